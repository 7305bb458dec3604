#!/usr/bin/env python3
"""Markdown tables comparing Http11Probe JSON reports (http11probe.py --json) of several servers.

usage: compare.py NAME=REPORT.json [NAME=REPORT.json ...]

Prints the score per category (Pass + Warn over the scored tests, as the suite scores) and,
for every scored test some server fails, each server's verdict and status.
"""
import json
import sys


def load(arg):
    name, _, path = arg.partition("=")
    if not path:
        sys.exit(f"compare.py: expected NAME=REPORT.json, got {arg!r}")
    with open(path) as f:
        return name, {r["id"]: r for r in json.load(f)["results"]}


def ok(r):
    return r["verdict"] in ("Pass", "Warn")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__.strip().splitlines()[2])
    servers = [load(a) for a in sys.argv[1:]]
    names = [n for n, _ in servers]
    first = servers[0][1]
    categories = sorted({r["category"] for r in first.values()})

    print("| category | scored | " + " | ".join(names) + " |")
    print("|---|---:|" + "---:|" * len(names))
    totals = [0] * len(names)
    scored_total = 0
    for cat in categories:
        ids = [i for i, r in first.items() if r["category"] == cat and r["scored"]]
        if not ids:
            continue
        scored_total += len(ids)
        cells = []
        for k, (_, res) in enumerate(servers):
            n = sum(ok(res[i]) for i in ids)
            totals[k] += n
            cells.append(str(n))
        print(f"| {cat} | {len(ids)} | " + " | ".join(cells) + " |")
    print(f"| **all** | **{scored_total}** | " + " | ".join(f"**{t}**" for t in totals) + " |")
    print()

    print("| test | expected | " + " | ".join(names) + " |")
    print("|---|---|" + "---|" * len(names))
    for i, r in first.items():
        if not r["scored"]:
            continue
        verdicts = [ok(res[i]) for _, res in servers]
        if all(verdicts):
            continue
        cells = []
        for _, res in servers:
            x = res[i]
            mark = "✓" if ok(x) else "✗"
            status = x["statusCode"] if x["statusCode"] is not None else x["connectionState"]
            cells.append(f"{mark} {status}")
        expected = r["expected"].replace("|", "/")
        print(f"| {i} | {expected} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
