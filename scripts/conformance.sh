#!/usr/bin/env bash
# Runs the public Http11Probe suite (scripts/conformance/http11probe.py, a copy of
# ../shared/conformance/http11probe.py) against the demo server, as `linerate serve` runs it
# with no arguments, and checks the result (scripts/conformance/check.py): no scored miss
# outside scripts/conformance/expected-misses.txt and a score of at least 155/161.
# The server binds 127.0.0.1 on an OS-chosen port and is stopped by its PID.
# usage: scripts/conformance.sh [path/to/linerate]   (default: target/release/linerate)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-${CARGO_TARGET_DIR:-target}/release/linerate}
probe=scripts/conformance/http11probe.py
if [ -f ../shared/conformance/http11probe.py ] && ! cmp -s ../shared/conformance/http11probe.py "$probe"; then
    echo "conformance: $probe differs from ../shared/conformance/http11probe.py; copy the new one in" >&2
    exit 1
fi
out=$(mktemp -d)
"$bin" serve --addr 127.0.0.1:0 --workers 1 --no-pin --log-level warn >"$out/banner" 2>"$out/stderr" &
pid=$!
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$out"' EXIT
port=""
for _ in $(seq 100); do
    port=$(sed -n 's|^linerate serving on http://127\.0\.0\.1:\([0-9]*\) .*|\1|p' "$out/banner")
    [ -n "$port" ] && break
    kill -0 "$pid" 2>/dev/null || { cat "$out/stderr" >&2; echo "conformance: the server did not start" >&2; exit 1; }
    sleep 0.1
done
[ -n "$port" ] || { echo "conformance: no banner from the server" >&2; exit 1; }
python3 "$probe" "$port" --json "$out/report.json" >"$out/probe.txt"
grep "^score:" "$out/probe.txt"
python3 scripts/conformance/check.py "$out/report.json" scripts/conformance/expected-misses.txt 155
kill -0 "$pid" || { echo "conformance: the server died during the suite" >&2; exit 1; }
