#!/usr/bin/env python3
"""Prints the per-launch profile of `dqnflow bench --profile --json` logs on
one line each: ms per step, then each launch's name and microseconds, with
consecutive launches of one name grouped; a second line per log gives the
launches in situ (`kernels_in_situ`: each launch's share where it runs in
the step).

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
        name = path.rsplit('/', 1)[-1]
        for key, label in (("kernels", ""), ("kernels_in_situ", " in situ")):
            ks = r.get(key, [])
            if not ks:
                continue
            groups = []
            for k in ks:
                if groups and groups[-1][0] == k["name"]:
                    groups[-1][1].append(k["us"])
                else:
                    groups.append((k["name"], [k["us"]]))
            parts = [f"{n} " + "+".join(f"{u:.1f}" for u in us) for n, us in groups]
            total = sum(k["us"] for k in ks)
            print(f"{name}{label}: {r.get('ms_per_step', 0):.4f} ms/step, launches sum to {total:.1f} us | " + " | ".join(parts))


if __name__ == "__main__":
    main(sys.argv[1:])
