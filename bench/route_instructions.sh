#!/usr/bin/env bash
# Instructions per request of the demo's native routes (callgrind, user space, every thread:
# the program's total ÷ N, start-up included), for each linerate binary given, in turn, in one
# run: /plaintext and /json, sync handlers with no layer and no extractor (a route
# that uses none of the tower layers, async layers or extractors costs what it did before them).
# Ports are the OS's, every process is stopped by PID. Counts, not times: a noisy machine
# moves them by a few tens.
#   bench/route_instructions.sh BINARY [BINARY…]      (N=20000 requests each)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${N:-20000}
command -v valgrind >/dev/null || { echo "NOT RUN: valgrind is not installed"; exit 0; }
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 1 200); do (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.1; done; return 1; }
for bin in "$@"; do
  for path in plaintext json; do
    p=$(free_port)
    out=$tmp/cg.$p
    valgrind --tool=callgrind --callgrind-out-file="$out" "$bin" serve --addr 127.0.0.1:$p \
      --workers 1 --no-pin --log-level warn --app demo >/dev/null 2>&1 &
    vp=$!
    pids+=($vp)
    wait_port "$p"
    "$1" load "http://127.0.0.1:$p/$path" -c 16 -n "$n" >"$tmp/load"
    kill -INT "$vp"; wait "$vp" 2>/dev/null || true
    total=0
    for f in "$out"*; do
      t=$(grep -m1 '^summary:' "$f" | awk '{print $2}')
      total=$((total + ${t:-0}))
    done
    ok=$(grep -m1 'Status codes' "$tmp/load" | sed 's/^ *//')
    printf '%s\t/%s\t%d instructions per request\t(%s)\n' "$bin" "$path" $((total / n)) "$ok"
  done
done
