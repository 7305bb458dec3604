#!/usr/bin/env python3
"""A stand-in OTLP/HTTP collector for benchmarks: answers every POST 200 with an empty
body on a kept-alive connection and counts what it took (bench/tracing_instructions.sh,
bench/tracing_cpu.sh). Not a collector: the CI stage (scripts/otel.sh) checks spans with the
OpenTelemetry Collector itself; this only lets the exporter's cost be measured without the
collector's own CPU beside it.

    python3 bench/otlp_sink.py PORT_FILE     (writes the port it listens on into PORT_FILE, and
                                             "POSTS BYTES" into PORT_FILE.counts after each)
"""
import http.server
import socketserver
import sys


class Sink(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    posts = 0
    body_bytes = 0
    counts_file = "/dev/null"

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        self.rfile.read(n)
        Sink.posts += 1
        Sink.body_bytes += n
        with open(Sink.counts_file, "w") as f:
            f.write(f"{Sink.posts} {Sink.body_bytes}\n")
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


def main():
    Sink.counts_file = sys.argv[1] + ".counts"
    srv = Server(("127.0.0.1", 0), Sink)
    with open(sys.argv[1], "w") as f:
        f.write(str(srv.server_address[1]))
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        print(f"otlp_sink: {Sink.posts} posts, {Sink.body_bytes} bytes", file=sys.stderr)


if __name__ == "__main__":
    main()
