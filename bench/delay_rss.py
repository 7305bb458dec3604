#!/usr/bin/env python3
"""Memory per connection waiting on `GET /delay/{ms}` (HttpArena's async profile), beyond an
idle keep-alive connection's.

Against a running server (`--pid`, `--port` on 127.0.0.1): opens N connections and answers one
`GET /plaintext` on each (idle keep-alive connections), reads the server's VmRSS, then sends
`GET /delay/MS` on every one and reads VmRSS again while all wait (checked: none answered
yet), then reads every answer (each must be its number). Prints both growths per connection.
The server needs N + a few hundred descriptors (RLIMIT_NOFILE), and so does this script.
Python 3 standard library only; bounded by --deadline.

  target/release/linerate serve --workers 1 --addr 127.0.0.1:8080 &
  python3 bench/delay_rss.py --pid $! --port 8080 -n 18000
"""

from __future__ import annotations

import argparse
import resource
import socket
import sys
import time
from pathlib import Path

IO_TIMEOUT_S = 10.0


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise SystemExit(f"no VmRSS for pid {pid}")


def read_response(s: socket.socket) -> bytes:
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(4096)
        if not chunk:
            raise ConnectionError("closed before the response head ended")
        buf += chunk
    head, _, body = buf.partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200"):
        raise ConnectionError(f"unexpected answer {head[:40]!r}")
    length = next(int(l.split(b":", 1)[1]) for l in head.split(b"\r\n")[1:] if l.lower().startswith(b"content-length:"))
    while len(body) < length:
        chunk = s.recv(4096)
        if not chunk:
            raise ConnectionError("closed inside the body")
        body += chunk
    return body


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("-n", "--connections", type=int, default=18_000)
    ap.add_argument("--ms", type=int, default=10_000, help="the delay asked for (the demo allows up to 10000)")
    ap.add_argument("--settle", type=float, default=1.0)
    ap.add_argument("--deadline", type=float, default=120.0)
    args = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if hard < args.connections + 64:
        raise SystemExit(f"RLIMIT_NOFILE hard limit {hard} < {args.connections + 64}")
    deadline = time.monotonic() + args.deadline
    addr = ("127.0.0.1", args.port)
    socks = []
    time.sleep(args.settle)
    base = rss_kib(args.pid)
    for _ in range(args.connections):
        assert time.monotonic() < deadline, "deadline"
        s = socket.create_connection(addr, timeout=IO_TIMEOUT_S)
        s.sendall(b"GET /plaintext HTTP/1.1\r\nHost: t\r\n\r\n")
        read_response(s)
        socks.append(s)
    time.sleep(args.settle)
    idle = rss_kib(args.pid)
    t0 = time.monotonic()
    req = f"GET /delay/{args.ms} HTTP/1.1\r\nHost: t\r\n\r\n".encode()
    for s in socks:
        s.sendall(req)
    time.sleep(args.settle)
    waiting = rss_kib(args.pid)
    sent_s = time.monotonic() - t0
    early = 0
    for s in socks:
        s.setblocking(False)
        try:
            if s.recv(1, socket.MSG_PEEK):
                early += 1
        except BlockingIOError:
            pass
        s.setblocking(True)
        s.settimeout(IO_TIMEOUT_S + args.ms / 1000)
    if sent_s >= args.ms / 1000:
        print(f"warning: sending took {sent_s:.1f} s, longer than the delay: raise --ms", file=sys.stderr)
    for s in socks:
        assert time.monotonic() < deadline, "deadline"
        assert read_response(s) == str(args.ms).encode()
    n = args.connections
    print(f"connections: {n}, delay {args.ms} ms; answered before the RSS read: {early}")
    print(f"VmRSS: {base} KiB at start, {idle} KiB with all idle, {waiting} KiB with all waiting")
    print(f"idle: {(idle - base) * 1024 / n:.0f} bytes/conn; waiting beyond idle: {(waiting - idle) * 1024 / n:.0f} bytes/conn")
    return 0 if early == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
