#!/usr/bin/env bash
# The library comparison: linerate's bank example (crates/server/examples/bank) against
# the same service in axum + tonic (bench/bank-axum-tonic), through `linerate lab compare
# --suite bench/bank.toml`, on a throwaway PostgreSQL 15 (scripts/pg.sh) and a private Redis on
# a free port, both pinned to the load CPU (1), seeded (bench/bank/schema.sql and seed.sql: 1,000
# accounts; the bearer token `secret`). The database and Redis are stopped and removed at the
# end, whatever happens.
#
#   bench/bank.sh [lab compare flags…]   e.g. --rounds 1 --duration 2s, or --out docs/lab/bank
#
# SUITE=bench/bank-cached.toml runs the cache-hit workloads instead (both services started
# with CACHE_MS: the frameworks' cost, PostgreSQL and Redis out of the request).
#
# LINERATE=path runs that linerate binary's lab instead of building target/release/linerate (a
# check that the suite works needs no release build of the whole binary).
#
# The example is built as bench/bank-size.sh measures it: `--no-default-features --features
# grpc,tower` (what the service uses: gRPC over h2c and
# tower-http's CompressionLayer for gzip and br answers, as its twin).
set -euo pipefail
cd "$(dirname "$0")/.."
FEATURES=grpc,tower
if [ -z "${LINERATE:-}" ]; then
    cargo build --release -p linerate >/dev/null
    LINERATE=target/release/linerate
fi
cargo build --release -p linerate-server --example bank --no-default-features --features "$FEATURES" >/dev/null
(cd bench/bank-axum-tonic && cargo build --release --locked >/dev/null)
python3 bench/bank/frames.py

redis_pid= pg_dir=
cleanup() {
    if [ -n "$redis_pid" ]; then kill "$redis_pid" 2>/dev/null || true; wait "$redis_pid" 2>/dev/null || true; fi
    if [ -n "$pg_dir" ]; then scripts/pg.sh stop "$pg_dir"; fi
}
trap cleanup EXIT

out=$(scripts/pg.sh start)
pg_dir=$(echo "$out" | sed -n 's/^PG_DIR=//p')
export DATABASE_URL REDIS_URL
DATABASE_URL=$(echo "$out" | sed -n 's/^DATABASE_URL=//p')
/usr/lib/postgresql/15/bin/psql -X -q -v ON_ERROR_STOP=1 "$DATABASE_URL" \
    -f bench/bank/schema.sql -f bench/bank/seed.sql
pm=$(head -1 "$pg_dir/data/postmaster.pid")
taskset -a -p -c 1 "$pm" >/dev/null
for child in $(pgrep -P "$pm"); do taskset -a -p -c 1 "$child" >/dev/null; done

# Redis on a port the OS picks free, in memory only, its own process (stopped by PID at exit).
redis_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
taskset -c 1 redis-server --bind 127.0.0.1 --port "$redis_port" --save '' --appendonly no \
    --logfile "$pg_dir/redis.log" &
redis_pid=$!
REDIS_URL=redis://127.0.0.1:$redis_port
for _ in $(seq 50); do
    redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break
    sleep 0.1
done
redis-cli -p "$redis_port" set bank:token:secret 'owner 1' >/dev/null

"$LINERATE" lab compare --suite "${SUITE:-bench/bank.toml}" "$@"
