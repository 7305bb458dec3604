#!/usr/bin/env bash
# The fleet test (docs/fleet.md): three linerate nodes behind Debian's HAProxy in TCP
# mode with `send-proxy-v2` and no retries (as an NLB or IPVS would be), one Redis (the shared
# storage, the cache tier and the fleet's rate limits), Pebble as the ACME CA resolving every
# name through Debian's bind9 (which also takes the DNS-01 records by RFC 2136 + TSIG), and two
# app instances (Python's http.server) as the upstream. Real parts only, started here, on
# 127.0.0.1 ports chosen here, stopped by PID.
#
# Each check is one line, `fleet: PASS …`, `fleet: FAIL …` or `fleet: NOT RUN …` with why:
#   acme-one-order       three nodes starting at once: one ACME order, and every node serves
#                        the certificate of that order (the same serial), through HTTP-01
#                        validations that HAProxy sends to any node
#   acme-renewal         a renewal forced on one node is served by all three
#   acme-tls-alpn-01     the same fleet on TLS-ALPN-01: one order, one serial
#   acme-dns-01          a wildcard through DNS-01 (bind9, RFC 2136 with TSIG): one order, one
#                        serial, the TXT record gone afterwards
#   tls-resume           a TLS 1.3 and a TLS 1.2 session made on node 1 resume on nodes 2 and 3
#                        (Debian's openssl s_client)
#   rate-limit-burst     60 parallel requests to a `scope = "fleet"` rule of 5r/s burst 5:
#                        5 to 12 answered 200 in the whole fleet (the limit 6, plus at most a
#                        local share per node while its first lease is on the way; node-local
#                        rules: 18)
#   rate-limit-window    10 s of steady requests through HAProxy: 200s within ±10 % of
#                        rate × 10 s + burst
#   purge                a page cached on all three nodes, changed at the origin and purged
#                        on one: the other two answer the new page
#   rolling-restart      SIGTERM (shutdown_delay) and a new start, node by node, under load
#                        (`linerate load` through HAProxy): 0 failed requests
#   binary-upgrade       each node's listeners taken over by a new process (`--takeover`),
#                        under load: 0 failed requests
#   kill-9               a node killed under load: only its in-flight requests fail (each on
#                        a connection to it that the kill cut, by HAProxy's log), none on
#                        the other nodes
#   redis-paused         Redis stopped (SIGSTOP) for 3 s under load: 0 failed requests, and
#                        lines in every node's log saying so (each part using Redis: one when
#                        it goes, one when it is back)
#
#   scripts/fleet.sh [path/to/linerate]   (default: target/release/linerate)
#
# Installs with apt-get, where missing and root on Debian: haproxy, redis-server, bind9 and its
# tools; Pebble through scripts/acme.sh --install-only (`go install`, pinned). Exit 0 when every
# check passed, 1 when one failed, 2 with `fleet: NOT RUN: …` when a part cannot be had.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-${CARGO_TARGET_DIR:-target}/release/linerate}
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")

say() { echo "fleet: $*" >&2; }
not_run() { say "NOT RUN: $*"; exit 2; }

# How long a wait may take, each (seconds).
WAIT=30
# Requests' connections for the load under rollouts.
LOAD_CONNS=12

pids=()
dir=""
failed=0
cleanup() {
    local rc=$? p
    for p in ${pids[@]+"${pids[@]}"} ${node_pid[@]+"${node_pid[@]}"} ${new_pid[@]+"${new_pid[@]}"}; do
        kill -CONT "$p" 2>/dev/null || true
        kill "$p" 2>/dev/null || true
    done
    for p in ${pids[@]+"${pids[@]}"} ${node_pid[@]+"${node_pid[@]}"} ${new_pid[@]+"${new_pid[@]}"}; do
        wait "$p" 2>/dev/null || true
    done
    if [ -n "$dir" ]; then
        if [ $rc = 0 ] && [ "${FLEET_KEEP:-}" != 1 ]; then
            rm -rf "$dir"
        else
            say "logs kept in $dir"
        fi
    fi
}
trap cleanup EXIT

pass() { echo "fleet: PASS $1: $2"; }
fail() { echo "fleet: FAIL $1: $2"; failed=1; }
skip() { echo "fleet: NOT RUN $1: $2"; }

[ -x "$bin" ] || { say "no linerate binary at $bin (cargo build --release --locked -p linerate)"; exit 1; }
for tool in curl openssl python3; do
    command -v "$tool" >/dev/null || not_run "no $tool on this machine"
done

# apt_install PKG…: installs Debian packages where missing (root on Debian only), with no
# service started by their scripts.
apt_install() {
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
        return 1
    fi
    local policy_rc="" log rc=0
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
        chmod +x /usr/sbin/policy-rc.d
        policy_rc=/usr/sbin/policy-rc.d
    fi
    log=$(mktemp "${TMPDIR:-/tmp}/linerate-fleet-apt.XXXXXX")
    say "installing $* (apt-get, --no-install-recommends)"
    if ! DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -q \
        --no-install-recommends "$@" >"$log" 2>&1; then
        apt-get update >>"$log" 2>&1 || true
        DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -q \
            --no-install-recommends "$@" >>"$log" 2>&1 || rc=1
    fi
    [ -z "$policy_rc" ] || rm -f "$policy_rc"
    [ $rc = 0 ] || tail -5 "$log" >&2
    rm -f "$log"
    return $rc
}

# which NAME: the path of a program, /usr/sbin included (where Debian puts daemons).
which_sbin() {
    command -v "$1" 2>/dev/null || { [ -x "/usr/sbin/$1" ] && echo "/usr/sbin/$1"; } || true
}

haproxy=$(which_sbin haproxy)
[ -n "$haproxy" ] || { apt_install haproxy || true; haproxy=$(which_sbin haproxy); }
[ -n "$haproxy" ] || not_run "no haproxy, and it could not be installed"
redis=$(which_sbin redis-server)
[ -n "$redis" ] || { apt_install redis-server || true; redis=$(which_sbin redis-server); }
[ -n "$redis" ] || not_run "no redis-server, and it could not be installed"
named=$(which_sbin named)
if [ -z "$named" ] || [ -z "$(which_sbin tsig-keygen)" ] || ! command -v dig >/dev/null; then
    apt_install bind9 bind9-utils bind9-dnsutils || true
    named=$(which_sbin named)
fi
[ -n "$named" ] || not_run "no bind9 (named), and it could not be installed"
tsig_keygen=$(which_sbin tsig-keygen)
[ -n "$tsig_keygen" ] && command -v dig >/dev/null || not_run "no tsig-keygen or dig (bind9-utils, bind9-dnsutils)"
tools=$(scripts/acme.sh --install-only 2>/dev/null) || not_run "Pebble could not be installed (scripts/acme.sh --install-only)"
read -r pebble _challtestsrv <<<"$tools"
[ -x "$pebble" ] || not_run "no Pebble binary at $pebble"

dir=$(mktemp -d "${TMPDIR:-/tmp}/linerate-fleet.XXXXXX")

# --- ports ---------------------------------------------------------------------------------------
# Free ports bound together (so they differ), closed just before use.
read -r -a P < <(python3 -c '
import socket
socks = []
for _ in range(40):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(*(s.getsockname()[1] for s in socks))
')
# DNS needs the UDP port free as well: pick one that is.
dns_port=$(python3 -c '
import socket
for _ in range(50):
    t = socket.socket(); t.bind(("127.0.0.1", 0)); p = t.getsockname()[1]
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        u.bind(("127.0.0.1", p))
    except OSError:
        continue
    print(p); break
')
redis_port=${P[0]}
app_port=(${P[1]} ${P[2]})
lb_http=${P[3]}
lb_https=${P[4]}
lb_stats=${P[5]}
pebble_port=${P[6]}
pebble_mgmt=${P[7]}
# node i (1..3): its PROXY listeners (plain, TLS), a direct TLS listener (checks that must reach
# one node), and its admin listener.
node_http=(- ${P[10]} ${P[11]} ${P[12]})
node_https=(- ${P[13]} ${P[14]} ${P[15]})
node_direct=(- ${P[16]} ${P[17]} ${P[18]})
node_admin=(- ${P[19]} ${P[20]} ${P[21]})
node_pid=()
new_pid=()

# wait_for SECONDS CMD…: runs CMD until it succeeds, every 0.1 s, at most SECONDS.
wait_for() {
    local limit=$1 t0=$SECONDS
    shift
    until "$@" >/dev/null 2>&1; do
        [ $((SECONDS - t0)) -lt "$limit" ] || return 1
        sleep 0.1
    done
}

# --- Redis -----------------------------------------------------------------------------------------
"$redis" --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no --daemonize no \
    --logfile "$dir/redis.log" &
redis_pid=$!
pids+=("$redis_pid")
redis_ping() { python3 - "$redis_port" <<'EOF'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=1)
s.sendall(b"PING\r\n")
sys.exit(0 if s.recv(16).startswith(b"+PONG") else 1)
EOF
}
wait_for $WAIT redis_ping || { say "Redis did not start"; cat "$dir/redis.log" >&2; exit 1; }

# --- the apps ------------------------------------------------------------------------------------
mkdir -p "$dir/app"
echo "page" >"$dir/app/page"
echo "limited" >"$dir/app/limited"
for i in 0 1; do
    python3 -m http.server "${app_port[$i]}" --bind 127.0.0.1 --directory "$dir/app" \
        >"$dir/app$i.log" 2>&1 &
    pids+=($!)
done
for i in 0 1; do
    wait_for $WAIT curl -sf "http://127.0.0.1:${app_port[$i]}/page" \
        || { say "app $i did not start"; exit 1; }
done

# --- bind9: the zone fleet.test, every name 127.0.0.1, TXT updates by TSIG -------------------------
mkdir -p "$dir/bind"
"$tsig_keygen" -a hmac-sha256 linerate. >"$dir/bind/tsig.key"
cat >"$dir/bind/fleet.test.zone" <<EOF
\$TTL 5
@   IN SOA ns.fleet.test. admin.fleet.test. 1 60 60 600 5
@   IN NS  ns.fleet.test.
ns  IN A   127.0.0.1
@   IN A   127.0.0.1
*   IN A   127.0.0.1
EOF
cat >"$dir/bind/named.conf" <<EOF
options {
    directory "$dir/bind";
    listen-on port $dns_port { 127.0.0.1; };
    listen-on-v6 { none; };
    pid-file none;
    session-keyfile none;
    recursion no;
    dnssec-validation no;
    allow-query { any; };
};
controls { };
include "$dir/bind/tsig.key";
zone "fleet.test" {
    type primary;
    file "$dir/bind/fleet.test.zone";
    update-policy { grant linerate. zonesub TXT; };
};
EOF
"$named" -g -c "$dir/bind/named.conf" >"$dir/bind/named.log" 2>&1 &
pids+=($!)
wait_for $WAIT dig +short +time=1 +tries=1 @127.0.0.1 -p "$dns_port" A fleet.test \
    || { say "named did not answer"; tail -20 "$dir/bind/named.log" >&2; exit 1; }

# --- Pebble ------------------------------------------------------------------------------------------
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -keyout "$dir/wfe-ca.key" -out "$dir/wfe-ca.pem" -subj "/CN=fleet test WFE CA" \
    >"$dir/openssl.log" 2>&1
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$dir/wfe-key.pem" \
    -out "$dir/wfe.csr" -subj "/CN=Pebble WFE" >>"$dir/openssl.log" 2>&1
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >"$dir/wfe.ext"
openssl x509 -req -in "$dir/wfe.csr" -CA "$dir/wfe-ca.pem" -CAkey "$dir/wfe-ca.key" \
    -CAcreateserial -days 2 -extfile "$dir/wfe.ext" -out "$dir/wfe-cert.pem" >>"$dir/openssl.log" 2>&1

# start_pebble LIFETIME_S: Pebble with certificates valid that long (0: its default), its
# validations sent to HAProxy's frontends (any node may answer them).
start_pebble() {
    cat >"$dir/pebble.json" <<EOF
{ "pebble": {
    "listenAddress": "127.0.0.1:$pebble_port",
    "managementListenAddress": "127.0.0.1:$pebble_mgmt",
    "certificate": "$dir/wfe-cert.pem",
    "privateKey": "$dir/wfe-key.pem",
    "httpPort": $lb_http,
    "tlsPort": $lb_https,
    "ocspResponderURL": "",
    "externalAccountBindingRequired": false,
    "retryAfter": { "authz": 0, "order": 0 },
    "keyAlgorithm": "ecdsa",
    "profiles": { "default": { "description": "fleet", "validityPeriod": $1 } }
} }
EOF
    PEBBLE_VA_NOSLEEP=1 PEBBLE_WFE_NONCEREJECT=0 PEBBLE_AUTHZREUSE=0 \
        "$pebble" -config "$dir/pebble.json" -dnsserver "127.0.0.1:$dns_port" \
        >>"$dir/pebble.log" 2>&1 &
    pebble_pid=$!
    pids+=("$pebble_pid")
    wait_for $WAIT curl -sf --cacert "$dir/wfe-ca.pem" "https://127.0.0.1:$pebble_port/dir" \
        || { say "Pebble did not start"; tail -20 "$dir/pebble.log" >&2; exit 1; }
}
stop_pebble() {
    kill "$pebble_pid" 2>/dev/null || true
    wait "$pebble_pid" 2>/dev/null || true
}

# --- HAProxy: TCP, PROXY v2, no retries, /healthz checks on the admin port ----------------------------
cat >"$dir/haproxy.cfg" <<EOF
global
    maxconn 1024
    log stderr format iso local0
    stats socket $dir/haproxy.sock mode 600 level admin

defaults
    mode tcp
    log global
    option tcplog
    retries 0
    timeout connect 2s
    timeout client 30s
    timeout server 30s

frontend fe_http
    bind 127.0.0.1:$lb_http
    default_backend be_http
backend be_http
    balance roundrobin
    option httpchk GET /healthz
    default-server check inter 100ms fall 1 rise 1 send-proxy-v2 observe layer4 error-limit 1 on-error mark-down
    server n1 127.0.0.1:${node_http[1]} port ${node_admin[1]}
    server n2 127.0.0.1:${node_http[2]} port ${node_admin[2]}
    server n3 127.0.0.1:${node_http[3]} port ${node_admin[3]}

frontend fe_https
    bind 127.0.0.1:$lb_https
    default_backend be_https
backend be_https
    balance roundrobin
    option httpchk GET /healthz
    default-server check inter 100ms fall 1 rise 1 send-proxy-v2 observe layer4 error-limit 1 on-error mark-down
    server n1 127.0.0.1:${node_https[1]} port ${node_admin[1]}
    server n2 127.0.0.1:${node_https[2]} port ${node_admin[2]}
    server n3 127.0.0.1:${node_https[3]} port ${node_admin[3]}
EOF
"$haproxy" -f "$dir/haproxy.cfg" -db >"$dir/haproxy.log" 2>&1 &
haproxy_pid=$!
pids+=("$haproxy_pid")

# --- the nodes ---------------------------------------------------------------------------------------
# write_config I CHALLENGE DB NAME: node I's file, its ACME on CHALLENGE, Redis database DB (a
# fresh fleet per ACME phase), its site named NAME.
write_config() {
    local i=$1 challenge=$2 db=$3 name=$4 dns=""
    if [ "$challenge" = dns-01 ]; then
        dns="dns = { server = \"127.0.0.1:$dns_port\", zone = \"fleet.test\", key_file = \"$dir/bind/tsig.key\" }"
    fi
    mkdir -p "$dir/n$i"
    cat >"$dir/n$i/linerate.toml" <<EOF
access_log = "$dir/n$i/access.log"
shutdown_delay = "1s"
upgrade_socket = "$dir/n$i/upgrade.sock"

[admin]
addr = "127.0.0.1:${node_admin[$i]}"

[storage]
redis = "redis://127.0.0.1:$redis_port/$db"
nodes = 3

[acme]
directory = "https://127.0.0.1:$pebble_port/dir"
ca_roots = "$dir/wfe-ca.pem"
email = "ops@fleet.test"
storage = "$dir/n$i/acme"
challenge = "$challenge"
$dns

[[listen]]
addr = "127.0.0.1:${node_http[$i]}"
proxy_protocol = true

[[listen]]
addr = "127.0.0.1:${node_https[$i]}"
tls = {}
proxy_protocol = true

[[listen]]
addr = "127.0.0.1:${node_direct[$i]}"
tls = {}

[[upstream]]
name = "app"
servers = ["127.0.0.1:${app_port[0]}", "127.0.0.1:${app_port[1]}"]

[[site]]
names = [$name]
default = true
tls = "acme"

[[site.rate_limit]]
prefix = "/limited"
rate = "5r/s"
burst = 5
scope = "fleet"

[[site.proxy]]
prefix = "/"
upstream = "app"
cache = { tier = "redis://127.0.0.1:$redis_port/$db", valid = { "200" = "10m" }, purge_from = ["127.0.0.1"], key = ["scheme", "host", "path", "query"] }
EOF
}

# start_node I [ARGS…]: node I from its file (one worker: three nodes share two cores).
start_node() {
    local i=$1
    shift
    "$bin" serve --config "$dir/n$i/linerate.toml" --workers 1 --no-pin --log-level info "$@" \
        >>"$dir/n$i/stdout.log" 2>>"$dir/n$i/stderr.log" &
    node_pid[$i]=$!
}
healthy() { curl -sf "http://127.0.0.1:${node_admin[$1]}/healthz"; }
# stop_node I: SIGTERM, and wait for its exit (its shutdown_delay and drain).
stop_node() {
    [ -n "${node_pid[$1]:-}" ] || return 0
    kill "${node_pid[$1]}" 2>/dev/null || true
    wait "${node_pid[$1]}" 2>/dev/null || true
    node_pid[$1]=""
}
# haproxy_up SERVER: HAProxy's checks say both its backends have it UP.
haproxy_up() {
    [ "$(haproxy_stat | awk -F, -v s="$1" '$2 == s && $18 == "UP"' | wc -l)" = 2 ]
}
# serial I NAME: the serial of the certificate node I serves for NAME (its direct listener).
serial() {
    openssl s_client -connect "127.0.0.1:${node_direct[$1]}" -servername "$2" </dev/null 2>/dev/null \
        | openssl x509 -noout -serial 2>/dev/null | sed 's/serial=//'
}
pebble_orders() { grep -c "Added order" "$dir/pebble.log" || true; }

# --- ACME phases ---------------------------------------------------------------------------------------
# acme_phase CHECK CHALLENGE DB NAMES SNI: a fresh fleet (Redis database DB) on CHALLENGE: one
# order, one serial on the three nodes.
acme_phase() {
    local check=$1 challenge=$2 db=$3 names=$4 sni=$5 i before s1 s2 s3 orders
    before=$(pebble_orders)
    for i in 1 2 3; do
        stop_node "$i"
        rm -rf "$dir/n$i/acme"
        write_config "$i" "$challenge" "$db" "$names"
    done
    for i in 1 2 3; do start_node "$i"; done
    local t0=$SECONDS
    for i in 1 2 3; do
        until [ -n "$(serial "$i" "$sni")" ]; do
            if ! kill -0 "${node_pid[$i]}" 2>/dev/null; then
                fail "$check" "node $i exited: $(tail -1 "$dir/n$i/stderr.log")"
                return 1
            fi
            if [ $((SECONDS - t0)) -ge $WAIT ]; then
                fail "$check" "node $i serves no certificate for $sni after ${WAIT} s (its log: $dir/n$i/stderr.log)"
                tail -5 "$dir/n$i/stderr.log" >&2
                return 1
            fi
            sleep 0.2
        done
    done
    s1=$(serial 1 "$sni")
    s2=$(serial 2 "$sni")
    s3=$(serial 3 "$sni")
    orders=$(($(pebble_orders) - before))
    if [ "$orders" = 1 ] && [ "$s1" = "$s2" ] && [ "$s2" = "$s3" ]; then
        pass "$check" "three nodes started at once: $orders order at Pebble, every node serves serial $s1 for $sni"
    else
        fail "$check" "$orders orders at Pebble; serials $s1 / $s2 / $s3"
        return 1
    fi
}

# --- traffic checks (the http-01 fleet, Redis database 1) -------------------------------------------------
# node_get I PATH [METHOD]: the answer head of a request straight to node I's plain listener
# (with the PROXY header it expects: curl --haproxy-protocol).
node_get() {
    curl -s -D - -o /dev/null --haproxy-protocol -H "Host: fleet.test" -X "${3:-GET}" \
        "http://127.0.0.1:${node_http[$1]}$2"
}

# haproxy_stat: HAProxy's `show stat` CSV.
haproxy_stat() {
    echo "show stat" | python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(sys.stdin.buffer.read())
data = b""
while True:
    b = s.recv(65536)
    if not b: break
    data += b
print(data.decode())' "$dir/haproxy.sock"
}

# start_load SECONDS PATH OUT: `linerate load` through HAProxy's plain frontend, JSON into OUT.
start_load() {
    "$bin" load "http://127.0.0.1:$lb_http$2" -t 1 -c $LOAD_CONNS -d "$1" --timeout 5s \
        --json --allow-status-errors >"$3" 2>"$3.err" &
    load_pid=$!
}
# stop_load: SIGINT (the load prints what it measured) and its exit.
stop_load() {
    kill -INT "$load_pid" 2>/dev/null || true
    wait "$load_pid" 2>/dev/null || true
}
# load_failed OUT: "FAILED ANSWERED": failed requests (errors of any kind, and answers other
# than 2xx), and the answers.
load_failed() {
    python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))["runs"][0]
bad = sum(n for code, n in r["status_codes"].items() if not code.startswith("2"))
print(r["failed"] + bad, r["responses"])' "$1" 2>/dev/null || echo "unreadable 0"
}

check_tls_resume() {
    local v ok=1 out i
    for v in 1.3 1.2; do
        rm -f "$dir/sess.pem"
        printf 'GET / HTTP/1.0\r\nHost: fleet.test\r\n\r\n' | openssl s_client -ign_eof \
            -connect "127.0.0.1:${node_direct[1]}" -servername fleet.test "-tls${v/./_}" \
            -sess_out "$dir/sess.pem" >/dev/null 2>&1 || true
        for i in 2 3; do
            out=$(printf 'GET / HTTP/1.0\r\nHost: fleet.test\r\n\r\n' | openssl s_client -ign_eof \
                -connect "127.0.0.1:${node_direct[$i]}" -servername fleet.test "-tls${v/./_}" \
                -sess_in "$dir/sess.pem" 2>/dev/null | grep -E '^(Reused|New),' | head -1 || true)
            case $out in
                Reused,*) ;;
                *) ok=0; fail tls-resume "TLS $v session from node 1 on node $i: ${out:-no session line}" ;;
            esac
        done
    done
    [ $ok = 0 ] || pass tls-resume "TLS 1.3 and TLS 1.2 sessions made on node 1 resume on nodes 2 and 3 (openssl s_client: Reused)"
}

check_rate_limits() {
    local ok n
    sleep 2 # every bucket drained
    ok=$(seq 60 | xargs -P 60 -I{} curl -s -o /dev/null -w '%{http_code}\n' \
        "http://127.0.0.1:$lb_http/limited" | grep -c '^200$' || true)
    # 6 is the limit; a node may pass its local share (2) of a key it has no lease for yet
    # while its first ask is on the way to Redis (docs/fleet.md, "Rate limits"): 12 at most.
    # Node-local rules would pass 18.
    if [ "$ok" -ge 5 ] && [ "$ok" -le 12 ]; then
        pass rate-limit-burst "60 parallel requests through HAProxy to a fleet rule of 5r/s burst 5: $ok answered 200 (the limit 6; node-local rules: 18)"
    else
        fail rate-limit-burst "60 parallel requests to a fleet rule of 5r/s burst 5: $ok answered 200, not 5 to 12"
    fi
    sleep 2
    "$bin" load "http://127.0.0.1:$lb_http/limited" -t 1 -c 3 -R 30 -d 10s --json \
        --allow-status-errors >"$dir/limit-window.json" 2>"$dir/limit-window.err" || true
    n=$(python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))["runs"][0]
print(r["status_codes"].get("200", 0))' "$dir/limit-window.json" 2>/dev/null || echo 0)
    # 5r/s for 10 s, plus the burst and the first request: 56; ±10 % of it.
    if [ "$n" -ge 50 ] && [ "$n" -le 62 ]; then
        pass rate-limit-window "10 s at 30 req/s through HAProxy to 5r/s burst 5: $n answered 200 (the limit: 56; ±10 %: 50 to 62)"
    else
        fail rate-limit-window "10 s at 30 req/s to 5r/s burst 5: $n answered 200, not 50 to 62"
    fi
}

check_purge() {
    local i st ok=1 purge body
    echo "page v1" >"$dir/app/page"
    for i in 1 2 3; do node_get "$i" /page >/dev/null; done
    for i in 2 3; do
        st=$(node_get "$i" /page | tr -d '\r' | grep -i '^cache-status:' || true)
        case $st in *hit*) ;; *) ok=0; fail purge "node $i: no hit before the purge ($st)" ;; esac
    done
    # The origin's page changes; only a purge makes the nodes ask for it again.
    echo "page v2" >"$dir/app/page"
    purge=$(node_get 1 /page PURGE | head -1 | tr -d '\r')
    case $purge in *" 200"*) ;; *) ok=0; fail purge "PURGE on node 1 answered: $purge" ;; esac
    # Each node reads the tier's purge log every second.
    sleep 2.5
    for i in 2 3; do
        body=$(curl -s --haproxy-protocol -H "Host: fleet.test" "http://127.0.0.1:${node_http[$i]}/page")
        [ "$body" = "page v2" ] || { ok=0; fail purge "node $i still answers \"$body\" 2.5 s after the purge on node 1"; }
    done
    [ $ok = 0 ] || pass purge "a page cached on all three nodes, changed at the origin and purged on node 1 (200): nodes 2 and 3 answer the new page 2.5 s later"
}

# wait_up I: node I answers /healthz and HAProxy has it up in both backends.
wait_up() { wait_for $WAIT healthy "$1" && wait_for $WAIT haproxy_up "n$1"; }

# node_by_node CHECK WHAT STEP: STEP I replaces node I's process (1, 2, then 3) while
# `linerate load` runs through HAProxy; CHECK passes when no request failed. A STEP that fails
# says why in `step_why`, and ends the check (it runs in this shell: it starts and waits for
# the nodes' processes).
node_by_node() {
    local check=$1 what=$2 step=$3 i f n
    start_load 120s /page "$dir/$check.json"
    sleep 1
    for i in 1 2 3; do
        step_why=""
        if ! "$step" "$i"; then
            fail "$check" "$step_why"
            stop_load
            return
        fi
    done
    sleep 1
    stop_load
    read -r f n < <(load_failed "$dir/$check.json")
    if [ "$f" = 0 ]; then
        pass "$check" "$what, node by node, under load through HAProxy: 0 of $n requests failed"
    else
        fail "$check" "$f of $n requests failed across $what"
    fi
}

# restart_step I: SIGTERM (its shutdown_delay and drain), and a new process.
restart_step() {
    stop_node "$1"
    start_node "$1"
    wait_up "$1" || { step_why="node $1 did not come back"; return 1; }
}

# upgrade_step I: a new process takes node I's listeners (`--takeover`); the old one drains
# and exits.
upgrade_step() {
    local old=${node_pid[$1]}
    # Stopped at exit too, should it outlive a failed takeover.
    pids+=("$old")
    start_node "$1" --takeover "$dir/n$1/upgrade.sock"
    wait_for $WAIT bash -c "! kill -0 $old 2>/dev/null" \
        || { step_why="node $1's old process did not exit after the takeover"; return 1; }
    wait "$old" 2>/dev/null || true
    wait_up "$1" || { step_why="node $1 is not up after the takeover"; return 1; }
}

check_rolling_restart() {
    node_by_node rolling-restart "SIGTERM (shutdown_delay 1s) and a new start" restart_step
}

check_binary_upgrade() {
    node_by_node binary-upgrade "each node's listeners taken over by a new process" upgrade_step
}

check_kill_9() {
    local log0 f n cut other
    start_load 120s /page "$dir/kill.json"
    sleep 2
    log0=$(wc -l <"$dir/haproxy.log")
    kill -9 "${node_pid[2]}"
    wait "${node_pid[2]}" 2>/dev/null || true
    node_pid[2]=""
    sleep 2
    stop_load
    read -r f n < <(load_failed "$dir/kill.json")
    # HAProxy's log (tcplog): a connection's server ($5) and how it ended ($8). Node 2's
    # connections cut by the kill are the ones it held and those in its accept queue (each
    # with at most one request in flight: no pipelining), and the connects HAProxy sent it
    # before it saw it gone (no retries, as an NLB): every node-2 connection that ended after
    # the kill, whatever its flags. A killed process's sockets are closed by the kernel, with
    # a FIN where nothing was left unread (HAProxy logs a normal end, `--`), a RST where
    # something was (`SD`); a connect after it is `SC`. (Counting `S…` alone missed the FIN
    # ones: CI saw 5 failed requests on 4 `--` and 1 `SC` node-2 connections.) No connection
    # to another node may end on its server's side.
    cut=$(tail -n +"$((log0 + 1))" "$dir/haproxy.log" | awk '$5 == "be_http/n2"' | wc -l)
    other=$(tail -n +"$((log0 + 1))" "$dir/haproxy.log" | awk '$5 ~ /^be_http\/n[13]$/ && $8 ~ /^S/' | wc -l)
    if [ "$f" -le "$cut" ] && [ "$other" = 0 ]; then
        pass kill-9 "node 2 killed under load: $f of $n requests failed, all on the $cut connections to node 2 that the kill cut (at most one request in flight on each); none on nodes 1 and 3"
    else
        fail kill-9 "node 2 killed under load: $f of $n requests failed; $cut connections to node 2 were cut, $other to nodes 1 and 3"
    fi
    start_node 2
    wait_up 2 || fail kill-9 "node 2 did not come back"
}

check_redis_paused() {
    local i f n lines=() before=() ok=1
    for i in 1 2 3; do before[$i]=$(wc -l <"$dir/n$i/stderr.log"); done
    start_load 120s /page "$dir/redis.json"
    sleep 1
    kill -STOP "$redis_pid"
    # Fleet-limited requests too, while Redis is away: each node falls back to its share.
    seq 30 | xargs -P 10 -I{} curl -s -o /dev/null "http://127.0.0.1:$lb_http/limited" || true
    sleep 3
    kill -CONT "$redis_pid"
    sleep 2
    stop_load
    read -r f n < <(load_failed "$dir/redis.json")
    for i in 1 2 3; do
        lines[$i]=$(tail -n +"$((before[$i] + 1))" "$dir/n$i/stderr.log" | grep -ci 'redis\|storage\|tier' || true)
    done
    if [ "$f" != 0 ]; then
        ok=0
        fail redis-paused "$f of $n requests failed while Redis was stopped for 3 s"
    fi
    for i in 1 2 3; do
        if [ "${lines[$i]}" -lt 1 ]; then
            ok=0
            fail redis-paused "node $i logged nothing about Redis being away"
        fi
    done
    [ $ok = 0 ] || pass redis-paused "Redis stopped 3 s under load: 0 of $n requests failed; lines about it in each node's log: ${lines[1]}, ${lines[2]}, ${lines[3]}"
}

# revoke CERT KEY: revokes the certificate at Pebble, signed with its own key (RFC 8555
# §7.6's second way: a JWS with the key's JWK), with Python's standard library and openssl.
revoke() {
    python3 - "https://127.0.0.1:$pebble_port/dir" "$dir/wfe-ca.pem" "$1" "$2" <<'PYEOF'
import base64, json, ssl, subprocess, sys, urllib.error, urllib.request
directory, ca, cert_pem, key_pem = sys.argv[1:5]
ctx = ssl.create_default_context(cafile=ca)
def b64(b): return base64.urlsafe_b64encode(b).rstrip(b"=").decode()
def run(*args, data=None): return subprocess.run(args, input=data, capture_output=True, check=True).stdout
d = json.load(urllib.request.urlopen(directory, context=ctx))
nonce = urllib.request.urlopen(urllib.request.Request(d["newNonce"], method="HEAD"), context=ctx).headers["Replay-Nonce"]
der = run("openssl", "x509", "-in", cert_pem, "-outform", "DER")
point = run("openssl", "pkey", "-in", key_pem, "-pubout", "-outform", "DER")[-65:]
if point[0] != 4: sys.exit("the certificate's key is not a P-256 point")
jwk = {"crv": "P-256", "kty": "EC", "x": b64(point[1:33]), "y": b64(point[33:])}
protected = b64(json.dumps({"alg": "ES256", "jwk": jwk, "nonce": nonce, "url": d["revokeCert"]}).encode())
payload = b64(json.dumps({"certificate": b64(der), "reason": 1}).encode())
sig = run("openssl", "dgst", "-sha256", "-sign", key_pem, data=f"{protected}.{payload}".encode())
# ECDSA-Sig-Value ::= SEQUENCE { r INTEGER, s INTEGER } -> r || s, 32 bytes each (JWS ES256)
i, rs = (2 if sig[1] < 0x80 else 2 + (sig[1] & 0x7F)), b""
for _ in range(2):
    n = sig[i + 1]
    rs += int.from_bytes(sig[i + 2:i + 2 + n], "big").to_bytes(32, "big")
    i += 2 + n
body = json.dumps({"protected": protected, "payload": payload, "signature": b64(rs)}).encode()
try:
    urllib.request.urlopen(urllib.request.Request(d["revokeCert"], data=body, method="POST",
        headers={"Content-Type": "application/jose+json"}), context=ctx)
except urllib.error.HTTPError as e:
    sys.exit(f"revokeCert: {e.code} {e.read().decode()}")
PYEOF
}

# A renewal forced on node 1: its certificate revoked at the CA, then SIGHUP (it asks the
# CA's renewal information, RFC 9773, whose window has begun, and renews at once). Nodes 2
# and 3 must serve node 1's new certificate (through the storage's watch), in one more order.
check_renewal() {
    local s0 s1 i t0 before files=$dir/n1/acme/acme/fleet.test
    before=$(pebble_orders)
    s0=$(serial 1 fleet.test)
    if ! revoke "$files/cert.pem" "$files/key.pem" 2>"$dir/revoke.err"; then
        fail acme-renewal "could not revoke node 1's certificate: $(tail -1 "$dir/revoke.err")"
        return
    fi
    kill -HUP "${node_pid[1]}"
    t0=$SECONDS
    until s1=$(serial 1 fleet.test) && [ -n "$s1" ] && [ "$s1" != "$s0" ]; do
        if [ $((SECONDS - t0)) -ge $WAIT ]; then
            fail acme-renewal "node 1 still serves serial $s0 ${WAIT} s after its revocation and SIGHUP"
            return
        fi
        sleep 0.2
    done
    for i in 2 3; do
        until [ "$(serial "$i" fleet.test)" = "$s1" ]; do
            if [ $((SECONDS - t0)) -ge $WAIT ]; then
                fail acme-renewal "node $i serves $(serial "$i" fleet.test), not node 1's renewal $s1"
                return
            fi
            sleep 0.2
        done
    done
    if [ "$(($(pebble_orders) - before))" = 1 ]; then
        pass acme-renewal "node 1's certificate revoked, then SIGHUP: node 1 renewed ($s0 -> $s1), and nodes 2 and 3 served it $((SECONDS - t0)) s after the signal; one order in all"
    else
        fail acme-renewal "$(($(pebble_orders) - before)) orders for one forced renewal"
    fi
}

traffic_checks() {
    local i
    for i in 1 2 3; do wait_up "$i" || fail fleet "node $i is not up behind HAProxy"; done
    check_renewal
    check_tls_resume
    check_rate_limits
    check_purge
    check_rolling_restart
    check_binary_upgrade
    check_kill_9
    check_redis_paused
}

start_pebble 0
fleet_up=0
if acme_phase acme-one-order http-01 1 '"fleet.test"' fleet.test; then
    fleet_up=1
fi
if [ $fleet_up = 1 ]; then
    traffic_checks
else
    for c in acme-renewal tls-resume rate-limit-burst rate-limit-window purge rolling-restart binary-upgrade kill-9 redis-paused; do
        skip "$c" "the fleet did not come up (acme-one-order failed)"
    done
fi
acme_phase acme-tls-alpn-01 tls-alpn-01 2 '"alpn.fleet.test"' alpn.fleet.test || true
if acme_phase acme-dns-01 dns-01 3 '"dns.fleet.test", "*.dns.fleet.test"' x.dns.fleet.test; then
    txt=$(dig +short @127.0.0.1 -p "$dns_port" TXT _acme-challenge.dns.fleet.test)
    if [ -z "$txt" ]; then
        pass acme-dns-01-cleanup "the _acme-challenge TXT record is gone from bind9 after the order"
    else
        fail acme-dns-01-cleanup "bind9 still serves _acme-challenge.dns.fleet.test TXT $txt"
    fi
fi
for i in 1 2 3; do stop_node "$i"; done

if [ $failed = 0 ]; then
    echo "fleet: every check passed (haproxy $("$haproxy" -v 2>&1 | sed -n 's/^HA-\{0,1\}Proxy version \([^ ]*\).*/\1/p' | head -1), redis $("$redis" --version | sed -n 's/.* v=\([^ ]*\).*/\1/p'), bind9 $("$named" -v | awk '{print $2}'))"
    exit 0
fi
say "FAILED"
exit 1
