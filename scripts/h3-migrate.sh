#!/usr/bin/env bash
# HTTP/3 connections that change address (a NAT rebinding, RFC 9000 §9.3) against
# `linerate serve --quic --workers N`: aioquic's client (scripts/h3migrate.py) opens 16
# connections, makes two requests on each (/plaintext and a static file, byte for byte),
# then twice moves every connection to a new UDP socket (a new source port; the second move
# also to a fresh connection ID) and makes the same requests from there. All must be 200 with
# the right bodies.
#
# With LINERATE_QUIC_STEERING=off the kernel's 4-tuple hash alone picks the worker socket, so
# about (N-1)/N of the moved connections' packets reach another worker than their own: only
# the routing of driver/quic.rs (`owner`, `Relay`) keeps them alive, and /metrics must show
# linerate_quic_routed_total > 0 (16 connections, 2 moves: all staying home is 2^-32 at two
# workers). Run at 2 and 4 workers, then at 2 with the cBPF steering on (all 200; its routed
# count printed, not asserted).
#
#   scripts/h3-migrate.sh [path/to/linerate]     (default: target/release/linerate)
#
# Exit 2 with a NOT RUN line where it cannot run (no aioquic and no pip to install it, no
# openssl). The server binds 127.0.0.1 on free ports and is stopped by its PID.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-target/release/linerate}

stage=h3-migrate
# shellcheck source=scripts/h3-common.sh
. scripts/h3-common.sh

[ -x "$bin" ] || { say "no $bin (build it first)"; exit 1; }
h3_need_aioquic

h3_workdir h3migrate


mkdir -p "$out/www"
# Larger than the 3x anti-amplification allowance before the new path is validated.
head -c 120000 /dev/urandom >"$out/www/blob.bin"
h3_cert "$out" IP:127.0.0.1,DNS:localhost

# start WORKERS: a server with --quic, the demo's routes and the file under /static/, an
# admin listener; the previous one stopped. The caller's environment passes through.
start() {
    stop
    port=$(free_port)
    tls_port=$(free_port)
    admin_port=$(free_port)
    # Emptied here: the server's own redirection runs in the child, maybe after the first
    # look below, which would see the previous server's banner.
    : >"$out/banner.txt"
    "$bin" serve --addr "127.0.0.1:$port" --tls-port "$tls_port" --tls-cert "$out/cert.pem" \
        --tls-key "$out/key.pem" --quic --workers "$1" --no-pin --log-level warn \
        --root "$out/www" --root-prefix /static --app demo --admin "127.0.0.1:$admin_port" \
        >"$out/banner.txt" 2>"$out/server.err" &
    pid=$!
    for _ in $(seq 1 600); do
        grep -q "^Stop with" "$out/banner.txt" 2>/dev/null && break
        kill -0 "$pid" 2>/dev/null || { cat "$out/server.err" >&2; say "the server did not start"; exit 1; }
        sleep 0.1
    done
    grep -q "^Stop with" "$out/banner.txt" || { cat "$out/server.err" >&2; say "no banner in 60 s"; exit 1; }
}

routed() {
    python3 - "http://127.0.0.1:$admin_port/metrics" <<'PY'
import sys, urllib.request
text = urllib.request.urlopen(sys.argv[1], timeout=10).read().decode()
values = [l.split()[1] for l in text.splitlines() if l.startswith("linerate_quic_routed_total ")]
print(values[0] if values else "absent")
PY
}

fail=0
# run NAME WORKERS STEERING: 16 connections, two moves each; every request right, and with
# the steering off, datagrams routed.
run() {
    local name=$1 workers=$2 steering=$3 got count bad=0
    if [ "$steering" = off ]; then
        LINERATE_QUIC_STEERING=off start "$workers"
    else
        start "$workers"
    fi
    if got=$(timeout 120 python3 scripts/h3migrate.py 127.0.0.1 "$tls_port" --conns 16 \
        --rebinds 2 --file-path /static/blob.bin --file "$out/www/blob.bin" 2>&1); then
        :
    else
        echo "$got" >&2
        echo "  FAIL  $name: requests failed (above)" >&2
        bad=1
    fi
    kill -0 "$pid" 2>/dev/null || { say "the server died"; cat "$out/server.err" >&2; exit 1; }
    count=$(routed)
    local summary
    summary=$(grep '^summary' <<<"$got" | cut -d' ' -f2- || true)
    if [ "$steering" = off ] && ! [ "$count" -gt 0 ] 2>/dev/null; then
        echo "  FAIL  $name: linerate_quic_routed_total is $count, want > 0" >&2
        bad=1
    fi
    if [ "$bad" = 0 ]; then
        echo "  ok    $name: 16 connections, 2 moves, $((16 * 3 * 2)) requests 200 ($summary); routed $count"
    else
        fail=1
    fi
}

echo "HTTP/3 connections moved to new source ports:"
run "2 workers, steering off" 2 off
run "4 workers, steering off" 4 off
run "2 workers, steering on" 2 on
stop

if [ "$fail" != 0 ]; then
    tail -20 "$out/server.err" >&2
    say "FAILED"
    exit 1
fi
echo "h3-migrate: passed (aioquic $(python3 -c 'import aioquic; print(aioquic.__version__)'))"
