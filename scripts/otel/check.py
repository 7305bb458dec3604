#!/usr/bin/env python3
"""The checks of scripts/otel.sh: reads the spans the OpenTelemetry Collector's file exporter
wrote (OTLP JSON, one export request a line) and asserts, for each request the stage sent,
what linerate and the application should have exported. Standard library only.

    check.py SPANS CASES --app-port PORT --user-agent UA [--service linerate-ci] [--wait S]

CASES has one request a line, as key=value words (no spaces in a value):
    case=a kind=proxied trace=HEX32|- parent=HEX16|- flags=01|00|- tracestate=...
    proto=1.1|2 path=/app/a route=/app/[|ALTERNATIVE] status=200 size=BYTES body=FILE
kind is proxied (linerate, its upstream exchange, the application), local (linerate alone),
cached-miss (as proxied, through a cached mount) or cached-hit (linerate alone, from its
cache). flags=00 is a sampled-out request: nothing of linerate's may be exported for it.

With --wait S it re-reads SPANS until every span expected is there (S seconds at most), then
GRACE more seconds so that a span that must not be there has had its chance to arrive. Prints
one line per check; exit 1 when any fails.
"""
import argparse
import json
import re
import sys
import time

SERVER, CLIENT = 2, 3  # OTLP SpanKind
HEX32 = re.compile(r"^[0-9a-f]{32}$")
HEX16 = re.compile(r"^[0-9a-f]{16}$")
# Seconds to wait, once every expected span is there, for one that must not be (a later batch
# of another worker).
GRACE = 1.5
APP_SERVICE = "otel-app"
# The server span's attributes every case must carry (OpenTelemetry's HTTP semantic
# conventions, and linerate's own).
SERVER_ATTRIBUTES = (
    "http.request.method",
    "url.path",
    "url.scheme",
    "http.response.status_code",
    "server.address",
    "client.address",
    "network.protocol.version",
    "user_agent.original",
    "http.route",
    "http.response.body.size",
    "linerate.request_id",
)


def value(v):
    """An OTLP JSON AnyValue as Python (int64 comes as a string in OTLP JSON)."""
    if "stringValue" in v:
        return v["stringValue"]
    if "intValue" in v:
        return int(v["intValue"])
    if "boolValue" in v:
        return v["boolValue"]
    if "doubleValue" in v:
        return float(v["doubleValue"])
    if "arrayValue" in v:
        return [value(x) for x in v["arrayValue"].get("values", [])]
    if "kvlistValue" in v:
        return {kv["key"]: value(kv.get("value", {})) for kv in v["kvlistValue"].get("values", [])}
    if "bytesValue" in v:
        return v["bytesValue"]
    return None


def attributes(items):
    return {kv["key"]: value(kv.get("value", {})) for kv in items or []}


class Span:
    def __init__(self, raw, resource, scope):
        self.raw = raw
        self.resource = resource
        self.scope = scope
        self.service = resource.get("service.name")
        self.trace_id = raw.get("traceId", "")
        self.span_id = raw.get("spanId", "")
        self.parent = raw.get("parentSpanId", "")
        self.trace_state = raw.get("traceState", "")
        self.name = raw.get("name", "")
        self.kind = raw.get("kind", 0)
        self.start = int(raw.get("startTimeUnixNano", 0))
        self.end = int(raw.get("endTimeUnixNano", 0))
        self.attrs = attributes(raw.get("attributes"))

    def __repr__(self):
        return (f"{self.service}:{self.name!r} kind={self.kind} trace={self.trace_id} "
                f"span={self.span_id} parent={self.parent or '-'}")


def read_spans(path):
    """Every span in the file; a line that does not parse is skipped (the exporter may be
    writing it), and counted."""
    spans, bad = [], 0
    try:
        lines = open(path, encoding="utf-8").read().splitlines()
    except FileNotFoundError:
        return [], 0
    for line in lines:
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
        except ValueError:
            bad += 1
            continue
        for rs in doc.get("resourceSpans", []):
            resource = attributes(rs.get("resource", {}).get("attributes"))
            for ss in rs.get("scopeSpans", []):
                scope = ss.get("scope", {}).get("name", "")
                for raw in ss.get("spans", []):
                    spans.append(Span(raw, resource, scope))
    return spans, bad


def read_cases(path):
    cases = []
    for line in open(path, encoding="utf-8"):
        words = line.split()
        if not words:
            continue
        case = dict(w.split("=", 1) for w in words)
        for k in ("trace", "parent", "flags"):
            if case.get(k) == "-":
                case[k] = None
        case["status"] = int(case["status"])
        case["size"] = int(case["size"])
        case["sent"] = case["trace"] is not None
        case["echo"] = None
        if case["kind"] in ("proxied", "cached-miss") or case.get("flags") == "00":
            try:
                case["echo"] = json.load(open(case["body"], encoding="utf-8"))
            except (OSError, ValueError):
                pass
        if case["trace"] is None and case["echo"] and case["echo"].get("traceparent"):
            # linerate began the trace: the application saw its id.
            parts = case["echo"]["traceparent"].split("-")
            if len(parts) == 4:
                case["trace"] = parts[1]
        cases.append(case)
    return cases


def upstream(case):
    """Whether the request should have gone to the application."""
    return case["kind"] in ("proxied", "cached-miss")


def sampled(case):
    return case.get("flags") != "00"


class Trace:
    """A case's spans: linerate's server and client spans and the application's."""

    def __init__(self, spans, trace_id):
        mine = [s for s in spans if s.trace_id == trace_id]
        self.linerate = [s for s in mine if s.service != APP_SERVICE]
        self.servers = [s for s in self.linerate if s.kind == SERVER]
        self.clients = [s for s in self.linerate if s.kind == CLIENT]
        self.app = [s for s in mine if s.service == APP_SERVICE]


def complete(spans, cases):
    """Whether every span a case expects is in SPANS."""
    for case in cases:
        if not sampled(case):
            continue
        if not case["trace"]:
            return False
        t = Trace(spans, case["trace"])
        if not t.servers:
            return False
        if upstream(case) and (not t.clients or not t.app):
            return False
    return True


class Checker:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def check(self, label, ok, detail):
        if ok:
            self.passed += 1
            print(f"  ok    {label}: {detail}")
        else:
            self.failed += 1
            print(f"  FAIL  {label}: {detail}")
        return ok


def expected_attributes(case, args):
    """The server span's attributes and the values they must have (a set: any of them)."""
    want = {
        "http.request.method": {"GET"},
        "url.path": {case["path"]},
        "url.scheme": {"http"},
        "http.response.status_code": {case["status"]},
        "server.address": {"127.0.0.1"},
        "client.address": {"127.0.0.1"},
        "network.protocol.version": {case["proto"]},
        "user_agent.original": {args.user_agent},
        # The mount's prefix as written, or without its trailing slash; | separates
        # alternatives.
        "http.route": {r for alt in case["route"].split("|") for r in (alt, alt.rstrip("/") or "/")},
        "http.response.body.size": {case["size"]},
    }
    return want


def check_case(chk, case, spans, cases, args):
    label = f"({case_label(case)})"
    if not case["trace"]:
        chk.check(label, False, "no trace id: the application echoed no traceparent "
                  f"(body: {case['echo']!r})")
        return
    t = Trace(spans, case["trace"])
    if not sampled(case):
        check_sampled_out(chk, case, t, label)
        return

    # linerate's server span.
    if not chk.check(f"{label} server span", len(t.servers) == 1,
                     f"{len(t.servers)} linerate SERVER span(s) in trace {case['trace']}"
                     + (f": {t.servers}" if len(t.servers) > 1 else "")):
        if t.linerate:
            print(f"        linerate spans in that trace: {t.linerate}")
        return
    server = t.servers[0]
    chk.check(f"{label} service.name", server.service == args.service,
              f"resource service.name {server.service!r} (want {args.service!r})")
    if case["parent"]:
        chk.check(f"{label} parent", server.parent == case["parent"],
                  f"trace {server.trace_id}, parent {server.parent or '(none)'} (the client's: {case['parent']})")
    else:
        sent = {x["trace"] for x in cases if x["sent"]}
        ok = (server.parent == "" and HEX32.match(server.trace_id) and server.trace_id != "0" * 32
              and server.trace_id not in sent)
        chk.check(f"{label} new root", bool(ok),
                  f"trace {server.trace_id} (new, none sent), parent {server.parent or '(none: a root)'}")
    if case.get("tracestate"):
        chk.check(f"{label} tracestate", server.trace_state == case["tracestate"],
                  f"span traceState {server.trace_state!r} (sent {case['tracestate']!r})")

    want = expected_attributes(case, args)
    wrong = []
    for key in SERVER_ATTRIBUTES:
        if key not in server.attrs:
            wrong.append(f"{key} missing")
        elif key in want and server.attrs[key] not in want[key]:
            wrong.append(f"{key}={server.attrs[key]!r} (want {' or '.join(map(repr, sorted(want[key], key=str)))})")
    rid = server.attrs.get("linerate.request_id")
    if rid is not None and not (isinstance(rid, str) and HEX32.match(rid)):
        wrong.append(f"linerate.request_id={rid!r} (want 32 hex digits)")
    if case["kind"].startswith("cached"):
        if "linerate.cache_status" not in server.attrs:
            wrong.append("linerate.cache_status missing (a cached mount)")
    shown = ", ".join(f"{k}={server.attrs[k]!r}" for k in SERVER_ATTRIBUTES if k in server.attrs)
    chk.check(f"{label} attributes", not wrong,
              ("; ".join(wrong) + f" [had: {shown}]") if wrong else shown)
    route = server.attrs.get("http.route")
    chk.check(f"{label} span name", server.name == f"GET {route}",
              f"{server.name!r} (want 'GET {{http.route}}' = {'GET ' + str(route)!r})")

    if case["kind"].startswith("cached"):
        status = str(server.attrs.get("linerate.cache_status", ""))
        hit = "hit" in status.lower()
        chk.check(f"{label} cache status", hit == (case["kind"] == "cached-hit"),
                  f"linerate.cache_status={status!r} (want {'a hit' if case['kind'] == 'cached-hit' else 'no hit'})")

    if not upstream(case):
        chk.check(f"{label} no upstream", not t.clients and not t.app,
                  f"{len(t.clients)} CLIENT span(s), {len(t.app)} application span(s) (want none)")
        return

    # The upstream exchange.
    if not chk.check(f"{label} client span", len(t.clients) == 1 and t.clients[0].parent == server.span_id,
                     f"{len(t.clients)} CLIENT span(s) under server span {server.span_id}: {t.clients}"):
        return
    client = t.clients[0]
    cwant = {
        "server.address": "127.0.0.1",
        "server.port": args.app_port,
        "http.request.method": "GET",
        "http.response.status_code": 200,
    }
    cwrong = [f"{k}={client.attrs.get(k, '(missing)')!r} (want {v!r})"
              for k, v in cwant.items() if client.attrs.get(k) != v]
    if client.name != "GET":
        cwrong.append(f"name {client.name!r} (want 'GET')")
    chk.check(f"{label} client attributes", not cwrong,
              "; ".join(cwrong) if cwrong else
              f"name 'GET', " + ", ".join(f"{k}={client.attrs[k]!r}" for k in cwant))
    chk.check(f"{label} client within server", server.start <= client.start <= client.end <= server.end,
              f"server {server.start}..{server.end}, client {client.start}..{client.end} (ns)")

    # What reached the application.
    echo = case["echo"] or {}
    # The client's flags go on; a trace linerate began is sampled, and may say its id is
    # random (W3C Trace Context Level 2: 03).
    flags = [case["flags"]] if case["flags"] else ["01", "03"]
    want_tp = [f"00-{case['trace']}-{client.span_id}-{f}" for f in flags]
    chk.check(f"{label} traceparent upstream", echo.get("traceparent") in want_tp,
              f"the application got {echo.get('traceparent')!r} (want {' or '.join(map(repr, want_tp))}: "
              "the CLIENT span as parent)")
    if case.get("tracestate"):
        chk.check(f"{label} tracestate upstream", echo.get("tracestate") == case["tracestate"],
                  f"the application got {echo.get('tracestate')!r} (sent {case['tracestate']!r})")
    got_rid = echo.get("x_request_id")
    chk.check(f"{label} X-Request-Id", isinstance(got_rid, str) and bool(HEX32.match(got_rid)) and got_rid == rid,
              f"the application got {got_rid!r}, the server span says {rid!r} (want the same 32 hex digits)")
    ok = len(t.app) == 1 and t.app[0].parent == client.span_id and t.app[0].name == f"app GET {case['path']}"
    chk.check(f"{label} application span", ok,
              f"{len(t.app)} {APP_SERVICE} span(s) in the trace, want one 'app GET {case['path']}' under CLIENT span "
              f"{client.span_id}: {t.app}")


def check_sampled_out(chk, case, t, label):
    echo = case["echo"] or {}
    tp = echo.get("traceparent") or ""
    parts = tp.split("-")
    ok = len(parts) == 4 and parts[0] == "00" and parts[1] == case["trace"] and HEX16.match(parts[2]) and parts[3] == "00"
    chk.check(f"{label} traceparent upstream", bool(ok),
              f"the application got {tp!r} (want 00-{case['trace']}-<16 hex>-00: sampled out, still propagated)")
    chk.check(f"{label} nothing exported", not t.linerate,
              f"{len(t.linerate)} linerate span(s) in trace {case['trace']} (want none)"
              + (f": {t.linerate}" if t.linerate else ""))


def case_label(case):
    return f"{case['case']} {case['kind']} HTTP/{case['proto']} {case['path']}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("spans")
    ap.add_argument("cases")
    ap.add_argument("--app-port", type=int, required=True)
    ap.add_argument("--user-agent", required=True)
    ap.add_argument("--service", default="linerate-ci")
    ap.add_argument("--wait", type=float, default=0)
    args = ap.parse_args()

    cases = read_cases(args.cases)
    deadline = time.monotonic() + args.wait
    spans, bad = read_spans(args.spans)
    while not complete(spans, cases) and time.monotonic() < deadline:
        time.sleep(0.2)
        spans, bad = read_spans(args.spans)
    waited = args.wait - max(0.0, deadline - time.monotonic())
    if args.wait:
        time.sleep(GRACE)
        spans, bad = read_spans(args.spans)
    services = sorted({str(s.service) for s in spans})
    print(f"otel: {len(spans)} spans from {', '.join(services) or 'nobody'} "
          f"(after {waited:.1f} s{f'; {bad} unreadable line(s)' if bad else ''})")

    chk = Checker()
    for case in cases:
        check_case(chk, case, spans, cases, args)
    theirs = [s for s in spans if s.service != APP_SERVICE]
    wrong = [s for s in theirs if s.service != args.service]
    chk.check("(all) service.name", bool(theirs) and not wrong,
              f"{len(theirs)} linerate span(s), {len(wrong)} with another service.name"
              + (f": {sorted({str(s.service) for s in wrong})}" if wrong else ""))
    malformed = [s for s in spans if not (HEX32.match(s.trace_id) and HEX16.match(s.span_id)
                                          and (not s.parent or HEX16.match(s.parent)))]
    chk.check("(all) ids", not malformed, f"{len(malformed)} span(s) with a malformed id"
              + (f": {malformed[:3]}" if malformed else ""))
    if chk.failed:
        print(f"otel: {chk.failed} of {chk.passed + chk.failed} checks FAILED")
        sys.exit(1)
    print(f"otel: all {chk.passed} checks passed")


if __name__ == "__main__":
    main()
