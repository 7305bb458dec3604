#!/usr/bin/env bash
# Instructions per memory hit (callgrind, user space: the program's total ÷ N, start-up and one
# miss included), for each linerate binary given, in turn, in one run: an identity hit of the
# 1 KiB /c1k, and a gzip hit of the 2,048-byte page /c2k. The origin is
# bench/cache-origin.toml, served by the first binary; ports are the OS's, every process is
# stopped by PID. Counts, not times: a noisy machine moves them by a few tens.
#   bench/hit_instructions.sh OLD_BINARY NEW_BINARY [N]
set -euo pipefail
cd "$(dirname "$0")/.."
n=${N:-${3:-20000}}
bins=("$1" "$2")
command -v valgrind >/dev/null || { echo "NOT RUN: valgrind is not installed"; exit 0; }
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 1 200); do (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.1; done; return 1; }
op=$(free_port)
"${bins[0]}" serve --config bench/cache-origin.toml --addr 127.0.0.1:$op --workers 1 --no-pin --log-level warn &
pids+=($!)
wait_port "$op"
for bin in "${bins[@]}"; do
  for w in "c1k identity" "c2k gzip"; do
    set -- $w
    path=$1 coding=$2
    p=$(free_port)
    out=$tmp/cg.$p
    valgrind --tool=callgrind --callgrind-out-file="$out" "$bin" serve --addr 127.0.0.1:$p \
      --workers 1 --no-pin --log-level warn --app none --proxy /=http://127.0.0.1:$op \
      --proxy-cache 64MiB 2>/dev/null &
    vp=$!
    pids+=($vp)
    wait_port "$p"
    hdr=()
    [ "$coding" = gzip ] && hdr=(-H "Accept-Encoding: gzip")
    "${bins[0]}" load "http://127.0.0.1:$p/$path" "${hdr[@]}" -c 16 -n "$n" >/dev/null
    kill -INT "$vp"; wait "$vp" 2>/dev/null || true
    total=$(grep -m1 '^summary:' "$out" | awk '{print $2}')
    printf '%s\t/%s %s\t%d instructions per hit\n' "$bin" "$path" "$coding" $((total / n))
  done
done
