#!/usr/bin/env python3
"""linerate load vs wrk, interleaved rounds, against a server already pinned to CPU 0.

Both generators run pinned to CPU 1 with one thread and the same connections. Per run it records
req/s, the generator's own CPU time (utime + stime from wait4, the same counters as
/proc/<pid>/stat fields 14-15, read at exit) divided by the responses it counted, and, when
--status-url points at nginx's stub_status, the server's own request count for the run.

    benches/vs_wrk.py --load target/release/linerate --url http://127.0.0.1:8080/ \
        --lua bench/pipeline.lua [--status-url http://127.0.0.1:8080/status] [--rounds 3]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import urllib.request


def run_measured(cmd):
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out = p.stdout.read().decode()
    err = p.stderr.read().decode()
    _, status, ru = os.wait4(p.pid, 0)
    if status != 0:
        raise SystemExit(f"{cmd[0]} failed ({status}): {err.strip()}")
    return out, ru.ru_utime + ru.ru_stime


def server_count(url):
    if not url:
        return None
    text = urllib.request.urlopen(url).read().decode()
    # "server accepts handled requests\n a b c"
    return int(text.splitlines()[2].split()[2])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--load", required=True, help="linerate binary")
    ap.add_argument("--load-prefix", default="load", help="subcommand before the options")
    ap.add_argument("--url", required=True)
    ap.add_argument("--lua", required=True, help="wrk pipeline script")
    ap.add_argument("--status-url", default=None)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", default="5")
    ap.add_argument("--connections", default="64")
    ap.add_argument("--depth", default="16")
    ap.add_argument("--load-extra", default="", help="extra linerate options, e.g. '--spin 1ms'")
    ap.add_argument("--out", default=None, help="write raw results as JSON here")
    a = ap.parse_args()

    prefix = [a.load] + ([a.load_prefix] if a.load_prefix else []) + a.load_extra.split()
    c, d = a.connections, a.duration
    cmds = {
        ("linerate", 1): ["taskset", "-c", "1"] + prefix + ["-t", "1", "-c", c, "-d", d + "s", "--cpus", "1", "--json", a.url],
        ("wrk", 1): ["taskset", "-c", "1", "wrk", "-t", "1", "-c", c, "-d", d + "s", a.url],
        ("linerate", 16): ["taskset", "-c", "1"] + prefix
        + ["-t", "1", "-c", c, "-d", d + "s", "--cpus", "1", "-p", a.depth, "--json", a.url],
        ("wrk", 16): ["taskset", "-c", "1", "wrk", "-t", "1", "-c", c, "-d", d + "s", "-s", a.lua, a.url, "--", a.depth],
    }
    # Warm-up: 1 s of wrk, not recorded.
    subprocess.run(["taskset", "-c", "1", "wrk", "-t", "1", "-c", c, "-d", "1s", a.url], capture_output=True, check=True)
    rows = []
    for rnd in range(a.rounds):
        order = [("linerate", 1), ("wrk", 1), ("linerate", 16), ("wrk", 16)]
        if rnd % 2:
            order = [("wrk", 1), ("linerate", 1), ("wrk", 16), ("linerate", 16)]
        for key in order:
            before = server_count(a.status_url)
            out, cpu = run_measured(cmds[key])
            after = server_count(a.status_url)
            if key[0] == "linerate":
                r = json.loads(out)["runs"][0]
                n, rps, errs = r["responses"], r["req_per_s"], sum(r["errors"].values())
            else:
                n = int(re.search(r"(\d+) requests in", out).group(1))
                rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
                m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
                errs = sum(int(x) for x in m.groups()) if m else 0
            served = None if before is None else after - before - 1  # minus our own status request
            row = dict(round=rnd + 1, tool=key[0], pipeline=key[1], req_per_s=rps, responses=n,
                       errors=errs, cpu_s=round(cpu, 3), cpu_us_per_req=round(cpu * 1e6 / max(n, 1), 3),
                       server_requests=served)
            rows.append(row)
            print(json.dumps(row), flush=True)
    print()
    for depth in (1, 16):
        med = {}
        for tool in ("linerate", "wrk"):
            sel = [r for r in rows if r["tool"] == tool and r["pipeline"] == depth]
            rps = [r["req_per_s"] for r in sel]
            cpu = [r["cpu_us_per_req"] for r in sel]
            med[tool] = statistics.median(rps)
            print(f"pipeline {depth:>2} {tool:>8}: median {statistics.median(rps):>10.0f} req/s "
                  f"(min {min(rps):.0f}, max {max(rps):.0f}), CPU {statistics.median(cpu):.3f} us/req")
        print(f"pipeline {depth:>2} ratio linerate/wrk: {med['linerate'] / med['wrk']:.2f}x")
    if a.out:
        with open(a.out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
