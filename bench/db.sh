#!/usr/bin/env bash
# The database comparison: a throwaway PostgreSQL 15 pinned to the load CPU (1), the
# actix peer built, then `linerate lab compare --suite bench/db.toml` with DATABASE_URL set,
# the round trips to the database per request (bench/db_roundtrips.py) and the context switches
# per request (bench/db_switches.py); the database is
# stopped and removed at the end, whatever happens.
#
#   bench/db.sh [lab compare flags…]     e.g. --rounds 3 --out docs/lab/db --update-docs docs/benchmarks.md
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p linerate >/dev/null
(cd bench/actix-db && cargo build --release --locked >/dev/null)
out=$(scripts/pg.sh start)
dir=$(echo "$out" | sed -n 's/^PG_DIR=//p')
trap 'scripts/pg.sh stop "$dir"' EXIT
export DATABASE_URL
DATABASE_URL=$(echo "$out" | sed -n 's/^DATABASE_URL=//p')
port=$(echo "$out" | sed -n 's/^PG_PORT=//p')
# The postmaster and every backend it forks from now on run on the load CPU.
pm=$(head -1 "$dir/data/postmaster.pid")
taskset -a -p -c 1 "$pm" >/dev/null
for child in $(pgrep -P "$pm"); do taskset -a -p -c 1 "$child" >/dev/null; done
python3 bench/db_roundtrips.py --pg-port "$port"
python3 bench/db_switches.py
target/release/linerate lab compare --suite bench/db.toml "$@"
