#!/usr/bin/env bash
# What request ids and tracing cost: instructions per request (callgrind, user
# space, every thread — the exporter's too: the program's total ÷ N, start-up included), for
# each linerate binary given, in turn, in one run:
#   json        /json over HTTP/1.1, 16 connections (the demo; no proxy, no log: no ids drawn)
#   pipelined   /plaintext pipelined 16 deep
#   proxied     GET /json through a proxy mount to the demo (not under callgrind): a request id
#               is drawn and sent upstream
#   traced      the same with tracing on, every request sampled and exported
#               (OTEL_TRACES_SAMPLER=always_on) to bench/otlp_sink.py; only for a binary that
#               traces (`serve --help` names OTEL_EXPORTER_OTLP_ENDPOINT); the exports and
#               bytes the sink took are printed
# Counts, not times: the same binary and inputs give the same count within a few tens.
#   bench/tracing_instructions.sh BINARY [BINARY…]      (N=20000 requests each)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${N:-20000}
# shellcheck source=bench/callgrind_common.sh
. bench/callgrind_common.sh
up=$(free_port)
"$1" serve --addr 127.0.0.1:$up --workers 1 --no-pin --log-level warn --app demo >/dev/null 2>&1 &
pids+=($!)
wait_port "$up"
python3 bench/otlp_sink.py "$tmp/sink.port" 2>"$tmp/sink.log" &
pids+=($!)
for _ in $(seq 1 100); do [ -s "$tmp/sink.port" ] && break; sleep 0.1; done
sink=$(cat "$tmp/sink.port")
for bin in "$@"; do
    cases="json pipelined proxied"
    if "$bin" serve --help 2>&1 | grep -c OTEL_EXPORTER_OTLP_ENDPOINT >/dev/null; then cases="$cases traced"; fi
    for case in $cases; do
        p=$(free_port)
        admin=$(free_port)
        out=$tmp/cg.$p
        args=(--addr 127.0.0.1:$p --workers 1 --no-pin --log-level warn --admin 127.0.0.1:$admin)
        envs=()
        url=http://127.0.0.1:$p/json
        load=(-c 16)
        case $case in
            json) args+=(--app demo) ;;
            pipelined) args+=(--app demo); url=http://127.0.0.1:$p/plaintext; load=(-c 16 -p 16) ;;
            proxied) args+=(--app none --proxy "/=http://127.0.0.1:$up") ;;
            traced)
                args+=(--app none --proxy "/=http://127.0.0.1:$up")
                envs=(OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:$sink OTEL_TRACES_SAMPLER=always_on
                    OTEL_BSP_SCHEDULE_DELAY=200 OTEL_BSP_MAX_QUEUE_SIZE=100000 OTEL_BSP_MAX_EXPORT_BATCH_SIZE=4096)
                ;;
        esac
        env "${envs[@]}" valgrind --tool=callgrind --callgrind-out-file="$out" "$bin" serve "${args[@]}" \
            >/dev/null 2>"$tmp/serve.err" &
        vp=$!
        pids+=($vp)
        wait_port "$p"
        # shellcheck disable=SC2046
        "$1" load "$url" "${load[@]}" -n "$n" -t 1 >"$tmp/load"
        exported=""
        if [ "$case" = traced ]; then
            # Read off the sink, not /metrics: the scrape's process_* series read the clock
            # rate through rustix's auxv, which crashes under valgrind (not natively).
            sleep 1 # the last batch's schedule delay
            exported="exports and bytes the collector took: $(cat "$tmp/sink.port.counts" 2>/dev/null)"
        fi
        kill -INT "$vp"
        wait "$vp" 2>/dev/null || { echo "$bin $case: the server under callgrind failed:"; grep -v '^==' "$tmp/serve.err" | tail -5; }
        ok=$(grep -m1 'Status codes' "$tmp/load" | sed 's/^ *//')
        printf '%s\t%s\t%d instructions per request\t(%s) %s\n' "$bin" "$case" \
            "$(per_request "$out" "$n")" "$ok" "$exported"
    done
done
