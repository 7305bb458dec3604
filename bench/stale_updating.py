#!/usr/bin/env python3
"""The `use_stale updating` figure: 100 concurrent clients on an expired key.

An origin (this script, threaded) answers GET /page after `--delay` seconds (2 s) with
`Cache-Control: max-age=1` and nothing about stale answers, counting its requests. A cache in
front of it is filled once, the entry is let expire, and then `--clients` (100) raw-socket
clients, released together, ask for it. Printed per cache: the origin requests the burst made
(the goal: 1), each client's time to its whole answer (p50, p99, max; the goal: p50 under
10 ms) and the statuses and cache-status values seen.

Caches: linerate (`cache = { use_stale = ["updating"] }`, its server pinned to CPU 0) and, if
nginx is installed, nginx 1.22 with `proxy_cache_use_stale updating` and
`proxy_cache_background_update on` (the same CPU). The clients run on CPU 1.

    python3 bench/stale_updating.py target/release/linerate

Loops are bounded: one burst per cache, every socket with a timeout, every process stopped by
PID. Ports are the OS's.
"""
import http.server
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

DELAY = 2.0
CLIENTS = 100
BODY = b"stale-updating bench page\n" * 40


class Origin(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    count = 0
    lock = threading.Lock()

    def do_GET(self):
        with Origin.lock:
            Origin.count += 1
        time.sleep(DELAY)
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Cache-Control", "max-age=1")
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)

    def log_message(self, *_):
        pass


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_port(port, deadline=10.0):
    end = time.time() + deadline
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


def get(port, timeout=10.0):
    """One GET /page on a new connection: (status, cache-status field, seconds)."""
    t0 = time.perf_counter()
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.sendall(b"GET /page HTTP/1.1\r\nHost: shop.test\r\nConnection: close\r\n\r\n")
    data = b""
    want = None  # the head's length and the body's, once the head is in
    while want is None or len(data) < want:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
        if want is None and b"\r\n\r\n" in data:
            head_len = data.index(b"\r\n\r\n") + 4
            for line in data[:head_len].decode("latin-1").split("\r\n"):
                if line.lower().startswith("content-length:"):
                    want = head_len + int(line.split(":", 1)[1])
    # the time to the whole answer, not to the close: nginx keeps a connection open until its
    # background update ends, after the answer is out
    took = time.perf_counter() - t0
    s.close()
    head = data.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
    status = int(head[0].split()[1]) if head and len(head[0].split()) > 1 else 0
    cs = ""
    for line in head[1:]:
        name, _, value = line.partition(":")
        if name.lower() in ("cache-status", "x-cache-status"):
            cs = value.strip()
    return status, cs, took


def burst(port):
    barrier = threading.Barrier(CLIENTS)
    out = [None] * CLIENTS

    def one(i):
        barrier.wait()
        try:
            out[i] = get(port)
        except OSError as e:
            out[i] = (0, str(e), float("nan"))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return out


def measure(name, port):
    get(port)  # fill (waits DELAY)
    time.sleep(2.2)  # past max-age=1 (nginx counts it in whole seconds)
    before = Origin.count
    answers = burst(port)
    time.sleep(DELAY + 0.5)  # the background refresh lands
    origin = Origin.count - before
    times = sorted(a[2] * 1000 for a in answers if a[0])
    statuses = {}
    for a in answers:
        statuses[(a[0], a[1])] = statuses.get((a[0], a[1]), 0) + 1
    p = lambda q: times[min(len(times) - 1, int(q * len(times)))] if times else float("nan")
    print(f"{name}: origin requests during the burst: {origin}; answers: {len(times)}/{CLIENTS}; "
          f"p50 {statistics.median(times):.2f} ms, p99 {p(0.99):.2f} ms, max {times[-1]:.2f} ms")
    for (st, cs), n in sorted(statuses.items(), key=lambda x: -x[1]):
        print(f"    {n:3} x {st} {cs}")


def main():
    linerate = sys.argv[1] if len(sys.argv) > 1 else "target/release/linerate"
    os.sched_setaffinity(0, {1})
    oport = free_port()
    origin = http.server.ThreadingHTTPServer(("127.0.0.1", oport), Origin)
    threading.Thread(target=origin.serve_forever, daemon=True).start()
    tmp = tempfile.mkdtemp(prefix="stale-updating-")
    os.chmod(tmp, 0o755)  # nginx's workers (nobody, when run as root) open its cache
    procs = []
    try:
        lport = free_port()
        conf = os.path.join(tmp, "linerate.toml")
        with open(conf, "w") as f:
            f.write(f"""log_level = "warn"
[[listen]]
addr = "127.0.0.1:{lport}"
[[upstream]]
name = "origin"
servers = ["127.0.0.1:{oport}"]
[[site]]
default = true
app = "none"
[[site.proxy]]
prefix = "/"
upstream = "origin"
cache = {{ use_stale = ["updating"] }}
""")
        p = subprocess.Popen(["taskset", "-c", "0", linerate, "serve", "--config", conf,
                              "--workers", "1"], stdout=subprocess.DEVNULL)
        procs.append(p)
        if not wait_port(lport):
            print("linerate: NOT RUN (did not listen)")
        else:
            measure("linerate", lport)
        p.terminate()
        p.wait(10)
        if shutil.which("nginx"):
            nport = free_port()
            nconf = os.path.join(tmp, "nginx.conf")
            with open(nconf, "w") as f:
                f.write(f"""worker_processes 1; daemon off; pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  client_body_temp_path {tmp}/cb; proxy_temp_path {tmp}/pt; fastcgi_temp_path {tmp}/ft;
  uwsgi_temp_path {tmp}/ut; scgi_temp_path {tmp}/st;
  proxy_cache_path {tmp}/cache keys_zone=edge:1m use_temp_path=off;
  server {{
    listen 127.0.0.1:{nport};
    location / {{
      proxy_pass http://127.0.0.1:{oport};
      proxy_http_version 1.1; proxy_set_header Connection "";
      proxy_cache edge; proxy_cache_lock on;
      proxy_cache_use_stale error timeout updating http_500;
      proxy_cache_background_update on;
      add_header X-Cache-Status $upstream_cache_status;
    }}
  }}
}}
""")
            n = subprocess.Popen(["taskset", "-c", "0", "nginx", "-p", tmp, "-e",
                                  f"{tmp}/error.log", "-c", nconf])
            procs.append(n)
            if not wait_port(nport):
                print("nginx: NOT RUN (did not listen)")
            else:
                measure("nginx", nport)
            n.terminate()
            n.wait(10)
        else:
            print("nginx: NOT RUN (not installed)")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        origin.shutdown()
        if os.environ.get("KEEP"):
            print("kept", tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
