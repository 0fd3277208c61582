#!/usr/bin/env python3
"""Prints the per-launch profile of `dqnflow bench --profile --json` logs on
one line each: ms per step, then each launch's name and microseconds, with
consecutive launches of one name grouped.

    python3 tools/device/kernels.py LOG...
"""
import json
import sys


def parse(path):
    text = open(path).read()
    start = text.find("{")
    if start < 0:
        return None
    try:
        return json.JSONDecoder().raw_decode(text[start:])[0]
    except ValueError:
        return None


def main(paths):
    for path in paths:
        r = parse(path)
        if r is None:
            print(f"{path}: no JSON report")
            continue
        groups = []
        for k in r.get("kernels", []):
            if groups and groups[-1][0] == k["name"]:
                groups[-1][1].append(k["us"])
            else:
                groups.append((k["name"], [k["us"]]))
        parts = [f"{n} " + "+".join(f"{u:.1f}" for u in us) for n, us in groups]
        print(f"{path.rsplit('/', 1)[-1]}: {r.get('ms_per_step', 0):.4f} ms/step | " + " | ".join(parts))


if __name__ == "__main__":
    main(sys.argv[1:])
