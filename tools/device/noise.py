#!/usr/bin/env python3
"""Summarise a multi-seed parity study (visit.sh noise) over seeds.

    python3 tools/device/noise.py DIR

DIR holds noise-seedN/parity.json (one `dqnflow parity` per seed) and,
from visit.sh part control, control-seedN/parity.json: the same study with
only the weight gradients' summation order changed (DQNFLOW_GRAD_KCHUNK,
ADR 0017); its modes are named "fp32 reordered" and so on, and are
compared with the plain fp32 run of the same seed like every mode. For each
mode: the final validation Sharpe (epoch 50) per seed, its mean and
standard error over seeds; for each mode against fp32 at the same seed,
the paired difference of final Sharpe, its mean, standard error and t;
and the mean over seeds of the training criteria's relative gaps (mean Q,
gradient-norm mean and max). Prints markdown.
"""
import glob
import json
import math
import os
import re
import sys


def stats(xs):
    n = len(xs)
    m = sum(xs) / n
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (n - 1)) if n > 1 else float("nan")
    return m, sd, sd / math.sqrt(n) if n > 1 else float("nan")


def main(root):
    runs = {}  # mode -> seed -> summary values
    paths = sorted(glob.glob(os.path.join(root, "noise-seed*", "parity.json")))
    paths += sorted(glob.glob(os.path.join(root, "control-seed*", "parity.json")))
    for path in paths:
        kind, seed = re.search(r"(noise|control)-seed(\d+)", path).groups()
        seed = int(seed)
        with open(path) as f:
            d = json.load(f)
        for r in d["runs"]:
            mode = r["mode"]["name"] if isinstance(r["mode"], dict) and "name" in r["mode"] else str(r["mode"])
            if kind == "control":
                mode += " reordered"
            ep = r["epochs"]
            last = ep[-1]
            tail = ep[-10:]
            runs.setdefault(mode, {})[seed] = {
                "sharpe": last["valid_sharpe"],
                "sharpe10": sum(e["valid_sharpe"] for e in tail) / len(tail),
                "q": sum(e["mean_q"] for e in tail) / len(tail),
                "g": sum(e["grad_norm"] for e in ep) / len(ep),
                "gmax": max(e["grad_norm_max"] for e in ep),
                "nonfinite": any(not math.isfinite(e["loss"]) for e in ep),
            }
    if "fp32" not in runs:
        sys.exit("no fp32 runs under " + root)
    seeds = sorted(runs["fp32"])
    print(f"{len(seeds)} seeds: {', '.join(map(str, seeds))}\n")
    print("| mode | final Sharpe, mean ± SE | SD over seeds | mean of last 10 epochs, mean ± SE | paired Δ final Sharpe vs fp32, mean ± SE (t) | Δ last-10 mean vs fp32 (t) | mean Q gap | ‖g‖ mean gap | ‖g‖ max gap | seeds within issue 8's limits: Sharpe 5 % / mean Q 10 % / ‖g‖ mean and max 20 % / all | NaN/Inf |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    ref = runs["fp32"]
    for mode, by in runs.items():
        common = [s for s in seeds if s in by]
        sh = [by[s]["sharpe"] for s in common]
        s10 = [by[s]["sharpe10"] for s in common]
        m, sd, se = stats(sh)
        m10, _, se10 = stats(s10)
        row = f"| {mode} | {m:.3f} ± {se:.3f} | {sd:.3f} | {m10:.3f} ± {se10:.3f} |"
        if mode == "fp32":
            row += " — | — | — | — | — | — |"
        else:
            d = [by[s]["sharpe"] - ref[s]["sharpe"] for s in common]
            d10 = [by[s]["sharpe10"] - ref[s]["sharpe10"] for s in common]
            dm, _, dse = stats(d)
            dm10, _, dse10 = stats(d10)
            gap = lambda k: 100 * sum(abs(by[s][k] - ref[s][k]) / abs(ref[s][k]) for s in common) / len(common)
            row += f" {dm:+.3f} ± {dse:.3f} ({dm / dse:+.2f}) | {dm10:+.3f} ({dm10 / dse10:+.2f}) | {gap('q'):.1f} % | {gap('g'):.1f} % | {gap('gmax'):.1f} % |"
            rel = lambda s, k: abs(by[s][k] - ref[s][k]) / max(abs(ref[s][k]), 1e-12)
            ok = {s: (rel(s, "sharpe") <= 0.05, rel(s, "q") <= 0.10, rel(s, "g") <= 0.20 and rel(s, "gmax") <= 0.20) for s in common}
            cnt = [sum(ok[s][i] for s in common) for i in range(3)]
            row += f" {cnt[0]} / {cnt[1]} / {cnt[2]} / {sum(all(ok[s]) for s in common)} of {len(common)} |"
        row += " " + ("yes" if any(by[s]["nonfinite"] for s in common) else "none") + " |"
        print(row)
    print()
    print("| seed | " + " | ".join(f"{m} final Sharpe" for m in runs) + " |")
    print("|---|" + "---|" * len(runs))
    for s in seeds:
        print(f"| {s} | " + " | ".join(f"{runs[m][s]['sharpe']:.3f}" if s in runs[m] else "" for m in runs) + " |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
