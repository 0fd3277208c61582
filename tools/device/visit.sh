#!/usr/bin/env bash
# One device visit: every GPU check and timing of the CUDA backend, with a
# report under $OUT. Built here beforehand by `make gpu-binaries` (static
# binaries in bin/, carried to the device machine, which has no Go).
#   bash tools/device/visit.sh [quick]
set -u
OUT=${OUT:-/tmp/visit-out}
mkdir -p "$OUT"
export DQNFLOW_REQUIRE_GPU=1 DQNFLOW_KERNEL_CACHE=/tmp/dqnflow-kernels PYTHONUNBUFFERED=1
log() { echo "== $*" | tee -a "$OUT/summary.txt"; }
step() { # step NAME TIMEOUT CMD...
  local name=$1 t=$2; shift 2
  local t0=$(date +%s.%N)
  timeout "$t" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  log "$name rc=$rc ($(echo "$(date +%s.%N) - $t0" | bc | cut -c1-6) s)"
  return $rc
}
log "date $(date -u +%FT%TZ)"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv | tee -a "$OUT/summary.txt"

step cuda-binding 120 bin/gputest/cuda.test -test.v -test.count=1
tail -3 "$OUT/cuda-binding.log" | tee -a "$OUT/summary.txt"
step gpu-tests 300 bin/gputest/gpu.test -test.v -test.count=1 -test.timeout=290s
grep -E "^(=== RUN|--- |PASS|FAIL|ok)|tolerance|outside|: [a-z_]+ +[0-9.e-]+" "$OUT/gpu-tests.log" | head -80 >>"$OUT/summary.txt"
grep -E "^--- |^(PASS|FAIL)" "$OUT/gpu-tests.log" | tail -30

# Device slots (ADR 0006): every GPU of the host is a device of its own. Then TrainingRun, 3 epochs on the
# real activities and the CUDA backend, with one checkpoint restore (SDK test environment, in-memory store).
step devices 120 bin/gputest/backend.test -test.run 'TestEveryGPUIsADeviceOfItsOwn' -test.v -test.count=1
grep -E "^(---|    devices_test)" "$OUT/devices.log" | head -12 >>"$OUT/summary.txt"
for p in fp32 bf16-mixed; do
  step "workflow-$p" 300 env DQNFLOW_TEST_DEVICE=cuda DQNFLOW_TEST_PRECISION=$p bin/gputest/workflows.test -test.run 'TestTrainingRunOnRealActivitiesResumesBitIdentically' -test.v -test.count=1
  grep -E "^(---|    realactivities)" "$OUT/workflow-$p.log" | head -8 >>"$OUT/summary.txt"
done

for p in bf16-mixed fp32; do
  for b in 256 4096 16384; do
    prof=""; [ "$b" = 256 ] && prof="--profile"
    step "bench-$p-$b" 60 bin/dqnflow bench --device cuda --precision "$p" --batch "$b" --steps 300 --json $prof
    grep -E '"(ms_per_step|ms_per_300_step_epoch|train_steps_per_s|gemm_tflop_s)"' "$OUT/bench-$p-$b.log" | tr -d ' \n' >>"$OUT/summary.txt"; echo >>"$OUT/summary.txt"
  done
done

if [ "${1:-}" != quick ]; then
  if [ -f bench/pytorch/bench.py ]; then
    step pytorch 300 python3 bench/pytorch/bench.py --out "$OUT/pytorch.json" --budget-s 240
    tail -25 "$OUT/pytorch.log" >>"$OUT/summary.txt"
  fi
  if command -v compute-sanitizer >/dev/null; then
    step memcheck 240 compute-sanitizer --tool memcheck --error-exitcode 9 bin/gputest/gpu.test -test.run 'TestCheckpointsMoveBetweenBackends|TestMatchesCPUReference/fp32' -test.count=1
    tail -4 "$OUT/memcheck.log" >>"$OUT/summary.txt"
    step racecheck 240 compute-sanitizer --tool racecheck --error-exitcode 9 bin/gputest/gpu.test -test.run 'TestCheckpointsMoveBetweenBackends' -test.count=1
    tail -4 "$OUT/racecheck.log" >>"$OUT/summary.txt"
  else
    log "compute-sanitizer: not on this machine"
  fi
fi
cat "$OUT/summary.txt"
