#!/usr/bin/env python3
"""SSE fan-out: the server's CPU per event delivered to many subscribers.

Opens SUBS subscriptions to GET /users/events (HTTP/1.1, bearer token), waits until every head
arrived, reads the server's CPU time (utime + stime of every thread, /proc/PID/stat), creates
EVENTS users one after another with POST /users (each waits for its 201; every create is
published to every subscriber), reads every subscription until it holds EVENTS `user` events,
and reads the CPU time again. Prints one JSON line:
{"subs":…,"events":…,"delivered":…,"cpu_s":…,"us_per_event":…}.

It only talks to the address it is given (127.0.0.1), and every wait is bounded.

  sse-fanout.py --addr 127.0.0.1:PORT --pid PID [--subs 1000] [--events 100] [--token secret]
"""
import argparse
import json
import os
import selectors
import socket
import sys
import time

LIMIT_S = 60.0


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # utime and stime are fields 14 and 15 (1-based), 11 and 12 after the name.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--addr", required=True)
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--subs", type=int, default=1000)
    ap.add_argument("--events", type=int, default=100)
    ap.add_argument("--token", default="secret")
    a = ap.parse_args()
    host, port = a.addr.rsplit(":", 1)
    port = int(port)
    if host not in ("127.0.0.1", "::1", "localhost"):
        sys.exit("sse-fanout: only a loopback address")
    deadline = time.monotonic() + LIMIT_S

    sel = selectors.DefaultSelector()
    subs = []
    request = (
        f"GET /users/events HTTP/1.1\r\nHost: {a.addr}\r\n"
        f"Authorization: Bearer {a.token}\r\n\r\n"
    ).encode()
    for _ in range(a.subs):
        s = socket.create_connection((host, port), timeout=10)
        s.sendall(request)
        s.setblocking(False)
        st = {"sock": s, "buf": b"", "head": False, "events": 0}
        subs.append(st)
        sel.register(s, selectors.EVENT_READ, st)

    def pump(until):
        while not until():
            if time.monotonic() > deadline:
                sys.exit("sse-fanout: time limit reached")
            for key, _ in sel.select(timeout=1.0):
                st = key.data
                try:
                    data = st["sock"].recv(1 << 16)
                except BlockingIOError:
                    continue
                if not data:
                    sys.exit("sse-fanout: a subscription closed")
                st["buf"] += data
                if not st["head"] and b"\r\n\r\n" in st["buf"]:
                    head, _, rest = st["buf"].partition(b"\r\n\r\n")
                    if not head.startswith(b"HTTP/1.1 200"):
                        sys.exit(f"sse-fanout: subscription refused: {head[:80]!r}")
                    st["head"] = True
                    st["buf"] = rest
                if st["head"]:
                    n = st["buf"].count(b"event: user\n")
                    if n:
                        st["events"] += n
                        st["buf"] = st["buf"][st["buf"].rfind(b"event: user\n") + 12:]

    pump(lambda: all(st["head"] for st in subs))
    before = cpu_seconds(a.pid)
    post = socket.create_connection((host, port), timeout=10)
    body = b'{"name":"fan"}'
    req = (
        f"POST /users HTTP/1.1\r\nHost: {a.addr}\r\nAuthorization: Bearer {a.token}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    for _ in range(a.events):
        post.sendall(req)
        got = b""
        while b"\r\n\r\n" not in got or not got.split(b"\r\n\r\n", 1)[1].endswith(b"}"):
            chunk = post.recv(4096)
            if not chunk:
                sys.exit("sse-fanout: the POST connection closed")
            got += chunk
        if not got.startswith(b"HTTP/1.1 201"):
            sys.exit(f"sse-fanout: POST /users answered {got[:60]!r}")
    pump(lambda: all(st["events"] >= a.events for st in subs))
    after = cpu_seconds(a.pid)
    delivered = sum(st["events"] for st in subs)
    cpu = after - before
    print(json.dumps({
        "subs": a.subs,
        "events": a.events,
        "delivered": delivered,
        "cpu_s": round(cpu, 3),
        "us_per_event": round(cpu / delivered * 1e6, 3),
    }))
    for st in subs:
        st["sock"].close()
    post.close()


if __name__ == "__main__":
    main()
