#!/usr/bin/env bash
# Runs the GPU tests of several gpu packages with the same flags: since the
# split by concern (ADR 0044) they are three test binaries of
# `make gpu-binaries`, gpu.test (the trainer, the device environment
# through it, the conformance and checkpoint tests), step.test (the GEMMs,
# the plan, the kernels compiled) and device.test (device memory, launches,
# the tuning).
#   tools/device/gputests.sh PKGS TEST-FLAGS...
# PKGS is a comma-separated list of gpu, step and device, or "all". Each
# binary runs in turn (a -test.run pattern that names none of a binary's
# tests is fine: it reports no tests to run); the exit status is the first
# failure's, else 0.
set -uo pipefail
pkgs=$1
shift
[ "$pkgs" = all ] && pkgs=gpu,step,device
rc=0
for p in ${pkgs//,/ }; do
  echo "== bin/gputest/$p.test $*"
  bin/gputest/"$p".test "$@"
  r=$?
  [ "$rc" = 0 ] && rc=$r
done
exit "$rc"
