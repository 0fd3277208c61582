#!/usr/bin/env bash
# run.sh CASES OUT [JOBS] [THREADS]: trains every case of the file CASES
# with `dqnflow train --device cpu`, JOBS at a time with THREADS threads
# each (default 8 and 2), and writes OUT/NAME.json (the final report: the
# checkpoint validation picked, on validation and on the test range),
# OUT/NAME.log (progress) and OUT/NAME.time (wall seconds). A line of
# CASES is "NAME CONFIG DATA" (CONFIG relative to this folder); # starts
# a comment. Checkpoints are deleted after each run. The CPU backend's
# results do not depend on the thread count (trainer/cpu/doc.go).
# DQNFLOW_CMD (default train) and DQNFLOW_ARGS (default none) run another
# command that takes --config and --data the same way;
# DQNFLOW_DEVICE (default cpu) picks the backend, e.g. cuda on a GPU
# machine. (The bar-count walk-forward these batches once ran, and the
# scripts that read its JSON, are gone: the calendar walk-forward of ADR
# 0038 replaced it, and visit.sh part walkforward runs it.) A run that would start after
# DQNFLOW_DEADLINE (Unix seconds, default none) is skipped and says so in
# its log, so that a timed visit returns whole runs.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cases=$1 out=$2 jobs=${3:-8} threads=${4:-2}
bin=${DQNFLOW_BIN:-$here/../../bin/dqnflow}
mkdir -p "$out"
one() {
	local name=$1 cfg=$2 data=$3
	local t0=$(date +%s.%N)
	if [ -n "${DQNFLOW_DEADLINE:-}" ] && [ "$(date +%s)" -ge "$DQNFLOW_DEADLINE" ]; then
		echo "SKIPPED $name: past DQNFLOW_DEADLINE" >"$out/$name.log"
		return
	fi
	# shellcheck disable=SC2086 # DQNFLOW_ARGS is a list of words
	GOMAXPROCS=$threads "$bin" "${DQNFLOW_CMD:-train}" --device "${DQNFLOW_DEVICE:-cpu}" --config "$here/$cfg" --data "$data" ${DQNFLOW_ARGS:-} \
		--out "$out/$name.d" --json >"$out/$name.json" 2>"$out/$name.log" || echo "FAILED $name" >>"$out/$name.log"
	echo "$(date +%s.%N) $t0" | awk '{printf "%.1f\n", $1-$2}' >"$out/$name.time"
	rm -rf "$out/$name.d"
}
export -f one
export here out threads bin
grep -v '^\s*#' "$cases" | grep -v '^\s*$' | xargs -P "$jobs" -L 1 bash -c 'one "$@"' _
