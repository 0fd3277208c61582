#!/usr/bin/env bash
# The CPU backend against PyTorch on the same cores, in one run: dqnflow
# bench --device cpu on gonum, then on OpenBLAS with the PyTorch CPU
# reference of the same step (bench/pytorch/bench.py, eager and
# torch.compile) at the same thread count, pinned to the same cores. Prints
# steps/s and the ratios, and keeps the JSON of each bench.
#
#   tools/bench-cpu-vs-pytorch.sh [--cores 0,1] [--steps 100] [--batch 256]
#                                 [--python python3] [--bin bin/dqnflow] [--out DIR]
#
# Needs bin/dqnflow (make build), python3 with torch, and OpenBLAS: installed
# (Debian: apt-get install libopenblas0), at $DQNFLOW_OPENBLAS, or as
# bin/openblas/ or bin/openblas.tar.xz made on a machine that has it with
#
#   tools/bench-cpu-vs-pytorch.sh --pack
#
# (copies libopenblas.so.0 with the libgfortran and libquadmath it needs,
# about 11 MB compressed), for a machine that cannot install packages.
set -euo pipefail
cd "$(dirname "$0")/.."

cores=0,1 steps=100 batch=256 python=python3 bin=bin/dqnflow out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --cores) cores=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --python) python=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --pack)
      lib=$(ldconfig -p | awk '/libopenblas\.so\.0 / && !n++ {print $NF}')
      [ -n "$lib" ] || { echo "--pack: no libopenblas.so.0 here (apt-get install libopenblas0)" >&2; exit 1; }
      lib=$(readlink -f "$lib")
      mkdir -p bin/openblas
      cp -L "$lib" bin/openblas/libopenblas.so.0
      for dep in $(ldd "$lib" | awk '/libgfortran|libquadmath/{print $3}'); do cp -L "$dep" bin/openblas/; done
      tar -cJf bin/openblas.tar.xz -C bin openblas
      ls -la bin/openblas.tar.xz
      exit 0 ;;
    *) echo "unknown argument $1 (see the comment at the top of $0)" >&2; exit 2 ;;
  esac
done

[ -x "$bin" ] || { echo "$bin is missing: run make build" >&2; exit 1; }
if [ -z "${DQNFLOW_OPENBLAS:-}" ] && ! ldconfig -p 2>/dev/null | grep 'libopenblas\.so\.0 ' >/dev/null; then
  if [ ! -d bin/openblas ] && [ -f bin/openblas.tar.xz ]; then tar -xJf bin/openblas.tar.xz -C bin; fi
  if [ -f bin/openblas/libopenblas.so.0 ]; then
    export DQNFLOW_OPENBLAS=$PWD/bin/openblas/libopenblas.so.0
    export LD_LIBRARY_PATH=$PWD/bin/openblas${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  fi
fi

threads=$(awk -F, '{n=0; for (i=1;i<=NF;i++) { if ($i ~ /-/) { split($i,r,"-"); n+=r[2]-r[1]+1 } else n++ } print n}' <<<"$cores")
pin=()
if command -v taskset >/dev/null; then
  pin=(taskset -c "$cores")
else
  echo "taskset not found: not pinned; GOMAXPROCS=$threads and torch at $threads threads" >&2
fi
# Go sizes GOMAXPROCS from the CPU affinity; say it anyway for machines
# where the affinity is not visible (containers).
export GOMAXPROCS=$threads OMP_NUM_THREADS=$threads MKL_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads

[ -n "$out" ] || out=$(mktemp -d)
mkdir -p "$out"
echo "cores $cores ($threads threads), batch $batch, $steps steps; results in $out" >&2

"${pin[@]}" "$bin" bench --device cpu --blas gonum --batch "$batch" --steps "$steps" --pytorch off --json >"$out/gonum.json"
PYTHONUNBUFFERED=1 "${pin[@]}" "$bin" bench --device cpu --blas openblas --batch "$batch" --steps "$steps" \
  --pytorch on --python "$python" --json >"$out/openblas.json"

"$python" - "$out/gonum.json" "$out/openblas.json" <<'EOF'
import json, sys
g, o = (json.load(open(p)) for p in sys.argv[1:3])
print(f"machine: {o['pytorch'].get('device')}; torch {o['pytorch'].get('torch')}, {o['pytorch'].get('threads')} threads")
print(f"{'':34} {'steps/s':>9} {'ms/step':>9}")
print(f"{'dqnflow gonum':34} {g['train_steps_per_s']:9.1f} {g['ms_per_step']:9.2f}   blas {g.get('blas')}")
print(f"{'dqnflow openblas':34} {o['train_steps_per_s']:9.1f} {o['ms_per_step']:9.2f}   blas {o.get('blas')}")
for v in o["pytorch"].get("variants", []):
    if v["status"] != "ok":
        print(f"{'pytorch ' + v['variant']:34} {v['status']}: {v.get('error', '')[:100]}")
        continue
    print(f"{'pytorch ' + v['variant']:34} {v['steps_per_s']:9.1f} {v['ms_per_step']:9.2f}   "
          f"dqnflow openblas / pytorch = {v['speedup']:.2f}x, gonum / pytorch = {g['train_steps_per_s'] / v['steps_per_s']:.2f}x")
print(f"openblas / gonum = {o['train_steps_per_s'] / g['train_steps_per_s']:.2f}x")
EOF
