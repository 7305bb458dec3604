#!/usr/bin/env python3
"""User-space memory per idle keep-alive connection (MEASURING.md, item 5).

Opens N keep-alive connections to a server on 127.0.0.1, sends one `GET <path>` on each, reads
each full response, then holds them all idle. The server's VmRSS (summed over its process and
all descendants, so an nginx master + worker counts whole) is read before the first connection
and again once all are idle and a settle time has passed; the growth divided by N is the figure.
Kernel socket memory is not in VmRSS: this is the server's own bookkeeping per connection.

The server is either running already (`--pid PID`), started from a command after `--`, or
nginx from bench/nginx.conf.in on CPU 0 (`--nginx`, the default when neither is given).
Python 3 standard library only; every socket has a timeout and the run is bounded by --deadline.

  python3 bench/idle_conns.py                       # nginx, GET /plaintext
  python3 bench/idle_conns.py --url http://127.0.0.1:8080/plaintext \
      -- target/release/linerate lab floor --addr 127.0.0.1:8080 --response plaintext
  python3 bench/idle_conns.py --url http://127.0.0.1:8080/plaintext --pid 1234
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import socket
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

sys.dont_write_bytecode = True  # no bench/__pycache__ from importing run_a
sys.path.insert(0, str(Path(__file__).resolve().parent))
import run_a  # noqa: E402  (shares the server start/stop and nginx config code)

IO_TIMEOUT_S = 5.0


def rss_kib(pids: list[int]) -> dict[int, int]:
    """VmRSS in KiB of each pid still alive."""
    out = {}
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    out[pid] = int(line.split()[1])
        except FileNotFoundError:
            pass
    return out


def tree(pid: int) -> list[int]:
    return [pid] + run_a.descendants(pid)


def raise_nofile(need: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= need:
        return
    if hard != resource.RLIM_INFINITY and hard < need:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (need, need))  # root may raise the hard limit
            return
        except (ValueError, PermissionError):
            raise SystemExit(f"RLIMIT_NOFILE hard limit {hard} < {need}; lower -n or raise the limit")
    resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))


def read_response(s: socket.socket) -> bytes:
    """Reads one full response (head + Content-Length body); a 2xx is required."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(4096)
        if not chunk:
            raise ConnectionError("closed before the response head ended")
        buf += chunk
    head, _, body = buf.partition(b"\r\n\r\n")
    status = head.split(b"\r\n", 1)[0]
    if not status.startswith(b"HTTP/1.1 2"):
        raise ConnectionError(f"unexpected status line {status!r}")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        chunk = s.recv(4096)
        if not chunk:
            raise ConnectionError("closed inside the response body")
        body += chunk
    if len(body) != length:
        raise ConnectionError("more bytes than one response: the server answered twice")
    return head


def still_open(socks: list[socket.socket]) -> int:
    """How many connections the server has not closed (no EOF, no bytes pending)."""
    n = 0
    for s in socks:
        s.setblocking(False)
        try:
            if s.recv(1, socket.MSG_PEEK):
                continue  # unexpected bytes: not idle
        except BlockingIOError:
            n += 1
            continue
        except OSError:
            continue
        finally:
            s.setblocking(True)
            s.settimeout(IO_TIMEOUT_S)
    return n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", "--connections", type=int, default=10_000)
    ap.add_argument("--url", help="http://127.0.0.1:PORT/PATH (with --nginx: port chosen, path /plaintext)")
    ap.add_argument("--pid", type=int, help="pid of a running server to measure")
    ap.add_argument("--nginx", action="store_true", help="start nginx from bench/nginx.conf.in on CPU 0")
    ap.add_argument("--nginx-bin", default="/usr/sbin/nginx")
    ap.add_argument("--settle", type=float, default=1.0, help="seconds to wait once all are idle")
    ap.add_argument("--deadline", type=float, default=60.0, help="give up after this many seconds")
    ap.add_argument("command", nargs="*", help="server command to start (after --)")
    args = ap.parse_args()
    if not (args.pid or args.command):
        args.nginx = True
    if sum(map(bool, (args.pid, args.nginx, args.command))) != 1:
        ap.error("give one of --pid, --nginx, or a server command after --")
    path = "/plaintext"
    if args.url:
        u = urllib.parse.urlsplit(args.url)
        if u.scheme != "http" or u.hostname != "127.0.0.1" or not u.port:
            ap.error("--url must be http://127.0.0.1:PORT/... (loopback only)")
        args.port, path = u.port, (u.path or "/")
    elif not args.nginx:
        ap.error("--url is required with --pid or a command")

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    raise_nofile(args.connections + 1024)  # a started server inherits this limit too
    deadline = time.monotonic() + args.deadline
    server = None
    socks: list[socket.socket] = []
    try:
        if args.nginx:
            port = run_a.free_port()
            rundir = Path(tempfile.mkdtemp(prefix="linerate-nginx-"))
            conf = run_a.nginx_conf(run_a.BENCH / "nginx.conf.in", rundir, port)
            argv = ["taskset", "-c", "0", args.nginx_bin, "-p", str(rundir), "-e", str(rundir / "error.log"), "-c", str(conf)]
            server = run_a.Server("nginx", argv, port, rundir)
        elif args.command:
            port = args.port
            server = run_a.Server(Path(args.command[0]).name, args.command, port)
        else:
            port = args.port
        if server:
            server.wait_ready()
            time.sleep(0.2)  # let the worker finish starting before the baseline
        pid = server.proc.pid if server else args.pid
        # One warm-up request, so one-time allocations (first request, lazy init) are in the baseline.
        with socket.create_connection(("127.0.0.1", port), timeout=IO_TIMEOUT_S) as s:
            s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
            read_response(s)
        time.sleep(args.settle)
        before = rss_kib(tree(pid))

        request = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
        t0 = time.monotonic()
        for i in range(args.connections):
            if time.monotonic() > deadline:
                raise TimeoutError(f"deadline passed after {i} connections")
            s = socket.create_connection(("127.0.0.1", port), timeout=IO_TIMEOUT_S)
            socks.append(s)
            s.sendall(request)
            read_response(s)
        opened_s = time.monotonic() - t0
        time.sleep(args.settle)
        after = rss_kib(tree(pid))
        alive = still_open(socks)

        grow_kib = sum(after.values()) - sum(before.values())
        n = args.connections
        print(f"server pid {pid} ({', '.join(f'{p}: {before.get(p, 0)}→{after.get(p, 0)} KiB' for p in after)})")
        print(f"connections: {n} opened and answered in {opened_s:.1f} s; {alive} still open after {args.settle:g} s idle")
        print(f"VmRSS before: {sum(before.values())} KiB, after: {sum(after.values())} KiB")
        print(f"growth: {grow_kib} KiB total, {grow_kib * 1024 / n:.0f} bytes/conn")
        return 0 if alive == n else 1
    finally:
        for s in socks:
            s.close()
        if server:
            server.stop()


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
