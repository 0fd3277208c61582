#!/usr/bin/env bash
# vulncheck.sh GOVULNCHECK DB [ARGS...]
#
# Runs govulncheck against the vulnerability database DB (file:///DIR, or a
# URL), printing the Go version, the scanner's version and the database's
# date (-show version), and exits with its status: 0 when no vulnerable
# symbol is called, 3 when one is (in source mode), 1 or 2 when it failed.
#
# A status 0 without govulncheck's verdict is a failure: govulncheck scans in
# a goroutine of its own, and a panic there can end the process with status
# 0 when its main function returns first (seen with v1.9.0, which crashes
# reporting an entry without database_specific; one run in eight exited 0).
set -uo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 GOVULNCHECK DB [ARGS...]" >&2
  exit 2
fi
bin=$1
db=$2
shift 2

out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$bin" -db "$db" -show version "$@" 2>&1 | tee "$out"
rc=${PIPESTATUS[0]}
if [ "$rc" -eq 0 ] && ! grep -q '^No vulnerabilities found\.$' "$out"; then
  echo "vulncheck: govulncheck exited 0 without its verdict ('No vulnerabilities found.'): counted as a failure" >&2
  exit 1
fi
exit "$rc"
