#!/usr/bin/env bash
# A throwaway PostgreSQL 15 for tests, development and the lab: a cluster in a new temporary
# directory, owned by an unprivileged user, listening on 127.0.0.1 on a free port, seeded with
# TechEmpower's world (10,000 rows) and fortune (12) tables and HttpArena's items (100,000)
# and users (4) (scripts/pg/schema.sql, scripts/pg/items.py); and `linerate_arena`, a copy of it
# whose `fortune` is HttpArena's 200 rows (scripts/pg/httparena-fortunes.sql), for
# `linerate lab arena`.
#
#   scripts/pg.sh start      start one; prints DATABASE_URL=…, ARENA_DATABASE_URL=…, PG_DIR=…
#                            and PG_PORT=… (also in $PG_DIR/env)
#   scripts/pg.sh stop DIR   stop the cluster in DIR (pg_ctl, then its postmaster by PID) and
#                            remove DIR
#   scripts/pg.sh down DIR   stop the server in DIR, keeping the cluster (a database outage)
#   scripts/pg.sh up DIR     start it again, on the same port
#   scripts/pg.sh selftest   start, check the seed over TCP with the password, stop (CI runs it)
#
# Test clusters only: durability is off (fsync, synchronous_commit, full_page_writes), so a
# crash of the machine loses the data, which is thrown away anyway. Logins over TCP use
# SCRAM-SHA-256 (user and password `linerate`), as a real server would ask; the Unix socket in
# the directory trusts its local user. Exit 2, with a line saying why, where it cannot run
# (no PostgreSQL 15 and no way to install it). As root on Debian it installs postgresql-15
# itself (no default cluster is created) and runs the cluster as the `postgres` user.
set -euo pipefail
cd "$(dirname "$0")/.."
PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
DB_USER=linerate
DB_PASS=linerate
DB_NAME=linerate

say() { echo "pg: $*" >&2; }
not_run() { say "NOT RUN: $*"; exit 2; }

install_pg() {
    [ -x "$PG_BIN/initdb" ] && return 0
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
        not_run "no $PG_BIN/initdb, and installing postgresql-15 needs root and apt-get"
    fi
    say "installing postgresql-15"
    # Debian's package would create and start a cluster on port 5432 at install: say no.
    if [ ! -e /etc/postgresql-common/createcluster.conf ]; then
        mkdir -p /etc/postgresql-common
        echo "create_main_cluster = false" >/etc/postgresql-common/createcluster.conf
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        -o Dpkg::Options::=--force-confold postgresql-15 >/tmp/linerate-pg-apt.log 2>&1 \
        || { apt-get update >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y \
            --no-install-recommends -o Dpkg::Options::=--force-confold postgresql-15 \
            >/tmp/linerate-pg-apt.log 2>&1; } \
        || not_run "apt-get install postgresql-15 failed (see /tmp/linerate-pg-apt.log)"
    [ -x "$PG_BIN/initdb" ] || not_run "postgresql-15 installed, but $PG_BIN/initdb is missing"
}

# as_owner CMD…: runs CMD as the cluster's owner (postgres when we are root; initdb refuses root).
as_owner() {
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start() {
    install_pg
    local dir port
    dir=$(mktemp -d "${TMPDIR:-/tmp}/linerate-pg.XXXXXX")
    chmod 755 "$dir"
    [ "$(id -u)" = 0 ] && chown postgres: "$dir"
    printf '%s\n' "$DB_PASS" >"$dir/pwfile"
    [ "$(id -u)" = 0 ] && chown postgres: "$dir/pwfile"
    as_owner "$PG_BIN/initdb" -D "$dir/data" -U "$DB_USER" --pwfile="$dir/pwfile" \
        --auth-local=trust --auth-host=scram-sha-256 -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 \
        || { cat "$dir/initdb.log" >&2; rm -rf "$dir"; say "initdb failed"; exit 1; }
    rm -f "$dir/pwfile"
    local started=""
    for _ in 1 2 3; do   # a free port can be taken between the probe and the bind: try again
        port=$(free_port)
        echo "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$dir \
 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300" \
            >"$dir/options"
        if server_up "$dir"; then
            started=1
            break
        fi
    done
    if [ -z "$started" ]; then
        tail -20 "$dir/server.log" >&2 || true
        rm -rf "$dir"
        say "the server did not start"
        exit 1
    fi
    local psql=("$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$dir" -p "$port" -U "$DB_USER")
    if ! { as_owner "${psql[@]}" -d postgres -c "CREATE DATABASE $DB_NAME" \
        && as_owner "${psql[@]}" -d "$DB_NAME" -f scripts/pg/schema.sql \
        && python3 scripts/pg/items.py crates/linerate/data/dataset.json \
            | as_owner "${psql[@]}" -d "$DB_NAME" -c "COPY items FROM STDIN" \
        && as_owner "${psql[@]}" -d "$DB_NAME" -c "VACUUM ANALYZE" \
        && as_owner "${psql[@]}" -d postgres -c "CREATE DATABASE ${DB_NAME}_arena TEMPLATE $DB_NAME" \
        && as_owner "${psql[@]}" -d "${DB_NAME}_arena" -f scripts/pg/httparena-fortunes.sql; } \
        >"$dir/seed.log" 2>&1; then
        cat "$dir/seed.log" >&2
        stop "$dir"
        say "seeding failed"
        exit 1
    fi
    local url="postgres://$DB_USER:$DB_PASS@127.0.0.1:$port/$DB_NAME"
    printf 'DATABASE_URL=%s\nARENA_DATABASE_URL=%s_arena\nPG_DIR=%s\nPG_PORT=%s\n' \
        "$url" "$url" "$dir" "$port" | tee "$dir/env"
}

# server_up DIR: starts the cluster in DIR with the options it was made with.
server_up() {
    as_owner "$PG_BIN/pg_ctl" -D "$1/data" -l "$1/server.log" -w -t 60 start \
        -o "$(cat "$1/options")" >/dev/null 2>&1
}

ours() {
    case "$1" in
        */linerate-pg.*) ;;
        *) say "refusing to touch $1: not a directory scripts/pg.sh made"; exit 1 ;;
    esac
}

down() {
    local dir=${1:?usage: scripts/pg.sh down DIR}
    ours "$dir"
    as_owner "$PG_BIN/pg_ctl" -D "$dir/data" -m fast -w -t 30 stop >/dev/null
}

up() {
    local dir=${1:?usage: scripts/pg.sh up DIR}
    ours "$dir"
    server_up "$dir" || { tail -20 "$dir/server.log" >&2; say "the server did not start"; exit 1; }
}

stop() {
    local dir=${1:?usage: scripts/pg.sh stop DIR}
    ours "$dir"
    if [ -f "$dir/data/postmaster.pid" ]; then
        local pid
        pid=$(head -1 "$dir/data/postmaster.pid")
        as_owner "$PG_BIN/pg_ctl" -D "$dir/data" -m fast -w -t 30 stop >/dev/null 2>&1 \
            || kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -rf "$dir"
}

selftest() {
    local out dir port url
    set +e
    out=$(start)
    local rc=$?
    set -e
    [ $rc = 0 ] || exit $rc
    dir=$(echo "$out" | sed -n 's/^PG_DIR=//p')
    port=$(echo "$out" | sed -n 's/^PG_PORT=//p')
    url=$(echo "$out" | sed -n 's/^DATABASE_URL=//p')
    trap 'stop "$dir"' EXIT
    # Over TCP with the password (SCRAM), as linerate connects.
    local fail=0
    check() {   # check NAME SQL EXPECTED [URL]
        local got
        got=$("$PG_BIN/psql" -X -tA "${4:-$url}" -c "$2" 2>&1) || true
        if [ "$got" = "$3" ]; then echo "PG $1 PASS $got"; else echo "PG $1 FAIL got '$got', want '$3'"; fail=1; fi
    }
    check world "SELECT count(*), min(id), max(id) FROM world" "10000|1|10000"
    check world_numbers "SELECT count(*) FROM world WHERE randomnumber BETWEEN 1 AND 10000" "10000"
    check fortune "SELECT count(*), max(length(message)) FROM fortune" "12|79"
    check fortune_utf8 "SELECT message FROM fortune WHERE id = 12" "フレームワークのベンチマーク"
    check items "SELECT count(*), min(price) >= 1, max(price) <= 500 FROM items" "100000|t|t"
    check items_tags "SELECT count(*) FROM items WHERE jsonb_array_length(tags) BETWEEN 1 AND 4" "100000"
    check users "SELECT count(*), max(name) FILTER (WHERE id = 42) FROM users" "4|Alice Chen"
    check durability_off "SHOW fsync" "off"
    local arena
    arena=$(echo "$out" | sed -n 's/^ARENA_DATABASE_URL=//p')
    check arena_fortune "SELECT count(*), count(*) FILTER (WHERE message LIKE '%&%''%—%') FROM fortune" "200|188" \
        "$arena"
    check arena_script "SELECT message FROM fortune WHERE id = 11" \
        '<script>alert("This should not be displayed in a browser alert box.");</script>' "$arena"
    check arena_items "SELECT count(*) FROM items" "100000" "$arena"
    down "$dir"
    if "$PG_BIN/pg_isready" -h 127.0.0.1 -p "$port" >/dev/null 2>&1; then
        echo "PG down FAIL the server still answers"; fail=1
    else
        echo "PG down PASS"
    fi
    up "$dir"
    check up_again "SELECT count(*) FROM fortune" "12"
    if PGPASSWORD=wrong "$PG_BIN/psql" -X -tA -h 127.0.0.1 -p "$port" -U "$DB_USER" -d "$DB_NAME" \
        -c "SELECT 1" >/dev/null 2>&1; then
        echo "PG password_checked FAIL a wrong password was let in"; fail=1
    else
        echo "PG password_checked PASS"
    fi
    stop "$dir"
    trap - EXIT
    if "$PG_BIN/pg_isready" -h 127.0.0.1 -p "$port" >/dev/null 2>&1 || [ -e "$dir" ]; then
        echo "PG stopped FAIL the server on port $port or its directory is still there"; fail=1
    else
        echo "PG stopped PASS"
    fi
    exit $fail
}

case "${1:-}" in
    start) start ;;
    stop) stop "${2:-}" ;;
    down) down "${2:-}" ;;
    up) up "${2:-}" ;;
    selftest) selftest ;;
    *) echo "usage: scripts/pg.sh start | stop DIR | down DIR | up DIR | selftest" >&2; exit 1 ;;
esac
