#!/usr/bin/env python3
"""The HTTP/2 comparison: linerate, h2o and nginx under h2load, one server core.

Each server runs pinned to CPU 0 with one worker; h2load (one thread) runs pinned to CPU 1 with
`-c 64 -m 100` for a fixed duration after a warm-up. Workloads: `/baseline2?a=1&b=2` (a small
computed answer) and a 64 KiB static file, each over h2c (prior knowledge) and over TLS (ALPN
h2). Rounds are interleaved (every server and workload once per round, the server order rotated)
and the table gives medians of the rounds with their range: req/s from h2load, and server CPU
µs per request from the server's own CPU time (utime + stime of every process of it, from
/proc, over the measured interval only).

What each server answers on /baseline2: linerate's demo computes a + b; h2o computes it in its
mruby handler; nginx 1.22 cannot add without a module, so it returns a constant of the same
length (`return 200 "3"`), less work than the contract asks. The 64 KiB file is the same file
for all three (bench/make_static.py's f64k.bin).

    python3 bench/h2_compare.py [--rounds 3] [--duration 5] [--out docs/lab/h2]

Needs h2load (Debian nghttp2-client), h2o and nginx (Debian h2o, nginx-light); installs none.
"""

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STATIC = ROOT / "bench" / "out" / "static"
TLS = ROOT / "bench" / "out" / "tls"
TICK = os.sysconf("SC_CLK_TCK")

H2O_CONF = """user: {user}
num-threads: 1
listen:
  host: 127.0.0.1
  port: {port}
listen:
  host: 127.0.0.1
  port: {tls_port}
  ssl:
    certificate-file: {cert}
    key-file: {key}
    minimum-version: TLSv1.2
http2-idle-timeout: 60
hosts:
  default:
    paths:
      /baseline2:
        mruby.handler: |
          Proc.new do |env|
            sum = 0
            env["QUERY_STRING"].to_s.split("&").each do |kv|
              k, v = kv.split("=", 2)
              sum += v.to_i if k == "a" || k == "b"
            end
            [200, {{"content-type" => "text/plain"}}, [sum.to_s]]
          end
      /:
        file.dir: {root}
"""

NGINX_CONF = """worker_processes 1;
daemon off;
pid {run}/nginx.pid;
error_log {run}/error.log warn;
worker_rlimit_nofile 40000;
events {{ worker_connections 20000; }}
http {{
    access_log off;
    keepalive_requests 10000000;
    http2_max_requests 10000000;
    sendfile on;
    tcp_nopush on;
    open_file_cache max=1024 inactive=60s;
    include /etc/nginx/mime.types;
    default_type application/octet-stream;
    client_body_temp_path {run}/client_body;
    proxy_temp_path {run}/proxy;
    fastcgi_temp_path {run}/fastcgi;
    uwsgi_temp_path {run}/uwsgi;
    scgi_temp_path {run}/scgi;
    ssl_protocols TLSv1.2 TLSv1.3;
    server {{
        listen 127.0.0.1:{port} http2 reuseport;
        listen 127.0.0.1:{tls_port} ssl http2 reuseport;
        ssl_certificate {cert};
        ssl_certificate_key {key};
        root {root};
        location = /baseline2 {{
            default_type text/plain;
            return 200 "3";
        }}
    }}
}}
"""

WORKLOADS = [
    ("baseline2", "h2c", "/baseline2?a=1&b=2"),
    ("baseline2", "tls", "/baseline2?a=1&b=2"),
    ("file64k", "h2c", "/f64k.bin"),
    ("file64k", "tls", "/f64k.bin"),
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_ticks(pid: int) -> int:
    """utime + stime of `pid`, its threads and its children processes (nginx's worker)."""
    total = 0
    pids = [pid] + [int(p) for p in subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()]
    for p in pids:
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total


def wait_ready(port: int, tls: bool) -> None:
    url = f"{'https' if tls else 'http'}://127.0.0.1:{port}/f64k.bin"
    flag = "--http2" if tls else "--http2-prior-knowledge"
    for _ in range(100):
        r = subprocess.run(["curl", "-sk", flag, "-o", "/dev/null", "-w", "%{http_code}", url],
                           capture_output=True, text=True)
        if r.stdout == "200":
            return
        time.sleep(0.1)
    raise SystemExit(f"server on {port} did not answer")


def start(name: str, run: Path):
    port, tls_port = free_port(), free_port()
    cert, key = TLS / "cert.pem", TLS / "key.pem"
    if name == "linerate":
        cmd = [os.environ.get("LINERATE_BIN", str(ROOT / "target/release/linerate")), "serve", "--addr", f"127.0.0.1:{free_port()}",
               "--h2c-port", str(port), "--tls-port", str(tls_port), "--tls-cert", str(cert),
               "--tls-key", str(key), "--workers", "1", "--cpus", "0", "--root", str(STATIC),
               "--app", "demo", "--log-level", "warn"]
    elif name == "h2o":
        conf = run / "h2o.conf"
        user = "root" if os.geteuid() == 0 else os.environ.get("USER", "nobody")
        conf.write_text(H2O_CONF.format(user=user, port=port, tls_port=tls_port, cert=cert, key=key,
                                        root=STATIC))
        cmd = ["taskset", "-c", "0", "h2o", "-c", str(conf)]
    else:
        conf = run / "nginx.conf"
        conf.write_text(NGINX_CONF.format(run=run, port=port, tls_port=tls_port, cert=cert, key=key,
                                          root=STATIC))
        cmd = ["taskset", "-c", "0", "nginx", "-c", str(conf)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(run / f"{name}.log", "w"),
                            start_new_session=True)
    wait_ready(port, False)
    wait_ready(tls_port, True)
    return proc, port, tls_port


def stop(proc) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def measure(proc, port: int, tls_port: int, kind: str, path: str, duration: int, warmup: int):
    url = (f"https://127.0.0.1:{tls_port}" if kind == "tls" else f"http://127.0.0.1:{port}") + path
    cmd = ["taskset", "-c", "1", "h2load", "-t", "1", "-c", "64", "-m", "100",
           "--warm-up-time", str(warmup), "-D", str(duration), url]
    h2 = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    time.sleep(warmup + 0.2)
    t0, c0 = time.monotonic(), cpu_ticks(proc.pid)
    out, _ = h2.communicate(timeout=duration + warmup + 60)
    t1, c1 = time.monotonic(), cpu_ticks(proc.pid)
    rps = done = ok = None
    bad = 1
    for line in out.splitlines():
        if line.startswith("finished in"):
            rps = float(line.split(",")[1].split()[0])
        if line.startswith("requests:"):
            parts = line.replace(",", "").split()
            done, ok = int(parts[5]), int(parts[7])
        if line.startswith("status codes:"):
            codes = line.replace(",", "").split()
            bad = int(codes[6]) + int(codes[8])  # 4xx + 5xx
    # (h2load's status counts include the warm-up's requests; its done/succeeded do not.)
    if rps is None or done is None or bad or ok != done:
        raise SystemExit(f"h2load failed or saw errors:\n{out}")
    # The CPU window covers the measured period (h2load's -D after its warm-up) give or take
    # the sleep's slack; the requests in it are rps × that window.
    cpu_s = (c1 - c0) / TICK
    reqs = rps * (t1 - t0)
    return rps, cpu_s * 1e6 / reqs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--servers", default="linerate,h2o,nginx")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    for tool in ["h2load", "h2o", "nginx", "taskset", "curl"]:
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} is not installed")
    if not (STATIC / "f64k.bin").exists() or not (TLS / "cert.pem").exists():
        subprocess.run([sys.executable, str(ROOT / "bench/make_static.py")], check=True)
    servers = a.servers.split(",")
    results = {}
    for r in range(a.rounds):
        order = servers[r % len(servers):] + servers[:r % len(servers)]
        for name in order:
            with tempfile.TemporaryDirectory() as run:
                proc, port, tls_port = start(name, Path(run))
                try:
                    for wl, kind, path in WORKLOADS:
                        rps, us = measure(proc, port, tls_port, kind, path, a.duration, a.warmup)
                        results.setdefault((wl, kind, name), []).append((rps, us))
                        print(f"round {r + 1} {name:8} {wl:9} {kind:3} {rps:10.0f} req/s {us:7.2f} µs/req",
                              flush=True)
                finally:
                    stop(proc)
    rows = []
    for wl, kind, _ in WORKLOADS:
        h2o = results.get((wl, kind, "h2o"))
        ref_rps = statistics.median(x[0] for x in h2o) if h2o else None
        ref_us = statistics.median(x[1] for x in h2o) if h2o else None
        for name in servers:
            v = results[(wl, kind, name)]
            rps = [x[0] for x in v]
            us = [x[1] for x in v]
            rows.append({
                "workload": wl, "transport": kind, "server": name,
                "rps": statistics.median(rps), "rps_min": min(rps), "rps_max": max(rps),
                "us": statistics.median(us), "us_min": min(us), "us_max": max(us),
                "rps_vs_h2o": statistics.median(rps) / ref_rps if ref_rps else None,
                "us_vs_h2o": statistics.median(us) / ref_us if ref_us else None,
            })
    lines = ["| workload | transport | server | req/s (range) | × h2o | CPU µs/request (range) | × h2o |",
             "|---|---|---|---:|---:|---:|---:|"]
    for x in rows:
        lines.append(
            f"| {x['workload']} | {x['transport']} | {x['server']} | {x['rps'] / 1000:.1f}k "
            f"({x['rps_min'] / 1000:.1f}k–{x['rps_max'] / 1000:.1f}k) | {x['rps_vs_h2o']:.2f}× | "
            f"{x['us']:.2f} ({x['us_min']:.2f}–{x['us_max']:.2f}) | {x['us_vs_h2o']:.2f}× |")
    table = "\n".join(lines)
    print(table)
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        (a.out / "results.json").write_text(json.dumps({"rounds": a.rounds, "duration_s": a.duration,
                                                         "raw": {"/".join(k): v for k, v in results.items()},
                                                         "rows": rows}, indent=1))
        (a.out / "table.md").write_text(table + "\n")


if __name__ == "__main__":
    main()
