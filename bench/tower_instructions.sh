#!/usr/bin/env bash
# Instructions per request of tower layers on native routes (callgrind, user
# space, every thread: the program's total ÷ N, start-up included), in one run:
# 1. a route with no tower layer costs what it did: the demo's /plaintext and /json served by
#    each linerate binary given (built with `--features linerate-server/tower`, before and
#    after the change);
# 2. the adapter's cost: crates/server/examples/tower_layers.rs (release) serving /plaintext
#    under no tower layer, /around/plaintext under a no-op async layer (the deferred chain a
#    tower layer runs in) and /noop/plaintext under a no-op tower layer (tower_layer::Identity), and a
#    4 KiB text answer gzipped (level 1) by linerate's own compression (/own/page) and by
#    tower-http's CompressionLayer (/gz/page).
# The load is the last binary's `linerate load -c 16`. Ports are the OS's, every process is
# stopped by PID. Counts, not times: a noisy machine moves them by a few tens.
#   bench/tower_instructions.sh OLD_BINARY NEW_BINARY EXAMPLE_BINARY [N]
set -euo pipefail
cd "$(dirname "$0")/.."
old=$1 new=$2 example=$3
n=${N:-${4:-20000}}
command -v valgrind >/dev/null || { echo "NOT RUN: valgrind is not installed"; exit 0; }
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 1 300); do (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.1; done; return 1; }
# count LABEL PORT PID PATH [HEADER]: loads PATH, stops PID, prints instructions per request.
count() {
  local label=$1 p=$2 vp=$3 path=$4 hdr=()
  [ $# -ge 5 ] && hdr=(-H "$5")
  "$new" load "http://127.0.0.1:$p$path" "${hdr[@]}" -c 16 -n "$n" >"$tmp/load.$p"
  kill -INT "$vp"; wait "$vp" 2>/dev/null || true
  local total=0 t f
  for f in "$tmp"/cg."$p"*; do
    t=$(grep -m1 '^summary:' "$f" | awk '{print $2}')
    total=$((total + ${t:-0}))
  done
  ok=$(grep -m1 'Status codes' "$tmp/load.$p" | sed 's/^ *//' || true)
  printf '%s\t%s\t%d instructions per request\t(%s)\n' "$label" "$path${5:+ ($5)}" $((total / n)) "$ok"
}
for bin in "$old" "$new"; do
  for path in /plaintext /json; do
    p=$(free_port)
    valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.$p" "$bin" serve --addr 127.0.0.1:$p \
      --workers 1 --no-pin --log-level warn >/dev/null 2>&1 &
    vp=$!
    pids+=($vp)
    wait_port "$p"
    count "$bin" "$p" "$vp" "$path"
  done
done
for run in "/plaintext" "/around/plaintext" "/noop/plaintext" "/own/page|Accept-Encoding: gzip" "/gz/page|Accept-Encoding: gzip"; do
  path=${run%%|*}
  p=$(free_port)
  valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.$p" "$example" --port "$p" --workers 1 \
    >/dev/null 2>&1 &
  vp=$!
  pids+=($vp)
  wait_port "$p"
  if [ "$path" = "$run" ]; then
    count "$example" "$p" "$vp" "$path"
  else
    count "$example" "$p" "$vp" "$path" "${run#*|}"
  fi
done
