#!/usr/bin/env bash
# The io_uring backend against epoll and the C io_uring engine (docs/benchmarks.md,
# the arena's peers, "Third step"): `linerate serve` with epoll and with `--io uring` (the
# same binary) and uring-c (target/peers/uring-c, built by `scripts/peers.sh arena`), interleaved round by round, each
# with one worker on CPU 0 and `linerate load -t 1` on CPU 1, 1 s of warm-up then 4 s measured;
# CPU per request from each server's own cgroup (v1 cpuacct; run as root).
#
#   bench/io-backends.sh PROFILE [ROUNDS]    PROFILE: baseline, pipelined, limited, paced
#
# LINERATE (default target/release/linerate) serves and loads. Prints a line per server and
# round: req/s, CPU µs a request, failed requests.
set -euo pipefail
cd "$(dirname "$0")/.."
prof=${1:?"usage: bench/io-backends.sh baseline|pipelined|limited|paced [ROUNDS]"}
rounds=${2:-3}
bin=${LINERATE:-target/release/linerate}
peer=target/peers/uring-c
cg=/sys/fs/cgroup/cpuacct/linerate-io-backends
[ -x "$bin" ] || { echo "no $bin (cargo build --release -p linerate)" >&2; exit 1; }
mkdir -p "$cg" || { echo "cannot make $cg (needs root and cgroup v1 cpuacct)" >&2; exit 2; }
case $prof in
    baseline) args=(-c 128) url="/baseline11?a=13&b=42" ;;
    pipelined) args=(-c 128 -p 16) url="/pipeline" ;;
    limited) args=(-c 128 --reconnect 10) url="/baseline11?a=13&b=42" ;;
    paced) args=(-c 32 -R 31250) url="/baseline11?a=13&b=42" ;;
    *) echo "unknown profile $prof" >&2; exit 1 ;;
esac
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for r in $(seq 1 "$rounds"); do
    for s in epoll uring uring-c; do
        port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
        case $s in
            epoll | uring) cmd=("$bin" serve --io "$s" --addr "127.0.0.1:$port" --workers 1) ;;
            uring-c)
                [ -x "$peer" ] || { echo "no $peer: scripts/peers.sh arena"; continue; }
                cmd=("$peer" --h1 "127.0.0.1:$port" --workers 1)
                ;;
        esac
        sh -c 'echo $$ > "$1/cgroup.procs"; shift; exec taskset -c 0 "$@"' sh "$cg" "${cmd[@]}" \
            >/dev/null 2>&1 &
        srv=$!
        sleep 0.7
        taskset -c 1 "$bin" load -t 1 "${args[@]}" -d 1s "http://127.0.0.1:$port$url" >/dev/null 2>&1
        u0=$(cat "$cg/cpuacct.usage")
        taskset -c 1 "$bin" load -t 1 "${args[@]}" -d 4s --json "http://127.0.0.1:$port$url" >"$out" 2>/dev/null
        u1=$(cat "$cg/cpuacct.usage")
        kill "$srv"
        wait "$srv" 2>/dev/null || true
        python3 - "$out" "$prof" "$r" "$s" "$u0" "$u1" <<'PY'
import json, sys
path, prof, r, s, u0, u1 = sys.argv[1:]
run = json.load(open(path))["runs"][0]
n = run["responses"]
print("%s round %s %-8s %9.0f req/s %6.2f us/req  failed %d"
      % (prof, r, s, run["req_per_s"], (int(u1) - int(u0)) / 1e3 / n, run["failed"]))
PY
    done
done
