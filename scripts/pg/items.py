#!/usr/bin/env python3
"""Writes HttpArena's `items` rows in PostgreSQL COPY text format to stdout.

usage: items.py DATASET.json [ROWS]   (default 100000 rows)

Each row takes its shape from the demo's dataset (names, categories and tags of its items)
and its numbers from a seeded generator, so every run writes the same rows: id 1..ROWS,
name "<a dataset name> <id>", a dataset category, price 1..500, quantity 1..1000, active,
1 to 4 distinct dataset tags as a JSON array, rating score 1..50 and count 1..500.
"""
import json
import random
import sys


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__.strip().splitlines()[2])
    with open(sys.argv[1]) as f:
        dataset = json.load(f)
    rows = int(sys.argv[2]) if len(sys.argv) > 2 else 100_000
    names = sorted({d["name"] for d in dataset})
    categories = sorted({d["category"] for d in dataset})
    tags = sorted({t for d in dataset for t in d["tags"]})
    rng = random.Random(20261123)
    out = sys.stdout
    for i in range(1, rows + 1):
        picked = rng.sample(tags, min(rng.randint(1, 4), len(tags)))
        fields = [
            str(i),
            f"{rng.choice(names)} {i}",
            rng.choice(categories),
            str(rng.randint(1, 500)),
            str(rng.randint(1, 1000)),
            "t" if rng.random() < 0.5 else "f",
            json.dumps(picked),
            str(rng.randint(1, 50)),
            str(rng.randint(1, 500)),
        ]
        # COPY text format: backslash and tab are the only bytes our data could carry.
        out.write("\t".join(f.replace("\\", "\\\\").replace("\t", "\\t") for f in fields))
        out.write("\n")


if __name__ == "__main__":
    main()
