#!/usr/bin/env python3
"""Writes lsqpack.txt: field sections encoded by ls-qpack (through pylsqpack, which aioquic
installs) with a 4096-byte dynamic table, for crates/h3/tests/lsqpack.rs to decode.

Each line is one of:
  enc HEX                      bytes of the encoder stream
  sec STREAM HEX               an encoded field section on a request stream
  field NAME VALUE             a field the last section must decode to (hex name, hex value)
Run: python3 lsqpack_vectors.py > lsqpack.txt   (pylsqpack 1.0.0 made the committed file)
"""
import random

import pylsqpack

rng = random.Random(9204)
enc = pylsqpack.Encoder()
out = []
settings = enc.apply_settings(max_table_capacity=4096, blocked_streams=100)
if settings:
    out.append("enc " + settings.hex())
paths = [b"/", b"/index.html", b"/static/app.js", b"/static/style.css", b"/api/users/1", b"/baseline2?a=1&b=2"]
agents = [b"Mozilla/5.0 (X11; Linux x86_64) Chrome/156.0", b"aioquic/1.7.2", b"curl/8.11"]
for i in range(60):
    stream = 4 * i
    headers = [
        (b":method", rng.choice([b"GET", b"GET", b"POST", b"HEAD"])),
        (b":scheme", b"https"),
        (b":authority", rng.choice([b"localhost:8443", b"example.com", b"127.0.0.1:4433"])),
        (b":path", rng.choice(paths) + (b"" if rng.random() < 0.5 else b"?n=%d" % rng.randrange(1000))),
        (b"user-agent", rng.choice(agents)),
        (b"accept", rng.choice([b"*/*", b"text/html,application/xhtml+xml", b"application/json"])),
        (b"accept-encoding", b"gzip, deflate, br"),
    ]
    if rng.random() < 0.6:
        headers.append((b"cookie", b"session=%08x" % rng.randrange(1 << 32)))
    if rng.random() < 0.4:
        headers.append((b"x-request-id", b"%016x" % rng.randrange(1 << 64)))
    if rng.random() < 0.2:
        headers.append((b"x-long-%d" % rng.randrange(5), bytes(rng.choice(b"abcdefgh") for _ in range(rng.randrange(1, 300)))))
    encoder_bytes, section = enc.encode(stream, headers)
    if encoder_bytes:
        out.append("enc " + encoder_bytes.hex())
    out.append("sec %d %s" % (stream, section.hex()))
    for n, v in headers:
        out.append("field %s %s" % (n.hex(), v.hex() or "-"))
print("\n".join(out))
