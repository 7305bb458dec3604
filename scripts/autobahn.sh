#!/usr/bin/env bash
# Autobahn|Testsuite, the suite WebSocket implementations are judged by: `wstest -m
# fuzzingclient` against the demo's /ws echo (every case, 1 to 13; 12.x and 13.x are
# permessage-deflate), then a summary by behaviour from its report. Fails when a case FAILED,
# or when the suite ran no case; the NON-STRICT, INFORMATIONAL and UNIMPLEMENTED cases are
# listed (docs/conformance.md explains them).
#
#   scripts/autobahn.sh [path/to/linerate]     (default: target/release/linerate)
#
# 12.x and 13.x send 1,000 messages of up to 128 KiB per case (252 cases): Autobahn's Python
# 2.7 client takes most of the time (the server about a quarter of the CPU), ~7 minutes in one
# process. So the cases are split among AUTOBAHN_JOBS clients run at once (default: the CPU
# count, at most 4), balanced by their measured times.
#
# Autobahn|Testsuite runs on Python 2.7 only: pyenv's 2.7 (~/.pyenv/versions/2.7.*), or
# python2.7 on the PATH, or $AUTOBAHN_PYTHON. It is installed with that Python's pip into
# target/tools/autobahn (PyPI). Exit 2 with a NOT RUN line saying why where it cannot run (no
# Python 2.7, pip cannot install it). The server binds 127.0.0.1 on a free port and is
# stopped by its PID; the report is left in target/autobahn/.
#
# The server and its clients run in a network namespace of their own where one can be made
# (root and iproute2; else on the host's loopback, said): scripts/test-all.sh runs this beside
# the later stages, which pick free ports on 127.0.0.1, and the clients' hundreds of
# connections would take ephemeral ports there too. (A stage's picked port was once taken
# before its bind; it happened again with this namespace, so that was not Autobahn:
# docs/conformance.md.)
# AUTOBAHN_CASES (e.g. "1.*") runs only those cases, to check this script itself.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-target/release/linerate}

say() { echo "autobahn: $*" >&2; }
not_run() { say "NOT RUN: $*"; exit 2; }

[ -x "$bin" ] || { say "no $bin (build it: cargo build --release -p linerate)"; exit 1; }

py2=${AUTOBAHN_PYTHON:-}
if [ -z "$py2" ]; then
    for p in "$HOME"/.pyenv/versions/2.7*/bin/python "$(command -v python2.7 || true)"; do
        if [ -n "$p" ] && [ -x "$p" ]; then py2=$p; break; fi
    done
fi
[ -n "$py2" ] || not_run "no Python 2.7 (Autobahn|Testsuite needs it: pyenv install 2.7.18)"
"$py2" -c 'import sys; sys.exit(sys.version_info[:2] != (2, 7))' \
    || not_run "$py2 is not Python 2.7"

tools=$PWD/target/tools/autobahn
# Only the copy installed here: a user-wide install elsewhere must not stand in for it.
export PYTHONNOUSERSITE=1
# A site directory, not PYTHONPATH: zope.interface is a namespace package whose .pth file
# only a site directory reads.
site="import site, sys; site.addsitedir('$tools')"
if ! "$py2" -c "$site; import autobahntestsuite" 2>/dev/null; then
    say "installing autobahntestsuite into $tools (pip, PyPI)"
    mkdir -p "$tools"
    "$py2" -m pip install --quiet --disable-pip-version-check --no-warn-script-location \
        --target "$tools" autobahntestsuite >&2 \
        || not_run "pip could not install autobahntestsuite with $py2"
fi

out=$PWD/target/autobahn
rm -rf "$out"
mkdir -p "$out"
# A namespace of its own (see above): `ip netns exec` execs, so a PID taken below is the
# server's or the client's own.
ns=""
in_ns=()
if [ "$(id -u)" = 0 ] && command -v ip >/dev/null 2>&1 \
    && ip netns add "linerate-autobahn-$$" 2>/dev/null; then
    ns=linerate-autobahn-$$
    ip -n "$ns" link set lo up
    in_ns=(ip netns exec "$ns")
    say "in network namespace $ns"
else
    say "no network namespace (root and iproute2 make one): on the host's loopback"
fi
port=$("${in_ns[@]}" "$py2" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"${in_ns[@]}" "$bin" serve --addr "127.0.0.1:$port" --workers 1 >"$out/server.log" 2>&1 &
server=$!
clients=()
# The clients too, should one fail: `timeout` passes the signal on to its wstest.
trap 'kill "$server" "${clients[@]}" 2>/dev/null || true; wait 2>/dev/null || true; [ -z "$ns" ] || ip netns del "$ns" 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do
    if "${in_ns[@]}" "$py2" -c "import socket; socket.create_connection(('127.0.0.1', $port), 1)" 2>/dev/null; then
        break
    fi
    sleep 0.1
done

jobs=${AUTOBAHN_JOBS:-$(nproc 2>/dev/null || echo 1)}
[ "$jobs" -ge 1 ] 2>/dev/null || jobs=1
[ "$jobs" -le 4 ] || jobs=4
[ -z "${AUTOBAHN_CASES:-}" ] || jobs=1
# One spec per client: the case groups dealt out longest first (seconds measured on a 2 vCPU
# guest; docs/conformance.md), each to the client with the least so far.
python3 - "$out" "$port" "$jobs" <<'EOF'
import json, os, sys
out, port, jobs = sys.argv[1], sys.argv[2], int(sys.argv[3])
groups = [("12.3.*", 72), ("12.2.*", 62), ("12.5.*", 47), ("13.7.*", 27), ("13.5.*", 26),
          ("13.3.*", 26), ("12.4.*", 26), ("12.1.*", 25), ("13.4.*", 24), ("13.1.*", 24),
          ("13.2.*", 24), ("13.6.*", 24),
          (["%d.*" % n for n in range(1, 12)], 11)]
load = [0] * jobs
cases = [[] for _ in range(jobs)]
if os.environ.get("AUTOBAHN_CASES"):
    groups = [(os.environ["AUTOBAHN_CASES"].split(","), 1)]
for pattern, secs in groups:
    i = load.index(min(load))
    load[i] += secs
    cases[i] += pattern if isinstance(pattern, list) else [pattern]
for i in range(jobs):
    json.dump({"outdir": "%s/reports-%d" % (out, i + 1),
               "servers": [{"agent": "linerate", "url": "ws://127.0.0.1:%s/ws" % port}],
               "cases": cases[i], "exclude-cases": [], "exclude-agent-cases": {}},
              open("%s/spec-%d.json" % (out, i + 1), "w"), indent=2)
EOF
say "wstest -m fuzzingclient against ws://127.0.0.1:$port/ws (every case, $jobs clients)"
cd "$out"
for i in $(seq 1 "$jobs"); do
    timeout 1200 "${in_ns[@]}" "$py2" -c \
        "$site; from autobahntestsuite.wstest import run; sys.argv[0] = 'wstest'; run()" \
        -m fuzzingclient -s "$out/spec-$i.json" >"$out/wstest-$i.log" 2>&1 &
    clients+=($!)
done
for i in $(seq 1 "$jobs"); do
    wait "${clients[$((i - 1))]}" \
        || { tail -20 "$out/wstest-$i.log" >&2; say "wstest failed (log: $out/wstest-$i.log)"; exit 1; }
done

# The report: every case's behaviour (and its close behaviour), counted.
python3 - "$out"/reports-*/index.json <<'EOF'
import json, sys
from collections import Counter
cases = {}
for path in sys.argv[1:]:
    cases.update(json.load(open(path))["linerate"])
def key(case):
    return [int(p) for p in case.split(".")]
counts = Counter()
notes = []
failed = []
for case in sorted(cases, key=key):
    r = cases[case]
    b, c = r["behavior"], r["behaviorClose"]
    worst = "FAILED" if "FAILED" in (b, c) else b
    counts[worst] += 1
    if worst == "FAILED":
        failed.append("%s (%s, close %s)" % (case, b, c))
    elif worst != "OK":
        notes.append("%s %s" % (case, worst))
print("autobahn: %d cases: %s" % (len(cases), ", ".join("%s %d" % kv for kv in sorted(counts.items()))))
groups = Counter(n.split(" ")[1] + " in " + n.split(".")[0] + ".x" for n in notes)
for g, n in sorted(groups.items()):
    print("autobahn:   %s: %d" % (g, n))
if failed:
    print("autobahn: FAILED: " + ", ".join(failed))
    sys.exit(1)
if not cases:
    print("autobahn: no case ran")
    sys.exit(1)
EOF
