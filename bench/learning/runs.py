"""runs.py: the reports of one run.sh output directory, for the summary scripts."""
import json, os, re


def by_series(d):
    """{series: [(seed, report), ...]} of DIR's NAME.json files (NAME =
    X-sSEED-SERIES, X the batch letter), seeds in order; a file that does not
    parse (a run still going, or one that failed) is left out."""
    out = {}
    for f in sorted(os.listdir(d)):
        m = re.fullmatch(r"[a-z]-s(\d+)-(\w+)\.json", f)
        if not m:
            continue
        try:
            r = json.load(open(os.path.join(d, f)))
        except (ValueError, OSError):
            continue
        out.setdefault(m.group(2), []).append((int(m.group(1)), r))
    for runs in out.values():
        runs.sort(key=lambda x: x[0])
    return out
