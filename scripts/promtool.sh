#!/usr/bin/env bash
# The metrics stage: `/metrics` as Prometheus's own linter reads it, and the
# Grafana dashboard in dist/ checked against what the server exports.
#
#   scripts/promtool.sh [path/to/linerate]     (default: target/release/linerate)
#
# Starts `linerate serve` with one worker and a configuration under which every family shows
# (the conditional ones included): its admin listener, a cleartext and a TLS listener (a
# throwaway certificate), a proxy mount with a cache and a Redis second tier (Debian's
# redis-server, by scripts/cache-servers.sh) in front of a Python http.server upstream, a rate
# limit, `[storage]` as a directory (whose keys seal the TLS tickets), and a `tls = "acme"`
# site whose CA (a closed port) never answers, so its orders fail. It sends requests so the
# counters move (routes, files, 404s, a 429, a malformed request, proxied hits and misses,
# HTTPS), waits for the first failed ACME order, checks that /readyz is 503 naming the site,
# then scrapes /metrics and:
#   - runs `promtool check metrics` on it: any complaint, or any exit but 0, fails the stage;
#   - runs scripts/dashboard_check.py (its own table tests first) on
#     dist/grafana/linerate-dashboard.json and the scrape: the dashboard must load as a Grafana
#     dashboard and every series its queries name must be exported.
# promtool comes from Debian's `prometheus` package, installed with apt-get where missing
# (root only; a policy-rc.d keeps the package's service from starting, and it is stopped
# should an init system have started it anyway). Exit 2 with a NOT RUN line where the stage
# cannot run (no promtool and no way to install it; no redis-server; no python3, curl or
# openssl). Every server binds 127.0.0.1 on free ports and is stopped by its PID.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-target/release/linerate}
stage=promtool
say() { echo "$stage: $*" >&2; }
not_run() { say "NOT RUN: $*"; exit 2; }
have() { command -v "$1" >/dev/null 2>&1; }

# How long the first ACME order may take to fail (connect refused: at once), in tenths.
ACME_TENTHS=300
# How long a server may take to start, in tenths.
START_TENTHS=600

[ -x "$bin" ] || { say "no $bin (build it first)"; exit 1; }
for tool in python3 curl openssl; do
    have "$tool" || not_run "no $tool on this machine"
done

# --- promtool ------------------------------------------------------------------------------
install_promtool() {
    if [ "$(id -u)" != 0 ] || ! have apt-get; then
        not_run "no promtool, and installing Debian's prometheus needs root and apt-get"
    fi
    local log=/tmp/linerate-promtool-apt.log made_policy=""
    # The package's service is not ours: refused to start during the install, as in a
    # container's own policy (kept where there is one).
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\n# scripts/promtool.sh: no service starts during the install\nexit 101\n' \
            >/usr/sbin/policy-rc.d
        chmod 0755 /usr/sbin/policy-rc.d
        made_policy=1
    fi
    say "installing Debian's prometheus for promtool (apt-get update first)"
    local rc=0
    { apt-get -o DPkg::Lock::Timeout=120 update \
        && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=120 install -y \
            --no-install-recommends -o Dpkg::Options::=--force-confold prometheus; } \
        >"$log" 2>&1 || rc=$?
    [ -z "$made_policy" ] || rm -f /usr/sbin/policy-rc.d
    [ "$rc" = 0 ] || { tail -5 "$log" >&2; not_run "apt-get install prometheus failed (see $log)"; }
    if have systemctl && [ -d /run/systemd/system ]; then
        systemctl disable --now prometheus >/dev/null 2>&1 || true
    elif have service; then
        service prometheus stop >/dev/null 2>&1 || true
    fi
    have promtool || not_run "promtool is still missing after installing prometheus"
}
have promtool || install_promtool
say "$(promtool --version 2>&1 | head -1)"

# --- servers -------------------------------------------------------------------------------
out=$(mktemp -d "${TMPDIR:-/tmp}/linerate-promtool.XXXXXX")
server_pid=""
up_pid=""
redis_pid=""
# shellcheck source=scripts/procs.sh
. scripts/procs.sh
cleanup() {
    stop_pid server_pid
    stop_pid up_pid
    [ -z "$redis_pid" ] || scripts/cache-servers.sh stop "$redis_pid" || true
    rm -rf "$out"
}
trap cleanup EXIT

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# The cache's second tier: redis-server (installed by cache-servers.sh where it can be).
rc=0
redis_env=$(scripts/cache-servers.sh start redis --maxmemory 16) || rc=$?
[ "$rc" = 0 ] || { [ "$rc" = 2 ] && not_run "no redis-server for the cache's tier"; exit "$rc"; }
redis_pid=$(sed -n 's/^PID=//p' <<<"$redis_env")
redis_port=$(sed -n 's/^PORT=//p' <<<"$redis_env")

mkdir -p "$out/up/p" "$out/www"
echo "an upstream answer, cached" >"$out/up/p/a.txt"
echo "a file" >"$out/www/f.txt"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$out/key.pem" -out "$out/cert.pem" -days 1 -subj /CN=localhost \
    -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" >/dev/null 2>&1

up_port=$(free_port)
python3 -m http.server --bind 127.0.0.1 "$up_port" --directory "$out/up" \
    >"$out/up.log" 2>&1 &
up_pid=$!

admin_port=$(free_port)
http_port=$(free_port)
tls_port=$(free_port)
ca_port=$(free_port) # nothing listens: every ACME order fails
cat >"$out/linerate.toml" <<EOF
[admin]
addr = "127.0.0.1:$admin_port"
[storage]
dir = "shared"
[acme]
directory = "https://127.0.0.1:$ca_port/directory"
storage = "acme"
email = "ops@example.test"
[[listen]]
addr = "127.0.0.1:$http_port"
[[listen]]
addr = "127.0.0.1:$tls_port"
tls = { cert = "cert.pem", key = "key.pem" }
[[upstream]]
name = "app"
servers = ["127.0.0.1:$up_port"]
[[site]]
default = true
app = "demo"
root = [{ prefix = "/files/", dir = "www" }]
[[site.proxy]]
prefix = "/p/"
upstream = "app"
cache = { size = "4MiB", heuristic = true, tier = "redis://127.0.0.1:$redis_port" }
[[site.rate_limit]]
prefix = "/limited"
rate = "1r/m"
[[site]]
names = ["acme.example.test"]
app = "demo"
tls = "acme"
EOF
"$bin" serve --config "$out/linerate.toml" --workers 1 --no-pin --log-level warn \
    >"$out/banner.txt" 2>"$out/server.err" &
server_pid=$!
for ((t = 0; t < START_TENTHS; t++)); do
    grep -q "^Stop with" "$out/banner.txt" 2>/dev/null && break
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
done
grep -q "^Stop with" "$out/banner.txt" || { cat "$out/server.err" >&2; say "linerate did not start"; exit 1; }
admin=http://127.0.0.1:$admin_port

# --- traffic ---------------------------------------------------------------------------------
fail=0
get() { curl -s -o /dev/null -w '%{http_code}' --max-time 10 "$@" || true; }
expect() { # expect WHAT WANT GOT
    if [ "$2" = "$3" ]; then
        echo "PROMTOOL traffic $1 PASS ($3)"
    else
        echo "PROMTOOL traffic $1 FAIL: $3, expected $2"
        fail=1
    fi
}
for _ in 1 2 3; do expect "a route" 200 "$(get "http://127.0.0.1:$http_port/plaintext")"; done
expect "a file" 200 "$(get "http://127.0.0.1:$http_port/files/f.txt")"
expect "nothing there" 404 "$(get "http://127.0.0.1:$http_port/nope")"
for _ in 1 2 3; do expect "proxied, cached" 200 "$(get "http://127.0.0.1:$http_port/p/a.txt")"; done
get "http://127.0.0.1:$http_port/limited" >/dev/null
expect "over the rate limit" 429 "$(get "http://127.0.0.1:$http_port/limited")"
expect "HTTPS" 200 "$(get -k "https://127.0.0.1:$tls_port/plaintext")"
malformed=$(python3 - "$http_port" <<'EOF'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
s.sendall(b"NOT HTTP\r\n\r\n")
print(s.recv(64).split(b"\r\n")[0].decode())
EOF
)
expect "malformed request" "HTTP/1.1 400 Bad Request" "$malformed"

acme_failed() {
    # Read whole first: grep -q stopping early would fail curl's write (pipefail).
    local m
    m=$(curl -s --max-time 5 "$admin/metrics" || true)
    grep -q '^linerate_acme_orders_total{outcome="failed"} [1-9]' <<<"$m"
}
for ((t = 0; t < ACME_TENTHS; t++)); do
    acme_failed && break
    sleep 0.1
done
if acme_failed; then
    echo "PROMTOOL acme order failed and counted PASS"
else
    echo "PROMTOOL acme order failed and counted FAIL: no failed order on /metrics"
    fail=1
fi
expect "/readyz without the ACME site's certificate" 503 "$(get "$admin/readyz")"
expect "/readyz names the site" "not ready: no certificate yet for acme.example.test" \
    "$(curl -s --max-time 5 "$admin/readyz" || true)"

# --- the scrape ------------------------------------------------------------------------------
curl -s --max-time 10 -o "$out/metrics.txt" "$admin/metrics"
say "scraped $(grep -vc '^#' "$out/metrics.txt") samples of $(grep -c '^# TYPE' "$out/metrics.txt") families"
rc=0
lint=$(promtool check metrics <"$out/metrics.txt" 2>&1) || rc=$?
if [ "$rc" = 0 ] && [ -z "$lint" ]; then
    echo "PROMTOOL check metrics PASS (no complaint)"
else
    echo "PROMTOOL check metrics FAIL (exit $rc):"
    echo "$lint"
    fail=1
fi
if python3 scripts/dashboard_check.py --selftest \
    && python3 scripts/dashboard_check.py dist/grafana/linerate-dashboard.json "$out/metrics.txt"; then
    echo "PROMTOOL dashboard PASS"
else
    echo "PROMTOOL dashboard FAIL"
    fail=1
fi
if [ "$fail" != 0 ]; then
    say "server log:"
    tail -20 "$out/server.err" >&2
fi
exit "$fail"
