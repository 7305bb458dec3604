#!/usr/bin/env bash
# The TechEmpower entry's cost per request against the demo's: instructions per
# request (callgrind, user space, every thread), each server with one worker, on the same
# throwaway PostgreSQL (scripts/pg.sh), in one run:
#   json           /json, 16 connections
#   plaintext      /plaintext, 16 connections pipelined 16 deep
#   db             /db, 16 connections
#   queries        /queries?queries=20
#   fortunes       /fortunes
#   cached         /cached-queries?count=20
# Each case is run twice, with N/10 and N requests: the difference divided by the difference
# in requests is the cost of one request, start-up and shutdown (which differ between the two
# binaries) left out. Counts, not times: the same binary and inputs give the same count
# within a few tens.
#   bench/techempower_instructions.sh LINERATE ENTRY      (N=20000 requests)
# LINERATE is the product binary (its demo, as `serve` runs it and again with the entry's
# settings: --no-compression --max-conns-per-client 0), ENTRY the entry's
# (linerate-techempower); the load comes from LINERATE's load generator, not under callgrind.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${N:-20000}
linerate=$1
entry=$2
# shellcheck source=bench/callgrind_common.sh
. bench/callgrind_common.sh
pg=$(scripts/pg.sh start)
pg_dir=$(sed -n 's/^PG_DIR=//p' <<<"$pg")
url=$(sed -n 's/^DATABASE_URL=//p' <<<"$pg")
trap 'cleanup; scripts/pg.sh stop "$pg_dir" >/dev/null 2>&1 || true' EXIT

# count SERVER CASE REQUESTS: the server's instructions (every thread) serving REQUESTS of CASE.
count() {
    local server=$1 case=$2 requests=$3 p out vp path load
    p=$(free_port)
    out=$tmp/cg.$server.$case.$requests.out
    case $server in
        demo) cmd=("$linerate" serve --addr "127.0.0.1:$p" --workers 1 --no-pin --log-level warn
                   --app demo --database-url "$url") ;;
        # The demo with the entry's settings: no compression, no per-client connection limit.
        demo-as-entry) cmd=("$linerate" serve --addr "127.0.0.1:$p" --workers 1 --no-pin
                   --log-level warn --app demo --database-url "$url" --no-compression
                   --max-conns-per-client 0) ;;
        entry) cmd=("$entry" --addr "127.0.0.1:$p" --workers 1 --no-pin) ;;
    esac
    load=(-c 16)
    case $case in
        json) path=/json ;;
        plaintext) path=/plaintext; load=(-c 16 -p 16) ;;
        db) path=/db ;;
        queries) path=/queries?queries=20 ;;
        fortunes) path=/fortunes ;;
        cached) path=/cached-queries?count=20 ;;
    esac
    # The entry reads DATABASE_URL (the demo ignores it beside --database-url).
    DATABASE_URL=$url valgrind --tool=callgrind --callgrind-out-file="$out" "${cmd[@]}" >/dev/null 2>"$tmp/serve.err" &
    vp=$!
    pids+=("$vp")
    wait_port "$p"
    "$linerate" load "http://127.0.0.1:$p$path" "${load[@]}" -n "$requests" -t 1 >"$tmp/load"
    grep -q "Status codes.*200" "$tmp/load" || { echo "$server $case: not all 200:" >&2; cat "$tmp/load" >&2; }
    kill -INT "$vp"
    wait "$vp" 2>/dev/null || { echo "$server $case: the server under callgrind failed:" >&2; grep -v '^==' "$tmp/serve.err" | tail -5 >&2; }
    per_request "$out" 1
}

small=$((n / 10))
printf 'case\tdemo\tdemo-as-entry\tentry\t(instructions per request, %d - %d requests)\n' "$n" "$small"
for case in json plaintext db queries fortunes cached; do
    row=$case
    for server in demo demo-as-entry entry; do
        a=$(count "$server" "$case" "$small")
        b=$(count "$server" "$case" "$n")
        row="$row	$(((b - a) / (n - small)))"
    done
    echo "$row"
done
