#!/usr/bin/env python3
"""Issue-A acceptance table: req/s and CPU cost per request of each server, and their ratios
to the syscall floor (`linerate lab floor`), measured the MEASURING.md way.

Server on CPU 0 (one worker), wrk on CPU 1 (one thread, 64 connections), loopback only.
Rounds are interleaved (A B C A B C ...); every measurement starts its server fresh on a new
port, waits until the port accepts, warms up 1 s, then brackets one wrk run with /proc/stat
samples of CPU 0: cost µs/req = CPU-0 busy seconds (user+nice+system+irq+softirq+steal) /
requests wrk counted. Only one of our server process trees is alive at a time, but CPU 0's
busy time also holds whatever else the machine runs there, so each sample also records the
server processes' own utime+stime: their share of CPU 0's busy time (near 100% on a quiet box;
a sample below --min-share is retried --retries times, then flagged) and a cost per request
from that alone, which other programs do not inflate.

Writes bench/out/run_a-<UTC timestamp>.{json,md}; the Markdown also goes to stdout.
Python 3 standard library only.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
OUT = BENCH / "out"
CLK_TCK = os.sysconf("SC_CLK_TCK")

# workload name -> (path, floor response, wrk pipeline depth or None)
WORKLOADS = {
    "json": ("/json", "json", None),
    "plaintext16": ("/plaintext", "plaintext", 16),
}
SERVERS = ("floor", "linerate", "nginx")
START_TIMEOUT_S = 5.0


# ---------------------------------------------------------------------------------------------
# servers


def free_port() -> int:
    """An OS-chosen free port on 127.0.0.1 (closed again; the server binds it right after)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def nginx_conf(template: Path, rundir: Path, port: int) -> Path:
    """Fills bench/nginx.conf.in for one run; returns the generated config's path."""
    text = template.read_text()
    text = text.replace("@RUNDIR@", str(rundir)).replace("@PORT@", str(port))
    conf = rundir / "nginx.conf"
    conf.write_text(text)
    return conf


class Server:
    """One server process tree in its own session, killed as a group (also on errors)."""

    def __init__(self, name: str, argv: list[str], port: int, rundir: Path | None = None):
        self.name = name
        self.argv = argv
        self.port = port
        self.rundir = rundir
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=REPO,
        )

    def wait_ready(self, timeout: float = START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}: {self.output()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"{self.name} did not accept on port {self.port} within {timeout}s: {self.output()}")

    def output(self) -> str:
        self.log.seek(0)
        text = self.log.read().decode(errors="replace").strip()
        if self.rundir and (self.rundir / "error.log").exists():
            text += (self.rundir / "error.log").read_text(errors="replace").strip()
        return text[-2000:] or "(no output)"

    def pids(self) -> list[int]:
        """The server's process and all its descendants (nginx: master + worker)."""
        return [self.proc.pid] + descendants(self.proc.pid)

    def stop(self) -> None:
        if self.proc.poll() is None:
            for sig, wait in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 3.0)):
                try:
                    os.killpg(self.proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    self.proc.wait(timeout=wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
        # Reap stragglers of the group (an nginx worker outliving its master).
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.log.close()
        if self.rundir:
            shutil.rmtree(self.rundir, ignore_errors=True)


def descendants(pid: int) -> list[int]:
    out = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return out
    for tid in tasks:
        try:
            kids = Path(f"/proc/{pid}/task/{tid}/children").read_text().split()
        except FileNotFoundError:
            continue
        for k in map(int, kids):
            out.append(k)
            out.extend(descendants(k))
    return out


def proc_cpu_s(pids: list[int]) -> float:
    """utime + stime of the given processes, in seconds."""
    total = 0
    for pid in pids:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except FileNotFoundError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15)
    return total / CLK_TCK


def start_server(args, name: str, workload: str) -> Server:
    path, floor_response, _ = WORKLOADS[workload]
    port = free_port()
    cpu = str(args.server_cpu)
    if name == "floor":
        argv = [args.bin, "lab", "floor", "--addr", f"127.0.0.1:{port}", "--response", floor_response, "--cpu", cpu]
        return Server(name, argv, port)
    if name == "linerate":
        argv = [args.bin, "serve", "--addr", f"127.0.0.1:{port}", "--workers", "1", "--cpus", cpu]
        return Server(name, argv, port)
    if name == "nginx":
        rundir = Path(tempfile.mkdtemp(prefix="linerate-nginx-"))
        conf = nginx_conf(BENCH / "nginx.conf.in", rundir, port)
        argv = ["taskset", "-c", cpu, args.nginx, "-p", str(rundir), "-e", str(rundir / "error.log"), "-c", str(conf)]
        return Server(name, argv, port, rundir)
    raise ValueError(f"unknown server {name!r}")


# ---------------------------------------------------------------------------------------------
# measuring


def cpu_jiffies(cpu: int) -> tuple[int, int]:
    """(busy, total) jiffies of one CPU from /proc/stat."""
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith(f"cpu{cpu} "):
            v = [int(x) for x in line.split()[1:]]
            user, nice, system, idle, iowait, irq, softirq, steal = v[:8]
            busy = user + nice + system + irq + softirq + steal
            return busy, busy + idle + iowait
    raise RuntimeError(f"cpu{cpu} not in /proc/stat")


def wrk_argv(args, url: str, depth: int | None, duration: float, latency: bool) -> list[str]:
    argv = ["taskset", "-c", str(args.client_cpu), args.wrk, "-t1", f"-c{args.connections}", f"-d{duration:g}s"]
    if latency:
        argv.append("--latency")
    if depth:
        argv += ["-s", str(BENCH / "pipeline.lua")]
    argv.append(url)
    if depth:
        argv += ["--", str(depth)]
    return argv


UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3}


def to_ms(text: str) -> float:
    m = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text)
    return float(m.group(1)) * UNITS[m.group(2)] if m else float("nan")


def parse_wrk(out: str) -> dict:
    rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
    total = re.search(r"(\d+) requests in ([\d.]+)(\w+),", out)
    if not rps or not total:
        raise RuntimeError(f"cannot parse wrk output:\n{out}")
    res = {
        "rps": float(rps.group(1)),
        "requests": int(total.group(1)),
        "latency_ms": {p: to_ms(v) for p, v in re.findall(r"^\s+(50|75|90|99)%\s+(\S+)", out, re.M)},
        "socket_errors": None,
        "non_2xx": 0,
    }
    err = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    if err:
        res["socket_errors"] = dict(zip(("connect", "read", "write", "timeout"), map(int, err.groups())))
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if non2xx:
        res["non_2xx"] = int(non2xx.group(1))
    return res


def run_wrk(argv: list[str], duration: float) -> str:
    p = subprocess.run(argv, capture_output=True, text=True, timeout=duration + 30)
    if p.returncode != 0:
        raise RuntimeError(f"wrk failed ({p.returncode}): {p.stderr.strip()}")
    return p.stdout


def measure(args, name: str, workload: str, rnd: int) -> dict:
    path, _, depth = WORKLOADS[workload]
    server = start_server(args, name, workload)
    try:
        server.wait_ready()
        url = f"http://127.0.0.1:{server.port}{path}"
        run_wrk(wrk_argv(args, url, depth, args.warmup, latency=False), args.warmup)
        load = os.getloadavg()[0]
        pids = server.pids()
        cpu_before = proc_cpu_s(pids)
        s0, c0 = cpu_jiffies(args.server_cpu), cpu_jiffies(args.client_cpu)
        t0 = time.monotonic()
        out = run_wrk(wrk_argv(args, url, depth, args.duration, latency=True), args.duration)
        wall = time.monotonic() - t0
        s1, c1 = cpu_jiffies(args.server_cpu), cpu_jiffies(args.client_cpu)
        cpu_after = proc_cpu_s(pids)
    finally:
        server.stop()
    res = parse_wrk(out)
    busy_s = (s1[0] - s0[0]) / CLK_TCK
    res.update(
        server=name,
        workload=workload,
        round=rnd,
        wall_s=round(wall, 3),
        cpu0_busy_s=busy_s,
        cpu0_busy_frac=(s1[0] - s0[0]) / max(1, s1[1] - s0[1]),
        client_cpu_busy_frac=(c1[0] - c0[0]) / max(1, c1[1] - c0[1]),
        server_proc_cpu_s=round(cpu_after - cpu_before, 3),
        loadavg_1m_before=load,
        server_share=(cpu_after - cpu_before) / busy_s if busy_s else 0.0,
        us_per_req=busy_s / res["requests"] * 1e6 if res["requests"] else float("nan"),
        proc_us_per_req=(cpu_after - cpu_before) / res["requests"] * 1e6 if res["requests"] else float("nan"),
    )
    return res


# ---------------------------------------------------------------------------------------------
# reporting


def machine() -> dict:
    model = "unknown"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break

    def version(argv: list[str]) -> str:
        try:
            p = subprocess.run(argv, capture_output=True, text=True, timeout=10)
        except OSError:
            return "not found"
        text = (p.stdout + p.stderr).strip().splitlines()
        return text[0] if text else "unknown"

    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "kernel": os.uname().release,
        "date_utc": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "wrk": version(["wrk", "-v"]).split(" Copyright")[0],
        "nginx": version(["nginx", "-v"]),
    }


def spread(xs: list[float], fmt: str, unit: str = "") -> str:
    def f(x: float) -> str:
        return format(x, fmt) + unit

    return f"{f(statistics.median(xs))} ({f(min(xs))}–{f(max(xs))})"


def markdown(m: dict, command: str, args, results: list[dict]) -> str:
    lines = [
        "# Issue A: servers against the syscall floor",
        "",
        f"- Machine: {m['cpu']}, {m['cores']} cores, Linux {m['kernel']}",
        f"- Date: {m['date_utc']}",
        f"- Tools: {m['wrk']}; {m['nginx']}",
        f"- Setup: server on CPU {args.server_cpu} (1 worker), wrk -t1 -c{args.connections} on CPU "
        f"{args.client_cpu}, {args.duration:g} s per sample after {args.warmup:g} s warm-up, "
        f"{args.rounds} interleaved rounds, fresh server per sample (retried up to {args.retries}× when "
        f"the server's share of CPU {args.server_cpu} was under {args.min_share:.0%})",
        f"- Cost: CPU-{args.server_cpu} busy time (user+nice+system+irq+softirq+steal, /proc/stat) "
        "per request wrk counted; figures are median (min–max). \"Server processes only\": the server's "
        "own utime+stime (tick-sampled, includes softirq work done in its context) per request, which "
        "other programs on the CPU do not inflate; the share column is the one over the other",
        f"- Command: `{command}`",
        "",
    ]
    for workload in args.workloads:
        path, _, depth = WORKLOADS[workload]
        desc = f"GET {path}" + (f", {depth} pipelined requests per write" if depth else ", no pipelining")
        lines += [f"## {workload} ({desc})", ""]
        lines += [
            f"| server | req/s | µs/req | req/s ÷ floor | cost ÷ floor | server's share of CPU {args.server_cpu} "
            "| µs/req, server processes only | that ÷ floor |",
            "|---|---|---|---|---|---|---|---|",
        ]
        rows = {s: [r for r in results if r["workload"] == workload and r["server"] == s] for s in args.servers}
        floor = rows.get("floor") or []
        floor_rps = statistics.median(r["rps"] for r in floor) if floor else None
        floor_cost = statistics.median(r["us_per_req"] for r in floor) if floor else None
        floor_proc = statistics.median(r["proc_us_per_req"] for r in floor) if floor else None
        for s in args.servers:
            rs = rows[s]
            if not rs:
                lines.append(f"| {s} | – | – | – | – | – | – | – |")
                continue
            rps = [r["rps"] for r in rs]
            cost = [r["us_per_req"] for r in rs]
            rps_ratio = f"{statistics.median(rps) / floor_rps:.2f}×" if floor_rps else "–"
            cost_ratio = f"{statistics.median(cost) / floor_cost:.2f}×" if floor_cost else "–"
            share = [r["server_share"] * 100 for r in rs]
            proc = [r["proc_us_per_req"] for r in rs]
            proc_ratio = f"{statistics.median(proc) / floor_proc:.2f}×" if floor_proc else "–"
            lines.append(
                f"| {s} | {spread([x / 1e3 for x in rps], '.1f', 'k')} | {spread(cost, '.2f')} | {rps_ratio} "
                f"| {cost_ratio} | {spread(share, '.0f', '%')} | {spread(proc, '.2f')} | {proc_ratio} |"
            )
        lines.append("")
        for r in (r for r in results if r["workload"] == workload):
            if r["non_2xx"] or any((r["socket_errors"] or {}).values()):
                lines.append(
                    f"- Warning: {r['server']} round {r['round']}: socket errors {r['socket_errors']}, "
                    f"non-2xx {r['non_2xx']}"
                )
        shared = [r for r in results if r["workload"] == workload and r["server_share"] < args.min_share]
        if shared:
            lines.append(
                f"- Warning: in {len(shared)} sample(s) the server's own processes got less than "
                f"{args.min_share:.0%} of CPU {args.server_cpu}'s busy time even after "
                f"{args.retries} retries: other programs ran there, so those costs are inflated"
            )
        if lines[-1] != "":
            lines.append("")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--servers", default="floor,linerate,nginx", help="comma list of floor,linerate,nginx")
    ap.add_argument("--workloads", default="json,plaintext16", help="comma list of json,plaintext16")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=int, default=5, help="seconds per sample (wrk takes whole seconds)")
    ap.add_argument("--warmup", type=int, default=1, help="seconds of wrk before each sample")
    ap.add_argument("--connections", type=int, default=64)
    ap.add_argument("--bin", default="target/release/linerate", help="linerate binary (relative to the repo root)")
    ap.add_argument("--nginx", default=shutil.which("nginx") or "/usr/sbin/nginx")
    ap.add_argument("--wrk", default=shutil.which("wrk") or "/usr/bin/wrk")
    ap.add_argument(
        "--min-share",
        type=float,
        default=0.8,
        help="retry a sample when the server's processes got less than this share of the server CPU's "
        "busy time (the rest went to other programs); on a quiet box the share is close to 1",
    )
    ap.add_argument("--retries", type=int, default=1, help="retries of a sample below --min-share")
    ap.add_argument("--server-cpu", type=int, default=0)
    ap.add_argument("--client-cpu", type=int, default=1)
    args = ap.parse_args(argv)
    args.servers = [s for s in args.servers.split(",") if s]
    args.workloads = [w for w in args.workloads.split(",") if w]
    for s in args.servers:
        if s not in SERVERS:
            ap.error(f"unknown server {s!r} (known: {', '.join(SERVERS)})")
    for w in args.workloads:
        if w not in WORKLOADS:
            ap.error(f"unknown workload {w!r} (known: {', '.join(WORKLOADS)})")
    args.bin = str((REPO / args.bin).resolve())
    if any(s in ("floor", "linerate") for s in args.servers) and not os.access(args.bin, os.X_OK):
        ap.error(f"{args.bin} is not an executable (build it: cargo build --release -p linerate)")
    return args


def main() -> int:
    # SIGTERM unwinds like Ctrl-C, so the finally blocks kill the servers.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    args = parse_args()
    command = shlex.join(["python3", os.path.relpath(sys.argv[0], REPO)] + sys.argv[1:])
    m = machine()
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    OUT.mkdir(parents=True, exist_ok=True)
    results: list[dict] = []
    total = len(args.workloads) * args.rounds * len(args.servers)
    n = 0
    for workload in args.workloads:
        for rnd in range(1, args.rounds + 1):
            for name in args.servers:
                n += 1
                for attempt in range(args.retries + 1):
                    r = measure(args, name, workload, rnd)
                    r["attempt"] = attempt + 1
                    if r["server_share"] >= args.min_share:
                        break
                    print(f"  {name}: server's share of CPU {args.server_cpu} {r['server_share']:.0%}, "
                          f"{'retrying' if attempt < args.retries else 'keeping it, flagged'}", file=sys.stderr)
                results.append(r)
                print(
                    f"[{n}/{total}] {workload} round {rnd} {name}: {r['rps'] / 1e3:.1f}k req/s, "
                    f"{r['us_per_req']:.2f} µs/req (CPU{args.server_cpu} busy {r['cpu0_busy_frac']:.0%}, "
                    f"server's share {r['server_share']:.0%})",
                    file=sys.stderr,
                    flush=True,
                )
    md = markdown(m, command, args, results)
    raw = {"machine": m, "command": command, "config": vars(args), "results": results}
    (OUT / f"run_a-{stamp}.json").write_text(json.dumps(raw, indent=2) + "\n")
    (OUT / f"run_a-{stamp}.md").write_text(md + "\n")
    print(md)
    print(f"raw: {OUT / f'run_a-{stamp}.json'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
