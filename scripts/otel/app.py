#!/usr/bin/env python3
"""The application behind linerate in scripts/otel.sh: a small HTTP/1.1 server instrumented with
the OpenTelemetry Python SDK (PyPI), so a trace can be followed through linerate into it.

    app.py PORT COLLECTOR_URL      e.g. app.py 9000 http://127.0.0.1:4318

For each request it extracts the W3C context (traceparent, tracestate) from the request's
fields, starts a SERVER span "app {METHOD} {path}" under it, and answers 200 with a small JSON
body echoing what it received (traceparent, tracestate, X-Request-Id) and its own span's ids
(with Cache-Control: max-age=60 under /cached/, for the stage's cached mount).
Spans go to COLLECTOR_URL/v1/traces (OTLP/HTTP, protobuf) from a batch processor with a short
delay, so a collector that is down slows no answer. service.name is "otel-app"; the SDK's
default sampler (parentbased_always_on) keeps a sampled-out parent sampled out.
"""
import json
import signal
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry import propagate, trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

SERVICE_NAME = "otel-app"
# Milliseconds between the batch processor's exports: short, so the stage waits little.
EXPORT_DELAY_MS = 100
# Seconds one export may take (the SDK's default, 10, would hold the exit when the collector
# is gone).
EXPORT_TIMEOUT_S = 2


def make_tracer(collector):
    # Resource(...) rather than Resource.create(...): the stage's OTEL_* variables are
    # linerate's, and must not rename this service.
    provider = TracerProvider(resource=Resource({"service.name": SERVICE_NAME}))
    exporter = OTLPSpanExporter(endpoint=collector.rstrip("/") + "/v1/traces", timeout=EXPORT_TIMEOUT_S)
    provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=EXPORT_DELAY_MS))
    return provider, provider.get_tracer("linerate-ci-app")


class Handler(BaseHTTPRequestHandler):
    # Keep-alive, as an application behind a pooling proxy is; the head and the body go in
    # two writes, which Nagle's algorithm would hold 40 ms for the peer's delayed ACK.
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    tracer = None

    def handle_any(self):
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        path = self.path.split("?", 1)[0]
        ctx = propagate.extract(self.headers)
        with self.tracer.start_as_current_span(
            f"app {self.command} {path}", context=ctx, kind=trace.SpanKind.SERVER
        ) as span:
            own = span.get_span_context()
            body = json.dumps(
                {
                    "path": self.path,
                    "traceparent": self.headers.get("traceparent"),
                    "tracestate": self.headers.get("tracestate"),
                    "x_request_id": self.headers.get("X-Request-Id"),
                    "trace_id": f"{own.trace_id:032x}",
                    "span_id": f"{own.span_id:016x}",
                    "sampled": own.trace_flags.sampled,
                }
            ).encode() + b"\n"
            span.set_attribute("http.request.method", self.command)
            span.set_attribute("url.path", path)
            span.set_attribute("http.response.status_code", 200)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            if path.startswith("/cached/"):
                # For the stage's cached mount: the second request is a hit.
                self.send_header("Cache-Control", "max-age=60")
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = handle_any

    def log_message(self, format, *args):
        pass


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: app.py PORT COLLECTOR_URL")
    port, collector = int(sys.argv[1]), sys.argv[2]
    provider, Handler.tracer = make_tracer(collector)
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True

    def stop(_sig, _frame):
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    print(f"app listening on 127.0.0.1:{port}", flush=True)
    try:
        server.serve_forever()
    finally:
        provider.shutdown()


if __name__ == "__main__":
    main()
