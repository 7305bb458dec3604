#!/usr/bin/env bash
# HTTP/3 over a lossy, slow, reordering link: `linerate serve --quic` in one network namespace,
# aioquic's client (scripts/h3client.py) in another, joined by a veth pair whose both ends
# drop, delay (with jitter) and reorder packets with netem. A 10 MB random file must arrive
# byte-exact (sha256) and a 2 MB request body must be counted whole by /upload.
#
#   scripts/h3-netem.sh [path/to/linerate]     (default: target/release/linerate)
#
# The namespaces (lrh3s-PID, lrh3c-PID) and their 10.213.0.0/30 addresses are made here and
# removed on exit; no traffic leaves them. Where the kernel has no netem (sch_netem not built,
# modprobe cannot load it), the same loss, delay and reordering come from a UDP relay in the
# client's namespace (scripts/h3attack.py relay), and the run says so.
# Exit 2 with a NOT RUN line where it cannot run: not root, no `ip`, no network namespaces or
# veth, no aioquic and no pip to install it, no openssl.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-target/release/linerate}

stage=h3-netem
# shellcheck source=scripts/h3-common.sh
. scripts/h3-common.sh

# The link, each way.
loss=3%
delay=5ms
jitter=2ms
reorder=5%

[ -x "$bin" ] || { say "no $bin (build it first)"; exit 1; }
[ "$(id -u)" = 0 ] || not_run "not root (network namespaces need it)"
command -v ip >/dev/null || not_run "no ip (iproute2)"
h3_need_aioquic
bin=$(realpath "$bin")

ns_s=lrh3s-$$
ns_c=lrh3c-$$
veth_s=lh3s$$
veth_c=lh3c$$
addr_s=10.213.0.1
addr_c=10.213.0.2
out=$(mktemp -d "${TMPDIR:-/tmp}/linerate-h3n.XXXXXX")
pids=()
cleanup() {
    for p in "${pids[@]}"; do
        kill "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    done
    ip netns del "$ns_s" 2>/dev/null || true
    ip netns del "$ns_c" 2>/dev/null || true
    rm -rf "$out"
}
trap cleanup EXIT

ip netns add "$ns_s" 2>"$out/ip.err" || not_run "ip netns add failed: $(head -1 "$out/ip.err")"
ip netns add "$ns_c" 2>"$out/ip.err" || not_run "ip netns add failed: $(head -1 "$out/ip.err")"
ip link add "$veth_s" netns "$ns_s" type veth peer name "$veth_c" netns "$ns_c" 2>"$out/ip.err" \
    || not_run "no veth pair: $(head -1 "$out/ip.err")"
ip -n "$ns_s" addr add "$addr_s/30" dev "$veth_s"
ip -n "$ns_c" addr add "$addr_c/30" dev "$veth_c"
for ns in "$ns_s" "$ns_c"; do
    ip -n "$ns" link set lo up
done
ip -n "$ns_s" link set "$veth_s" up
ip -n "$ns_c" link set "$veth_c" up

netem() { ip netns exec "$1" tc qdisc add dev "$2" root netem \
    delay "$delay" "$jitter" loss "$loss" reorder "$reorder" 50% 2>>"$out/tc.err"; }
modprobe sch_netem 2>/dev/null || true
impair=""
if ! command -v tc >/dev/null; then
    impair="no tc (iproute2)"
elif ! netem "$ns_s" "$veth_s" || ! netem "$ns_c" "$veth_c"; then
    impair="tc cannot add netem: $(head -1 "$out/tc.err")"
fi

mkdir -p "$out/www"
head -c 10485760 /dev/urandom >"$out/www/big.bin"
head -c 2097152 /dev/urandom >"$out/body.bin"
want=$(sha256sum <"$out/www/big.bin" | cut -c1-64)
h3_cert "$out" IP:$addr_s

# serve NAME PORT TLS_PORT ARGS...: a server in the server's namespace (the demo, or files).
serve() {
    local name=$1 p=$2 tp=$3
    shift 3
    ip netns exec "$ns_s" "$bin" serve --addr "$addr_s:$p" --tls-port "$tp" \
        --tls-cert "$out/cert.pem" --tls-key "$out/key.pem" --quic --workers 2 --no-pin \
        --log-level warn "$@" >"$out/$name.banner" 2>"$out/$name.err" &
    pids+=($!)
    for _ in $(seq 1 600); do
        grep -q "^Stop with" "$out/$name.banner" 2>/dev/null && return
        kill -0 "${pids[-1]}" 2>/dev/null || { cat "$out/$name.err" >&2; say "the server did not start"; exit 1; }
        sleep 0.1
    done
    cat "$out/$name.err" >&2
    say "no banner in 60 s"
    exit 1
}
serve files 8080 8443 --root "$out/www"
serve demo 8081 8444

# Where the client aims: the server, or the relay in front of it.
files_at=$addr_s:8443
demo_at=$addr_s:8444
if [ -z "$impair" ]; then
    echo "link: netem on both veth ends, loss $loss, delay $delay ± $jitter, reorder $reorder"
else
    say "netem is not available ($impair): the same loss, delay and reordering come from scripts/h3attack.py relay"
    d=${delay%ms} j=${jitter%ms} l=${loss%\%} r=${reorder%\%}
    for target in 8443:9443 8444:9444; do
        ip netns exec "$ns_c" python3 scripts/h3attack.py relay "${target#*:}" "$addr_s" \
            "${target%:*}" --loss "$l" --delay "$d" --jitter "$j" --reorder "$r" \
            --seconds 300 >"$out/relay${target%:*}.out" 2>&1 &
        pids+=($!)
    done
    for _ in $(seq 1 100); do
        grep -q listening "$out/relay8443.out" 2>/dev/null && grep -q listening "$out/relay8444.out" 2>/dev/null && break
        sleep 0.1
    done
    grep -q listening "$out/relay8444.out" || { cat "$out"/relay*.out >&2; say "the relay did not start"; exit 1; }
    files_at=127.0.0.1:9443
    demo_at=127.0.0.1:9444
    echo "link: a UDP relay, loss $loss, delay $delay ± $jitter, reorder $reorder, each way"
fi

h3() { ip netns exec "$ns_c" timeout 150 python3 scripts/h3client.py -k --timeout 140 "$@"; }
fail=0
n=0

n=$((n + 1))
started=$SECONDS
if got=$(h3 --expect-status 200 "https://$files_at/big.bin" 2>"$out/h3.err"); then
    digest=$(grep -o 'sha256=[0-9a-f]*' <<<"$got" | head -1 | cut -d= -f2)
    size=$(grep -o 'body: [0-9]*' <<<"$got" | head -1 | cut -d' ' -f2)
    if [ "$digest" = "$want" ]; then
        echo "  ok    10 MB file byte-exact ($size bytes, sha256 $want; $((SECONDS - started)) s)"
    else
        echo "  FAIL  10 MB file: $size bytes, sha256 $digest, want $want" >&2
        fail=1
    fi
else
    echo "  FAIL  10 MB file: $(tail -1 "$out/h3.err") $(grep -o 'status=[0-9]*\|error:.*' <<<"$got" | head -1)" >&2
    fail=1
fi

n=$((n + 1))
if got=$(h3 --expect-status 200 --print-body -d "$out/body.bin" "https://$demo_at/upload" 2>"$out/h3.err"); then
    if grep -qx '[^0-9]*2097152[^0-9]*' <<<"$(tail -1 <<<"$got")"; then
        echo "  ok    2 MB request body counted whole by /upload"
    else
        echo "  FAIL  2 MB upload: the answer says $(tail -1 <<<"$got")" >&2
        fail=1
    fi
else
    echo "  FAIL  2 MB upload: $(tail -1 "$out/h3.err") $(grep -o 'status=[0-9]*\|error:.*' <<<"$got" | head -1)" >&2
    fail=1
fi

for p in "${pids[@]:0:2}"; do
    kill -0 "$p" 2>/dev/null || { say "a server died"; cat "$out"/*.err >&2; exit 1; }
done
# What the link did: netem's counters, or the relay's (it prints them when stopped).
if [ -z "$impair" ]; then
    for ns in "$ns_s:$veth_s" "$ns_c:$veth_c"; do
        echo "link ${ns#*:}: $(ip netns exec "${ns%:*}" tc -s qdisc show dev "${ns#*:}" | grep -o 'Sent.*' | head -1)"
    done
else
    for p in "${pids[@]:2}"; do
        kill "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    done
    pids=("${pids[@]:0:2}")
    for port in 8443 8444; do
        echo "relay to $port: $(tail -1 "$out/relay$port.out")"
    done
fi
if [ "$fail" != 0 ]; then
    tail -n 20 "$out/files.err" "$out/demo.err" >&2
    say "FAILED"
    exit 1
fi
echo "h3-netem: $n checks passed"
