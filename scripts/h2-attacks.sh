#!/usr/bin/env bash
# HTTP/2 under attack: hostile clients over raw sockets, frames from PyPI's hyperframe and header
# blocks from its hpack (a real dynamic table) (scripts/h2attack.py), against `linerate serve`
# with one worker: its TLS listener (ALPN h2) and its h2c one, a small file (--root, "static")
# and a prefix proxied (--proxy /app=…, "proxied") to a counting HTTP/1.1 keep-alive upstream
# the stage runs (`h2attack.py upstream`, 50 ms per answer). Each attack runs H2_ATTACK_SECONDS
# (10) over 2 connections, a new one opened whenever the server ends one:
#   - MadeYouReset (CVE-2025-8671), the client making the server reset streams: data-closed
#     (DATA after END_STREAM), wu-zero (WINDOW_UPDATE 0), wu-overflow (2^31-1 twice),
#     priority-self (PRIORITY on itself); each stream's HEADERS and poison in one write, 50
#     new streams a write, within the server's stream limit;
#   - rapid-reset (CVE-2023-44487): HEADERS then RST_STREAM(CANCEL), 50 streams a write;
#   - hpack-bomb: a ~4,000-byte value put in the dynamic table and referred to 48,000 times in
#     under 64 KiB (HEADERS + CONTINUATION), alternating with a ~1,000-byte value referred to
#     as often as one 16 KiB HEADERS frame holds;
#   - slow-upload: POSTs declaring 500 KB, each fed 4 KiB/s, 16 per connection.
# Beside each, a good client (curl --http2 over TLS, --http2-prior-knowledge over h2c, a fresh
# connection every 200 ms) fetches the same kind of path. Each run prints one key=value line;
# for linerate it is then checked:
#   - goaway: each reset attack gets a GOAWAY, and no connection has more than
#     MAX_CONN_STREAMS (1,000: nginx's keepalive_requests) streams taken by the server before
#     its GOAWAY (the GOAWAY's last stream id says how many; a connection without one counts
#     all it was sent); every HPACK bomb is refused (431, RST_STREAM or GOAWAY), none served
#     nor left unanswered;
#   - fds: the server's open descriptors (sampled every 100 ms) never above its baseline + 2
#     per attack connection (the one open, and the one it replaced while that one closes) + 2
#     for the good client + on proxied runs, one upstream connection per stream the attack
#     may have open at once (the server's SETTINGS_MAX_CONCURRENT_STREAMS x connections) and
#     one for the good client;
#   - rss: VmRSS at most RSS_DURING_MIB (32) MiB over its baseline during the attack and
#     RSS_AFTER_MIB (16) MiB 2 s after it;
#   - upstream: the upstream received no more requests than were answered in full (the
#     attacker's complete answers, the good client's and its warm-up fetch): work started
#     for a stream that is then reset is work an attacker gets for free. Each stream's HEADERS
#     and the frame that ends it go in one write (one TLS record), which the server reads
#     whole, and a request reset in the read that opened it never goes up (nginx 1.22 lets
#     0.3% of rapid-reset streams through: its row shows it);
#   - good: the good client was served every time (200 over HTTP/2), p99 at most 1 s;
#   - alive: the server still runs.
# By default each attack runs once over TLS to the proxied path and once over h2c to the file
# (every dimension covered, 14 runs); --all runs each over {tls, h2c} x {static, proxied}.
# Where nginx is installed the same runs go to it (TLS and h2c listeners, the same file,
# proxy_pass with keepalive to the same upstream), rows prefixed `nginx:`, informational only.
#
#   scripts/h2-attacks.sh [path/to/linerate] [--all]     (default: target/release/linerate)
#
# Exit 2 with a NOT RUN line where it cannot run (no hyperframe/hpack and no pip to install
# them, no openssl, no curl with HTTP/2). Every server binds 127.0.0.1 on free ports and is
# stopped by its PID; every run is bounded by `timeout`.
set -euo pipefail
cd "$(dirname "$0")/.."
all=0
bin=target/release/linerate
for arg in "$@"; do
    if [ "$arg" = --all ]; then all=1; else bin=$arg; fi
done
secs=${H2_ATTACK_SECONDS:-10}

stage=h2-attacks
# say, not_run, h3_cert (a throwaway certificate) and free_port.
# shellcheck source=scripts/h3-common.sh
. scripts/h3-common.sh

CONNS=2
MAX_CONN_STREAMS=1000
RSS_DURING_MIB=32
RSS_AFTER_MIB=16
P99_MAX=1.0
ATTACKS="data-closed wu-zero wu-overflow priority-self rapid-reset hpack-bomb slow-upload"

[ -x "$bin" ] || { say "no $bin (build it first)"; exit 1; }
command -v openssl >/dev/null || not_run "no openssl to make a throwaway certificate"
curl --version 2>/dev/null | grep -q HTTP2 || not_run "no curl with HTTP/2 (the good client)"
if ! python3 -c 'import hyperframe, hpack' 2>/dev/null; then
    say "installing hyperframe and hpack from PyPI (pip --user)"
    python3 -m pip install --user --quiet hyperframe hpack >/dev/null 2>&1 \
        || python3 -m pip install --user --quiet --break-system-packages hyperframe hpack >/dev/null 2>&1 \
        || not_run "hyperframe and hpack are not installed and pip could not install them"
    python3 -c 'import hyperframe, hpack' 2>/dev/null || not_run "hyperframe/hpack do not import after pip"
fi

out=$(mktemp -d "${TMPDIR:-/tmp}/linerate-h2a.XXXXXX")
chmod 755 "$out" # nginx's worker runs as nobody and reads www/
server_pid=""
up_pid=""
# shellcheck source=scripts/procs.sh
. scripts/procs.sh
trap 'stop_pid server_pid 20; stop_pid up_pid 20; rm -rf "$out"' EXIT

h3_cert "$out" IP:127.0.0.1,DNS:localhost
mkdir -p "$out/www"
# About 1 KiB, so an answer is one small DATA frame.
for i in $(seq 1 16); do echo "<p>line $i of a small static file, sixty-odd bytes</p>"; done >"$out/www/small.html"
chmod -R a+rX "$out/www"

# started PID FILE PATTERN TRIES: waits (TRIES × 0.1 s at most) for PATTERN in FILE, the
# output of process PID; 1 when PID ends first or the time runs out.
started() {
    for _ in $(seq 1 "$4"); do
        grep -q "$3" "$2" 2>/dev/null && return 0
        kill -0 "$1" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

# start_upstream: the counting upstream on a free port ($up_port); its counts go to
# $out/up.txt when it is stopped.
start_upstream() {
    up_port=$(free_port)
    # Gone before the start: the redirect below happens in the background job, and the line
    # waited for must be this upstream's.
    rm -f "$out/up.txt" "$out/up.out"
    python3 scripts/h2attack.py upstream "$up_port" --stats "$out/up.txt" --seconds $((secs + 120)) \
        >"$out/up.out" 2>>"$out/up.err" &
    up_pid=$!
    started "$up_pid" "$out/up.out" "^upstream listening" 100 \
        || { cat "$out/up.err" >&2; say "the upstream did not start"; exit 1; }
}

# start_linerate: the server on fresh ports ($tls_port, $h2c_port), one worker, the file and
# the proxied prefix; $sample_pid is the process whose descriptors and RSS are sampled.
start_linerate() {
    tls_port=$(free_port)
    h2c_port=$(free_port)
    rm -f "$out/banner.txt"
    "$bin" serve --addr "127.0.0.1:$(free_port)" --tls-port "$tls_port" --tls-cert "$out/cert.pem" \
        --tls-key "$out/key.pem" --h2c-port "$h2c_port" --root "$out/www" \
        --proxy "/app=http://127.0.0.1:$up_port" --workers 1 --no-pin --log-level warn \
        >"$out/banner.txt" 2>>"$out/server.err" &
    server_pid=$!
    sample_pid=$server_pid
    started "$server_pid" "$out/banner.txt" "^Stop with" 600 \
        || { cat "$out/server.err" >&2; say "linerate did not start"; exit 1; }
}

# start_nginx: the same for nginx: one worker (the process sampled), h2 over TLS and h2c,
# the same root, /app/ to the upstream with keepalive. 1 when it does not start.
start_nginx() {
    local dir=$out/nginx
    mkdir -p "$dir"
    tls_port=$(free_port)
    h2c_port=$(free_port)
    # nginx 1.22: `listen … http2` (1.25 moved it to `http2 on;`).
    cat >"$dir/nginx.conf" <<EOF
worker_processes 1;
daemon off;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $dir/client_body;
    proxy_temp_path $dir/proxy;
    fastcgi_temp_path $dir/fastcgi;
    uwsgi_temp_path $dir/uwsgi;
    scgi_temp_path $dir/scgi;
    upstream app { server 127.0.0.1:$up_port; keepalive 32; }
    server {
        listen 127.0.0.1:$tls_port ssl http2;
        listen 127.0.0.1:$h2c_port http2;
        ssl_certificate $out/cert.pem;
        ssl_certificate_key $out/key.pem;
        root $out/www;
        location /app/ {
            proxy_pass http://app;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }
    }
}
EOF
    nginx -p "$dir" -c "$dir/nginx.conf" -e "$dir/error.log" >"$dir/stdout" 2>&1 &
    server_pid=$!
    sample_pid=""
    for _ in $(seq 1 100); do
        sample_pid=$(cat "/proc/$server_pid/task/$server_pid/children" 2>/dev/null | awk '{print $1}')
        [ -n "$sample_pid" ] && (exec 3<>"/dev/tcp/127.0.0.1/$h2c_port") 2>/dev/null && return 0
        kill -0 "$server_pid" 2>/dev/null || break
        sleep 0.1
    done
    cat "$dir/stdout" "$dir/error.log" >&2 2>/dev/null || true
    return 1
}

fail=0
n=0
ok() { n=$((n + 1)); echo "  ok    $*"; }
bad() { n=$((n + 1)); echo "  FAIL  $*" >&2; fail=1; }
# field NAME LINE: the value of NAME=... in LINE.
field() { grep -o "\b$1=[^ ]*" <<<"$2" | head -1 | cut -d= -f2; }

# run WHO ATTACK TRANSPORT KIND: one attack against a fresh server (linerate or nginx) and a
# fresh upstream; sets $row, its key=value facts.
run() {
    local who=$1 attack=$2 transport=$3 kind=$4 port scheme tls="" path good got alive up
    start_upstream
    if [ "$who" = nginx ]; then
        start_nginx || { row="attack=$attack NOT RUN: nginx did not start"; stop_pid server_pid 20; stop_pid up_pid 20; return; }
    else
        start_linerate
    fi
    port=$h2c_port
    scheme=http
    if [ "$transport" = tls ]; then
        port=$tls_port
        scheme=https
        tls=--tls
    fi
    path=/small.html
    good=/small.html
    if [ "$kind" = proxied ]; then
        path=/app/attack
        good=/app/good
    fi
    got=$(timeout $((secs + 60)) python3 scripts/h2attack.py "$attack" 127.0.0.1 "$port" $tls \
        --path "$path" --pid "$sample_pid" --good-url "$scheme://127.0.0.1:$port$good" \
        --seconds "$secs" --connections "$CONNS" 2>>"$out/attack.err") || got="exit=$?"
    alive=1
    kill -0 "$server_pid" 2>/dev/null || alive=0
    stop_pid server_pid 20
    stop_pid up_pid 20
    up=$(cat "$out/up.txt" 2>/dev/null || echo "up-requests=none")
    row="attack=$attack transport=$transport path=$kind $got $up alive=$alive"
}

# check: the assertions on $row (a linerate run).
check() {
    local what attack kind
    f() { field "$1" "$row"; }
    attack=$(f attack)
    kind=$(f path)
    what="$attack/$(f transport)/$kind"
    if [ -z "$(f fd-max)" ]; then
        bad "$what: the attack did not run ($(f exit) exit; $out/attack.err below)"
        tail -5 "$out/attack.err" >&2
        [ "$(f alive)" = 1 ] || bad "$what: the server died"
        return
    fi
    case $attack in
        hpack-bomb)
            local refused=$(($(f bomb-431) + $(f bomb-reset) + $(f bomb-goaway)))
            if [ "$refused" -gt 0 ] && [ "$(f bomb-other)" = 0 ] && [ "$(f bomb-lost)" = 0 ] \
                && [ "$(f bomb-closed)" = 0 ]; then
                ok "$what: $refused bombs refused (431: $(f bomb-431), reset: $(f bomb-reset), GOAWAY: $(f bomb-goaway)), none served or lost"
            else
                bad "$what: bombs $(f bombs): 431 $(f bomb-431), reset $(f bomb-reset), GOAWAY $(f bomb-goaway), closed without GOAWAY $(f bomb-closed), unanswered in 5 s $(f bomb-lost), answered otherwise $(f bomb-other) ($(f bomb-other-codes))"
            fi
            ;;
        slow-upload) ;;
        *)
            if [ "$(f goaways)" -gt 0 ] && [ "$(f max-conn-streams)" -le "$MAX_CONN_STREAMS" ]; then
                ok "$what: GOAWAY ($(f goaway-codes)) after at most $(f max-conn-streams) streams a connection (bound $MAX_CONN_STREAMS)"
            else
                bad "$what: $(f goaways) GOAWAYs ($(f goaway-codes)), a connection took $(f max-conn-streams) streams (bound $MAX_CONN_STREAMS) of $(f streams) sent"
            fi
            ;;
    esac
    local concurrent upstream=0 fd_bound
    concurrent=$(f max-concurrent)
    [ "$concurrent" = none ] && concurrent=100
    [ "$kind" = proxied ] && upstream=$((concurrent * CONNS + 1))
    fd_bound=$(($(f fd-base) + 2 * CONNS + 2 + upstream))
    if [ "$(f fd-max)" -le "$fd_bound" ]; then
        ok "$what: at most $(f fd-max) descriptors open (baseline $(f fd-base), bound $fd_bound)"
    else
        bad "$what: $(f fd-max) descriptors open, over the bound $fd_bound (baseline $(f fd-base) + $((2 * CONNS)) attack + 2 good + $upstream upstream)"
    fi
    local during=$((($(f rss-max-kb) - $(f rss-base-kb)) / 1024)) after=$((($(f rss-after-kb) - $(f rss-base-kb)) / 1024))
    if [ "$during" -le "$RSS_DURING_MIB" ] && [ "$after" -le "$RSS_AFTER_MIB" ]; then
        ok "$what: RSS grew $during MiB during (at most $RSS_DURING_MIB), $after MiB after (at most $RSS_AFTER_MIB)"
    else
        bad "$what: RSS grew $during MiB during (at most $RSS_DURING_MIB), $after MiB 2 s after (at most $RSS_AFTER_MIB)"
    fi
    # +1: the good client's warm-up fetch before the baseline.
    local answered=$(($(f answers) + $(f good-served) + 1))
    if [ "$(f up-requests)" = none ]; then
        bad "$what: the upstream's counts are missing ($out/up.err below)"
        tail -5 "$out/up.err" >&2
    elif [ "$(f up-requests)" -le "$answered" ]; then
        ok "$what: the upstream got $(f up-requests) requests for $answered answered in full"
    else
        bad "$what: the upstream got $(f up-requests) requests for $answered answered in full ($(f answers) to the attacker, $(f up-max-open) upstream connections open at most)"
    fi
    if [ "$(f good-failures)" = 0 ] && awk -v p="$(f good-p99)" -v m="$P99_MAX" 'BEGIN { exit !(p <= m) }'; then
        ok "$what: the good client served $(f good-served) times, p99 $(f good-p99) s"
    else
        bad "$what: the good client: $(f good-failures) failures, $(f good-served) served, p99 $(f good-p99) s (at most $P99_MAX)"
    fi
    if [ "$(f alive)" = 1 ]; then
        ok "$what: the server is alive"
    else
        bad "$what: the server died"
        tail -20 "$out/server.err" >&2
    fi
}

# The runs: TRANSPORT/KIND pairs.
if [ "$all" = 1 ]; then
    pairs="tls/static tls/proxied h2c/static h2c/proxied"
else
    pairs="tls/proxied h2c/static"
fi

echo "linerate ($bin), one worker, ${secs} s an attack, $CONNS connections:"
for attack in $ATTACKS; do
    for pair in $pairs; do
        run linerate "$attack" "${pair%/*}" "${pair#*/}"
        echo "        $row"
        check
    done
done

if command -v nginx >/dev/null; then
    echo "nginx $(nginx -v 2>&1 | sed 's|.*/||'), the same runs (informational, never a failure):"
    for attack in $ATTACKS; do
        for pair in $pairs; do
            run nginx "$attack" "${pair%/*}" "${pair#*/}"
            echo "nginx: $row"
        done
    done
else
    echo "nginx: NOT RUN (not installed)"
fi

if [ "$fail" != 0 ]; then
    tail -20 "$out/attack.err" >&2 2>/dev/null || true
    tail -20 "$out/server.err" >&2 2>/dev/null || true
    tail -20 "$out/up.err" >&2 2>/dev/null || true
    say "FAILED"
    exit 1
fi
echo "h2-attacks: $n checks passed (hyperframe $(python3 -c 'import hyperframe; print(hyperframe.__version__)'), hpack $(python3 -c 'import hpack; print(hpack.__version__)'))"
