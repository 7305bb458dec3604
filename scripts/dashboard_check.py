#!/usr/bin/env python3
"""Checks a Grafana dashboard against what linerate's /metrics exports.

    scripts/dashboard_check.py DASHBOARD.json METRICS.txt
    scripts/dashboard_check.py --selftest

DASHBOARD.json must load as a Grafana dashboard (the JSON model: a title, a schemaVersion,
panels each with an id, a type, a title and a gridPos inside the 24-column grid, rows'
panels included; every panel but a row or a text panel with at least one target, each with a
refId and a PromQL `expr`, on the `${DS_PROMETHEUS}` data source, which the templating
declares as a Prometheus data source variable). Every metric name an `expr` uses (PromQL
identifiers that are not functions, aggregations, keywords, label names or Grafana
variables) must be the name of a sample in METRICS.txt, a Prometheus text exposition: a
counter as exported (`_total`), a histogram's `_bucket`, `_sum` or `_count`. Each failure
is named (panel, query, series); exit 0 when none, 1 otherwise. The series exported that no
query uses are listed for information only.

Python's standard library only. --selftest runs the tokenizer's table of PromQL cases.
"""

import json
import re
import sys

# PromQL's words that are not series: keywords and binary operators (functions and
# aggregations are told by the "(" after them).
KEYWORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "bool",
    "and", "or", "unless", "offset", "inf", "nan", "atan2", "start", "end",
}
# Clauses whose parentheses hold label names, not expressions.
LABEL_LISTS = re.compile(
    r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)", re.IGNORECASE
)
STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
MATCHERS = re.compile(r"\{[^{}]*\}")
RANGES = re.compile(r"\[[^\[\]]*\]")
VARIABLES = re.compile(r"\$\{[^}]*\}|\$\w+")
DURATIONS = re.compile(r"\b\d+(?:\.\d+)?(?:ms|s|m|h|d|w|y)\b")
NUMBERS = re.compile(r"\b\d+(?:\.\d+)?(?:e[+-]?\d+)?\b", re.IGNORECASE)
IDENT = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")


def series_names(expr):
    """The metric names a PromQL expression selects, in order of first use."""
    e = STRINGS.sub(" ", expr)  # label values, label_replace's names, regexes
    e = VARIABLES.sub(" ", e)  # $__rate_interval, ${instance}
    e = MATCHERS.sub(" ", e)  # {label="value", ...}
    e = RANGES.sub(" ", e)  # [5m], [1h:5m]
    e = LABEL_LISTS.sub(" ", e)  # by (le), on (instance) group_left (version)
    e = DURATIONS.sub(" ", e)  # offset 1h
    e = NUMBERS.sub(" ", e)
    names = []
    for m in IDENT.finditer(e):
        word = m.group(0)
        rest = e[m.end():].lstrip()
        if rest.startswith("("):  # a function or an aggregation
            continue
        if word.lower() in KEYWORDS:
            continue
        if word not in names:
            names.append(word)
    return names


def exported(text):
    """The sample names of a Prometheus text exposition."""
    names = set()
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = re.match(r"[A-Za-z_:][A-Za-z0-9_:]*", line)
        if m:
            names.add(m.group(0))
    return names


def panels(dashboard):
    """Every panel, rows' panels included, with its path for messages."""
    for p in dashboard.get("panels", []):
        yield p
        for inner in p.get("panels", []) or []:
            yield inner


def check_model(d):
    """The ways `d` fails to be a Grafana dashboard with Prometheus queries."""
    errors = []
    if not isinstance(d, dict):
        return ["not a JSON object"]
    for key, kind in [("title", str), ("schemaVersion", int), ("panels", list)]:
        if not isinstance(d.get(key), kind):
            errors.append(f"no {key} ({kind.__name__})")
    if isinstance(d.get("schemaVersion"), int) and d["schemaVersion"] < 36:
        errors.append(f"schemaVersion {d['schemaVersion']}: older than Grafana 9's 36")
    variables = {v.get("name"): v for v in d.get("templating", {}).get("list", [])}
    ds = variables.get("DS_PROMETHEUS")
    if not ds or ds.get("type") != "datasource" or ds.get("query") != "prometheus":
        errors.append("templating has no DS_PROMETHEUS data source variable of Prometheus")
    ids = set()
    for p in panels(d):
        title = p.get("title")
        where = f"panel {p.get('id')} {title!r}"
        for key, kind in [("id", int), ("type", str), ("title", str), ("gridPos", dict)]:
            if not isinstance(p.get(key), kind):
                errors.append(f"{where}: no {key}")
        if p.get("id") in ids:
            errors.append(f"{where}: id used twice")
        ids.add(p.get("id"))
        g = p.get("gridPos") or {}
        if not all(isinstance(g.get(k), int) for k in "xywh") or g.get("x", 0) + g.get("w", 0) > 24:
            errors.append(f"{where}: gridPos {g} is not inside the 24-column grid")
        if p.get("type") in ("row", "text"):
            continue
        if (p.get("datasource") or {}).get("uid") != "${DS_PROMETHEUS}":
            errors.append(f"{where}: its data source is not ${{DS_PROMETHEUS}}")
        targets = p.get("targets")
        if not isinstance(targets, list) or not targets:
            errors.append(f"{where}: no targets")
            continue
        for t in targets:
            if not isinstance(t.get("expr"), str) or not t["expr"].strip():
                errors.append(f"{where}: target {t.get('refId')}: no expr")
            if not isinstance(t.get("refId"), str):
                errors.append(f"{where}: a target without a refId")
    return errors


def check(dashboard_path, metrics_path):
    with open(dashboard_path, encoding="utf-8") as f:
        try:
            d = json.load(f)
        except json.JSONDecodeError as e:
            print(f"DASHBOARD FAIL {dashboard_path}: not JSON: {e}")
            return 1
    with open(metrics_path, encoding="utf-8") as f:
        have = exported(f.read())
    errors = check_model(d)
    used = set()
    queries = 0
    for p in panels(d):
        for t in p.get("targets") or []:
            expr = t.get("expr")
            if not isinstance(expr, str):
                continue
            queries += 1
            names = series_names(expr)
            if not names:
                errors.append(f"panel {p.get('id')} {p.get('title')!r} query {t.get('refId')}: names no series: {expr}")
            for name in names:
                used.add(name)
                if name not in have:
                    errors.append(
                        f"panel {p.get('id')} {p.get('title')!r} query {t.get('refId')}: "
                        f"{name} is not exported"
                    )
    for e in errors:
        print(f"DASHBOARD FAIL {dashboard_path}: {e}")
    unused = sorted(n for n in have - used)
    print(f"dashboard: {queries} queries name {len(used)} series; "
          f"{len(unused)} exported series on no panel: {' '.join(unused)}")
    if errors:
        return 1
    print(f"DASHBOARD PASS {dashboard_path}: loads, every series it names is exported ({len(used)})")
    return 0


# The tokenizer's table: an expression and the series it names.
CASES = [
    ('rate(linerate_requests_total[5m])', ["linerate_requests_total"]),
    ('sum by (class) (rate(linerate_requests_total{instance=~"$instance"}[$__rate_interval]))',
     ["linerate_requests_total"]),
    ('histogram_quantile(0.99, sum by (le) (rate(linerate_request_duration_seconds_bucket[5m])))',
     ["linerate_request_duration_seconds_bucket"]),
    ('sum(rate(a_sum[5m])) / sum(rate(a_count[5m]))', ["a_sum", "a_count"]),
    ('time() - process_start_time_seconds{job="x"}', ["process_start_time_seconds"]),
    ('min by (name, source) (linerate_certificate_expiry_timestamp_seconds) - time()',
     ["linerate_certificate_expiry_timestamp_seconds"]),
    ('process_open_fds / on (instance) process_max_fds', ["process_open_fds", "process_max_fds"]),
    ('x * on (instance) group_left (version) linerate_build_info', ["x", "linerate_build_info"]),
    ('label_replace(up, "dst", "$1", "src", "(.*)")', ["up"]),
    ('a > bool 1 and b unless c or d offset 1h', ["a", "b", "c", "d"]),
    ('sum without (op) (increase(linerate_storage_errors_total[1h]))',
     ["linerate_storage_errors_total"]),
    ('max_over_time(linerate_restart_pending[5m:1m])', ["linerate_restart_pending"]),
    ('{__name__="hidden"}', []),
    ('1e3 * rate(x[${__range}])', ["x"]),
    ('topk(5, sum by (cache) (rate(linerate_cache_requests_total{outcome=~"hit|stale"}[5m])))',
     ["linerate_cache_requests_total"]),
]


def selftest():
    bad = 0
    for expr, want in CASES:
        got = series_names(expr)
        if got != want:
            print(f"SELFTEST FAIL {expr!r}: {got}, expected {want}")
            bad += 1
    sample = '# HELP a x\n# TYPE a counter\na_total{x="1"} 2\nb 3\n\nc_bucket{le="+Inf"} 1\n'
    if exported(sample) != {"a_total", "b", "c_bucket"}:
        print(f"SELFTEST FAIL exported(): {exported(sample)}")
        bad += 1
    if not check_model({}) or check_model({"title": "t", "schemaVersion": 39, "panels": [],
                                           "templating": {"list": [{"name": "DS_PROMETHEUS",
                                                                    "type": "datasource",
                                                                    "query": "prometheus"}]}}):
        print("SELFTEST FAIL check_model: an empty object passes, or a minimal dashboard fails")
        bad += 1
    print(f"dashboard_check selftest: {len(CASES) + 2 - bad}/{len(CASES) + 2} PASS")
    return 1 if bad else 0


def main(argv):
    if argv[1:] == ["--selftest"]:
        return selftest()
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    return check(argv[1], argv[2])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
