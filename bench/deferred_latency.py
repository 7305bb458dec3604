#!/usr/bin/env python3
"""Latency of fast requests while slow ones are outstanding on the same worker.

Starts `examples/deferred` (ONE worker) pinned to the server CPU. Each round measures
`GET /fast` at a fixed rate with `linerate load --rate` (pinned to the load CPU, latency from
the intended send time) twice, interleaved: on the idle server, and while N connections keep
one `GET /slow?ms=M` each outstanding (a new one is sent as soon as the last is answered).
If a slow request held the worker, /fast would wait behind it and its percentiles would grow
by whole milliseconds; unchanged percentiles mean the worker never waited.

  cargo build --release -p linerate && cargo build --release -p linerate-server --example deferred
  python3 bench/deferred_latency.py --rounds 5 --out docs/lab/deferred

Python 3 standard library only. Every socket has a timeout, every wait a deadline, and the
server it starts is stopped by its PID.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port: int, deadline: float) -> None:
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"server did not listen on 127.0.0.1:{port}")


def read_response(sock: socket.socket, buf: bytearray) -> None:
    """Reads one Content-Length-framed response (the example's answers all have one)."""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("EOF before a response head")
        buf += chunk
    end = buf.index(b"\r\n\r\n") + 4
    head = bytes(buf[:end]).decode("latin-1").lower()
    length = 0
    for line in head.split("\r\n"):
        if line.startswith("content-length:"):
            length = int(line.split(":", 1)[1])
    while len(buf) < end + length:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("EOF inside a response body")
        buf += chunk
    del buf[: end + length]


class Holder:
    """N connections, each keeping one slow request outstanding until stopped."""

    def __init__(self, port: int, n: int, ms: int):
        self.port, self.n, self.ms = port, n, ms
        self.stop = threading.Event()
        self.sent = 0
        self.answered = 0
        self.errors = 0
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.run, daemon=True) for _ in range(n)]

    def run(self) -> None:
        req = f"GET /slow?ms={self.ms} HTTP/1.1\r\nHost: bench\r\n\r\n".encode()
        try:
            sock = socket.create_connection(("127.0.0.1", self.port), timeout=self.ms / 1000 + 10)
        except OSError:
            with self.lock:
                self.errors += 1
            return
        buf = bytearray()
        with sock:
            while not self.stop.is_set():
                try:
                    sock.sendall(req)
                    with self.lock:
                        self.sent += 1
                    read_response(sock, buf)
                    with self.lock:
                        self.answered += 1
                except (OSError, ConnectionError):
                    with self.lock:
                        self.errors += 1
                    return

    def outstanding(self) -> int:
        with self.lock:
            return self.sent - self.answered

    def __enter__(self) -> "Holder":
        for t in self.threads:
            t.start()
        deadline = time.monotonic() + 10
        while self.outstanding() < self.n and time.monotonic() < deadline:
            time.sleep(0.01)
        if self.outstanding() < self.n:
            sys.exit(f"only {self.outstanding()} of {self.n} slow requests got outstanding")
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=self.ms / 1000 + 15)


def measure(linerate: str, port: int, rate: int, duration: str, conns: int, cpu: int) -> dict:
    cmd = [linerate, "load", "-t", "1", "-c", str(conns), "--rate", str(rate), "-d", duration,
           "--cpus", str(cpu), "--json", f"http://127.0.0.1:{port}/fast"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True).stdout
    run = json.loads(out)["runs"][0]
    lat = run["latency"]
    return {
        "responses": run["responses"],
        "failed": run["failed"],
        "p50_us": lat["p50_us"],
        "p99_us": lat["p99_us"],
        "p99_9_us": lat["p99_9_us"],
        "max_us": lat["max_us"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default="target/release/examples/deferred")
    ap.add_argument("--linerate", default="target/release/linerate")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", default="10s", help="each /fast measurement")
    ap.add_argument("--rate", type=int, default=2000, help="/fast requests per second")
    ap.add_argument("--connections", type=int, default=8, help="/fast connections")
    ap.add_argument("--slow", type=int, default=100, help="slow requests kept outstanding")
    ap.add_argument("--slow-ms", type=int, default=2000)
    ap.add_argument("--server-cpu", type=int, default=0)
    ap.add_argument("--load-cpu", type=int, default=1)
    ap.add_argument("--out", help="directory for results.json")
    a = ap.parse_args()

    port = free_port()
    server = subprocess.Popen(
        [a.binary, f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        preexec_fn=lambda: os.sched_setaffinity(0, {a.server_cpu}),
    )
    # The holder's threads run beside the load generator, away from the server's CPU.
    os.sched_setaffinity(0, {a.load_cpu})
    samples: dict[str, list[dict]] = {"idle": [], "slow outstanding": []}
    try:
        wait_listening(port, time.monotonic() + 10)
        measure(a.linerate, port, a.rate, "1s", a.connections, a.load_cpu)  # warm-up
        for r in range(a.rounds):
            s = measure(a.linerate, port, a.rate, a.duration, a.connections, a.load_cpu)
            samples["idle"].append(s)
            with Holder(port, a.slow, a.slow_ms) as h:
                s = measure(a.linerate, port, a.rate, a.duration, a.connections, a.load_cpu)
                s["slow_outstanding_after"] = h.outstanding()
                s["slow_answered"] = h.answered
                samples["slow outstanding"].append(s)
            print(f"round {r + 1}: idle p50/p99 {samples['idle'][-1]['p50_us']}/"
                  f"{samples['idle'][-1]['p99_us']} us; with {a.slow} x /slow?ms={a.slow_ms} "
                  f"outstanding {s['p50_us']}/{s['p99_us']} us "
                  f"({s['slow_answered']} slow answered meanwhile)", flush=True)
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()

    def med(mode: str, key: str) -> float:
        return statistics.median(x[key] for x in samples[mode])

    print(f"\n/fast at {a.rate} req/s, {a.connections} connections, ONE worker, "
          f"{a.rounds} interleaved rounds of {a.duration}; medians (min-max) in us:")
    print("| server state | p50 | p99 | p99.9 | max | responses | failed |")
    print("|---|---|---|---|---|---|---|")
    for mode in samples:
        cells = []
        for key in ("p50_us", "p99_us", "p99_9_us", "max_us"):
            vals = [x[key] for x in samples[mode]]
            cells.append(f"{statistics.median(vals):.0f} ({min(vals)}-{max(vals)})")
        total = sum(x["responses"] for x in samples[mode])
        failed = sum(x["failed"] for x in samples[mode])
        print(f"| {mode} | " + " | ".join(cells) + f" | {total} | {failed} |")
    print(f"\nratio slow/idle: p50 {med('slow outstanding', 'p50_us') / med('idle', 'p50_us'):.2f}x, "
          f"p99 {med('slow outstanding', 'p99_us') / med('idle', 'p99_us'):.2f}x")
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "results.json"), "w") as f:
            json.dump({"args": vars(a), "samples": samples}, f, indent=2)


if __name__ == "__main__":
    main()
