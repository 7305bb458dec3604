#!/usr/bin/env bash
# Checks linerate's PROXY protocol listeners (docs/config.md, "The client's address behind a
# balancer or a proxy") behind a real HAProxy, Debian's package, in `mode tcp`:
#   fe_v1  -> linerate's plain listener, `send-proxy`     (v1 text header)
#   fe_v2  -> linerate's plain listener, `send-proxy-v2`  (v2 binary header)
#   fe_tls -> linerate's TLS listener,   `send-proxy-v2`  (TLS passes through HAProxy)
# curl sends from 127.0.0.2 and 127.0.0.3 (--interface): the demo answers 200 through each
# frontend, an access rule (`deny 127.0.0.3` on /plaintext) answers 403 to 127.0.0.3 only, and
# the JSON access log names exactly the addresses curl sent from, in order (never HAProxy's
# 127.0.0.1). A request straight to linerate's plain listener, without HAProxy's header, must
# get no answer at all, and be counted in linerate_refused_connections_total{reason="proxy_header"}.
# Builds nothing: target/release/linerate must exist (scripts/test-all.sh builds it first).
#
#   scripts/proxy-protocol.sh [path/to/linerate]   (default: target/release/linerate)
#
# haproxy is installed with apt-get when missing (root on Debian; a temporary policy-rc.d keeps
# the packaged service from starting, as scripts/peers.sh does). Everything listens on 127.0.0.1
# (free ports chosen here; curl binds 127.0.0.2 and .3), runs from a mktemp directory and is
# stopped by its PID; every wait is bounded. Exit 0 when all holds, 1 on any mismatch (each printed), 2 with a line
# `proxy-protocol: NOT RUN: …` where it cannot run (no haproxy and no way to install it, no
# curl, openssl or python3).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-${CARGO_TARGET_DIR:-target}/release/linerate}

say() { echo "proxy-protocol: $*" >&2; }
not_run() { say "NOT RUN: $*"; exit 2; }

pids=()
dir=""
policy_rc=""
cleanup() {
    local p
    for p in ${pids[@]+"${pids[@]}"}; do kill "$p" 2>/dev/null || true; done
    for p in ${pids[@]+"${pids[@]}"}; do wait "$p" 2>/dev/null || true; done
    if [ -n "$policy_rc" ]; then rm -f "$policy_rc"; fi
    if [ -n "$dir" ]; then rm -rf "$dir"; fi
}
trap cleanup EXIT

if [ ! -x "$bin" ]; then
    say "no linerate binary at $bin (cargo build --release --locked -p linerate)"
    exit 1
fi
for tool in curl openssl python3; do
    command -v "$tool" >/dev/null || not_run "no $tool on this machine"
done

find_haproxy() {
    haproxy=$(command -v haproxy || true)
    # Debian puts it in /usr/sbin, which a non-root PATH often leaves out.
    if [ -z "$haproxy" ] && [ -x /usr/sbin/haproxy ]; then haproxy=/usr/sbin/haproxy; fi
}
find_haproxy
if [ -z "$haproxy" ]; then
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
        not_run "no haproxy on PATH, and not root on Debian to install it (apt-get install haproxy)"
    fi
    export DEBIAN_FRONTEND=noninteractive
    # Debian starts the packaged service on install; refuse that while apt runs (only if the
    # host has no policy-rc.d of its own).
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
        chmod +x /usr/sbin/policy-rc.d
        policy_rc=/usr/sbin/policy-rc.d
    fi
    log=$(mktemp "${TMPDIR:-/tmp}/linerate-proxy-protocol-apt.XXXXXX")
    say "installing haproxy (apt-get, --no-install-recommends)"
    if ! apt-get install -y -q --no-install-recommends haproxy >"$log" 2>&1; then
        apt-get update >>"$log" 2>&1 || true
        apt-get install -y -q --no-install-recommends haproxy >>"$log" 2>&1 || true
    fi
    if [ -n "$policy_rc" ]; then rm -f "$policy_rc"; policy_rc=""; fi
    find_haproxy
    [ -n "$haproxy" ] || not_run "apt-get could not install haproxy (see $log)"
    rm -f "$log"
fi
# "HAProxy version 2.6.12-1+deb12u4 2025/07/07 - https://haproxy.org/"
hap_version=$("$haproxy" -v 2>&1 | sed -n 's/^HA-\{0,1\}Proxy version \([^ ]*\).*/\1/p' | head -1)
hap_version=${hap_version:-unknown}

dir=$(mktemp -d "${TMPDIR:-/tmp}/linerate-proxy-protocol.XXXXXX")
# Six free ports at once (bound together, so they differ), closed just before use.
read -r lr_plain lr_tls lr_admin fe_v1 fe_v2 fe_tls < <(python3 -c '
import socket
socks = [socket.socket() for _ in range(6)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in socks))
')

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$dir/key.pem" \
    -out "$dir/cert.pem" -days 2 -subj /CN=localhost >"$dir/openssl.log" 2>&1 ||
    { cat "$dir/openssl.log" >&2; say "openssl could not make a certificate"; exit 1; }

cat >"$dir/linerate.toml" <<EOF
access_log = "$dir/access.log"
access_log_format = "json"

[admin]
addr = "127.0.0.1:$lr_admin"

[[listen]]
addr = "127.0.0.1:$lr_plain"
proxy_protocol = true

[[listen]]
addr = "127.0.0.1:$lr_tls"
tls = { cert = "$dir/cert.pem", key = "$dir/key.pem" }
proxy_protocol = true

[[site]]
default = true
app = "demo"

[[site.access]]
prefix = "/plaintext"
rules = ["deny 127.0.0.3"]
EOF

cat >"$dir/haproxy.cfg" <<EOF
global
    maxconn 256

defaults
    mode tcp
    timeout connect 5s
    timeout client 30s
    timeout server 30s

frontend fe_v1
    bind 127.0.0.1:$fe_v1
    default_backend be_v1
backend be_v1
    server linerate 127.0.0.1:$lr_plain send-proxy

frontend fe_v2
    bind 127.0.0.1:$fe_v2
    default_backend be_v2
backend be_v2
    server linerate 127.0.0.1:$lr_plain send-proxy-v2

frontend fe_tls
    bind 127.0.0.1:$fe_tls
    default_backend be_tls
backend be_tls
    server linerate 127.0.0.1:$lr_tls send-proxy-v2
EOF

"$bin" serve --config "$dir/linerate.toml" --workers 1 --no-pin --log-level warn \
    >"$dir/banner" 2>"$dir/linerate.err" &
lr_pid=$!
pids+=("$lr_pid")
started=""
for _ in $(seq 100); do
    if grep -q '^linerate serving on http://127\.0\.0\.1:' "$dir/banner"; then started=1; break; fi
    kill -0 "$lr_pid" 2>/dev/null || break
    sleep 0.1
done
if [ -z "$started" ]; then
    cat "$dir/banner" "$dir/linerate.err" >&2
    say "linerate did not start (no banner within 10 s)"
    exit 1
fi

"$haproxy" -f "$dir/haproxy.cfg" -db >"$dir/haproxy.log" 2>&1 &
hap_pid=$!
pids+=("$hap_pid")
# Wait until haproxy's three ports listen, reading /proc/net/tcp rather than connecting: a probe
# through a frontend would reach linerate as a connection of its own.
if ! python3 - "$hap_pid" "$fe_v1" "$fe_v2" "$fe_tls" <<'PY'; then
import os, sys, time
pid, ports = int(sys.argv[1]), {int(p) for p in sys.argv[2:]}
deadline = time.monotonic() + 10
while time.monotonic() < deadline:
    if not os.path.exists(f"/proc/{pid}"):
        sys.exit(1)
    listening = set()
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            if state == "0A" and local.startswith("0100007F:"):
                listening.add(int(local.split(":")[1], 16))
    if ports <= listening:
        sys.exit(0)
    time.sleep(0.1)
sys.exit(1)
PY
    cat "$dir/haproxy.log" >&2
    say "haproxy did not listen on 127.0.0.1:$fe_v1, :$fe_v2 and :$fe_tls within 10 s"
    exit 1
fi

failures=0
# get SOURCE URL [curl args…]: "STATUS CURL_EXIT" (status 000 when no answer came)
get() {
    local src=$1 code rc=0
    shift
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 --interface "$src" "$@") || rc=$?
    echo "$code $rc"
}
expect() {
    local what=$1 want=$2 got=$3
    if [ "$got" != "$want" ]; then
        say "MISMATCH: $what: got status ${got% *} (curl exit ${got#* }), wanted status ${want% *}"
        failures=$((failures + 1))
    fi
}

expect "GET fe_v1 (send-proxy) /json from 127.0.0.2" "200 0" \
    "$(get 127.0.0.2 "http://127.0.0.1:$fe_v1/json")"
expect "GET fe_v2 (send-proxy-v2) /json from 127.0.0.2" "200 0" \
    "$(get 127.0.0.2 "http://127.0.0.1:$fe_v2/json")"
expect "GET fe_tls (send-proxy-v2, TLS) /json from 127.0.0.2" "200 0" \
    "$(get 127.0.0.2 "https://localhost:$fe_tls/json" --cacert "$dir/cert.pem" \
        --resolve "localhost:$fe_tls:127.0.0.1")"
expect "GET fe_v2 /plaintext from 127.0.0.3 (denied by the access rule)" "403 0" \
    "$(get 127.0.0.3 "http://127.0.0.1:$fe_v2/plaintext")"
expect "GET fe_v2 /plaintext from 127.0.0.2" "200 0" \
    "$(get 127.0.0.2 "http://127.0.0.1:$fe_v2/plaintext")"

# Straight to linerate, no PROXY header: the connection must be closed without an answer.
direct=$(get 127.0.0.1 "http://127.0.0.1:$lr_plain/json")
if [ "${direct% *}" != 000 ] || [ "${direct#* }" = 0 ]; then
    say "MISMATCH: a direct GET to linerate's PROXY listener :$lr_plain got status ${direct% *}" \
        "(curl exit ${direct#* }), wanted no answer (status 000, curl failing)"
    failures=$((failures + 1))
fi

# The access log: exactly the five requests, each from the address curl sent it from.
if ! python3 - "$dir/access.log" <<'PY'; then
import json, os, sys, time
path = sys.argv[1]
want = [
    ("127.0.0.2", 200, "/json"),
    ("127.0.0.2", 200, "/json"),
    ("127.0.0.2", 200, "/json"),
    ("127.0.0.3", 403, "/plaintext"),
    ("127.0.0.2", 200, "/plaintext"),
]

def lines():
    try:
        with open(path) as f:
            return [l for l in f.read().splitlines() if l.strip()]
    except FileNotFoundError:
        return []

deadline = time.monotonic() + 5
while len(lines()) < len(want) and time.monotonic() < deadline:
    time.sleep(0.1)
time.sleep(0.3)  # a line too many (the direct connection's?) would come with the same turn
got = []
for l in lines():
    try:
        v = json.loads(l)
    except ValueError:
        print(f"proxy-protocol: MISMATCH: access log line is not JSON: {l!r}", file=sys.stderr)
        sys.exit(1)
    got.append((v.get("remote_addr"), v.get("status"), v.get("target")))
if got != want:
    print("proxy-protocol: MISMATCH: access log (remote_addr, status, target):", file=sys.stderr)
    for i in range(max(len(got), len(want))):
        g = got[i] if i < len(got) else "(no line)"
        w = want[i] if i < len(want) else "(no line)"
        mark = "  " if g == w else "!="
        print(f"  {mark} line {i + 1}: got {g}, wanted {w}", file=sys.stderr)
    sys.exit(1)
PY
    failures=$((failures + 1))
fi

# The refused connection is counted, once (no other connection came without a header).
refused=""
for _ in $(seq 30); do
    refused=$(curl -s --max-time 10 "http://127.0.0.1:$lr_admin/metrics" | sed -n \
        's/^linerate_refused_connections_total{reason="proxy_header"} \([0-9]*\)$/\1/p') || true
    [ "$refused" = 1 ] && break
    sleep 0.1
done
if [ "$refused" != 1 ]; then
    say "MISMATCH: linerate_refused_connections_total{reason=\"proxy_header\"} is" \
        "'${refused}', wanted 1"
    failures=$((failures + 1))
fi

for who in linerate:"$lr_pid" haproxy:"$hap_pid"; do
    if ! kill -0 "${who#*:}" 2>/dev/null; then
        say "MISMATCH: ${who%%:*} died during the checks"
        failures=$((failures + 1))
    fi
done

if [ "$failures" != 0 ]; then
    say "linerate's stderr:"
    sed 's/^/  /' "$dir/linerate.err" >&2
    say "haproxy's output:"
    sed 's/^/  /' "$dir/haproxy.log" >&2
    say "FAILED: $failures check(s) differed (haproxy $hap_version)"
    exit 1
fi
echo "proxy-protocol: haproxy $hap_version send-proxy, send-proxy-v2 (plain and TLS): 5 requests," \
    "clients seen as sent; a direct connection refused (counted)"
