#!/usr/bin/env bash
# HttpArena's validation of every profile against linerate's demo: `linerate lab arena
# --validate-only`, which starts the demo itself on free ports of 127.0.0.1 with fixtures of
# its own (HttpArena's static file names and sizes, a random dataset, an RSA-2048
# certificate) and runs HttpArena's checks with fresh random inputs (the load is not run).
# The database profiles (async-db, fortunes, crud, production-stack) get a throwaway PostgreSQL
# (scripts/pg.sh; its ARENA_DATABASE_URL, whose fortune table is HttpArena's 200 rows) and the
# crud and production-stack caches a Redis tier (scripts/cache-servers.sh); where either cannot start, a NOT RUN
# line says so and those profiles are reported NOT RUN, the rest still validated.
#
#   scripts/arena.sh [path/to/linerate [ARGS...]]   (default: $LINERATE_BIN, else
#                                                    target/release/linerate; ARGS go to
#                                                    `lab arena`, e.g. --update-docs docs/lab/arena.md)
#
# Exits non-zero when a profile fails. Profiles the demo does not serve yet are listed as
# "not entered" with the reason. Everything started here is stopped by its PID at exit.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-${LINERATE_BIN:-target/release/linerate}}
[ $# -gt 0 ] && shift
say() { echo "arena: $*" >&2; }
[ -x "$bin" ] || { say "no $bin (build it first)"; exit 1; }

out=$(mktemp -d "${TMPDIR:-/tmp}/linerate-arena.XXXXXX")
pg_dir=""
redis_pid=""
cleanup() {
    [ -n "$redis_pid" ] && scripts/cache-servers.sh stop "$redis_pid" >/dev/null 2>&1 || true
    [ -n "$pg_dir" ] && scripts/pg.sh stop "$pg_dir" >/dev/null 2>&1 || true
    rm -rf "$out"
}
trap cleanup EXIT

extra=()
rc=0
scripts/pg.sh start >"$out/pg.env" 2>"$out/pg.err" || rc=$?
if [ $rc = 0 ]; then
    pg_dir=$(sed -n 's/^PG_DIR=//p' "$out/pg.env")
    # The copy whose fortune table is HttpArena's 200 rows (fortunes); the rest is the same.
    extra+=(--database-url "$(sed -n 's/^ARENA_DATABASE_URL=//p' "$out/pg.env")")
    rc=0
    scripts/cache-servers.sh start redis >"$out/redis.env" 2>"$out/redis.err" || rc=$?
    if [ $rc = 0 ]; then
        redis_pid=$(sed -n 's/.*PID=\([0-9]*\).*/\1/p' "$out/redis.env" | head -1)
        port=$(sed -n 's/.*PORT=\([0-9]*\).*/\1/p' "$out/redis.env" | head -1)
        extra+=(--cache-tier "redis://127.0.0.1:$port")
    else
        say "NOT RUN: Redis for crud's cache tier ($(tail -1 "$out/redis.err")); crud runs on the memory cache alone"
    fi
else
    say "NOT RUN: PostgreSQL for async-db and crud ($(tail -1 "$out/pg.err")); those profiles are NOT RUN"
fi

"$bin" lab arena --validate-only "${extra[@]}" "$@"
