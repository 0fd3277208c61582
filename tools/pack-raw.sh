#!/usr/bin/env bash
# pack-raw.sh DIR...: compresses the raw run output committed under DIR
# (every *.json and *.log, recursively) with xz -9, in place: NAME.json
# becomes NAME.json.xz. Raw learning output repeats its configs and
# yardsticks run after run and packs about 8x; the device tool copies
# the whole tracked tree with the test binaries on every call, within
# 64 MiB (make carry-check). Read a packed file with `xz -dc`; the scripts
# in bench/learning read either form. Already packed files are left alone.
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: tools/pack-raw.sh DIR..." >&2; exit 2; }
for d in "$@"; do
	[ -d "$d" ] || { echo "pack-raw: $d: not a directory" >&2; exit 2; }
	find "$d" -type f \( -name '*.json' -o -name '*.log' \) -print0 | xargs -0 -r xz -9 -T1
done
