#!/usr/bin/env python3
"""Builds the static-file benchmark tree for bench/static.toml under bench/out/static:

- f64k.bin, f1m.bin, f100m.bin: incompressible files of 64 KiB, 1 MiB and 100 MiB;
- index.html: a page referencing three of the assets (a first view for `lab firstflight`);
- tls/cert.pem, tls/key.pem (bench/out/tls): a self-signed P-256 leaf for 127.0.0.1 made with
  the openssl CLI, for bench/tls.toml;
- arena/: 20 text assets of 2 KB-300 KB (css, js, html, json, svg) like HttpArena's static
  profile, each with a .gz sibling (gzip -9) and, when the `brotli` CLI is installed, a .br one.

Deterministic content (seeded), Python standard library only. Re-running rewrites the tree.
"""

import gzip
import os
import random
import shutil
import subprocess
from pathlib import Path

OUT = Path(__file__).resolve().parent / "out" / "static"
SIZES_KB = [2, 4, 6, 8, 10, 12, 16, 20, 24, 32, 40, 48, 64, 80, 96, 128, 160, 200, 250, 300]
KINDS = ["css", "js", "html", "json", "svg"]
WORDS = ("linerate serve static file sendfile window segment congestion kernel page cache "
         "request response header body chunk range etag vary encoding gzip brotli").split()


def text(rng: random.Random, size: int, kind: str) -> bytes:
    out = []
    n = 0
    while n < size:
        line = {
            "css": ".c{n} {{ margin: {a}px; color: #{b:06x}; }} /* {w} */\n",
            "js": "function f{n}(x) {{ return x * {a} + {b}; }} // {w}\n",
            "html": "<p class=\"p{n}\">{w} {w} {a}</p>\n",
            "json": "{{\"id\":{n},\"name\":\"{w}\",\"value\":{a},\"code\":{b}}},\n",
            "svg": "<rect x=\"{a}\" y=\"{n}\" width=\"{b}\" height=\"3\" fill=\"#{b:06x}\"/>\n",
        }[kind].format(n=n, a=rng.randint(0, 999), b=rng.randint(0, 0xFFFFFF),
                       w=" ".join(rng.choices(WORDS, k=4)))
        out.append(line)
        n += len(line)
    return "".join(out).encode()[:size]


def main() -> None:
    rng = random.Random(2026)
    shutil.rmtree(OUT, ignore_errors=True)
    (OUT / "arena").mkdir(parents=True)
    for name, size in [("f64k.bin", 64 << 10), ("f1m.bin", 1 << 20), ("f100m.bin", 100 << 20)]:
        with open(OUT / name, "wb") as f:
            left = size
            while left:
                chunk = rng.randbytes(min(left, 1 << 20))
                f.write(chunk)
                left -= len(chunk)
    have_brotli = shutil.which("brotli") is not None
    for i, kb in enumerate(SIZES_KB):
        kind = KINDS[i % len(KINDS)]
        path = OUT / "arena" / f"asset{i:02}.{kind}"
        data = text(rng, kb * 1000, kind)
        path.write_bytes(data)
        path.with_name(path.name + ".gz").write_bytes(gzip.compress(data, 9, mtime=0))
        if have_brotli:
            subprocess.run(["brotli", "-f", "-q", "11", str(path)], check=True)
    # A page whose first view is the page plus three same-origin assets (for lab firstflight).
    (OUT / "index.html").write_text(
        "<!doctype html><html><head><title>linerate static demo</title>\n"
        '<link rel="stylesheet" href="/arena/asset00.css">\n'
        '<script src="/arena/asset01.js"></script></head>\n'
        '<body><h1>linerate</h1><img src="arena/asset04.svg" alt="chart">\n'
        + text(rng, 6000, "html").decode()
        + "</body></html>\n"
    )
    tls = OUT.parent / "tls"
    tls.mkdir(exist_ok=True)
    if shutil.which("openssl"):
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
             "-nodes", "-days", "30", "-subj", "/CN=127.0.0.1",
             "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
             "-addext", "basicConstraints=critical,CA:FALSE",
             "-keyout", str(tls / "key.pem"), "-out", str(tls / "cert.pem")],
            check=True, capture_output=True)
    print(f"wrote {OUT} ({'with' if have_brotli else 'without'} .br siblings)")


if __name__ == "__main__":
    os.umask(0o022)
    main()
