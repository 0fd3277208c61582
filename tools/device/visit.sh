#!/usr/bin/env bash
# One device visit: every GPU check and timing of the CUDA backend, with a
# report under $OUT. Built here beforehand by `make gpu-binaries` (static
# binaries in bin/, carried to the device machine, which has no Go).
#   bash tools/device/visit.sh [PARTS]
# PARTS is a comma-separated list of: tests (binding, GPU, device-slot and
# real-activity workflow tests, and sanitize-step), bench (our benchmarks), pytorch (the
# PyTorch reference), pytorch-autotune (its max-autotune variant beside its
# best, with a budget of their own), cpu (the CPU backend against PyTorch on 2 cores), ncu
# (hardware counters of the step's kernels), sanitize (compute-sanitizer),
# sanitize-env (the environment's part of sanitize alone), tf32 (fp32's
# GEMMs on the CUDA cores checked and timed beside 3xTF32's), runbench (a
# whole TrainingRun per epoch on the real activities), capture (the
# checkpointing tests alone), sanitize-step
# (memcheck and racecheck of the training step in every mode), tf32wg (fp32's
# 3xTF32 wgmma GEMMs checked and timed beside mma.sync), sanitize-gemm
# (memcheck and racecheck of the GEMM test alone),
# crosscheck (the PyTorch
# reference against the Go CPU reference), multistep (graphs of several training
# steps, DQNFLOW_STEPS_PER_GRAPH, ADR 0027: the bits kept and the step
# timed), pdl (the step and the
# epoch with serial launches beside bench's), wgmma (the step
# and the epoch with the forward GEMMs on mma.sync beside bench's), same (the
# parity study's seed 1 in every mode against a committed log, SAME_REF
# or the current kernels' one: the bits kept; the run's log comes back as
# same-seed1.log), same2 (after same: a second run against the first's
# log), lossslots (the loss's block count, LOSS_SLOTS), headout (the head outputs' GEMM tile shapes, HEADOUT_SHAPES),
# ncu-headout (ncu's details and SASS counters of that GEMM), wgdx (the
# backward's input gradients on wgmma, checked and timed beside
# mma.sync), prof
# (ncu on one step's GEMMs and loss), noise (the parity study
# at NOISE_SEEDS), control (the same with the gradients' summation order
# changed, ADR 0017), epoch (the default
# epoch end to end on the device, per phase, and the collector with 4096
# and 16384 environments: dqnflow bench --epoch), envblock (the collector
# with smaller blocks of its per-environment kernels, DQNFLOW_ENV_BLOCK),
# hostwalk (the batched backtest's host work on this machine's CPU at 1 to
# 16 goroutines: BenchmarkBacktestBatch and BenchmarkCVaR), walkforward
# (the calendar walk-forward over the carried corpus), abbase (this
# build's step and epoch benchmarks beside a carried baseline build's),
# simt (fp32's tests on the CUDA cores), paneltrain (dqnflow train and
# evaluate on a panel of two corpus series), gputest (the GPU
# tests GPUTEST_RUN names), floor (the floor under a chain of dependent
# phases: kernels in a graph, programmatic dependents, a cooperative kernel
# with grid barriers).
# quick = tests,bench (the default); full = all of them, which takes longer
# than one device call allows: split it, e.g. tests,bench,pytorch then
# epoch,cpu,ncu,sanitize.
# Part parity (in full) trains 50 epochs in fp32, bf16-mixed, bf16 and bf16
# with stochastic rounding and compares each with fp32 (dqnflow parity;
# parity.json and learning-curves.png come back beside summary.txt).
# The knobs the parts set are gpu.Tuning's environment variables
# (gpu/tuning.go tuningEnv, read by gpu.TuningFromEnv; every run records
# the tuning it ran in its Info and checkpoints); the tuning removed with
# the paths measured slower (issue 46: the fused forward, the GEMM
# variants, early triggers, the lean epilogue, the spectral step on the
# main stream, the two-launch update) is set by no part.
# $OUT receives summary.txt and logs.tgz (every log); the device tool
# returns at most 8 files, so the logs travel as one archive.
set -u
MODE=${1:-quick}
case $MODE in
  quick) MODE=tests,bench ;;
  full) MODE=tests,bench,pytorch,epoch,cpu,ncu,sanitize,parity ;;
esac
has() { [[ ",$MODE," == *",$1,"* ]]; }
# Every visit that runs the tests tries the sanitizers on the training
# step too (part sanitize-step, about 20 s), and says so where the machine
# has no compute-sanitizer or refuses it.
if has tests && ! has sanitize-step; then MODE=$MODE,sanitize-step; fi
OUT=${OUT:-/tmp/visit-out}
LOGS=/tmp/visit-logs
rm -rf "$LOGS"
mkdir -p "$OUT" "$LOGS"
export DQNFLOW_REQUIRE_GPU=1 DQNFLOW_KERNEL_CACHE=/tmp/dqnflow-kernels PYTHONUNBUFFERED=1
log() { echo "== $*" | tee -a "$OUT/summary.txt"; }
step() { # step NAME TIMEOUT CMD...
  local name=$1 t=$2; shift 2
  local t0=$EPOCHREALTIME
  timeout "$t" "$@" >"$LOGS/$name.log" 2>&1
  local rc=$?
  log "$name rc=$rc ($(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.1f", b-a}') s)"
  return $rc
}
# benchline TAG LABEL FIELDS SETTING PRECISION BATCH STEPS: dqnflow bench
# with SETTING (NAME=VALUE, or several separated by spaces) in its environment; its JSON fields FIELDS (an
# ERE alternation of names) go to summary.txt after LABEL.
benchline() {
  local tag=$1 label=$2 fields=$3 setting=$4 p=$5 b=$6 n=$7
  # shellcheck disable=SC2086 # SETTING may be several NAME=VALUE words
  step "$tag" 90 env $setting bin/gputest/dqnflow bench --device cuda --precision "$p" --batch "$b" --steps "$n" --json
  echo -n "$label: " >>"$OUT/summary.txt"
  grep -E "\"($fields)\"" "$LOGS/$tag.log" | tr -d ' \n' >>"$OUT/summary.txt"; echo >>"$OUT/summary.txt"
}
# abRounds TAG FIELDS STEPS A SETTING_A B SETTING_B: the step with
# SETTING_A (labelled A) and with SETTING_B (labelled B), interleaved in
# two rounds, bf16-mixed at batches 256, 4096 and 16384 and fp32 at 256
# and 16384 (benchline; a setting may be empty: the defaults).
abRounds() {
  local tag=$1 fields=$2 n=$3 la=$4 sa=$5 lb=$6 sb=$7
  for round in 1 2; do
    for b in 256 4096 16384; do
      for p in bf16-mixed fp32; do
        [ "$p" = fp32 ] && [ "$b" = 4096 ] && continue
        benchline "$tag-$p-$b-$la-$round" "$p batch $b $tag $la round $round" "$fields" "$sa" "$p" "$b" "$n"
        benchline "$tag-$p-$b-$lb-$round" "$p batch $b $tag $lb round $round" "$fields" "$sb" "$p" "$b" "$n"
      done
    done
  done
}
finish() {
  tar czf "$OUT/logs.tgz" -C /tmp visit-logs
  cat "$OUT/summary.txt"
}
trap finish EXIT
# The binaries travel packed (make gpu-binaries); Python's lzma unpacks
# them where the machine has no xz.
# bin/gputest-bench.txz holds bin/gputest/dqnflow alone, for a visit
# that carries something large beside it (part crosscheck).
for a in bin/gputest.txz bin/gputest-bench.txz bin/gputest-wf.txz; do
  if [ -f "$a" ]; then
    tar xJf "$a" -C bin 2>/dev/null || python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall("bin")' "$a"
  fi
done
log "date $(date -u +%FT%TZ) mode $MODE"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv | tee -a "$OUT/summary.txt"

if has tests; then
  step cuda-binding 120 bin/gputest/cuda.test -test.v -test.count=1
  tail -3 "$LOGS/cuda-binding.log" | tee -a "$OUT/summary.txt"
  # TestKernelsCompileForHopper runs in make test (NVRTC 11.8); here every
  # module is compiled by NVRTC 13 when it loads.
  step gpu-tests 400 tools/device/gputests.sh all -test.v -test.count=1 -test.timeout=390s -test.skip TestKernelsCompileForHopper
  grep -E "^(--- |PASS|FAIL|ok)|tolerance|outside|wrong|: [a-z_]+ +[0-9.e-]+" "$LOGS/gpu-tests.log" | head -120 >>"$OUT/summary.txt"
  grep -E "^--- FAIL" "$LOGS/gpu-tests.log" | head -30

  # Device slots (ADR 0007): every GPU of the host is a device of its own.
  # Then TrainingRun, 3 epochs on the real activities and the CUDA backend,
  # with one checkpoint restore (SDK test environment, in-memory store).
  step devices 120 bin/gputest/backend.test -test.run 'TestEveryGPUIsADeviceOfItsOwn' -test.v -test.count=1
  grep -E "^(---|    devices_test)" "$LOGS/devices.log" | head -12 >>"$OUT/summary.txt"
  for p in fp32 bf16-mixed bf16; do
    step "workflow-$p" 300 env DQNFLOW_TEST_DEVICE=cuda DQNFLOW_TEST_PRECISION=$p bin/gputest/workflows.test -test.run 'TestTrainingRunOnRealActivitiesResumesBitIdentically' -test.v -test.count=1
    grep -E "^(---|    realactivities)" "$LOGS/workflow-$p.log" | head -8 >>"$OUT/summary.txt"
  done
fi
# Part capture: what a change to checkpointing needs on the GPU (a subset
# of tests): the conformance suite in every mode (its
# CaptureIsTheSnapshotOfItsMoment encodes a capture after training on),
# checkpoints between backends, and the real-activity workflow with its
# bit-identical restore in every mode.
if has capture; then
  step capture-tests 300 bin/gputest/gpu.test -test.run 'TestConformance|TestCheckpointsMoveBetweenBackends' -test.count=1 -test.v
  grep -E "^(--- |ok|FAIL|PASS)|Capture" "$LOGS/capture-tests.log" | head -40 >>"$OUT/summary.txt"
  for p in fp32 bf16-mixed bf16; do
    step "capture-workflow-$p" 300 env DQNFLOW_TEST_DEVICE=cuda DQNFLOW_TEST_PRECISION=$p bin/gputest/workflows.test -test.run 'TestTrainingRunOnRealActivitiesResumesBitIdentically' -test.v -test.count=1
    grep -E "^(---|    realactivities)" "$LOGS/capture-workflow-$p.log" | head -8 >>"$OUT/summary.txt"
  done
fi

has bench && for p in bf16-mixed fp32 bf16; do
  for b in 256 4096 16384; do
    prof=""; [ "$b" = 256 ] || [ "$b" = 16384 ] && prof="--profile"
    step "bench-$p-$b" 90 bin/gputest/dqnflow bench --device cuda --precision "$p" --batch "$b" --steps 300 --json $prof
    grep -E '"(ms_per_step|ms_per_300_step_epoch|train_steps_per_s|gemm_tflop_s|launches|forward)"' "$LOGS/bench-$p-$b.log" | tr -d ' \n' >>"$OUT/summary.txt"; echo >>"$OUT/summary.txt"
  done
done
# Each profiled run's launches on one line (ms per step, then µs per kernel).
has bench && python3 tools/device/kernels.py "$LOGS"/bench-*-256.log "$LOGS"/bench-*-16384.log >>"$OUT/summary.txt"
# Part floor: the floor under a step of dependent phases, whatever they
# compute (BenchmarkGPUPhaseFloor): 48 phases as serial kernels, as
# programmatic dependents and as one cooperative kernel with grid barriers,
# 4 bytes and 4 KB a block, us/phase.
has floor && step floor 120 bin/gputest/cuda.test -test.run '^$' -test.bench PhaseFloor -test.benchtime 400x -test.count 3
has floor && grep -E "^Benchmark|FAIL|ok" "$LOGS/floor.log" >>"$OUT/summary.txt"

# Part crosscheck: the PyTorch reference (bench/pytorch/dqn.py) against
# the Go CPU reference on the same weights and batch, in float64 on the
# CPU and in float32 on the GPU (bench/pytorch/README.md). It needs
# bin/refcase.safetensors.xz, written here with bin/gputest-bench.txz by
# make crosscheck-carry (16 and 14 MB: carry those two, not the whole set).
if has crosscheck; then
  if [ -f bin/refcase.safetensors.xz ]; then
    xz -dkf bin/refcase.safetensors.xz 2>/dev/null || python3 -c 'import lzma, shutil; shutil.copyfileobj(lzma.open("bin/refcase.safetensors.xz"), open("bin/refcase.safetensors", "wb"))'
    step crosscheck-float64 300 python3 bench/pytorch/crosscheck.py bin/refcase.safetensors --device cpu --json "$OUT/crosscheck-float64.json"
    tail -25 "$LOGS/crosscheck-float64.log" >>"$OUT/summary.txt"
    step crosscheck-float32 300 python3 bench/pytorch/crosscheck.py bin/refcase.safetensors --dtype float32 --device cuda --json "$OUT/crosscheck-float32.json"
    tail -25 "$LOGS/crosscheck-float32.log" >>"$OUT/summary.txt"
  else
    log "crosscheck: no bin/refcase.safetensors.xz carried"
  fi
fi

# Part multistep (ADR 0027): graphs of several training steps
# (DQNFLOW_STEPS_PER_GRAPH) train the same bits as one step a graph
# (TestStepsPerGraphTrainsTheSameBits), and the step timed with 1 and 8
# steps a graph, interleaved in two rounds (bf16-mixed at three batches,
# fp32 at 256 and 16384), then 32 at batch 256.
if has multistep; then
  step multistep-bits 300 bin/gputest/gpu.test -test.run 'TestStepsPerGraphTrainsTheSameBits' -test.v -test.count=1
  grep -E "^(--- |PASS|FAIL|ok)|differ" "$LOGS/multistep-bits.log" | head -20 >>"$OUT/summary.txt"
  abRounds multistep 'ms_per_step|steps_per_graph' 304 1 DQNFLOW_STEPS_PER_GRAPH=1 8 DQNFLOW_STEPS_PER_GRAPH=8
  benchline multistep-bf16-mixed-256-32 "bf16-mixed batch 256 steps/graph 32" 'ms_per_step|steps_per_graph' \
    DQNFLOW_STEPS_PER_GRAPH=32 bf16-mixed 256 320
fi

# Part pdl: the step with its kernels launched one after the other
# (DQNFLOW_PDL=off) beside part bench's default programmatic dependents
# (ADR 0019), same call; and the default epoch with serial launches.
has pdl && for b in 256 4096 16384; do
  for p in bf16-mixed fp32; do
    [ "$p" = fp32 ] && [ "$b" != 256 ] && [ "$b" != 16384 ] && continue
    prof=""; [ "$b" = 256 ] || [ "$b" = 16384 ] && prof="--profile"
    for pdl in off; do
      step "pdl-$pdl-$p-$b" 90 env DQNFLOW_PDL=$pdl bin/gputest/dqnflow bench --device cuda --precision "$p" --batch "$b" --steps 300 --json $prof
      echo -n "DQNFLOW_PDL=$pdl, $p batch $b: " >>"$OUT/summary.txt"
      grep -E '"(ms_per_step|launches)"' "$LOGS/pdl-$pdl-$p-$b.log" | tr -d ' \n' >>"$OUT/summary.txt"; echo >>"$OUT/summary.txt"
    done
  done
done
has pdl && python3 tools/device/kernels.py "$LOGS"/pdl-*.log >>"$OUT/summary.txt"
has pdl && step "epoch-pdl-off-bf16-mixed" 150 env DQNFLOW_PDL=off bin/gputest/dqnflow bench --device cuda --precision bf16-mixed --epoch --epochs 20 --json
has pdl && { grep -E '"(epoch_ms|collect_ms|train_ms|backtest_ms)"' "$LOGS/epoch-pdl-off-bf16-mixed.log" | tr -d ' \n' >>"$OUT/summary.txt"; echo >>"$OUT/summary.txt"; }

# Part wgmma: the step with its forward GEMMs on mma.sync
# (DQNFLOW_WGMMA=off) beside part bench's default (wgmma on sm_90a with
# NVRTC 12 or newer, gpu/module.go useWGMMA; fp32's 3xTF32 too), same call.
has wgmma && for b in 256 4096 16384; do
  for p in bf16-mixed bf16 fp32; do
    [ "$p" = bf16 ] && [ "$b" != 16384 ] && continue
    step "wgmma-off-$p-$b" 90 env DQNFLOW_WGMMA=off bin/gputest/dqnflow bench --device cuda --precision "$p" --batch "$b" --steps 300 --json --profile
    echo -n "DQNFLOW_WGMMA=off, $p batch $b: " >>"$OUT/summary.txt"
    grep -E '"(ms_per_step|forward|gemm_tflop_s)"' "$LOGS/wgmma-off-$p-$b.log" | tr -d ' \n' >>"$OUT/summary.txt"; echo >>"$OUT/summary.txt"
  done
done
has wgmma && python3 tools/device/kernels.py "$LOGS"/wgmma-off-*.log >>"$OUT/summary.txt"
has wgmma && step "epoch-wgmma-off-bf16-mixed" 150 env DQNFLOW_WGMMA=off bin/gputest/dqnflow bench --device cuda --precision bf16-mixed --epoch --epochs 20 --json
has wgmma && { grep -E '"(epoch_ms|collect_ms|train_ms|backtest_ms)"' "$LOGS/epoch-wgmma-off-bf16-mixed.log" | tr -d ' \n' >>"$OUT/summary.txt"; echo >>"$OUT/summary.txt"; }

# Part lossslots: the loss's rows in at most LOSS_SLOTS blocks (default
# 924, one wave at 7 blocks a SM; a list measures each:
# DQNFLOW_LOSS_SLOTS) beside part bench's default (gpu/plan.go lossSlots,
# four waves at 8 a SM), same call, batch 4096 and 16384 twice each.
has lossslots && for ls in ${LOSS_SLOTS:-924} default; do
  for b in 4096 16384 4096 16384; do
    tag="lossslots-$ls-$b-$RANDOM"
    if [ "$ls" = default ]; then
      step "$tag" 90 bin/gputest/dqnflow bench --device cuda --precision bf16-mixed --batch "$b" --steps 300 --json --profile
    else
      step "$tag" 90 env DQNFLOW_LOSS_SLOTS="$ls" bin/gputest/dqnflow bench --device cuda --precision bf16-mixed --batch "$b" --steps 300 --json --profile
    fi
    echo -n "loss slots $ls, batch $b: " >>"$OUT/summary.txt"
    grep -E '"ms_per_step"' "$LOGS/$tag.log" | tr -d ' \n' >>"$OUT/summary.txt"; echo >>"$OUT/summary.txt"
  done
done
has lossslots && python3 tools/device/kernels.py "$LOGS"/lossslots-*-16384-*.log >>"$OUT/summary.txt"

# Part tf32: fp32 with its GEMMs' products on the CUDA cores
# (DQNFLOW_FP32_GEMM=simt; the default is 3xTF32 on the tensor cores since
# ADR 0021): its checks against the CPU reference and float64
# (TestGEMMMatchesFloat64 runs both fp32 paths anyway), memcheck of the
# GEMM test, then the step beside 3xTF32 fp32 and bf16-mixed in the same
# call.
if has tf32; then
  step tf32-tests 400 env DQNFLOW_FP32_GEMM=simt tools/device/gputests.sh gpu,step -test.run 'TestMatchesCPUReference/fp32|TestConformanceFP32|TestGEMMMatchesFloat64|TestCheckpointsMoveBetweenBackends' -test.count=1 -test.v
  grep -E "^(--- |ok|FAIL|PASS)" "$LOGS/tf32-tests.log" | head -40 >>"$OUT/summary.txt"
  if command -v compute-sanitizer >/dev/null; then
    step tf32-memcheck-gemm 150 compute-sanitizer --tool memcheck --error-exitcode 9 bin/gputest/step.test -test.run 'TestGEMMMatchesFloat64' -test.count=1
    tail -4 "$LOGS/tf32-memcheck-gemm.log" >>"$OUT/summary.txt"
  fi
  for b in 256 4096 16384; do
    for run in "simt fp32" "3xtf32 fp32" "simt bf16-mixed"; do
      set -- $run
      step "tf32-$1-$2-$b" 90 env DQNFLOW_FP32_GEMM=$1 bin/gputest/dqnflow bench --device cuda --precision "$2" --batch "$b" --steps 300 --json --profile
      echo -n "DQNFLOW_FP32_GEMM=$1, $2 batch $b: " >>"$OUT/summary.txt"
      grep -E '"(ms_per_step|gemm_tflop_s|self_check)"' "$LOGS/tf32-$1-$2-$b.log" | tr -d ' \n' >>"$OUT/summary.txt"; echo >>"$OUT/summary.txt"
    done
  done
  python3 tools/device/kernels.py "$LOGS"/tf32-*-16384.log >>"$OUT/summary.txt"
fi

# ncuStep NAME: ncu's full set (stall reasons, memory tables) on one
# training step's GEMMs and loss at batch 16384, the headline metrics of
# each launch into $OUT/NAME.txt.
ncuStep() {
  local NCU
  NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  if [ -z "$NCU" ]; then
    log "$1: no ncu on this machine"
    return
  fi
  step "$1" 240 "$NCU" --clock-control none --set full -k 'regex:^(gemm128o|gemm128x64o|c51_loss)$' -c 9 \
    bin/gputest/dqnflow bench --device cuda --precision bf16-mixed --batch 16384 --steps 2 --json
  grep -E "^  [a-z_0-9]+.*\(|Duration|Compute \(SM\) Throughput|Memory Throughput|DRAM Throughput|Achieved Occupancy|Registers Per|Theoretical Occupancy|Stall|Issue Slots Busy|Executed Ipc|Executed Instructions  |L2 Hit|L1/TEX Hit|Warp Cycles Per Issued|Block Limit|Uncoalesced|Excessive|est. speedup" "$LOGS/$1.log" | head -400 >"$OUT/$1.txt"
}

# Part same: the parity study's seed 1 (fp32, bf16-mixed, bf16 and bf16
# with stochastic rounding, 50 epochs each) against its committed log (the
# bits of 2026-12-05's fourth session, ADR 0025: the spectral step's power
# iteration on the weights before the update changed 172 of the 200 lines;
# before it, docs/perf/gpu-2026-12-04/same-seed1.log, where fp32's GEMMs as
# 3xTF32 changed fp32's 50 lines of 2026-12-03's evening log; the earlier
# logs are docs/perf/gpu-2026-12-03-evening/same-seed1.log,
# docs/perf/gpu-2026-12-02-third/same-seed1.log and, of 2026-12-01,
# docs/perf/parity-2026-12-01/seeds/noise-seed1.log): a
# kernel change that claims to keep the bits (a new GEMM loader, tile
# shape or launch) must reproduce every epoch's loss, gradient norm, mean
# Q, stagnation and Sharpe. Only the epoch's milliseconds may differ.
# sameCheck NAME [VAR=VALUE...] runs that check under the given
# environment. Part prof is ncu's profile of the step alone.
sameCheck() {
  local name=$1
  shift
  # Every input feature, as when the reference was made: the default
  # inputs changed after it (ADR 0022), the kernels did not.
  echo '{"seed": 1, "data": {"drop_features": ""}}' >/tmp/parity-seed1.json
  step "$name" 280 env "$@" bin/gputest/dqnflow parity --device cuda --epochs 50 \
    --config /tmp/parity-seed1.json --out "$LOGS/$name"
  local ref=${SAME_REF:-docs/perf/gpu-2026-12-07/same-seed1.log}
  cp "$LOGS/$name.log" "$OUT/$name-seed1.log" 2>/dev/null
  if diff <(grep -E "^parity .*: epoch " "$ref" | sed -E 's/, [0-9]+ ms$//') \
    <(grep -E "^parity .*: epoch " "$LOGS/$name.log" | sed -E 's/, [0-9]+ ms$//') >"$LOGS/$name-diff.txt"; then
    log "$name ($*): all $(grep -cE '^parity .*: epoch ' "$ref") epochs of seed 1 match $ref"
  else
    log "$name ($*): DIFFERS from $ref ($(grep -c '^<' "$LOGS/$name-diff.txt") epoch lines)"
    head -12 "$LOGS/$name-diff.txt" >>"$OUT/summary.txt"
  fi
}
has same && sameCheck same DQNFLOW_SAME=1
# Part same2 (after same, same call): a second run against the first's
# log, which shows that a kernel change that makes new bits (a new
# summation order) still gives the same bits every run; its log is then
# the new reference.
has same2 && SAME_REF="$OUT/same-seed1.log" sameCheck same2 DQNFLOW_SAME=1

has prof && ncuStep prof-ncu


# Part tf32wg: fp32's forward GEMMs as 3xTF32 on wgmma: the GEMM test,
# the trains-like-mma.sync test (bit for bit), the CPU reference and
# conformance, and the step at three batches in two interleaved rounds
# beside bf16-mixed and fp32 on mma.sync (DQNFLOW_WGMMA=off). (On
# 2026-12-04 it also timed a second schedule, since removed: ADR 0021.)
if has tf32wg; then
  step tf32wg-tests 400 tools/device/gputests.sh gpu,step -test.run 'TestGEMMMatchesFloat64|TestWGMMATrainsLikeMMA|TestWGMMAShapesFitTheSM|TestMatchesCPUReference|TestConformanceFP32' -test.count=1 -test.v
  grep -E "^(--- |ok|FAIL|PASS)|wgmma against|worst|outside" "$LOGS/tf32wg-tests.log" | head -60 >>"$OUT/summary.txt"
  for round in 1 2; do
    for b in 256 4096 16384; do
      for v in wgmma off bf16-mixed; do
        tag="tf32wg-$v-$b-$round"
        case $v in
          bf16-mixed) step "$tag" 90 bin/gputest/dqnflow bench --device cuda --precision bf16-mixed --batch "$b" --steps 300 --json --profile ;;
          off) step "$tag" 90 env DQNFLOW_WGMMA=off bin/gputest/dqnflow bench --device cuda --precision fp32 --batch "$b" --steps 300 --json --profile ;;
          *) step "$tag" 90 bin/gputest/dqnflow bench --device cuda --precision fp32 --batch "$b" --steps 300 --json --profile ;;
        esac
        echo -n "$v batch $b round $round: " >>"$OUT/summary.txt"
        grep -E '"(ms_per_step|forward)"' "$LOGS/$tag.log" | tr -d ' \n' >>"$OUT/summary.txt"; echo >>"$OUT/summary.txt"
      done
    done
  done
  python3 tools/device/kernels.py "$LOGS"/tf32wg-*-16384-1.log "$LOGS"/tf32wg-*-4096-1.log >>"$OUT/summary.txt"
fi

# Part wgdx: the backward's input gradients on wgmma against transposed
# weight copies (ADR 0023): the masked GEMM bit for bit against mma.sync,
# the GEMM test against float64 and the trains-like-mma.sync test (every
# stage moved); memcheck and racecheck of the bit
# for bit test where the machine has compute-sanitizer; then the step at
# three batches in bf16-mixed and fp32 with DQNFLOW_WGMMA_DX off (the
# default until this part has run), fill (moved where the moved launch
# fills the GPU) and on (moved wherever they fit; not at 16384, where fill
# moves them all); batch 16384 a second round, same call.
if has wgdx; then
  step wgdx-tests 300 env DQNFLOW_WGMMA_DX=fill tools/device/gputests.sh gpu,step -test.run 'TestWGMMAInputGradientsMatchMMA|TestGEMMMatchesFloat64|TestWGMMATrainsLikeMMA' -test.count=1 -test.v
  grep -E "^(--- |ok|FAIL|PASS)|wgmma against|differ|outside" "$LOGS/wgdx-tests.log" | head -60 >>"$OUT/summary.txt"
  if command -v compute-sanitizer >/dev/null; then
    step wgdx-memcheck 150 compute-sanitizer --tool memcheck --error-exitcode 9 bin/gputest/step.test -test.run 'TestWGMMAInputGradientsMatchMMA' -test.count=1
    tail -4 "$LOGS/wgdx-memcheck.log" >>"$OUT/summary.txt"
    step wgdx-racecheck 150 compute-sanitizer --tool racecheck --error-exitcode 9 bin/gputest/step.test -test.run 'TestWGMMAInputGradientsMatchMMA' -test.count=1
    tail -4 "$LOGS/wgdx-racecheck.log" >>"$OUT/summary.txt"
  else
    log "compute-sanitizer: not on this machine"
  fi
  for round in 1 2; do
    for b in 256 4096 16384; do
      [ "$round" = 2 ] && [ "$b" != 16384 ] && continue
      for p in bf16-mixed fp32; do
        for v in off fill on; do
          [ "$v" = on ] && [ "$b" = 16384 ] && continue
          tag="wgdx-$v-$p-$b-$round"
          step "$tag" 90 env DQNFLOW_WGMMA_DX=$v bin/gputest/dqnflow bench --device cuda --precision "$p" --batch "$b" --steps 300 --json --profile
          echo -n "$v (DQNFLOW_WGMMA_DX), $p batch $b round $round: " >>"$OUT/summary.txt"
          grep -E '"(ms_per_step|launches|gemm_tflop_s)"' "$LOGS/$tag.log" | tr -d ' \n' >>"$OUT/summary.txt"; echo >>"$OUT/summary.txt"
        done
      done
    done
  done
  python3 tools/device/kernels.py "$LOGS"/wgdx-*-16384-1.log "$LOGS"/wgdx-*-4096-1.log >>"$OUT/summary.txt"
fi

# Part headout: the tile shapes of the head outputs' forward launch
# (DQNFLOW_HEADOUT_SHAPE) side by side at batch 4096 and 16384.
has headout && for sh in ${HEADOUT_SHAPES:-gemm64 gemm128o gemm128x64o}; do
  for b in 4096 16384; do
    step "headout-$sh-$b" 60 env DQNFLOW_HEADOUT_SHAPE=$sh bin/gputest/dqnflow bench --device cuda --precision bf16-mixed --batch "$b" --steps 300 --json --profile
    echo -n "head-out shape $sh batch $b: " >>"$OUT/summary.txt"
    grep -E '"ms_per_step"' "$LOGS/headout-$sh-$b.log" | tr -d ' \n' >>"$OUT/summary.txt"; echo >>"$OUT/summary.txt"
  done
done
has headout && python3 tools/device/kernels.py "$LOGS"/headout-*.log >>"$OUT/summary.txt"

# Part ncu-headout: where the head outputs' GEMM (gemm128x64o, 102 µs at
# batch 16384, half the rate of the other forward GEMMs) spends its time:
# ncu's full set on the first two launches of its kernel (gemm128x64o
# runs other launches too: the head outputs' has 4224 blocks of 128
# threads at this batch, which the details show), then the report's details
# (the memory tables name the accesses with excessive sectors and
# wavefronts) and its per-instruction SASS counters, into
# ncu-headout-details.txt and ncu-headout-sass.csv (in logs.tgz).
if has ncu-headout; then
  NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  if [ -z "$NCU" ]; then
    log "ncu-headout: no ncu on this machine"
  else
    step ncu-headout 240 "$NCU" --clock-control none --set full --import-source no -k 'regex:^gemm128x64o$' -c 2 \
      -o "$LOGS/headout" bin/gputest/dqnflow bench --device cuda --precision bf16-mixed --batch 16384 --steps 2 --json
    "$NCU" --import "$LOGS/headout.ncu-rep" --page details --print-details all >"$LOGS/ncu-headout-details.txt" 2>&1 ||
      "$NCU" --import "$LOGS/headout.ncu-rep" --page details >"$LOGS/ncu-headout-details.txt" 2>&1
    "$NCU" --import "$LOGS/headout.ncu-rep" --page source --csv --print-source sass >"$LOGS/ncu-headout-sass.csv" 2>&1
    log "ncu-headout: details $(wc -l <"$LOGS/ncu-headout-details.txt") lines, SASS $(wc -l <"$LOGS/ncu-headout-sass.csv") lines"
    grep -E "Excessive|Uncoalesced|Bank|est. speedup|Duration" "$LOGS/ncu-headout-details.txt" | head -40 >>"$OUT/summary.txt"
  fi
fi

# The default epoch on the device (issue 8: ≤ 80 ms in bf16-mixed; the
# collector ≥ 50 M env steps/s with ≥ 4096 envs), then the device
# environment's, collector's and backtest's GPU tests on their own.
# Part runbench: what a user's run costs per epoch on the real activities
# (workflows BenchmarkTrainingRunOnRealActivities: the TrainingRun
# workflow with the default config, a checkpoint every epoch and at the
# end only, in bf16-mixed and fp32; RUNBENCH_EPOCHS epochs, default 40).
# A baseline build of an earlier tree, bin/gputest/baseline-workflows.test
# when the visit carries one, runs beside it for an A/B in one call.
# RUNBENCH_PRECISIONS and RUNBENCH_BINS narrow it; RUNBENCH_BENCH picks
# the sub-benchmarks (a -test.bench pattern); with RUNBENCH_PROFILE=1 each
# run's Go CPU profile comes back as runbench-BIN-PRECISION.prof (the host's
# side of a GPU run: the backtest's walk, the checkpoint, the store).
if has runbench; then
  for p in ${RUNBENCH_PRECISIONS:-bf16-mixed fp32}; do
    for t in ${RUNBENCH_BINS:-workflows baseline-workflows}; do
      [ -x "bin/gputest/$t.test" ] || continue
      prof=()
      [ -n "${RUNBENCH_PROFILE:-}" ] && prof=(-test.cpuprofile "$OUT/runbench-$t-$p.prof")
      step "runbench-$t-$p" 300 env DQNFLOW_TEST_DEVICE=cuda DQNFLOW_TEST_PRECISION=$p DQNFLOW_BENCH_EPOCHS="${RUNBENCH_EPOCHS:-40}" \
        "bin/gputest/$t.test" -test.run '^$' -test.bench "${RUNBENCH_BENCH:-TrainingRunOnRealActivities}" -test.benchtime 1x -test.v "${prof[@]}"
      grep -E "^Benchmark|realactivities_bench" "$LOGS/runbench-$t-$p.log" | sed "s/^/$t $p: /" >>"$OUT/summary.txt"
    done
  done
fi

if has epoch; then
  for p in bf16-mixed fp32 bf16; do
    step "epoch-$p" 150 bin/gputest/dqnflow bench --device cuda --precision "$p" --epoch --epochs 20 --json
    grep -E '"(precision|launches|epoch_ms|collect_ms|train_ms|sync_ms|backtest_ms|collect_device_ms|train_device_ms|backtest_device_ms|gpu_busy_fraction|backtest_bars|backtest_mode|backtest_calls|backtest_calls_max|backtest_rows|num_envs|env_steps_per_s|device_env_steps_per_s)"' "$LOGS/epoch-$p.log" | tr -d ' \n' >>"$OUT/summary.txt"; echo >>"$OUT/summary.txt"
  done
  # The bar-by-bar backtest kernel beside the batched default, same run.
  step "epoch-bf16-mixed-kernel" 150 env DQNFLOW_BACKTEST=kernel bin/gputest/dqnflow bench --device cuda --precision bf16-mixed --epoch --epochs 5 --json
  grep -E '"(epoch_ms|backtest_ms|backtest_device_ms|backtest_mode)"' "$LOGS/epoch-bf16-mixed-kernel.log" | tr -d ' \n' >>"$OUT/summary.txt"; echo >>"$OUT/summary.txt"
  step epoch-tests 300 bin/gputest/gpu.test -test.run 'TestDeviceEnvironmentMatchesMarket|TestDeviceBacktestMatchesHost|TestCollectorThroughput' -test.v -test.count=1 -test.timeout=290s
  grep -E "^(--- |PASS|FAIL|ok)|max relative|differ|env steps/s|replay:|collector, |batched" "$LOGS/epoch-tests.log" | head -80 >>"$OUT/summary.txt"
fi

# Part abbase: this build's step and epoch benchmarks beside a baseline
# build's (bin/base/dqnflow, carried packed as bin/base-dqnflow.txz: make
# it from the earlier tree with `make gpu-binaries-wf` and
# `tar cJf bin/base-dqnflow.txz -C bin base` after copying its dqnflow to
# bin/base/), interleaved in two rounds so that drift shows as noise:
# bf16-mixed at batches 256 and 16384, fp32 at 256, and the default epoch.
if has abbase; then
  if [ -f bin/base-dqnflow.txz ]; then
    tar xJf bin/base-dqnflow.txz -C bin 2>/dev/null ||
      python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall("bin")' bin/base-dqnflow.txz
  fi
  if [ ! -x bin/base/dqnflow ]; then
    log "abbase: no baseline build (carry bin/base-dqnflow.txz): not run"
  else
    for round in 1 2; do
      for bin in base gputest; do
        for pb in bf16-mixed:256 bf16-mixed:16384 fp32:256; do
          p=${pb%:*} b=${pb#*:}
          step "ab-$bin-$p-$b-$round" 90 "bin/$bin/dqnflow" bench --device cuda --precision "$p" --batch "$b" --steps 300 --json
          echo -n "abbase $bin $p batch $b round $round: " >>"$OUT/summary.txt"
          grep -E '"(ms_per_step|ms_per_300_step_epoch)"' "$LOGS/ab-$bin-$p-$b-$round.log" | tr -d ' \n' >>"$OUT/summary.txt"; echo >>"$OUT/summary.txt"
        done
        step "ab-$bin-epoch-$round" 120 "bin/$bin/dqnflow" bench --device cuda --precision bf16-mixed --epoch --epochs 20 --json
        echo -n "abbase $bin epoch bf16-mixed round $round: " >>"$OUT/summary.txt"
        grep -E '"(epoch_ms|collect_ms|train_ms|backtest_ms)"' "$LOGS/ab-$bin-epoch-$round.log" | tr -d ' \n' >>"$OUT/summary.txt"; echo >>"$OUT/summary.txt"
      done
    done
    grep -h '"tuning"' -A3 "$LOGS"/ab-gputest-bf16-mixed-256-1.log | head -8 >>"$OUT/summary.txt"
  fi
fi

# Part gputest: the GPU tests GPUTEST_RUN names (a -test.run pattern),
# for a visit that checks one change without the whole of part tests
# (GPUTEST_SKIP, a -test.skip pattern, leaves some out).
if has gputest; then
  step gputest 400 tools/device/gputests.sh all -test.v -test.count=1 -test.timeout=390s -test.run "${GPUTEST_RUN:?part gputest needs GPUTEST_RUN}" \
    -test.skip "${GPUTEST_SKIP:-^$}"
  grep -E "^(--- |PASS|FAIL|ok)|lost|tolerance" "$LOGS/gputest.log" | head -60 >>"$OUT/summary.txt"
fi

# Part simt: fp32's tests with its GEMMs on the CUDA cores
# (DQNFLOW_FP32_GEMM=simt, the path of GPUs older than sm_80), the tests
# of part tf32 without its benchmarks.
if has simt; then
  step simt-tests 300 env DQNFLOW_FP32_GEMM=simt tools/device/gputests.sh gpu,step -test.run 'TestMatchesCPUReference/fp32|TestConformanceFP32|TestGEMMMatchesFloat64|TestCheckpointsMoveBetweenBackends' -test.count=1 -test.v
  grep -E "^(--- |ok|FAIL|PASS)" "$LOGS/simt-tests.log" | head -40 >>"$OUT/summary.txt"
fi

# Part paneltrain: `dqnflow train` on a panel of two corpus series (the
# carried corpus, as part walkforward) on the GPU, then `dqnflow
# evaluate` of its checkpoint, which loads the panel again from its
# record and must report the same test figures.
if has paneltrain; then
  mkdir -p /tmp/corpus
  [ -f /tmp/corpus/MANIFEST.tsv ] || [ ! -f .corpus/corpus.tar.xz ] || tar xJf .corpus/corpus.tar.xz -C /tmp/corpus 2>/dev/null ||
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' .corpus/corpus.tar.xz /tmp/corpus
  if [ ! -f /tmp/corpus/h4-forex/EURUSD_H4.csv ]; then
    log "paneltrain: no corpus (carry .corpus/corpus.tar.xz): not run"
  else
    rm -rf /tmp/paneltrain
    step paneltrain 200 bin/gputest/dqnflow train --device cuda --epochs "${PANEL_EPOCHS:-6}" --data-root /tmp/corpus \
      --series /tmp/corpus/h4-forex/EURUSD_H4.csv,/tmp/corpus/h4-forex/USDJPY_H4.csv --out /tmp/paneltrain
    ck=$(grep -E '^best epoch .*\.safetensors$' "$LOGS/paneltrain.log" | grep -oE '[^ ]+\.safetensors$' | tail -1)
    tail -c 1500 "$LOGS/paneltrain.log" >>"$OUT/summary.txt"
    if [ -n "$ck" ]; then
      step panel-evaluate 120 bin/gputest/dqnflow evaluate --device cuda --checkpoint "$ck" --data-root /tmp/corpus --out /tmp/paneltrain/eval
      tail -30 "$LOGS/panel-evaluate.log" >>"$OUT/summary.txt"
    fi
  fi
fi

# Part walkforward: the calendar walk-forward over the price corpus on
# the GPU (dqnflow walkforward, ADR 0038), carried packed beside
# bin/gputest-wf.txz (make gpu-binaries-wf; carry [".corpus"],
# tools/device/pack-corpus.sh). WF_SERIES (default: every corpus file but
# the four data inspect flags: LINKUSDT (a zero low), AAPLUSUSD, TSLAUSUSD
# and VXX (not split-adjusted); docs/perf/data-inspect-2026-12-07.md),
# WF_ARGS (default --panel --seeds 8) and WF_SECONDS (the study's wall
# limit, 420) shape it. results.json, summary.json and summary.md come
# back in wf.tgz; the per-window timing lines go to summary.txt.
if has walkforward; then
  rm -rf /tmp/corpus /tmp/wf && mkdir -p /tmp/corpus
  if [ -f .corpus/corpus.tar.xz ]; then
    tar xJf .corpus/corpus.tar.xz -C /tmp/corpus 2>/dev/null ||
      python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' .corpus/corpus.tar.xz /tmp/corpus
  fi
  if [ ! -f /tmp/corpus/MANIFEST.tsv ]; then
    log "walkforward: no corpus (carry .corpus/corpus.tar.xz, tools/device/pack-corpus.sh): not run"
  else
    wfseries=${WF_SERIES:-$(cd /tmp/corpus && ls h4-forex/*.csv hourly/*.csv lean/*.zip | grep -v -E 'LINKUSDT|AAPLUSUSD|TSLAUSUSD|equity-vxx' | sed 's|^|/tmp/corpus/|' | paste -sd, -)}
    log "walkforward: $(echo "$wfseries" | tr ',' '\n' | wc -l) series, args ${WF_ARGS:---panel --seeds 8}"
    # shellcheck disable=SC2086 # WF_ARGS is several flags
    # --max-time ends the study 30 s before the step's limit with the
    # windows done written (results.json's stopped says so).
    step walkforward "${WF_SECONDS:-420}" bin/gputest/dqnflow walkforward --device cuda --data-root /tmp/corpus \
      --series "$wfseries" ${WF_ARGS:---panel --seeds 8} --max-time "$((${WF_SECONDS:-420} - 30))s" --out /tmp/wf
    grep -E "^(window|walk-forward|study|  window)" "$LOGS/walkforward.log" | tail -60 >>"$OUT/summary.txt"
    [ -f /tmp/wf/summary.md ] && cat /tmp/wf/summary.md >>"$OUT/summary.txt"
    tail -5 "$LOGS/walkforward.log" >>"$OUT/summary.txt"
    cp "$LOGS/walkforward.log" /tmp/wf/ 2>/dev/null
    tar czf "$OUT/wf.tgz" -C /tmp wf
  fi
fi

# Part hostwalk: the batched backtest's host work (market.BacktestBatch
# with a policy that costs next to nothing, 8,000 bars) and the report's
# CVaR on this machine's CPU, at 1 to 16 goroutines: what the epoch's
# backtest spends on the host between its network calls.
if has hostwalk; then
  step hostwalk 200 bin/gputest/market.test -test.run XXX -test.bench 'BenchmarkBacktestBatch|BenchmarkCVaR' -test.benchtime 100x -test.count 3 -test.cpu 1,2,4,8,16
  grep -E '^(Benchmark|cpu:)' "$LOGS/hostwalk.log" >>"$OUT/summary.txt"
fi

# Part envblock: the collector with smaller blocks of its
# one-thread-per-environment kernels (DQNFLOW_ENV_BLOCK) beside the
# default 64, same call.
has envblock && for eb in 64 128 256; do
  step "envblock-$eb" 120 env DQNFLOW_ENV_BLOCK=$eb bin/gputest/gpu.test -test.run 'TestCollectorThroughput' -test.v -test.count=1
  grep -E "env steps/s|env_step|env_commit" "$LOGS/envblock-$eb.log" | sed "s/^ */env block $eb: /" >>"$OUT/summary.txt"
done

if has pytorch && [ -f bench/pytorch/bench.py ]; then
  step pytorch 240 python3 bench/pytorch/bench.py --out "$LOGS/pytorch.json" --budget-s 210
  tail -25 "$LOGS/pytorch.log" >>"$OUT/summary.txt"
fi
# Part pytorch-autotune: torch.compile's max-autotune (the variant the
# default budget of part pytorch skips) beside that part's best variant,
# bf16 autocast both, with a budget of its own (PYTORCH_AUTOTUNE_S).
if has pytorch-autotune && [ -f bench/pytorch/bench.py ]; then
  budget=${PYTORCH_AUTOTUNE_S:-330}
  step pytorch-autotune $((budget + 30)) python3 bench/pytorch/bench.py --variants compile+capture-bf16,compile-max-autotune-bf16 \
    --no-checks --out "$LOGS/pytorch-autotune.json" --budget-s "$budget"
  tail -12 "$LOGS/pytorch-autotune.log" >>"$OUT/summary.txt"
fi
if has cpu; then
  if [ -x tools/bench-cpu-vs-pytorch.sh ]; then
    step cpu-vs-pytorch 170 tools/bench-cpu-vs-pytorch.sh --cores 0,1 --bin bin/gputest/dqnflow --out "$LOGS/cpu"
    tail -15 "$LOGS/cpu-vs-pytorch.log" >>"$OUT/summary.txt"
  else
    log "cpu: tools/bench-cpu-vs-pytorch.sh not here"
  fi
fi
if has ncu; then
  NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  if [ -n "$NCU" ]; then
    # Hardware counters of the step's kernels at batch 16384 (gemm128*: the
    # collector's small inference GEMMs are gemm64, left out).
    step ncu 200 "$NCU" --clock-control none --section SpeedOfLight --section Occupancy --section LaunchStats \
      --section WarpStateStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
      -k 'regex:^(gemm128|c51_loss|grad_|adamw|spectral|sample|prio_|tree_)' -c 20 \
      bin/gputest/dqnflow bench --device cuda --precision bf16-mixed --batch 16384 --steps 2 --json
    grep -E "^  [a-z_0-9]+.*\(|Duration|Compute \(SM\) Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Theoretical Occupancy" "$LOGS/ncu.log" | head -200 >"$LOGS/ncu-summary.txt"
    log "ncu: $(grep -c Duration "$LOGS/ncu.log") kernels profiled (ncu-summary.txt in logs.tgz)"
  else
    log "ncu: not on this machine"
  fi
fi
if has sanitize && ! command -v compute-sanitizer >/dev/null; then
  log "compute-sanitizer: not on this machine"
elif has sanitize; then
  step memcheck 100 compute-sanitizer --tool memcheck --error-exitcode 9 bin/gputest/gpu.test -test.run 'TestCheckpointsMoveBetweenBackends|TestMatchesCPUReference/fp32' -test.count=1
  tail -4 "$LOGS/memcheck.log" >>"$OUT/summary.txt"
  step racecheck 80 compute-sanitizer --tool racecheck --error-exitcode 9 bin/gputest/gpu.test -test.run 'TestCheckpointsMoveBetweenBackends' -test.count=1
  tail -4 "$LOGS/racecheck.log" >>"$OUT/summary.txt"
  # Every GEMM shape and layout (the 128-row tiles run only at large batch).
  step memcheck-gemm 80 compute-sanitizer --tool memcheck --error-exitcode 9 bin/gputest/step.test -test.run 'TestGEMMMatchesFloat64' -test.count=1
  tail -4 "$LOGS/memcheck-gemm.log" >>"$OUT/summary.txt"
fi
# Part sanitize-step: memcheck of one training step and its reference
# check in every mode (sampling, forward, c51_loss with its bias parts,
# grad_reduce, backward, AdamW, spectral, priorities), and racecheck of the
# bf16-mixed step, whose loss and reductions share memory within a block.
if has sanitize-step && command -v compute-sanitizer >/dev/null; then
  step memcheck-step 200 compute-sanitizer --tool memcheck --error-exitcode 9 bin/gputest/gpu.test -test.run 'TestMatchesCPUReference' -test.count=1
  tail -4 "$LOGS/memcheck-step.log" >>"$OUT/summary.txt"
  step racecheck-step 200 compute-sanitizer --tool racecheck --error-exitcode 9 bin/gputest/gpu.test -test.run 'TestMatchesCPUReference/bf16-mixed' -test.count=1
  tail -4 "$LOGS/racecheck-step.log" >>"$OUT/summary.txt"
elif has sanitize-step; then
  log "compute-sanitizer: not on this machine"
fi
# Part sanitize-env (also in sanitize): the device environment and
# collector (observe, step, the replay commit's scan and writes) over a
# whole episode. The backtest tests walk 8,000 bars and outlast the
# sanitizers' time here.
# Part sanitize-gemm: memcheck and racecheck on every GEMM shape, layout
# and edge of TestGEMMMatchesFloat64 alone (part sanitize has the rest).
if has sanitize-gemm && command -v compute-sanitizer >/dev/null; then
  step memcheck-gemm 150 compute-sanitizer --tool memcheck --error-exitcode 9 bin/gputest/step.test -test.run 'TestGEMMMatchesFloat64' -test.count=1
  tail -4 "$LOGS/memcheck-gemm.log" >>"$OUT/summary.txt"
  if [ -z "${NO_RACECHECK:-}" ]; then
    step racecheck-gemm 200 compute-sanitizer --tool racecheck --error-exitcode 9 bin/gputest/step.test -test.run 'TestGEMMMatchesFloat64' -test.count=1
    tail -4 "$LOGS/racecheck-gemm.log" >>"$OUT/summary.txt"
  fi
elif has sanitize-gemm; then
  log "compute-sanitizer: not on this machine"
fi
if { has sanitize || has sanitize-env; } && command -v compute-sanitizer >/dev/null; then
  step memcheck-env 120 compute-sanitizer --tool memcheck --error-exitcode 9 bin/gputest/gpu.test -test.run 'TestDeviceEnvironmentMatchesMarket' -test.count=1
  tail -4 "$LOGS/memcheck-env.log" >>"$OUT/summary.txt"
  step racecheck-env 120 compute-sanitizer --tool racecheck --error-exitcode 9 bin/gputest/gpu.test -test.run 'TestDeviceEnvironmentMatchesMarket' -test.count=1
  tail -4 "$LOGS/racecheck-env.log" >>"$OUT/summary.txt"
fi

if has noise; then
  # How far each mode moves with the seed: the parity study at the seeds of
  # NOISE_SEEDS (default 2 3) in the modes of NOISE_MODES (default fp32 and
  # bf16-mixed), 50 epochs each; tools/device/noise.py summarises the
  # parity.json files over seeds.
  for seed in ${NOISE_SEEDS:-2 3}; do
    echo "{\"seed\": $seed}" >"/tmp/parity-seed$seed.json"
    step "noise-seed$seed" 280 bin/gputest/dqnflow parity --device cuda --epochs 50 --modes "${NOISE_MODES:-fp32,bf16-mixed}" \
      --config "/tmp/parity-seed$seed.json" --out "$LOGS/noise-seed$seed"
    grep -E "^(fp32|bf16-mixed|bf16|bf16-sr) " "$LOGS/noise-seed$seed.log" | sed "s/^/seed $seed: /" >>"$OUT/summary.txt"
  done
fi

if has control; then
  # The control of the precision study (ADR 0017): the noise study again
  # with only the summation order of the weight gradients changed
  # (DQNFLOW_GRAD_KCHUNK, default here 128 rows per split instead of 64 at
  # batch 256), so fp32 is compared with fp32 that differs in rounding alone.
  for seed in ${NOISE_SEEDS:-2 3}; do
    echo "{\"seed\": $seed}" >"/tmp/parity-seed$seed.json"
    DQNFLOW_GRAD_KCHUNK=${CONTROL_KCHUNK:-128} step "control-seed$seed" 280 bin/gputest/dqnflow parity --device cuda --epochs 50 --modes "${CONTROL_MODES:-fp32,bf16-mixed}" \
      --config "/tmp/parity-seed$seed.json" --out "$LOGS/control-seed$seed"
    grep -E "^(fp32|bf16-mixed|bf16|bf16-sr) " "$LOGS/control-seed$seed.log" | sed "s/^/control seed $seed: /" >>"$OUT/summary.txt"
  done
fi
if has noise || has control; then
  python3 tools/device/noise.py "$LOGS" >"$OUT/noise.md" 2>&1
  cat "$OUT/noise.md" >>"$OUT/summary.txt"
fi

if has parity; then
  # Convergence parity (issue 8 §5): same seed, data and config in each
  # mode, 50 epochs each; exit 1 means a mode does not hold parity.
  step parity 560 bin/gputest/dqnflow parity --device cuda --epochs 50 --out "$LOGS/parity"
  grep -vE "^parity .*: epoch " "$LOGS/parity.log" | tail -30 >>"$OUT/summary.txt"
  cp "$LOGS/parity/parity.json" "$LOGS/parity/learning-curves.png" "$OUT/" 2>/dev/null
fi
