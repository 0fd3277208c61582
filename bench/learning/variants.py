#!/usr/bin/env python3
"""variants.py DIR [BASE]: the variants of one walk-forward batch (run.sh
output with DQNFLOW_CMD=walkforward; NAME = BATCH-VARIANT-sSEED-SERIES, e.g.
ga-nocandle-s3-spx) against the variant BASE (default "base") at the same
series, seed and window, so that each pair shares its test range.

Per variant and series:
- runs: how many seeds it has a report for (and BASE at the same seeds);
- the checkpoints' test Sharpe, variant minus BASE, mean ± standard error
  over the windows, its t and how many windows the variant was ahead;
- the runs' joined test Sharpe with every window trading (gate none),
  variant minus BASE, the same way over the runs;
- the variant's own mean joined Sharpe (none), its windows traded by the
  record gate and that gate's highest t.

A file that does not parse (a run skipped, failed or still going) is left
out. With several variants, the largest of their t values is what chance
alone often gives: a variant picked here is confirmed at new seeds."""
import math, statistics, sys

from runs import reports


def load(d):
    out = {}
    for m, r in reports(d, r"[a-z]+-(.+)-s(\d+)-(\w+)\.json"):
        out.setdefault(m.group(1), {}).setdefault(m.group(3), {})[int(m.group(2))] = r
    return out


def none(r):
    return next(g for g in r["gates"] if g["gate"] == "none")["pooled"]["sharpe"]


def record(r):
    g = next(g for g in r["gates"] if g["gate"] == "record")
    return sum(g["traded"]), max(w["record_sharpe_t"] for w in r["windows"])


def diff(xs):
    d = [b - a for b, a in xs]
    if len(d) < 2:
        return "n/a", "n/a"
    se = statistics.stdev(d) / math.sqrt(len(d))
    t = statistics.mean(d) / se if se > 0 else float("nan")
    return f"{statistics.mean(d):+.2f} ± {se:.2f} (t {t:+.2f})", f"{sum(x > 0 for x in d)} of {len(d)}"


def main():
    d = sys.argv[1]
    base = sys.argv[2] if len(sys.argv) > 2 else "base"
    runs = load(d)
    if base not in runs:
        sys.exit(f"variants.py: no runs of the variant {base!r} in {d}")
    print(f"| variant | series | runs | windows: checkpoint test Sharpe, variant − {base} | ahead | runs: `none` joined Sharpe, variant − {base} | ahead | `none` joined Sharpe, mean | record: windows traded, highest t |")
    print("|---|---|---:|---|---:|---|---:|---:|---|")
    for v in sorted(runs, key=lambda v: (v != base, v)):
        for series in sorted(runs[v]):
            mine, ref = runs[v][series], runs[base].get(series, {})
            seeds = sorted(s for s in mine if s in ref)
            if not seeds:
                continue
            win = [(wb["checkpoint_test"]["sharpe"], wa["checkpoint_test"]["sharpe"])
                   for s in seeds for wa, wb in zip(ref[s]["windows"], mine[s]["windows"])]
            joined = [(none(mine[s]), none(ref[s])) for s in seeds]
            traded = sum(record(mine[s])[0] for s in seeds)
            hi = max(record(mine[s])[1] for s in seeds)
            mean = statistics.mean(none(mine[s]) for s in seeds)
            if v == base:
                wd, wa, rd, ra = "", "", "", ""
            else:
                (wd, wa), (rd, ra) = diff(win), diff(joined)
            print(f"| {v} | {series} | {len(seeds)} | {wd} | {wa} | {rd} | {ra} | {mean:+.2f} | {traded} of {4 * len(seeds)}, {hi:.2f} |")


if __name__ == "__main__":
    main()
