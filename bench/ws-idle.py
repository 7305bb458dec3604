#!/usr/bin/env python3
"""Memory per idle WebSocket connection: opens N WebSocket connections to a server's /ws
(handshake checked, one echo each so every connection has been used), then reads the
server's resident memory (VmRSS of PID) before and after, and prints the difference per
connection. Bounded: N connections, each with a 10 s timeout; everything closes at the end.

    bench/ws-idle.py PORT PID [N] [MODE]   (N defaults to 10000; raise `ulimit -n` first)

MODE: `plain` (the default: no extension offered), `deflate` (permessage-deflate offered and
the echo's message sent compressed, so the server holds the client's compression context:
an inflater per connection), `deflate-no-context` (the same with client_no_context_takeover:
the inflater is freed after each message).
"""
import base64, os, socket, sys, time, zlib

def rss_kib(pid):
    for line in open("/proc/%d/status" % pid):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise SystemExit("no VmRSS for %d" % pid)

def frame(payload, b0=0x81):
    mask = b"\x01\x02\x03\x04"
    body = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return bytes([b0, 0x80 | len(payload)]) + mask + body

def deflated(payload):
    """A compressed message's payload (RFC 7692 §7.2.1): raw DEFLATE, sync flush, tail cut."""
    z = zlib.compressobj(wbits=-15)
    return (z.compress(payload) + z.flush(zlib.Z_SYNC_FLUSH))[:-4]

def main():
    port, pid = int(sys.argv[1]), int(sys.argv[2])
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 10000
    mode = sys.argv[4] if len(sys.argv) > 4 else "plain"
    offer = {"plain": "",
             "deflate": "Sec-WebSocket-Extensions: permessage-deflate\r\n",
             "deflate-no-context": "Sec-WebSocket-Extensions: permessage-deflate; "
                                   "client_no_context_takeover\r\n"}[mode]
    message = frame(b"hi") if mode == "plain" else frame(deflated(b"hi"), 0xC1)
    key = base64.b64encode(os.urandom(16)).decode()
    req = ("GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n%s\r\n" % (key, offer)).encode()
    time.sleep(0.5)
    before = rss_kib(pid)
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(req + message)
        got = b""
        while not got.endswith(b"\x81\x02hi"):
            chunk = s.recv(4096)
            if not chunk:
                raise SystemExit("connection closed during the handshake")
            got += chunk
        if not got.startswith(b"HTTP/1.1 101 "):
            raise SystemExit("no 101: %r" % got[:80])
        if (b"permessage-deflate" in got) != (mode != "plain"):
            raise SystemExit("compression not as offered: %r" % got[:300])
        socks.append(s)
    time.sleep(1.0)
    after = rss_kib(pid)
    per = (after - before) * 1024.0 / n
    print("ws-idle (%s): %d connections open; server RSS %d KiB -> %d KiB: %.0f bytes per idle connection"
          % (mode, n, before, after, per))
    for s in socks:
        s.close()

main()
