#!/usr/bin/env python3
"""Round trips to PostgreSQL per HTTP request, observed on the wire.

For each server (linerate's runtime driver with 4 connections, its worker driver with 1 and 4,
the actix peer) and endpoint, sends a
fixed number of requests with `linerate load --requests N` (first one connection, one request
at a time, so nothing is shared between requests; then 64 connections), and reads the kernel's
counters of the server's TCP connections to PostgreSQL (`ss -tinp`: data_segs_out, the
segments that carried data to the database, and data_segs_in, back) before and after. One
request at a time, segments out per request is how many times the server wrote to the
database for it: 20 queries sent one after the other would be 20 or more, 20 sent together
(pipelined) on one connection 1 or a few.

Needs DATABASE_URL in the environment and --pg-port; servers bind 127.0.0.1 on free ports and
are stopped by PID.
"""
import argparse
import json
import os
import re
import socket
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINERATE = os.path.join(ROOT, "target/release/linerate")
PEER = os.path.join(ROOT, "bench/actix-db/target/release/actix-db")
WORKLOADS = [
    ("/db", "db"),
    ("/queries?queries=20", "queries20"),
    ("/fortunes", "fortunes"),
    ("/updates?queries=20", "updates20"),
    ("/async-db?min=10&max=50&limit=50", "asyncdb"),
]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def servers(port):
    addr = f"127.0.0.1:{port}"
    serve = [LINERATE, "serve", "--addr", addr, "--workers", "1", "--no-pin", "--log-level", "warn"]
    return [
        ("linerate runtime (4 connections)", serve + ["--database-driver", "runtime", "--database-connections", "4"]),
        ("linerate worker (1 connection)", serve + ["--database-driver", "worker", "--database-connections", "1"]),
        ("linerate worker (4 connections)", serve + ["--database-driver", "worker", "--database-connections", "4"]),
        ("actix (1 worker, 1 connection)", [PEER, "--addr", addr, "--workers", "1"]),
    ]


def pg_counters(pid, pg_port):
    """(data_segs_out, data_segs_in, connections) summed over pid's connections to pg_port."""
    out = subprocess.run(
        ["ss", "-Htinp", "state", "established", f"( dport = :{pg_port} )"],
        capture_output=True, text=True, check=True,
    ).stdout
    # ss prints each socket on two lines: addresses and process, then the TCP info.
    lines = out.splitlines()
    seg_out = seg_in = conns = 0
    for i, line in enumerate(lines):
        if f"pid={pid}," not in line:
            continue
        info = lines[i + 1] if i + 1 < len(lines) else ""
        m_out = re.search(r"data_segs_out:(\d+)", info)
        m_in = re.search(r"data_segs_in:(\d+)", info)
        seg_out += int(m_out.group(1)) if m_out else 0
        seg_in += int(m_in.group(1)) if m_in else 0
        conns += 1
    return seg_out, seg_in, conns


def wait_ready(port, proc, limit=15.0):
    deadline = time.time() + limit
    while time.time() < deadline:
        if proc.poll() is not None:
            sys.exit(f"db_roundtrips: server exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    sys.exit("db_roundtrips: server did not start")


def load(url, requests, connections):
    r = subprocess.run(
        [LINERATE, "load", "--requests", str(requests), "-c", str(connections), "-t", "1",
         "--json", url],
        capture_output=True, text=True,
    )
    if r.returncode != 0:
        sys.exit(f"db_roundtrips: load failed on {url}: {r.stderr.strip()}")
    return json.loads(r.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pg-port", type=int, required=True)
    ap.add_argument("--requests", type=int, default=500)
    args = ap.parse_args()
    if "DATABASE_URL" not in os.environ:
        sys.exit("db_roundtrips: DATABASE_URL is not set")
    print("## Round trips to PostgreSQL per request (bench/db_roundtrips.py)\n")
    print(f"{args.requests} requests per row; segments = TCP segments carrying data, "
          "server→PostgreSQL / PostgreSQL→server, per HTTP request (ss -tinp).\n")
    print("| Server | Endpoint | HTTP connections | Segments out/request | Segments in/request |")
    print("|---|---|---:|---:|---:|")
    for name, cmd in servers(free_port()):
        port = int(cmd[cmd.index("--addr") + 1].rsplit(":", 1)[1])
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
        try:
            wait_ready(port, proc)
            for path, _ in WORKLOADS:
                url = f"http://127.0.0.1:{port}{path}"
                load(url, 50, 1)  # warm: statements prepared, caches filled
                for conns in (1, 64):
                    before = pg_counters(proc.pid, args.pg_port)
                    load(url, args.requests, conns)
                    after = pg_counters(proc.pid, args.pg_port)
                    out = (after[0] - before[0]) / args.requests
                    inn = (after[1] - before[1]) / args.requests
                    print(f"| {name} | `{path}` | {conns} | {out:.2f} | {inn:.2f} |")
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    sys.stdout.flush()


if __name__ == "__main__":
    main()
