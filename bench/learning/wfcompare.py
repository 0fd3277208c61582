#!/usr/bin/env python3
"""wfcompare.py DIR...: one Markdown row per walk-forward batch and series
(run.sh output with DQNFLOW_CMD=walkforward, NAME = X-sSEED-SERIES): the
windows' chosen checkpoints on their test ranges (mean ± sd of Sharpe, how
many above zero, correlation of validation with test Sharpe), the runs'
test ranges joined with every window trading (gate none: mean joined Sharpe
and how many runs above zero), the highest t the procedure's own record
reached (gate record; windows 2 on, the first has none), and how many windows each gate traded."""
import os, statistics, sys

from runs import by_series

print("| batch | series | runs | checkpoints' test Sharpe, mean ± sd | > 0 | corr(valid, test) | `none` joined Sharpe, mean (runs > 0) | highest record t | windows traded: window / pooled / record |")
print("|---|---|---:|---|---:|---:|---|---:|---|")
for d in sys.argv[1:]:
    for series, seeds in sorted(by_series(d).items()):
        runs = [r for _, r in seeds]
        ws = [w for r in runs for w in r["windows"]]
        test = [w["checkpoint_test"]["sharpe"] for w in ws]
        valid = [w["validation_sharpe"] for w in ws]
        joined = {}
        for r in runs:
            for g in r["gates"]:
                joined.setdefault(g["gate"], []).append(g)
        none = [g["pooled"]["sharpe"] for g in joined["none"]]
        traded = " / ".join(str(sum(sum(g["traded"]) for g in joined.get(k, []))) for k in ("window", "pooled", "record"))
        corr = statistics.correlation(valid, test) if len(ws) > 2 else float("nan")
        print(f"| {os.path.basename(os.path.normpath(d))} | {series} | {len(runs)} | {statistics.mean(test):.2f} ± {statistics.stdev(test):.2f} | "
              f"{sum(x > 0 for x in test)} of {len(test)} | {corr:.2f} | {statistics.mean(none):.2f} ({sum(x > 0 for x in none)} of {len(none)}) | "
              f"{max(w['record_sharpe_t'] for w in ws if w['window'] > 1):.2f} | {traded} of {len(ws)} |")
