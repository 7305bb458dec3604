#!/usr/bin/env bash
# CPU per proxied request with every request traced and exported, against the same proxy
# untraced (the goal: ≤ 1.05×; nginx's otel module costs 1.10–1.15×). Two proxies
# of one binary run side by side, each one worker pinned to CPU 0 (they never load at once),
# both to one upstream (the demo) on CPU 1; the traced one exports to bench/otlp_sink.py on
# CPU 1. Rounds alternate untraced, traced, untraced, traced…: each is N requests of
# `linerate load` (CPU 1) to GET /json, and the proxy's CPU (user + system, /proc/PID/stat)
# over the round ÷ N. Prints each round, then the median of each and the median of the
# per-pair ratios.
#   bench/tracing_cpu.sh [BINARY]    (ROUNDS=7 pairs, N=200000, C=32 connections)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-target/release/linerate}
rounds=${ROUNDS:-7}
n=${N:-200000}
c=${C:-32}
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 1 300); do (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.1; done; return 1; }
# cpu_ticks PID: its user + system time so far, in clock ticks.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)

up=$(free_port)
taskset -c 1 "$bin" serve --addr 127.0.0.1:$up --workers 1 --no-pin --log-level warn --app demo \
    >/dev/null 2>&1 &
pids+=($!)
taskset -c 1 python3 bench/otlp_sink.py "$tmp/sink.port" 2>"$tmp/sink.log" &
pids+=($!)
for _ in $(seq 1 100); do [ -s "$tmp/sink.port" ] && break; sleep 0.1; done
sink=$(cat "$tmp/sink.port")
start() { # start NAME ENV…: a proxy on CPU 0; sets port_NAME and pid_NAME
    local name=$1 p a
    shift
    p=$(free_port)
    a=$(free_port)
    env "$@" taskset -c 0 "$bin" serve --addr 127.0.0.1:$p --workers 1 --no-pin --log-level warn \
        --admin 127.0.0.1:$a --app none --proxy "/=http://127.0.0.1:$up" >/dev/null 2>"$tmp/$name.err" &
    pids+=($!)
    eval "pid_$name=$!; port_$name=$p; admin_$name=$a"
    wait_port "$p"
}
start off
start on OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:$sink OTEL_TRACES_SAMPLER=always_on
# round NAME: N requests to that proxy; prints its CPU µs per request
round() {
    local port pid t0 t1
    eval "port=\$port_$1; pid=\$pid_$1"
    t0=$(cpu_ticks "$pid")
    taskset -c 1 "$bin" load "http://127.0.0.1:$port/json" -c "$c" -n "$n" -t 1 >"$tmp/load"
    t1=$(cpu_ticks "$pid")
    python3 -c "print(f'{($t1 - $t0) / $hz / $n * 1e6:.3f}')"
}
round off >/dev/null # warm both
round on >/dev/null
offs=()
ons=()
for i in $(seq 1 "$rounds"); do
    a=$(round off)
    b=$(round on)
    offs+=("$a")
    ons+=("$b")
    echo "round $i: untraced $a µs CPU/request, traced $b µs ($(python3 -c "print(f'{$b / $a:.3f}')")×)"
done
python3 - "${offs[*]}" "${ons[*]}" <<'EOF'
import statistics, sys
off = [float(x) for x in sys.argv[1].split()]
on = [float(x) for x in sys.argv[2].split()]
ratios = [b / a for a, b in zip(off, on)]
print(f"median: untraced {statistics.median(off):.3f} µs, traced {statistics.median(on):.3f} µs CPU per proxied request; "
      f"median ratio {statistics.median(ratios):.3f}× (min {min(ratios):.3f}, max {max(ratios):.3f}) over {len(ratios)} pairs")
EOF
sleep 1
echo "traced proxy: $(curl -s "http://127.0.0.1:$admin_on/metrics" \
    | awk '/^linerate_tracing_(spans_exported|spans_dropped|export_failures)_total/ {printf "%s %s  ", $1, $2}')"
