#!/usr/bin/env python3
"""Good clients' throughput during a slow-read attack, and the host's TCP memory.

One server worker pinned to the server CPU serves a 1 MiB file. Each round, for each server
in turn (interleaved):
  1. good clients alone: `linerate load -c 16` fetching the file for --seconds (load CPU);
     this is done again at the end (4), and "alone" is the mean of the two, so drift within
     the round (this machine's throughput moves by tens of percent) hits both sides;
  2. the attack: `slowhttptest -X` opens --attackers connections that ask for the same file
     with a 512-1024 byte window and read 32 bytes every 5 s (load CPU); once they are
     connected, the good clients run again for --seconds. slowhttptest spins (it takes a
     whole CPU whatever the attack), so it runs as SCHED_IDLE: otherwise it halves the good
     clients' CPU and "kept" measures the load core, not the server;
  3. the attackers still connected --hold seconds after the attack started (the send
     timeouts are 30 s for linerate and 60 s for nginx), then the attack is stopped;
  4. good clients alone again, once the attackers' connections are gone.
Throughput kept = req/s under attack / req/s alone, from the same round. TCP memory is
/proc/net/sockstat's `mem` (pages, both ends of every loopback connection) at its highest
while the good clients ran under attack, beside the host's limit (tcp_mem's third value).

Servers: linerate as built (max_unsent_bytes 128 KiB, min_send_rate 1 KiB/s), linerate with
both off (`--max-unsent-bytes 0 --min-send-rate 0`: what it did before), nginx 1.22 from
Debian (bench/nginx-static.conf.in: sendfile, one worker).

  cargo build --release -p linerate && scripts/peers.sh && apt-get install slowhttptest
  python3 bench/slow_readers.py --rounds 3 --out docs/lab/slow_readers

Python 3 standard library only. Every wait has a deadline; what it starts it stops by PID.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "target", "release", "linerate")


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


def tcp_mem() -> int:
    with open("/proc/net/sockstat") as f:
        for line in f:
            if line.startswith("TCP:"):
                words = line.split()
                return int(words[words.index("mem") + 1])
    return 0


def tcp_mem_limit() -> int:
    with open("/proc/sys/net/ipv4/tcp_mem") as f:
        return int(f.read().split()[2])


def established(port: int) -> int:
    out = subprocess.run(
        ["ss", "-Htn", "state", "established", f"( sport = :{port} )"],
        capture_output=True, text=True, timeout=10,
    ).stdout
    return len([l for l in out.splitlines() if l.strip()])


def start_server(kind: str, port: int, root: str, rundir: str, cpu: int) -> subprocess.Popen:
    if kind.startswith("linerate"):
        args = [BIN, "serve", "--addr", f"127.0.0.1:{port}", "--workers", "1",
                "--cpus", str(cpu), "--root", root, "--log-level", "warn"]
        if kind == "linerate-off":
            args += ["--max-unsent-bytes", "0", "--min-send-rate", "0"]
        return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(os.path.join(ROOT, "bench", "nginx-static.conf.in")) as f:
        conf = f.read()
    conf = conf.replace("@RUNDIR@", rundir).replace("@PORT@", str(port)).replace("@ROOT@", root)
    path = os.path.join(rundir, "nginx.conf")
    with open(path, "w") as f:
        f.write(conf)
    return subprocess.Popen(["taskset", "-c", str(cpu), "nginx", "-c", path, "-p", rundir],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def good_clients(port: int, seconds: float, cpu: int, sample_mem: bool) -> tuple[float, int]:
    """req/s of 16 connections fetching the file, and the highest TCP memory seen meanwhile."""
    load = subprocess.Popen(
        ["taskset", "-c", str(cpu), BIN, "load", "-c", "16", "-t", "1", "-d", f"{seconds}s",
         "--json", f"http://127.0.0.1:{port}/big.bin"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    peak = 0
    while load.poll() is None:
        if sample_mem:
            peak = max(peak, tcp_mem())
        time.sleep(0.25)
    out, _ = load.communicate(timeout=seconds + 30)
    run = json.loads(out)
    return run["median"]["req_per_s"], peak


def round_for(kind: str, args, root: str, cpu_srv: int, cpu_load: int) -> dict:
    port = free_port()
    rundir = tempfile.mkdtemp(prefix="linerate-slowread-")
    srv = start_server(kind, port, root, rundir, cpu_srv)
    attack = None
    try:
        wait_listening(port, time.monotonic() + 10)
        before, _ = good_clients(port, args.seconds, cpu_load, False)
        mem_before = tcp_mem()
        attack = subprocess.Popen(
            ["chrt", "--idle", "0", "taskset", "-c", str(cpu_load), "slowhttptest", "-X",
             "-c", str(args.attackers),
             "-r", "500", "-w", "512", "-y", "1024", "-n", "5", "-z", "32", "-k", "3",
             "-l", str(args.hold + 30), "-p", "3", "-u", f"http://127.0.0.1:{port}/big.bin"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        started = time.monotonic()
        deadline = started + 20
        while established(port) < args.attackers * 0.95 and time.monotonic() < deadline:
            time.sleep(0.5)
        connected = established(port)
        under, peak = good_clients(port, args.seconds, cpu_load, True)
        time.sleep(max(0.0, started + args.hold - time.monotonic()))
        left = established(port)
        attack.kill()
        attack.wait(timeout=10)
        deadline = time.monotonic() + 90
        while established(port) > 0 and time.monotonic() < deadline:
            time.sleep(0.5)
        after, _ = good_clients(port, args.seconds, cpu_load, False)
        alone = (before + after) / 2
        return {
            "server": kind, "alone_rps": alone, "alone_before_rps": before,
            "alone_after_rps": after, "attack_rps": under,
            "kept": under / alone if alone else 0.0, "attackers_connected": connected,
            "attackers_left": left, "tcp_mem_peak": peak, "tcp_mem_before": mem_before,
        }
    finally:
        if attack and attack.poll() is None:
            attack.kill()
            attack.wait(timeout=10)
        srv.terminate()
        try:
            srv.wait(timeout=10)
        except subprocess.TimeoutExpired:
            srv.kill()
            srv.wait(timeout=10)
        shutil.rmtree(rundir, ignore_errors=True)
        time.sleep(2)  # let the kernel free the reset connections before the next server


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--attackers", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--hold", type=float, default=40.0,
                    help="attackers counted this long after the attack started")
    ap.add_argument("--servers", default="linerate,linerate-off,nginx")
    ap.add_argument("--cpus", default="0,1", help="server CPU, load CPU")
    ap.add_argument("--out", help="directory for results.json and table.md")
    args = ap.parse_args()
    cpu_srv, cpu_load = (int(c) for c in args.cpus.split(","))
    for tool in ("slowhttptest", "ss", "taskset"):
        if not shutil.which(tool):
            sys.exit(f"NOT RUN: {tool} is not installed")
    servers = args.servers.split(",")
    if "nginx" in servers and not shutil.which("nginx"):
        sys.exit("NOT RUN: nginx is not installed (scripts/peers.sh)")
    root = tempfile.mkdtemp(prefix="linerate-slowread-www-")
    with open(os.path.join(root, "big.bin"), "wb") as f:
        f.write(os.urandom(1 << 20))
    os.chmod(root, 0o755)
    limit = tcp_mem_limit()
    rows = []
    try:
        for r in range(args.rounds):
            for kind in servers:
                row = round_for(kind, args, root, cpu_srv, cpu_load)
                row["round"] = r + 1
                rows.append(row)
                print(json.dumps(row), flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)

    names = {"linerate": "linerate (max_unsent_bytes 128 KiB, min_send_rate 1 KiB/s)",
             "linerate-off": "linerate, both off (as before)", "nginx": "nginx 1.22"}
    lines = [
        f"{args.attackers} slow readers (slowhttptest -X, 32 bytes every 5 s, window 512-1024)"
        f" against a 1 MiB file; good clients: `linerate load -c 16` for {args.seconds:g} s;"
        f" one server worker on CPU {cpu_srv}, load and attack (SCHED_IDLE) on CPU {cpu_load};"
        " alone = mean of the runs before and after the attack;"
        f" {args.rounds} interleaved rounds, median (min-max). TCP memory limit (tcp_mem max):"
        f" {limit} pages.",
        "",
        "| server | good req/s alone | under attack | kept | TCP memory at peak, pages (% of limit) | attackers connected | still connected at "
        f"{args.hold:g} s |",
        "|---|---|---|---|---|---|---|",
    ]

    def med(vals, fmt):
        return f"{fmt(statistics.median(vals))} ({fmt(min(vals))}-{fmt(max(vals))})"

    for kind in servers:
        rs = [x for x in rows if x["server"] == kind]
        peak = statistics.median(x["tcp_mem_peak"] for x in rs)
        lines.append(
            f"| {names.get(kind, kind)} | {med([x['alone_rps'] for x in rs], lambda v: f'{v:.0f}')}"
            f" | {med([x['attack_rps'] for x in rs], lambda v: f'{v:.0f}')}"
            f" | {med([100 * x['kept'] for x in rs], lambda v: f'{v:.0f} %')}"
            f" | {peak:.0f} ({100 * peak / limit:.0f} %)"
            f" | {statistics.median(x['attackers_connected'] for x in rs):.0f}"
            f" | {statistics.median(x['attackers_left'] for x in rs):.0f} |")
    table = "\n".join(lines) + "\n"
    print(table)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "results.json"), "w") as f:
            json.dump({"rows": rows, "tcp_mem_limit": limit}, f, indent=1)
        with open(os.path.join(args.out, "table.md"), "w") as f:
            f.write(table)


if __name__ == "__main__":
    main()
