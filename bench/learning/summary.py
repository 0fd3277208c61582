#!/usr/bin/env python3
"""summary.py DIR...: one Markdown row per run of run.sh (NAME.json or NAME.json.xz, NAME.time):
the checkpoint validation picked, its validation Sharpe and its test-range
metrics beside buy-and-hold."""
import os, sys

from runs import LOAD_ERRORS, load

print("| run | best / ran | valid Sharpe | test Sharpe | test return | max DD | trades | turnover | exposure | B&H Sharpe | B&H DD | wall s |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for d in sys.argv[1:]:
    for f in sorted(os.listdir(d)):
        if not f.endswith((".json", ".json.xz")):
            continue
        name = f.removesuffix(".xz")[:-5]
        try:
            r = load(os.path.join(d, f))
        except LOAD_ERRORS:
            print(f"| {name} | (no report: run stopped or failed) |" + " |" * 10)
            continue
        t, v, b = r["test"], r["validation"], r["test"]["buy_and_hold"]
        wall = open(os.path.join(d, name + ".time")).read().strip() if os.path.exists(os.path.join(d, name + ".time")) else "-"
        print(f"| {name} | {r['best_epoch']} / {r['epochs']} | {v['sharpe']:.2f} | {t['sharpe']:.2f} | {100*t['total_return']:.2f}% | "
              f"{100*t['max_drawdown']:.2f}% | {t['trades']} | {t['turnover']:.0f} | {100*t['exposure']:.0f}% | {b['sharpe']:.2f} | {100*b['max_drawdown']:.2f}% | {wall} |")
