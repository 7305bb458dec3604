#!/usr/bin/env bash
# The public RFC 9111 suite (http-tests/cache-tests, the suite behind cache-tests.fyi; an
# offline copy in ../shared/cache-tests) against linerate's proxy cache: the suite's origin on
# one loopback port, `linerate serve --proxy /=… --proxy-cache 64MiB` in front on a port it picks.
# Prints the suite's summary and the required tests that failed, and fails below its goal
# (at least 133 required tests passed, at most 9 failed: better than every cache the
# suite's README measured on this machine). Exit 2 (NOT RUN) where Node or the suite is missing.
# usage: scripts/cache-tests.sh LINERATE_BIN [OUT.json]
set -euo pipefail
BIN=${1:?usage: $0 LINERATE_BIN [OUT.json]}
OUT=${2:-}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SHARED=${CACHE_TESTS_DIR:-$ROOT/../shared/cache-tests}
MIN_PASS=133
MAX_FAIL=9

[ -d "$SHARED/suite" ] || { echo "NOT RUN: cache-tests: $SHARED/suite is missing"; exit 2; }
command -v node >/dev/null || { echo "NOT RUN: cache-tests: node is not installed (Node >= 20.18.1)"; exit 2; }
node -e 'const [a,b]=process.versions.node.split(".").map(Number); process.exit(a>20||(a==20&&b>=18)?0:1)' \
    || { echo "NOT RUN: cache-tests: node $(node --version) is older than 20.18.1"; exit 2; }

WORK=$(mktemp -d)
PID=""
ORIGIN_PID=""
cleanup() {
    [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null || true
    [ -n "$ORIGIN_PID" ] && kill "$ORIGIN_PID" 2>/dev/null && wait "$ORIGIN_PID" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
cp -r "$SHARED/suite" "$SHARED/tools" "$WORK/"
# The client imports undici for the interim (1xx) tests only.
if [ ! -d "$WORK/suite/node_modules/undici" ]; then
    (cd "$WORK/suite" && timeout 120 npm install --no-save --no-audit --no-fund --loglevel=error undici@7.30.2 >/dev/null 2>&1) \
        || echo "cache-tests: undici could not be installed; the interim tests will count as failures"
fi

# Ports. A port picked free and let go can be taken before it is bound again: twice in CI,
# linerate found the one picked for it in use ("cannot listen on 127.0.0.1:49481"), with
# Autobahn in its own network namespace the second time, and what took it was not found.
# So linerate binds port 0 and says which port it got, and the suite's origin, which needs
# a number, is started here (run-against.sh uses an origin that answers) and started again
# on another port should it fail to come up.
ORIGIN=""
for try in 1 2 3; do
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    (cd "$WORK/suite" && npm_config_update_notifier=false npm_config_protocol=http \
        npm_package_config_id="" npm_config_port=$port npm_config_pidfile="$WORK/origin.pid" \
        exec node --require "$WORK/tools/loopback.cjs" test-engine/server/server.mjs) \
        >"$WORK/origin.log" 2>&1 &
    ORIGIN_PID=$!
    for _ in $(seq 50); do
        kill -0 "$ORIGIN_PID" 2>/dev/null || break
        curl -s -o /dev/null "http://127.0.0.1:$port/state/probe" && { ORIGIN=$port; break; }
        sleep 0.1
    done
    [ -z "$ORIGIN" ] || break
    kill "$ORIGIN_PID" 2>/dev/null && wait "$ORIGIN_PID" 2>/dev/null || true
    ORIGIN_PID=""
    echo "cache-tests: the suite's origin did not come up on port $port (try $try of 3): $(tail -1 "$WORK/origin.log")"
done
[ -n "$ORIGIN" ] || { echo "cache-tests: the suite's origin did not start"; exit 1; }

"$BIN" serve --addr "127.0.0.1:0" --workers 2 --app none \
    --proxy "/=http://127.0.0.1:$ORIGIN" --proxy-cache 64MiB >"$WORK/linerate.log" 2>&1 &
PID=$!
PROXY=""
for _ in $(seq 50); do
    [ -n "$PROXY" ] || PROXY=$(sed -n 's#^linerate serving on http://127\.0\.0\.1:\([0-9]*\) .*#\1#p' "$WORK/linerate.log")
    [ -n "$PROXY" ] && curl -s -o /dev/null "http://127.0.0.1:$PROXY/" && break
    kill -0 "$PID" 2>/dev/null || break
    sleep 0.1
done
{ kill -0 "$PID" 2>/dev/null && [ -n "$PROXY" ]; } || { cat "$WORK/linerate.log"; echo "linerate did not start"; exit 1; }

"$WORK/tools/run-against.sh" "$PROXY" "$WORK/out.json" "$ORIGIN" | tee "$WORK/summary.txt"
[ -z "$OUT" ] || cp "$WORK/out.json" "$OUT"
SHOW_FAILS=1 node "$WORK/tools/summarize.mjs" "$WORK/suite" "$WORK/out.json" | tail -n +4
row=$(grep '^| out.json' "$WORK/summary.txt")
required=$(echo "$row" | awk -F'|' '{print $4}')
pass=$(echo "$required" | awk -F'/' '{gsub(/ /,"",$1); print $1}')
fail=$(echo "$required" | awk -F'/' '{gsub(/ /,"",$2); print $2}')
echo "cache-tests: required $pass passed, $fail failed (goal: >= $MIN_PASS passed, <= $MAX_FAIL failed)"
[ "$pass" -ge "$MIN_PASS" ] && [ "$fail" -le "$MAX_FAIL" ]
