#!/usr/bin/env python3
"""bench/ws-h2-echo.py PORT N [STREAMS] [SIZE]: N WebSocket echoes over HTTP/2 (RFC 8441) on
one h2c connection to 127.0.0.1:PORT (`linerate serve --h2c-port PORT`'s `/ws`), STREAMS
WebSocket streams (16) each with one SIZE-byte (32) text message in flight. A raw client
(`linerate load --ws` speaks HTTP/1.1 only): run the server under callgrind and take
(Ir at N=60000 - Ir at N=20000) / 40000 for the server's instructions per message. Prints the
echoes counted; exits non-zero on a reset, GOAWAY or close."""
import socket, struct, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
streams = int(sys.argv[3]) if len(sys.argv) > 3 else 16
size = int(sys.argv[4]) if len(sys.argv) > 4 else 32
s = socket.create_connection(("127.0.0.1", port))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
def frame(kind, flags, sid, payload):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", sid) + payload
def lit(n, v):
    return b"\x00" + bytes([len(n)]) + n + bytes([len(v)]) + v
out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0, struct.pack(">HI", 4, 0x7fffffff))
out += frame(8, 0, 0, struct.pack(">I", 0x7fffffff - 65535))
ids = [1 + 2 * i for i in range(streams)]
for sid in ids:
    block = lit(b":method", b"CONNECT") + lit(b":protocol", b"websocket") + lit(b":scheme", b"http") \
        + lit(b":path", b"/ws") + lit(b":authority", b"localhost") + lit(b"sec-websocket-version", b"13")
    out += frame(1, 4, sid, block)
s.sendall(out)
mask = b"\x01\x02\x03\x04"
payload = b"x" * size
masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
hdr = bytes([0x81, 0x80 | size]) if size < 126 else bytes([0x81, 0x80 | 126]) + struct.pack(">H", size)
msg = hdr + mask + masked
buf = b""
opened = set()
sent = done = 0
held = {sid: b"" for sid in ids}
def need(k):
    global buf
    while len(buf) < k:
        d = s.recv(1 << 20)
        if not d:
            sys.exit("the server closed")
        buf += d
while done < n:
    need(9)
    ln = int.from_bytes(buf[:3], "big"); kind = buf[3]; sid = int.from_bytes(buf[5:9], "big") & 0x7fffffff
    need(9 + ln)
    p = buf[9:9 + ln]; buf = buf[9 + ln:]
    if kind == 1 and sid in held and sid not in opened:
        opened.add(sid)
        if sent < n:
            s.sendall(frame(0, 0, sid, msg)); sent += 1
    elif kind == 0 and sid in held:
        held[sid] += p
        h = held[sid]
        while len(h) >= 2:
            l = h[1] & 0x7f; at = 2
            if l == 126:
                if len(h) < 4: break
                l = int.from_bytes(h[2:4], "big"); at = 4
            if len(h) < at + l: break
            h = h[at + l:]; done += 1
            if sent < n:
                s.sendall(frame(0, 0, sid, msg)); sent += 1
        held[sid] = h
    elif kind == 3 or kind == 7:
        sys.exit(f"reset or goaway: {kind} {p!r}")
print(done)
