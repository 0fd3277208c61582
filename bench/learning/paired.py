#!/usr/bin/env python3
"""paired.py A B [A2 B2 ...]: walk-forward batches compared in pairs (run.sh
output with DQNFLOW_CMD=walkforward, NAME = X-sSEED-SERIES). Batch A's
seeds and batch B's are matched by series, seed and window, so each pair
shares its test range; pairs of directories pool (A2 against B2 adds their
windows). Per series: the checkpoints' test Sharpe of B minus A, mean ±
standard error over the windows and its t, how many windows B beat A, and
the same for the runs' joined Sharpe with every window trading (gate none)."""
import math, statistics, sys

from runs import by_series


def pairs(a, b):
    out = {}
    for series, seeds in by_series(b).items():
        other = dict(by_series(a).get(series, []))
        for seed, r in seeds:
            if seed not in other:
                continue
            o = other[seed]
            win = [(wb["checkpoint_test"]["sharpe"], wa["checkpoint_test"]["sharpe"]) for wa, wb in zip(o["windows"], r["windows"])]
            none = lambda x: next(g for g in x["gates"] if g["gate"] == "none")["pooled"]["sharpe"]
            d = out.setdefault(series, {"windows": [], "runs": []})
            d["windows"] += win
            d["runs"].append((none(r), none(o)))
    return out


def line(xs):
    d = [b - a for b, a in xs]
    se = statistics.stdev(d) / math.sqrt(len(d)) if len(d) > 1 else float("nan")
    return f"{statistics.mean(d):+.2f} ± {se:.2f} (t {statistics.mean(d) / se:+.2f}) | {sum(x > 0 for x in d)} of {len(d)}"


args = sys.argv[1:]
total = {}
for a, b in zip(args[::2], args[1::2]):
    for series, d in pairs(a, b).items():
        t = total.setdefault(series, {"windows": [], "runs": []})
        t["windows"] += d["windows"]
        t["runs"] += d["runs"]
print("| series | windows: checkpoint test Sharpe, B − A (t) | B ahead | runs: `none` joined Sharpe, B − A (t) | B ahead |")
print("|---|---|---:|---|---:|")
for series, d in sorted(total.items()):
    print(f"| {series} | {line(d['windows'])} | {line(d['runs'])} |")
