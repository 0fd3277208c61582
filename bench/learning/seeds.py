#!/usr/bin/env python3
"""seeds.py DIR: the seed study of run.sh's output (NAME = X-sSEED-SERIES, X the batch letter).

One Markdown row per run: the chosen checkpoint's validation Sharpe and its
t-statistic, whether the run abstained (ADR 0016), the run's test Sharpe
(flat's when it abstained), the checkpoint's own test backtest, and
buy-and-hold on the same bars. Then, per series, what the seeds say: how
many runs abstained, how many checkpoints beat zero and buy-and-hold on the
test range, and their mean and standard deviation."""
import statistics, sys

from runs import by_series

rows = by_series(sys.argv[1])

print("| series | seed | best / ran | valid Sharpe (t) | abstained | run's test Sharpe | checkpoint's test Sharpe | its max DD | trades | B&H Sharpe | B&H DD |")
print("|---|---:|---|---|---|---:|---:|---:|---:|---:|---:|")
for series, runs in sorted(rows.items()):
    for seed, r in sorted(runs):
        t, c, v = r["test"], r.get("checkpoint_test") or r["test"], r["validation"]
        b = c["buy_and_hold"]
        print(f"| {series} | {seed} | {r['best_epoch']} / {r['epochs']} | {v['sharpe']:.2f} ({r['validation_sharpe_t']:.2f}) | "
              f"{'yes' if r['abstained'] else 'no'} | {t['sharpe']:.2f} | {c['sharpe']:.2f} | {100*c['max_drawdown']:.2f}% | "
              f"{c['trades']} | {b['sharpe']:.2f} | {100*b['max_drawdown']:.2f}% |")
print()
print("| series | runs | abstained | checkpoint test Sharpe > 0 | > B&H Sharpe | DD < B&H DD | mean ± sd of the checkpoints' test Sharpe | B&H Sharpe |")
print("|---|---:|---:|---:|---:|---:|---|---:|")
for series, runs in sorted(rows.items()):
    cs = [(r.get("checkpoint_test") or r["test"]) for _, r in runs]
    sh = [c["sharpe"] for c in cs]
    bh = cs[0]["buy_and_hold"]
    sd = statistics.stdev(sh) if len(sh) > 1 else 0.0
    print(f"| {series} | {len(runs)} | {sum(r['abstained'] for _, r in runs)} | {sum(s > 0 for s in sh)} | "
          f"{sum(s > bh['sharpe'] for s in sh)} | {sum(c['max_drawdown'] < c['buy_and_hold']['max_drawdown'] for c in cs)} | "
          f"{statistics.mean(sh):.2f} ± {sd:.2f} | {bh['sharpe']:.2f} |")
