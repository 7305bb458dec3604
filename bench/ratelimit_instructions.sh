#!/usr/bin/env bash
# Instructions per request of a site's rate limit (callgrind, user space, every thread: the
# program's total ÷ N, start-up included), for one linerate binary, in one run: no rule, a
# node-local rule, and a fleet rule counted in a redis-server started here.
# Each rule lets every request through (1000000r/s, burst 1000000, one client key): a fleet
# rule's leases are then 64 tokens, so 63 requests in 64 take a leased token and one asks Redis
# on the link's thread (its instructions are counted too). Ports are the OS's, every process is
# stopped by PID. Counts, not times: a noisy machine moves them by a few tens.
#   bench/ratelimit_instructions.sh BINARY [N]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$1
n=${N:-${2:-20000}}
command -v valgrind >/dev/null || { echo "NOT RUN: valgrind is not installed"; exit 0; }
command -v redis-server >/dev/null || { echo "NOT RUN: redis-server is not installed"; exit 0; }
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 1 200); do (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.1; done; return 1; }
rp=$(free_port)
redis-server --bind 127.0.0.1 --port "$rp" --save '' --appendonly no >/dev/null &
pids+=($!)
wait_port "$rp"
for scope in none node fleet; do
  p=$(free_port)
  conf=$tmp/$scope.toml
  {
    printf '[storage]\nredis = "redis://127.0.0.1:%s"\nnodes = 1\n' "$rp"
    printf '[[listen]]\naddr = "127.0.0.1:%s"\n[[site]]\ndefault = true\napp = "demo"\n' "$p"
    if [ "$scope" != none ]; then
      printf '[[site.rate_limit]]\nprefix = "/json"\nrate = "1000000r/s"\nburst = 1000000\nscope = "%s"\n' "$scope"
    fi
  } >"$conf"
  out=$tmp/cg.$scope
  valgrind --tool=callgrind --callgrind-out-file="$out" "$bin" serve --config "$conf" \
    --workers 1 --no-pin --log-level warn >/dev/null 2>&1 &
  vp=$!
  pids+=($vp)
  wait_port "$p"
  "$bin" load "http://127.0.0.1:$p/json" -c 16 -n "$n" >"$tmp/load.$scope"
  kill -INT "$vp"; wait "$vp" 2>/dev/null || true
  total=0
  for f in "$out"*; do
    t=$(grep -m1 '^summary:' "$f" | awk '{print $2}')
    total=$((total + ${t:-0}))
  done
  # The trips to Redis the requests made (a fleet rule: about one in 64).
  trips=$(redis-cli -p "$rp" info commandstats | tr -d '\r' | awk -F'[=,]' '/^cmdstat_evalsha:/ {print $2}')
  redis-cli -p "$rp" config resetstat >/dev/null
  ok=$(grep -m1 'Status codes' "$tmp/load.$scope" | sed 's/^ *//')
  printf '%s\t%s rule\t%d instructions per request\t%s EVALSHA for %d requests\t(%s)\n' \
    "$bin" "$scope" $((total / n)) "${trips:-0}" "$n" "$ok"
done
