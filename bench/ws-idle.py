#!/usr/bin/env python3
"""Memory per idle WebSocket connection: opens N WebSocket connections to a server's /ws
(handshake checked, one echo each so every connection has been used), then reads the
server's resident memory (VmRSS of PID) before and after, and prints the difference per
connection. Bounded: N connections, each with a 10 s timeout; everything closes at the end.

    bench/ws-idle.py PORT PID [N]      (N defaults to 10000; raise `ulimit -n` first)
"""
import base64, os, socket, sys, time

def rss_kib(pid):
    for line in open("/proc/%d/status" % pid):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise SystemExit("no VmRSS for %d" % pid)

def frame(payload):
    mask = b"\x01\x02\x03\x04"
    body = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return bytes([0x81, 0x80 | len(payload)]) + mask + body

def main():
    port, pid = int(sys.argv[1]), int(sys.argv[2])
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 10000
    key = base64.b64encode(os.urandom(16)).decode()
    req = ("GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n" % key).encode()
    time.sleep(0.5)
    before = rss_kib(pid)
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(req + frame(b"hi"))
        got = b""
        while not got.endswith(b"\x81\x02hi"):
            chunk = s.recv(4096)
            if not chunk:
                raise SystemExit("connection closed during the handshake")
            got += chunk
        if not got.startswith(b"HTTP/1.1 101 "):
            raise SystemExit("no 101: %r" % got[:80])
        socks.append(s)
    time.sleep(1.0)
    after = rss_kib(pid)
    per = (after - before) * 1024.0 / n
    print("ws-idle: %d connections open; server RSS %d KiB -> %d KiB: %.0f bytes per idle connection"
          % (n, before, after, per))
    for s in socks:
        s.close()

main()
