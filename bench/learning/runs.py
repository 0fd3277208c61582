"""runs.py: the reports of one run.sh output directory, for the summary scripts."""
import json, os, re


def reports(d, pattern):
    """(match, report) of every DIR/NAME.json whose NAME.json fully matches
    the regular expression pattern, in name order; a file that does not
    parse (a run still going, or one that failed) is left out."""
    for f in sorted(os.listdir(d)):
        m = re.fullmatch(pattern, f)
        if not m:
            continue
        try:
            r = json.load(open(os.path.join(d, f)))
        except (ValueError, OSError):
            continue
        yield m, r


def by_series(d):
    """{series: [(seed, report), ...]} of DIR's NAME.json files (NAME =
    X-sSEED-SERIES, X the batch's letters), seeds in order."""
    out = {}
    for m, r in reports(d, r"[a-z]+-s(\d+)-(\w+)\.json"):
        out.setdefault(m.group(2), []).append((int(m.group(1)), r))
    for runs in out.values():
        runs.sort(key=lambda x: x[0])
    return out
