#!/usr/bin/env bash
# The library comparison: linerate's users example against the same service in axum
# (bench/axum-users), on a throwaway PostgreSQL 15 pinned to the load CPU (1), through
# `linerate lab compare --suite bench/users.toml`. The database is stopped and removed at the
# end, whatever happens.
#
#   bench/users.sh [lab compare flags…]   e.g. --out docs/lab/users --update-docs docs/benchmarks.md
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p linerate >/dev/null
cargo build --release -p linerate-postgres --example users >/dev/null
(cd bench/axum-users && cargo build --release --locked >/dev/null)
out=$(scripts/pg.sh start)
dir=$(echo "$out" | sed -n 's/^PG_DIR=//p')
trap 'scripts/pg.sh stop "$dir"' EXIT
export DATABASE_URL USERS_TOKEN=secret
DATABASE_URL=$(echo "$out" | sed -n 's/^DATABASE_URL=//p')
/usr/lib/postgresql/15/bin/psql -X -q -v ON_ERROR_STOP=1 "$DATABASE_URL" \
    -c 'CREATE TABLE IF NOT EXISTS users (id serial PRIMARY KEY, name text NOT NULL)' \
    -c "INSERT INTO users (name) SELECT 'user ' || g FROM generate_series(1, 1000) g"
pm=$(head -1 "$dir/data/postmaster.pid")
taskset -a -p -c 1 "$pm" >/dev/null
for child in $(pgrep -P "$pm"); do taskset -a -p -c 1 "$child" >/dev/null; done
target/release/linerate lab compare --suite bench/users.toml "$@"
