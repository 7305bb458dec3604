#!/usr/bin/env bash
# What reading a request body whole before it goes up costs a proxied request (one of the edge
# defaults): instructions per request of the proxy (callgrind, user space, every thread: the
# program's total ÷ N, start-up included), a POST of a 1 KiB body over h2c (HEADERS, then
# DATA: the body never comes with the head, so it is either buffered or piped), with the
# default request buffering and with --no-proxy-request-buffering, for each binary given.
# The upstream is the demo (not under callgrind). Counts, not times.
#   bench/request_buffering_instructions.sh BINARY [BINARY…]      (N=20000 requests each)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${N:-20000}
# shellcheck source=bench/callgrind_common.sh
. bench/callgrind_common.sh
head -c 1024 /dev/zero | tr '\0' 'a' >"$tmp/body"
up=$(free_port)
"$1" serve --addr 127.0.0.1:$up --workers 1 --no-pin --log-level warn --app demo >/dev/null 2>&1 &
pids+=($!)
wait_port "$up"
for bin in "$@"; do
    for mode in buffered streamed; do
        flags=()
        [ "$mode" = streamed ] && flags=(--no-proxy-request-buffering)
        p=$(free_port)
        h2c=$(free_port)
        out=$tmp/cg.$p
        valgrind --tool=callgrind --callgrind-out-file="$out" "$bin" serve --addr 127.0.0.1:$p \
            --h2c-port "$h2c" --workers 1 --no-pin --log-level warn --app none \
            --proxy "/=http://127.0.0.1:$up" "${flags[@]}" >/dev/null 2>&1 &
        vp=$!
        pids+=($vp)
        wait_port "$h2c"
        "$1" load "http://127.0.0.1:$h2c/echo" --http2 -c 4 --max-concurrent-streams 4 -t 1 \
            --body-file "$tmp/body" -n "$n" --allow-status-errors >"$tmp/load"
        kill -INT "$vp"
        wait "$vp" 2>/dev/null || true
        ok=$(grep -m1 'Status codes' "$tmp/load" | sed 's/^ *//')
        printf '%s\t%s\t%d instructions per request\t(%s)\n' "$bin" "$mode" "$(per_request "$out" "$n")" "$ok"
    done
done
