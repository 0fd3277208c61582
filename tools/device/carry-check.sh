#!/usr/bin/env bash
# carry-check.sh [CARRY...]: whether a device call fits. The device tool
# copies the tracked files, the untracked files git does not ignore and
# the carried paths (default bin/gputest.txz, from make gpu-binaries), in
# 64 MiB in all. Prints each share; exits 1 when they do not fit, naming
# what to shrink.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# -gt 0 ] || set -- bin/gputest.txz
limit=$((64 * 1024 * 1024))
bytes() { xargs -0 -r du -cb 2>/dev/null | awk 'END { print ($1 == "" ? 0 : $1) }'; }
tracked=$(git ls-files -z | bytes)
untracked=$(git ls-files -z --others --exclude-standard | bytes)
carry=0
for p in "$@"; do
	[ -e "$p" ] || { echo "carry-check: $p: missing (make gpu-binaries builds bin/gputest.txz)" >&2; exit 1; }
	carry=$((carry + $(du -sb "$p" | cut -f1)))
done
total=$((tracked + untracked + carry))
mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
echo "carry-check: tracked $(mib "$tracked"), untracked $(mib "$untracked"), carried $(mib "$carry") ($*): $(mib "$total") of 64 MiB"
if [ "$total" -gt "$limit" ]; then
	echo "carry-check: over the device tool's 64 MiB: pack raw output (tools/pack-raw.sh docs/perf/DIR) or carry fewer binaries" >&2
	exit 1
fi
