#!/usr/bin/env python3
"""Checks an http11probe.py JSON report against the expected misses and the score floor.

usage: check.py REPORT.json EXPECTED_MISSES.txt FLOOR

Prints the score and every scored miss; exits 1 when a scored test outside the expected list
failed, when an expected miss now passes (the list must stay true), or when the score
(Pass + Warn over scored tests that ran, the suite's own definition) is below FLOOR.
"""
import json
import sys


def main():
    report, misses_file, floor = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with open(report) as fh:
        results = json.load(fh)['results']
    with open(misses_file) as fh:
        expected = {line.strip() for line in fh if line.strip() and not line.startswith('#')}
    scored = [r for r in results if r['scored'] and r['verdict'] in ('Pass', 'Warn', 'Fail', 'Error')]
    passed = [r for r in scored if r['verdict'] in ('Pass', 'Warn')]
    missed = {r['id']: r for r in scored if r['verdict'] in ('Fail', 'Error')}
    print('http11probe: %d/%d scored passed' % (len(passed), len(scored)))
    ok = True
    for rid, r in sorted(missed.items()):
        tag = 'expected' if rid in expected else 'UNEXPECTED'
        print('  %s miss %s: got %s %s, expected %s' % (tag, rid, r['statusCode'], r['connectionState'], r['expected']))
        ok &= rid in expected
    for rid in sorted(expected - set(missed)):
        print('  expected miss %s now passes (or did not run): update %s' % (rid, misses_file))
        ok = False
    if len(passed) < floor:
        print('  score %d is below the floor %d' % (len(passed), floor))
        ok = False
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
