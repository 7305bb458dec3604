#!/usr/bin/env python3
"""Where a pipelined request's server CPU goes: user space or the kernel.

Each server named on the command line is started pinned to CPU 0 on a free 127.0.0.1 port,
loaded by `linerate load` (one thread on CPU 1, 16 connections, 16 requests in flight each, a
1 s warm-up then --seconds) on PATH, and its utime and stime over the sampled run are read from
/proc (every thread; clock ticks, so a figure is good to about 10 ms of CPU over the run: use
runs of several seconds). Servers are interleaved round by round; medians (min-max) per request.

    python3 bench/user_system_split.py --rounds 3 --seconds 4 --load target/release/linerate \\
        floor="target/release/linerate lab floor --response plaintext" \\
        linerate="target/release/linerate serve --workers 1 --cpus 0 --log-level warn --app demo"

Each command gets `--addr 127.0.0.1:PORT` appended. Nothing is written; the table is printed.
"""

import argparse
import os
import re
import shlex
import socket
import subprocess
import time

TICK = os.sysconf("SC_CLK_TCK")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def cpu_times(pid):
    """(user, system) seconds of every thread of `pid`."""
    user = system = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        user += int(fields[11])
        system += int(fields[12])
    return user / TICK, system / TICK


def wait_for(port, limit=10.0):
    end = time.monotonic() + limit
    while time.monotonic() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"nothing listens on 127.0.0.1:{port} after {limit} s")


def load(binary, url, seconds):
    out = subprocess.run(
        [binary, "load", "--cpus", "1", "-t", "1", "-c", "16", "-p", "16", "-d", f"{seconds}s", url],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    m = re.search(r"([0-9]+) responses in", out)
    if not m:
        raise SystemExit(f"no response count in linerate load's output:\n{out}")
    return int(m.group(1))


def one(name, command, args):
    port = free_port()
    cmd = ["taskset", "-c", "0"] + shlex.split(command) + ["--addr", f"127.0.0.1:{port}"]
    server = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(port)
        url = f"http://127.0.0.1:{port}{args.path}"
        load(args.load, url, 1)
        u0, s0 = cpu_times(server.pid)
        n = load(args.load, url, args.seconds)
        u1, s1 = cpu_times(server.pid)
    finally:
        server.terminate()
        server.wait(timeout=10)
    return (u1 - u0) / n * 1e9, (s1 - s0) / n * 1e9


def median_range(xs):
    xs = sorted(xs)
    return f"{xs[len(xs) // 2]:.0f} ({xs[0]:.0f}-{xs[-1]:.0f})"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("servers", nargs="+", help="NAME=COMMAND")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seconds", type=int, default=4)
    p.add_argument("--path", default="/plaintext")
    p.add_argument("--load", default="linerate", help="the linerate binary whose `load` drives")
    args = p.parse_args()
    servers = [s.split("=", 1) for s in args.servers]
    got = {name: [] for name, _ in servers}
    for r in range(args.rounds):
        for name, command in servers:
            user, system = one(name, command, args)
            got[name].append((user, system))
            print(f"round {r} {name}: user {user:.0f} ns/req, system {system:.0f} ns/req", flush=True)
    print()
    print("| server | user ns/request | system ns/request |")
    print("|---|---|---|")
    for name, rows in got.items():
        print(f"| {name} | {median_range([u for u, _ in rows])} | {median_range([s for _, s in rows])} |")


if __name__ == "__main__":
    main()
