#!/usr/bin/env python3
"""Pipelined deferred requests: dispatch the ones behind an unanswered answer, or wait.

`examples/deferred` serves `/json` through a `Responder` answered from a second thread. With
`max_deferred_per_conn = 1` a connection dispatches nothing behind an outstanding deferred
request: a pipelined batch of 16 costs 16 hand-offs one after another. With 16 (the default)
the whole batch is handed off at once and the answers still leave in request order. Rounds
interleave the two settings; the server (both its threads) is pinned to the server CPU and
`linerate load -p 16` to the load CPU.

  python3 bench/deferred_pipeline.py --rounds 5

Python 3 standard library only; every server it starts is stopped by its PID.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_once(a: argparse.Namespace, bound: int) -> dict:
    port = free_port()
    server = subprocess.Popen(
        [a.binary, f"127.0.0.1:{port}", str(bound)],
        stdout=subprocess.DEVNULL,
        preexec_fn=lambda: os.sched_setaffinity(0, {a.server_cpu}),
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    sys.exit("the example did not start")
                time.sleep(0.05)
        cmd = [a.linerate, "load", "-t", "1", "--cpus", str(a.load_cpu), "-c", str(a.connections),
               "-p", "16", "-d", a.duration, "-w", "1s", "--json", f"http://127.0.0.1:{port}/json"]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True).stdout
        r = json.loads(out)["runs"][0]
        return {"req_per_s": r["req_per_s"], "p50_us": r["latency"]["p50_us"],
                "p99_us": r["latency"]["p99_us"], "failed": r["failed"], "responses": r["responses"]}
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default="target/release/examples/deferred")
    ap.add_argument("--linerate", default="target/release/linerate")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", default="5s")
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--server-cpu", type=int, default=0)
    ap.add_argument("--load-cpu", type=int, default=1)
    a = ap.parse_args()
    samples: dict[int, list[dict]] = {1: [], 16: []}
    for r in range(a.rounds):
        for bound in (1, 16):
            s = run_once(a, bound)
            samples[bound].append(s)
            print(f"round {r + 1}, max_deferred_per_conn {bound}: {s}", flush=True)
    print(f"\nGET /json answered from a second thread, pipelined x16, {a.connections} connections, "
          f"{a.rounds} interleaved rounds of {a.duration}; medians (min-max):")
    print("| max_deferred_per_conn | req/s | p50 us | p99 us | failed |")
    print("|---|---|---|---|---|")
    for bound, xs in samples.items():
        def cell(k: str, fmt: str = "{:.0f}") -> str:
            v = [x[k] for x in xs]
            return f"{fmt.format(statistics.median(v))} ({fmt.format(min(v))}-{fmt.format(max(v))})"
        print(f"| {bound} | {cell('req_per_s')} | {cell('p50_us')} | {cell('p99_us')} | "
              f"{sum(x['failed'] for x in xs)} |")


if __name__ == "__main__":
    main()
