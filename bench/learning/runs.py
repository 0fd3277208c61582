"""runs.py: the reports of one run.sh output directory, for the summary scripts."""
import json, lzma, os, re


# LOAD_ERRORS are what load raises for a report that is not whole (a run
# still going, one that failed, a truncated archive).
LOAD_ERRORS = (ValueError, OSError, EOFError, lzma.LZMAError)


def load(path):
    """The JSON at path, read through xz where the name ends in .xz
    (tools/pack-raw.sh packs committed raw output that way)."""
    opener = lzma.open if path.endswith(".xz") else open
    with opener(path, "rt") as f:
        return json.load(f)


def reports(d, pattern):
    """(match, report) of every DIR/NAME.json (or NAME.json.xz) whose
    NAME.json fully matches the regular expression pattern, in name order;
    a file that does not parse (a run still going, or one that failed) is
    left out."""
    for f in sorted(os.listdir(d)):
        m = re.fullmatch(pattern, f.removesuffix(".xz"))
        if not m:
            continue
        try:
            r = load(os.path.join(d, f))
        except LOAD_ERRORS:
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
