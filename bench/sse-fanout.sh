#!/usr/bin/env bash
# The SSE fan-out comparison: linerate's users example against the same service in axum
# (bench/axum-users), each pinned to CPU 0, a throwaway PostgreSQL 15 and the client
# (bench/sse-fanout.py) on CPU 1. Per round and server: SUBS subscriptions to /users/events,
# EVENTS users created one after another, each published to every subscriber; the server's CPU
# time per event delivered. Rounds interleave the two servers; the medians and their ratio are
# printed. Servers bind 127.0.0.1 on free ports and are stopped by PID; the database is stopped
# and removed at the end, whatever happens.
#
#   bench/sse-fanout.sh [ROUNDS] [SUBS] [EVENTS]     (default 3 1000 300)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
subs=${2:-1000}
events=${3:-300}
cargo build --release -p linerate-postgres --example users >/dev/null
(cd bench/axum-users && cargo build --release --locked >/dev/null)
out=$(scripts/pg.sh start)
dir=$(echo "$out" | sed -n 's/^PG_DIR=//p')
pid=""
cleanup() {
    if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
    scripts/pg.sh stop "$dir"
}
trap cleanup EXIT
export DATABASE_URL USERS_TOKEN=secret
DATABASE_URL=$(echo "$out" | sed -n 's/^DATABASE_URL=//p')
/usr/lib/postgresql/15/bin/psql -X -q -v ON_ERROR_STOP=1 "$DATABASE_URL" \
    -c 'CREATE TABLE IF NOT EXISTS users (id serial PRIMARY KEY, name text NOT NULL)'
pm=$(head -1 "$dir/data/postmaster.pid")
taskset -a -p -c 1 "$pm" >/dev/null
for child in $(pgrep -P "$pm"); do taskset -a -p -c 1 "$child" >/dev/null; done
free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
declare -A bin=(
    [linerate]=target/release/examples/users
    [axum]=bench/axum-users/target/release/axum-users
)
declare -A results=()
for r in $(seq 1 "$rounds"); do
    for name in axum linerate; do
        port=$(free_port)
        taskset -c 0 "${bin[$name]}" "127.0.0.1:$port" >/dev/null 2>&1 &
        pid=$!
        for _ in $(seq 1 100); do
            curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
            sleep 0.1
        done
        line=$(taskset -c 1 python3 bench/sse-fanout.py --addr "127.0.0.1:$port" --pid "$pid" \
            --subs "$subs" --events "$events")
        echo "round $r $name $line"
        results[$name]+="$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["us_per_event"])' "$line") "
        kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
    done
done
python3 - "${results[linerate]}" "${results[axum]}" <<'PY'
import statistics, sys
l = [float(x) for x in sys.argv[1].split()]
a = [float(x) for x in sys.argv[2].split()]
ml, ma = statistics.median(l), statistics.median(a)
print(f"median µs of server CPU per event delivered: linerate {ml:.3f}, axum {ma:.3f}; ratio {ml/ma:.2f}×")
PY
