#!/usr/bin/env bash
# OpenTelemetry tracing against real OpenTelemetry parts : a Collector built from
# its Go modules (scripts/otel/collector: the OTLP receiver and contrib's file exporter, which
# writes every span it receives as OTLP JSON), an application instrumented with the
# OpenTelemetry Python SDK (scripts/otel/app.py), and `linerate serve` between curl and the
# application, exporting over OTLP/HTTP to the collector (OTEL_EXPORTER_OTLP_ENDPOINT,
# OTEL_SERVICE_NAME=linerate-ci, OTEL_BSP_SCHEDULE_DELAY=200). One site: /app/ proxied to the
# application, /cached/ proxied through a proxy cache, files at /. Requests, with curl:
#   a  /app/a over HTTP/1.1 with the client's traceparent (sampled) and a tracestate;
#   b  /app/b without traceparent: linerate begins the trace;
#   c  /app/c with traceparent flags 00: sampled out, nothing exported, still propagated;
#   d  /app/d as a, over HTTP/2 (h2c, prior knowledge), with its own trace id;
#   e  /hello.txt, a file (200), and f /missing.txt (404), with a traceparent: no upstream;
#   g  /cached/g twice: a miss through the application, then a hit from linerate's cache.
# scripts/otel/check.py then reads the collector's file (waiting up to SPANS_WAIT seconds for the
# spans) and checks, one line each: linerate's SERVER span carries the client's trace id and
# parent (or is a new root for b), the semantic-convention attributes with the values sent,
# the name `GET {http.route}`, a CLIENT span under it, the application's span under that CLIENT
# span (the child context reached the application, with the tracestate), the X-Request-Id the
# application got equal to the span's linerate.request_id (32 hex). Last, the collector is
# stopped and LOAD_REQUESTS proxied requests are sent: every one must be answered 200 within
# LOAD_MAX_SECONDS, and /metrics' linerate_tracing_spans_dropped_total or
# linerate_tracing_export_failures_total must grow (the queue drops and counts, never blocks).
#
#   scripts/otel.sh [path/to/linerate]     (default: target/release/linerate)
#
# The collector is built with `go build` into target/tools/otelcol-linerate (about 70 s the
# first time on 2 cores; again only when main.go, go.mod or go.sum change: their hash is kept
# in target/tools/otelcol-linerate.stamp); the SDK is installed from PyPI, pinned, into the
# virtual environment target/tools/otel-venv. Exit 2 with a NOT RUN line where it cannot run
# (no Go and no collector built, the Go module proxy or PyPI unreachable, no python3 venv, no
# curl with HTTP/2). Everything binds 127.0.0.1 on free ports and is stopped by its PID. On a
# failure the spans, the cases and the logs are kept in target/otel-failed/.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-target/release/linerate}
tools=$PWD/target/tools
collector=$tools/otelcol-linerate
collector_src=scripts/otel/collector
venv=$tools/otel-venv
# The SDK and its OTLP/HTTP exporter, one release (their own dependencies follow from these).
OTEL_PY_PINS="opentelemetry-sdk==1.45.2 opentelemetry-exporter-otlp-proto-http==1.45.2"
SERVICE=linerate-ci
UA=linerate-otel-ci/1
TRACESTATE=linerate=ci,vendor=x1
SPANS_WAIT=10
LOAD_REQUESTS=200
LOAD_MAX_SECONDS=30
METRICS_WAIT=10

say() { echo "otel: $*" >&2; }
not_run() { say "NOT RUN: $*"; exit 2; }

[ -x "$bin" ] || { say "no $bin (build it first)"; exit 1; }
command -v python3 >/dev/null || not_run "no python3"
curl --version 2>/dev/null | grep -qw HTTP2 || not_run "no curl with HTTP/2 (case d)"
# OTEL_* variables around this script are not its own: every process gets exactly the ones
# set below.
while read -r v; do unset "$v"; done < <(compgen -e | grep '^OTEL_' || true)

# The collector in target/tools, built when missing or when its sources changed.
build_collector() {
    local stamp=$collector.stamp want t0
    want=$(cat "$collector_src/main.go" "$collector_src/go.mod" "$collector_src/go.sum" | sha256sum | cut -d' ' -f1)
    if [ -x "$collector" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
        return 0
    fi
    command -v go >/dev/null || not_run "no Go toolchain to build $collector with"
    mkdir -p "$tools"
    t0=$SECONDS
    say "building the collector ($collector_src) into $collector"
    # go.sum is the pin: -mod=readonly refuses anything it does not name.
    (cd "$collector_src" && GOFLAGS=-mod=readonly go mod download) >"$tools/otelcol-linerate-build.log" 2>&1 \
        || { tail -5 "$tools/otelcol-linerate-build.log" >&2; not_run "go mod download failed (the Go module proxy unreachable?)"; }
    (cd "$collector_src" && GOFLAGS=-mod=readonly go build -trimpath -buildvcs=false -o "$collector.new" .) \
        >>"$tools/otelcol-linerate-build.log" 2>&1 \
        || { tail -20 "$tools/otelcol-linerate-build.log" >&2; say "go build of the collector failed"; exit 1; }
    mv "$collector.new" "$collector"
    echo "$want" >"$stamp"
    say "collector built in $((SECONDS - t0)) s"
}

# The SDK's virtual environment, made again when the pins change.
setup_venv() {
    local pins=$venv/linerate-pins t0
    if [ "$(cat "$pins" 2>/dev/null)" = "$OTEL_PY_PINS" ] \
        && "$venv/bin/python" -c 'import opentelemetry.sdk.trace, opentelemetry.exporter.otlp.proto.http.trace_exporter' 2>/dev/null; then
        return 0
    fi
    t0=$SECONDS
    say "installing $OTEL_PY_PINS into $venv"
    rm -rf "$venv"
    mkdir -p "$tools"
    python3 -m venv "$venv" >/dev/null 2>&1 || not_run "python3 -m venv failed (python3-venv missing?)"
    # shellcheck disable=SC2086 # the pins are words
    "$venv/bin/pip" install -q --disable-pip-version-check $OTEL_PY_PINS >"$tools/otel-venv-pip.log" 2>&1 \
        || { tail -3 "$tools/otel-venv-pip.log" >&2; rm -rf "$venv"; not_run "pip install $OTEL_PY_PINS failed (PyPI unreachable?)"; }
    echo "$OTEL_PY_PINS" >"$pins"
    say "SDK installed in $((SECONDS - t0)) s"
}

build_collector
setup_venv

out=$(mktemp -d "${TMPDIR:-/tmp}/linerate-otel.XXXXXX")
col_pid=""
app_pid=""
server_pid=""
# shellcheck source=scripts/procs.sh
. scripts/procs.sh
trap 'stop_pid server_pid; stop_pid app_pid; stop_pid col_pid; rm -rf "$out"' EXIT

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
# wait_port PID PORT: until something listens on 127.0.0.1:PORT (10 s at most); 1 when PID
# ends first or the time runs out.
wait_port() {
    for _ in $(seq 1 100); do
        kill -0 "$1" 2>/dev/null || return 1
        (exec 3<>"/dev/tcp/127.0.0.1/$2") 2>/dev/null && return 0
        sleep 0.1
    done
    return 1
}
# hex N: N random bytes as lowercase hex.
hex() { od -An -N"$1" -tx1 /dev/urandom | tr -d ' \n'; }

# The collector: OTLP over HTTP (what linerate and the application send) and gRPC, every span
# to one file as OTLP JSON lines, flushed every 100 ms; no telemetry of its own (no port 8888).
col_http=$(free_port)
col_grpc=$(free_port)
cat >"$out/otelcol.yaml" <<EOF
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:$col_http
      grpc:
        endpoint: 127.0.0.1:$col_grpc
exporters:
  file:
    path: $out/spans.jsonl
    flush_interval: 100ms
service:
  telemetry:
    logs:
      level: warn
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [file]
EOF
"$collector" --config "$out/otelcol.yaml" >"$out/otelcol.log" 2>&1 &
col_pid=$!
wait_port "$col_pid" "$col_http" || { cat "$out/otelcol.log" >&2; say "the collector did not start"; exit 1; }

app_port=$(free_port)
"$venv/bin/python" scripts/otel/app.py "$app_port" "http://127.0.0.1:$col_http" >"$out/app.out" 2>"$out/app.err" &
app_pid=$!
wait_port "$app_pid" "$app_port" || { cat "$out/app.err" >&2; say "the application did not start"; exit 1; }

http_port=$(free_port)
h2c_port=$(free_port)
admin_port=$(free_port)
mkdir -p "$out/www"
echo "hello from linerate's tracing stage" >"$out/www/hello.txt"
cat >"$out/linerate.toml" <<EOF
workers = 2
log_level = "warn"

[admin]
addr = "127.0.0.1:$admin_port"

[[listen]]
addr = "127.0.0.1:$http_port"

[[listen]]
addr = "127.0.0.1:$h2c_port"
h2c = true

[[upstream]]
name = "app"
servers = ["127.0.0.1:$app_port"]

[[site]]
names = ["otel.test"]
default = true
# The demo's routes: a route's span names its pattern (http.route = /json/{count}).
app = "demo"

[[site.proxy]]
prefix = "/app/"
upstream = "app"

[[site.proxy]]
prefix = "/cached/"
upstream = "app"
cache = { size = "8MiB" }

[[site.root]]
prefix = "/"
dir = "$out/www"
EOF
OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$col_http" OTEL_SERVICE_NAME=$SERVICE \
    OTEL_BSP_SCHEDULE_DELAY=200 OTEL_TRACES_SAMPLER=parentbased_always_on \
    "$bin" serve --config "$out/linerate.toml" --no-pin >"$out/linerate.out" 2>"$out/linerate.err" &
server_pid=$!
wait_port "$server_pid" "$http_port" && wait_port "$server_pid" "$h2c_port" && wait_port "$server_pid" "$admin_port" \
    || { cat "$out/linerate.out" "$out/linerate.err" >&2; say "linerate did not start"; exit 1; }
say "collector :$col_http (grpc :$col_grpc), application :$app_port, linerate :$http_port (h2c :$h2c_port, admin :$admin_port)"

fail=0
ok() { echo "  ok    $*"; }
bad() { echo "  FAIL  $*"; fail=1; }

# req CASE KIND PROTO PATH ROUTE FLAGS WANT [TRACESTATE]: one request with curl (FLAGS - sends
# no traceparent), its body kept, a line for check.py added to $out/cases. ROUTE is the
# http.route expected (alternatives with |); WANT the status it must answer.
req() {
    local name=$1 kind=$2 proto=$3 path=$4 route=$5 flags=$6 want=$7 state=${8:-} trace=- parent=- port=$http_port got
    local args=(-s -o "$out/$name.body" -w '%{http_code} %{size_download}' -A "$UA" --max-time 10)
    if [ "$proto" = 2 ]; then
        args+=(--http2-prior-knowledge)
        port=$h2c_port
    fi
    if [ "$flags" != - ]; then
        trace=$(hex 16)
        parent=$(hex 8)
        args+=(-H "traceparent: 00-$trace-$parent-$flags")
    fi
    [ -z "$state" ] || args+=(-H "tracestate: $state")
    got=$(curl "${args[@]}" "http://127.0.0.1:$port$path") || got="000 0"
    if [ "${got% *}" = "$want" ]; then
        ok "($name $kind HTTP/$proto $path) answered ${got% *}"
    else
        bad "($name $kind HTTP/$proto $path) answered ${got% *}, want $want"
    fi
    echo "case=$name kind=$kind trace=$trace parent=$parent flags=$flags ${state:+tracestate=$state }proto=$proto path=$path route=$route status=${got% *} size=${got#* } body=$out/$name.body" >>"$out/cases"
}

echo "otel: requests (linerate $bin, $SERVICE; the application otel-app):"
req a proxied 1.1 /app/a /app/ 01 200 "$TRACESTATE"
req b proxied 1.1 /app/b /app/ - 200
req c proxied 1.1 /app/c /app/ 00 200
req d proxied 2 /app/d /app/ 01 200 "$TRACESTATE"
req e local 1.1 /hello.txt / 01 200
req i local 1.1 /json/3 "/json/{count}" 01 200
# A 404 matched no mount, or the root's: its route is the root's prefix or the site's name.
req f local 1.1 /missing.txt "/|otel.test" 01 404
req g cached-miss 1.1 /cached/g /cached/ 01 200
req h cached-hit 1.1 /cached/g /cached/ 01 200

python3 scripts/otel/check.py --wait "$SPANS_WAIT" --app-port "$app_port" --user-agent "$UA" \
    --service "$SERVICE" "$out/spans.jsonl" "$out/cases" || fail=1

# metric NAME: the sum of NAME's samples on /metrics ("none" when it has none).
metric() {
    curl -s --max-time 5 "http://127.0.0.1:$admin_port/metrics" \
        | awk -v n="$1" '$1 == n || index($1, n "{") == 1 { s += $NF; f = 1 } END { if (f) printf "%d\n", s; else print "none" }'
}
lost() {
    local d f
    d=$(metric linerate_tracing_spans_dropped_total)
    f=$(metric linerate_tracing_export_failures_total)
    if [ "$d" = none ] || [ "$f" = none ]; then
        echo none
    else
        echo $((d + f))
    fi
}

exported=$(metric linerate_tracing_spans_exported_total)
if [ "$exported" != none ] && [ "$exported" -gt 0 ]; then
    ok "/metrics: linerate_tracing_spans_exported_total $exported"
else
    bad "/metrics: linerate_tracing_spans_exported_total is $exported (want more than 0)"
fi
lost_before=$(lost)
if [ "$lost_before" = none ]; then
    bad "/metrics: no linerate_tracing_spans_dropped_total or linerate_tracing_export_failures_total"
fi

# The collector goes away; linerate must answer as before, and count what it cannot send.
stop_pid col_pid
t0=$(date +%s%N)
codes=$(curl -s -o /dev/null -w '%{http_code}\n' -A "$UA" --max-time 5 \
    "http://127.0.0.1:$http_port/app/load/[1-$LOAD_REQUESTS]" || true)
ms=$((($(date +%s%N) - t0) / 1000000))
answered=$(grep -c '^200$' <<<"$codes" || true)
if [ "$answered" = "$LOAD_REQUESTS" ] && [ "$ms" -le $((LOAD_MAX_SECONDS * 1000)) ]; then
    ok "collector down: $answered of $LOAD_REQUESTS proxied requests answered 200 in $ms ms"
else
    bad "collector down: $answered of $LOAD_REQUESTS proxied requests answered 200 in $ms ms (want all, within $LOAD_MAX_SECONDS s; other codes: $(grep -v '^200$' <<<"$codes" | sort | uniq -c | tr -s ' \n' ' '))"
fi
if [ "$lost_before" != none ]; then
    lost_after=$lost_before
    for _ in $(seq 1 $((METRICS_WAIT * 5))); do
        lost_after=$(lost)
        [ "$lost_after" != none ] && [ "$lost_after" -gt "$lost_before" ] && break
        sleep 0.2
    done
    if [ "$lost_after" != none ] && [ "$lost_after" -gt "$lost_before" ]; then
        ok "collector down: dropped + export failures grew from $lost_before to $lost_after (dropped $(metric linerate_tracing_spans_dropped_total), failures $(metric linerate_tracing_export_failures_total))"
    else
        bad "collector down: dropped + export failures stayed at $lost_before (now $lost_after) after ${METRICS_WAIT} s"
    fi
fi
if kill -0 "$server_pid" 2>/dev/null; then
    ok "linerate is alive"
else
    bad "linerate died"
fi

if [ "$fail" != 0 ]; then
    keep=target/otel-failed
    rm -rf "$keep"
    mkdir -p "$keep"
    cp "$out"/spans.jsonl "$out"/cases "$out"/*.body "$out"/*.log "$out"/*.err "$out"/*.toml "$out"/*.yaml "$keep"/ 2>/dev/null || true
    say "linerate's stderr (last lines):"
    tail -20 "$out/linerate.err" >&2 || true
    say "the collector's log (last lines):"
    tail -10 "$out/otelcol.log" >&2 || true
    say "FAILED (spans, cases and logs kept in $keep/)"
    exit 1
fi
echo "otel: passed (collector otelcol-linerate v0.161.0, $(grep -o 'opentelemetry-sdk==[^ ]*' <<<"$OTEL_PY_PINS"))"
