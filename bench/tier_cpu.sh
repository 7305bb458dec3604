#!/usr/bin/env bash
# The second-tier figure: the CPU of a tier hit (the edge and Redis together) against a
# memory hit on the same edge, per answered request. Every process is started and stopped here,
# by PID, on loopback ports the kernel picks:
#   the origin   `linerate serve --config bench/cache-origin.toml` (a 1 KiB answer, max-age 3600)
#   Redis        scripts/cache-servers.sh (Debian's redis-server)
#   the edge     `linerate serve --app none --workers 1 --proxy /=origin` with
#                  memory: `--proxy-cache 64MiB`           (every request a memory hit)
#                  tier:   `--proxy-cache 16KiB` + Redis    (the store keeps nothing: every
#                                                           request a memory miss, a tier hit)
#   the load     `linerate load --raw` over 64 connections, each asking its own URL
#                (/c1k?k=N), every URL asked once first.
#
#   bench/tier_cpu.sh time [ROUNDS] [SECONDS]   interleaved rounds (default 3 of 5 s): the edge
#       on CPU 0, the rest on CPU 1; utime+stime of the edge and of Redis from /proc, per
#       answered request; a table and the median ratio. Nothing else may run meanwhile.
#   bench/tier_cpu.sh callgrind [REQUESTS]      the tier edge under callgrind
#       (--separate-threads=yes), REQUESTS tier hits (default 20000) after the warm-up; prints
#       each thread's instructions per request (CG_OUT=DIR keeps the dump's files, for
#       callgrind_annotate). Counts, not times: fine on a busy machine.
#
# BIN=path/to/linerate (default target/release/linerate); BASE=another/linerate times that one
# too, in the same rounds (a table each), for a before-and-after in one run. Exit 2 with NOT RUN where Redis or the
# binary is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-target/release/linerate}
CONNS=64
mode=${1:-time}

say() { echo "tier_cpu: $*" >&2; }
[ -x "$BIN" ] || { say "NOT RUN: $BIN is not built (cargo build --release)"; exit 2; }
command -v redis-server >/dev/null || { say "NOT RUN: redis-server is not installed (scripts/cache-servers.sh install)"; exit 2; }

work=$(mktemp -d "${TMPDIR:-/tmp}/tier_cpu.XXXXXX")
pids=()
redis_pid=
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    [ -z "$redis_pid" ] || scripts/cache-servers.sh stop "$redis_pid" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() {
    for _ in $(seq 100); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.1
    done
    say "nothing listens on $1"; exit 1
}

for i in $(seq $CONNS); do
    printf 'GET /c1k?k=%d HTTP/1.1\r\nHost: origin.test\r\n\r\n' "$i" >"$work/r$i"
done
raw=$(seq -s, -f "$work/r%g" $CONNS)

origin_port=$(free_port)
taskset -c 1 "$BIN" serve --config bench/cache-origin.toml --addr "127.0.0.1:$origin_port" \
    --workers 1 --no-pin >"$work/origin.log" 2>&1 &
pids+=($!)
wait_port "$origin_port"

eval "$(scripts/cache-servers.sh start redis --cpus 1 | tr ' ' '\n' | grep -E '^(PID|PORT)=' | sed 's/^/REDIS_/')"
redis_pid=$REDIS_PID

# start_edge NAME CACHE [TIER] [WRAPPER...]: the edge's PID in $edge_pid, its port in $edge_port.
start_edge() {
    local name=$1 cache=$2 tier=$3
    shift 3
    edge_port=$(free_port)
    local args=(serve --app none --addr "127.0.0.1:$edge_port" --workers 1 --no-pin
        --proxy "/=http://127.0.0.1:$origin_port" --proxy-cache "$cache")
    [ -z "$tier" ] || args+=(--proxy-cache-tier "$tier")
    "$@" "${EDGE_BIN:-$BIN}" "${args[@]}" >"$work/$name.log" 2>&1 &
    edge_pid=$!
    pids+=("$edge_pid")
    wait_port "$edge_port"
}

load() { # load PORT ARGS...
    local port=$1
    shift
    taskset -c 1 "$BIN" load --raw "$raw" -c $CONNS -t 1 --cpus 1 "$@" \
        "http://127.0.0.1:$port/" 2>&1
}

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
answered() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[\"runs\"][0][\"responses\"])" "$1"; }

tier_url="redis://127.0.0.1:$REDIS_PORT"

if [ "$mode" = callgrind ]; then
    n=${2:-20000}
    command -v valgrind >/dev/null || { say "NOT RUN: valgrind is not installed"; exit 2; }
    start_edge tier 16KiB "$tier_url" valgrind --tool=callgrind --separate-threads=yes \
        --callgrind-out-file="$work/cg.out"
    # The tier's generation is read within a second of the start: until then nothing is asked.
    sleep 3
    load "$edge_port" -n $((CONNS * 4)) >/dev/null      # stores every URL (and warms valgrind)
    sleep 1
    callgrind_control -d "$edge_pid" >/dev/null
    sleep 1
    load "$edge_port" -n "$n" >"$work/load.out"
    callgrind_control -d "$edge_pid" >/dev/null
    sleep 1
    kill "$edge_pid"; wait "$edge_pid" 2>/dev/null || true
    say "per request, $n tier hits (the last dump: callgrind zeroes its counts at each dump):"
    python3 - "$work" "$n" <<'EOF'
import glob, os, re, sys
work, n = sys.argv[1], int(sys.argv[2])
def totals(files):
    out = {}
    for f in files:
        text = open(f, errors="replace").read()
        m = re.search(r"^thread: *(\d+)", text, re.M)
        t = re.search(r"^(?:summary|totals): *(\d+)", text, re.M)
        if m and t:
            out[int(m.group(1))] = out.get(int(m.group(1)), 0) + int(t.group(1))
    return out
files = sorted(glob.glob(os.path.join(work, "cg.out*")))
dumps = {}
for f in files:
    m = re.search(r"\.(\d+)-(\d+)$", f)
    if m:
        dumps.setdefault(int(m.group(1)), []).append(f)
keys = sorted(dumps)
if len(keys) < 2:
    sys.exit(f"tier_cpu: expected two dumps, found {files}")
last = totals(dumps[keys[-1]])
for t in sorted(last):
    print(f"thread {t}: {last[t] / n:,.0f} instructions a request")
if os.environ.get("CG_OUT"):
    import shutil
    os.makedirs(os.environ["CG_OUT"], exist_ok=True)
    for f in dumps[keys[-1]]:
        shutil.copy(f, os.environ["CG_OUT"])
    print("kept in", os.environ["CG_OUT"])
EOF
    exit 0
fi

rounds=${2:-3}
secs=${3:-5}
: >"$work/results"
for r in $(seq "$rounds"); do
  for bin in "$BIN" ${BASE:+"$BASE"}; do
    EDGE_BIN=$bin
    for kind in memory tier; do
        if [ $kind = memory ]; then
            start_edge memory 64MiB "" taskset -c 0
        else
            start_edge tier 16KiB "$tier_url" taskset -c 0
        fi
        sleep 2
        load "$edge_port" -n $((CONNS * 4)) >/dev/null
        e0=$(cpu_ticks "$edge_pid"); r0=$(cpu_ticks "$redis_pid")
        load "$edge_port" -d "${secs}s" --json >"$work/out.json"
        e1=$(cpu_ticks "$edge_pid"); r1=$(cpu_ticks "$redis_pid")
        reqs=$(answered "$work/out.json")
        echo "$bin $r $kind $reqs $((e1 - e0)) $((r1 - r0))" >>"$work/results"
        kill "$edge_pid"; wait "$edge_pid" 2>/dev/null || true
    done
  done
done
python3 - "$work/results" "$(getconf CLK_TCK)" <<'EOF'
import statistics, sys
hz = int(sys.argv[2])
rows = [l.split() for l in open(sys.argv[1])]
bins = {}
for b, r, kind, reqs, e, red in rows:
    us = lambda t: int(t) / hz * 1e6 / int(reqs)
    bins.setdefault(b, {}).setdefault(r, {})[kind] = (int(reqs), us(e), us(red))
for b, by in bins.items():
    print(f"\n{b}:")
    print("| round | memory hit µs | tier hit: edge + Redis µs | ratio (both) | edge alone |")
    print("|---|---:|---:|---:|---:|")
    ratios = []
    for r in sorted(by, key=int):
        m, t = by[r]["memory"], by[r]["tier"]
        both = t[1] + t[2]
        ratios.append(both / m[1])
        print(f"| {r} | {m[1]:.2f} | {t[1]:.2f} + {t[2]:.2f} = {both:.2f} | {both / m[1]:.2f}x | {t[1] / m[1]:.2f}x |")
    print(f"median ratio (both processes): {statistics.median(ratios):.2f}x")
EOF
