#!/usr/bin/env python3
"""walkforward.py DIR: the walk-forward study of run.sh's output with
DQNFLOW_CMD=walkforward (NAME = X-sSEED-SERIES, X the batch letter).

One Markdown row per window: the chosen checkpoint's Sharpe and t on its own
validation range and on the validation ranges of every window so far joined
(the pooled gate's evidence) and the earlier windows' test ranges joined
(the record gate's), whether the window traded under the run's --gate, its
checkpoint's test Sharpe (traded or not) and buy-and-hold's. Then one row per
run and gate: how many windows the gate traded and the test ranges as it
traded them, joined, beside buy-and-hold."""
import sys

from runs import by_series

runs = [(series, seed, r) for series, rs in sorted(by_series(sys.argv[1]).items()) for seed, r in rs]

print("| series | seed | window | best epoch | valid Sharpe (t) | pooled valid Sharpe (t) | record Sharpe (t) | traded | checkpoint's test Sharpe | its max DD | trades | B&H Sharpe | B&H DD |")
print("|---|---:|---:|---:|---|---|---|---|---:|---:|---:|---:|---:|")
for series, seed, r in runs:
    for w in r["windows"]:
        c, b = w["checkpoint_test"], w["checkpoint_test"]["buy_and_hold"]
        print(f"| {series} | {seed} | {w['window']} | {w['best_epoch']} | {w['validation_sharpe']:.2f} ({w['validation_sharpe_t']:.2f}) | "
              f"{w['pooled_validation_sharpe']:.2f} ({w['pooled_validation_sharpe_t']:.2f}) | {w['record_sharpe']:.2f} ({w['record_sharpe_t']:.2f}) | "
              f"{'yes' if w['traded'] else 'no'} | "
              f"{c['sharpe']:.2f} | {100*c['max_drawdown']:.2f}% | {c['trades']} | {b['sharpe']:.2f} | {100*b['max_drawdown']:.2f}% |")
print()
print("| series | seed | gate | windows traded | joined test Sharpe | return | max DD | trades | B&H Sharpe | B&H return | B&H DD |")
print("|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|")
for series, seed, r in runs:
    for g in r["gates"]:
        p, b = g["pooled"], g["pooled"]["buy_and_hold"]
        print(f"| {series} | {seed} | {g['gate']} | {sum(g['traded'])} of {len(g['traded'])} | {p['sharpe']:.2f} | {100*p['total_return']:.2f}% | "
              f"{100*p['max_drawdown']:.2f}% | {p['trades']} | {b['sharpe']:.2f} | {100*b['total_return']:.2f}% | {100*b['max_drawdown']:.2f}% |")
