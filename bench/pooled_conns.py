#!/usr/bin/env python3
"""User-space memory per idle pooled upstream connection of a reverse proxy.

Sends one `GET <path>` on each of N client connections at once, so the proxy has N exchanges
in flight and opens (up to) N upstream connections, reads every answer, waits for the proxy to
settle, and reports the proxy's VmRSS (its process and descendants) and how many TCP
connections it holds to the upstream's port. Run it twice against the same proxy built two ways
— its upstream pool on (e.g. linerate `--proxy-keepalive 1024`, nginx `keepalive 1024`) and off
(`--proxy-keepalive 0`, no `keepalive`) — and the RSS difference over the pooled-connection
difference is what one idle pooled upstream connection costs it. The N client connections stay
open and idle in both runs, so they cancel out.

  python3 bench/pooled_conns.py --url http://127.0.0.1:8080/json --pid PID --upstream-port 9000 -n 1000

Python 3 standard library only; every socket has a timeout.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time
import urllib.parse

IO_TIMEOUT_S = 10.0


def tree(pid: int) -> list[int]:
    """`pid` and its descendants."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for t in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{t}/children") as f:
                    todo.extend(int(c) for c in f.read().split())
        except OSError:
            pass
    return out


def rss_kib(pids: list[int]) -> int:
    total = 0
    for p in pids:
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total


def upstream_conns(pids: list[int], port: int) -> int:
    """TCP sockets of `pids` whose remote port is `port` (established)."""
    inodes = set()
    for p in pids:
        try:
            for fd in os.listdir(f"/proc/{p}/fd"):
                try:
                    link = os.readlink(f"/proc/{p}/fd/{fd}")
                except OSError:
                    continue
                if link.startswith("socket:["):
                    inodes.add(link[8:-1])
        except OSError:
            pass
    n = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    cols = line.split()
                    remote_port = int(cols[2].rsplit(":", 1)[1], 16)
                    if remote_port == port and cols[3] == "01" and cols[9] in inodes:
                        n += 1
        except OSError:
            pass
    return n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--pid", type=int, required=True, help="the proxy's (master) PID")
    ap.add_argument("--upstream-port", type=int, required=True)
    ap.add_argument("-n", type=int, default=1000, help="client connections (default 1000)")
    ap.add_argument("--settle", type=float, default=1.0, help="seconds to wait before reading")
    a = ap.parse_args()
    u = urllib.parse.urlsplit(a.url)
    host, port = u.hostname or "127.0.0.1", u.port or 80
    path = (u.path or "/") + (f"?{u.query}" if u.query else "")
    req = f"GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()
    pids = tree(a.pid)
    before = rss_kib(pids)
    socks = []
    for _ in range(a.n):
        s = socket.create_connection((host, port), timeout=IO_TIMEOUT_S)
        socks.append(s)
    for s in socks:
        s.sendall(req)
    for s in socks:
        got = b""
        while b"\r\n\r\n" not in got:
            chunk = s.recv(65536)
            if not chunk:
                print("a connection closed before its answer", file=sys.stderr)
                return 1
            got += chunk
        if not got.startswith(b"HTTP/1.1 200"):
            print(f"not a 200: {got[:40]!r}", file=sys.stderr)
            return 1
    time.sleep(a.settle)
    pids = tree(a.pid)
    after = rss_kib(pids)
    pooled = upstream_conns(pids, a.upstream_port)
    print(f"clients {a.n} rss_before_kib {before} rss_after_kib {after} upstream_conns {pooled}")
    for s in socks:
        s.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
