#!/usr/bin/env python3
"""Time the PyTorch reference of the dqnflow training step (dqn.py) in the
variants a strong PyTorch user would try, next to the GPU's own ceilings.

  python3 bench/pytorch/bench.py --out pytorch.json          # full run, ≤ --budget-s
  python3 bench/pytorch/bench.py --smoke --out smoke.json    # 3 steps per variant
  python3 bench/pytorch/bench.py --list                      # the variants

One JSON document goes to --out (stdout by default), a table to stderr. Every
variant and batch runs in its own try/except: a failure is recorded with its
traceback and the run goes on. The whole script, torch's import included,
ends within --budget-s: a variant whose expected cost no longer fits is
skipped with the reason, and a watchdog writes what has been measured and
exits (status 3) if a variant (a slow torch.compile, say) runs past the
budget. README.md beside this file explains the variants and the schema.
"""

import argparse
import datetime
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
import traceback

T_START = time.monotonic()

SCHEMA = "dqnflow-bench-pytorch/1"

# Figures measured on this H200 (DESIGN.md §6, 2026-12-01) that this
# reference must match or explain.
DESIGN_REFERENCE = {
    "source": "DESIGN.md §6, PyTorch 2.11 on the H200, 2026-12-01",
    "eager_fp32_b256_ms_per_step": 9.6,
    "compile_fp32_b256_ms_per_step": 6.2,
    "graph_fp32_b256_ms_per_step": 1.22,
    "graph_fp32_b256_ms_per_epoch": 366.0,
    "graph_bf16_b16384_ms_per_step": 2.6,
}

# --- Variants -------------------------------------------------------------------
#
# kind:    eager            the step as Python calls it
#          graph            the whole eager step captured once in a
#                           torch.cuda.CUDAGraph and replayed
#          compile          torch.compile of the forward+loss (its backward is
#                           compiled by AOTAutograd) and of the update (clip,
#                           AdamW, spectral step, priorities), in `mode`
#          compile+capture  the compiled step (mode default) captured by hand
#                           in one torch.cuda.CUDAGraph
# est_s:   the seconds a variant is expected to need for its first batch size
#          (compilation included); it is skipped when less budget is left.

BASES = {
    "eager": dict(kind="eager", mode=None, opt="fused", est_s=8),
    "graph": dict(kind="graph", mode=None, opt="fused-capturable", est_s=8),
    "compile": dict(kind="compile", mode="default", opt="foreach-capturable", est_s=35),
    "compile+capture": dict(kind="compile+capture", mode="default", opt="foreach-capturable", est_s=30),
    "compile-graph": dict(kind="compile", mode="reduce-overhead", opt="foreach-capturable", est_s=35),
    "compile-max-autotune": dict(kind="compile", mode="max-autotune-no-cudagraphs",
                                 opt="foreach-capturable", est_s=90),
}
VARIANTS = {}
for _name, _b in BASES.items():
    VARIANTS[_name] = dict(_b, precision="fp32")
    VARIANTS[_name + "-bf16"] = dict(_b, precision="bf16")

# On the CPU there are no CUDA graphs: eager, and torch.compile (inductor's
# C++/OpenMP code) in default mode and in max-autotune.
CPU_VARIANTS = ["eager", "compile"]

# Run order: the cheap variants first, then torch.compile in default mode and
# the two variants that reuse its compiled graphs (inductor's FX graph cache
# hits), then bf16, and max-autotune (slowest to compile) last, so that a
# tight budget cuts the least informative ones.
DEFAULT_VARIANTS = [
    "eager", "graph", "eager-bf16", "graph-bf16",
    "compile", "compile+capture", "compile-graph",
    "compile-bf16", "compile+capture-bf16", "compile-graph-bf16",
    "compile-max-autotune", "compile-max-autotune-bf16",
]


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="-", help="JSON output file ('-': stdout)")
    p.add_argument("--budget-s", type=float, default=240.0,
                   help="wall-clock budget of the whole script, import of torch included (default 240)")
    p.add_argument("--smoke", action="store_true",
                   help="run each variant for 3 steps (1 warm-up), no epoch timing: a check that everything runs")
    p.add_argument("--variants", default=None,
                   help="comma-separated variants in run order, or 'all' (see --list); default: all but "
                        "max-autotune on cuda, " + ",".join(CPU_VARIANTS) + " on cpu")
    p.add_argument("--batches", default=None, help="comma-separated batch sizes (default 256,4096,16384; cpu: 256)")
    p.add_argument("--epoch-batch", type=int, default=None,
                   help="batch size at which a whole 300-step epoch plus target sync is timed (0: none; "
                        "default 256, cpu: 0)")
    p.add_argument("--threads", type=int, default=0,
                   help="cpu: torch.set_num_threads (intra-op threads; 0: torch's default), the thread count "
                        "to match when comparing with dqnflow bench --device cpu")
    p.add_argument("--repeats", type=int, default=7, help="timed repeats per variant and batch (median taken)")
    p.add_argument("--rep-ms", type=float, default=50.0, help="target length of one timed repeat, in ms")
    p.add_argument("--epoch-repeats", type=int, default=3, help="timed epochs (fewer when an epoch is slow)")
    p.add_argument("--warmup", type=int, default=5, help="warm-up steps after compilation or capture")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--next-forward", choices=("joint", "split"), default="joint",
                   help="online net on [s; s'] as one batch (joint, as the Go backend), or s with grad and s' without")
    p.add_argument("--net", choices=("grouped", "plain"), default="grouped",
                   help="grouped: the four heads' GEMMs batched; plain: ten GEMMs as net.go")
    p.add_argument("--tf32", action="store_true",
                   help="allow TF32 for float32 matmuls (default: IEEE float32, like the Go fp32 mode)")
    p.add_argument("--capacity", type=int, default=100_000, help="replay capacity (full buffer)")
    p.add_argument("--bars", type=int, default=53_256, help="bars in the device feature matrix")
    p.add_argument("--device", default="cuda",
                   help="torch device (default cuda); cpu only checks that the script runs, with host timers")
    p.add_argument("--no-ceilings", action="store_true", help="skip the bf16 GEMM and copy-bandwidth ceilings")
    p.add_argument("--no-checks", action="store_true", help="skip the numerical self-checks")
    p.add_argument("--list", action="store_true", help="list the variants and exit")
    a = p.parse_args(argv)
    cpu = a.device == "cpu"
    if a.variants is None:
        a.variants = ",".join(CPU_VARIANTS if cpu else DEFAULT_VARIANTS)
    if a.batches is None:
        a.batches = "256" if cpu else "256,4096,16384"
    if a.epoch_batch is None:
        a.epoch_batch = 0 if cpu else 256
    if a.variants.strip() == "all":
        a.variant_list = list(VARIANTS)
    else:
        a.variant_list = [v.strip() for v in a.variants.split(",") if v.strip()]
    unknown = [v for v in a.variant_list if v not in VARIANTS]
    if unknown:
        p.error(f"unknown variants {unknown}; known: {', '.join(VARIANTS)}")
    try:
        a.batch_list = [int(b) for b in a.batches.split(",") if b.strip()]
    except ValueError:
        p.error(f"--batches {a.batches!r}: want comma-separated integers")
    if not a.batch_list or min(a.batch_list) < 1:
        p.error("--batches: want positive batch sizes")
    if a.smoke:
        a.repeats, a.warmup, a.epoch_batch = 1, 1, 0
    return a


# --- Output ---------------------------------------------------------------------


class Report:
    """The JSON document, written once at the end or by the watchdog."""

    def __init__(self, args):
        self.args = args
        self.lock = threading.Lock()
        self.written = False
        self.current = None  # what runs now, in words
        self.running = None  # the variant and batch that run now
        self.doc = {
            "schema": SCHEMA,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "argv": sys.argv[1:],
            "smoke": args.smoke,
            "budget_s": args.budget_s,
            "elapsed_s": None,
            "aborted": None,
            "env": {"python": platform.python_version()},
            "settings": {},
            "model": {},
            "ceilings": {},
            "checks": {},
            "results": [],
            "skipped": [],
            "summary": {},
            "design_reference": DESIGN_REFERENCE,
        }

    def emit(self, aborted=None):
        with self.lock:
            if self.written:
                return
            self.written = True
            d = self.doc
            d["elapsed_s"] = round(time.monotonic() - T_START, 2)
            if aborted:
                d["aborted"] = aborted
                if self.running is not None:
                    d["results"].append(dict(self.running, status="aborted", error=aborted))
            d["summary"] = summarise(d)
            text = json.dumps(d, indent=2, default=str) + "\n"
            try:
                if self.args.out in ("-", ""):
                    sys.stdout.write(text)
                    sys.stdout.flush()
                else:
                    tmp = self.args.out + ".tmp"
                    with open(tmp, "w") as f:
                        f.write(text)
                    os.replace(tmp, self.args.out)
            except Exception as e:  # still print the table
                sys.stderr.write(f"bench: writing {self.args.out}: {e}\n")
            try:
                sys.stderr.write(table(d))
                sys.stderr.flush()
            except Exception as e:
                sys.stderr.write(f"bench: table: {e}\n")


def summarise(d):
    """Best variant per batch, the 300-step epoch at the epoch batch, and the
    comparison with the DESIGN.md figures."""
    ok = [r for r in d["results"] if r.get("status") == "ok" and r.get("ms_per_step")]
    s = {"best_per_batch": {}, "best_per_batch_fp32": {}, "best_per_batch_bf16": {}}
    for r in ok:
        b = str(r["batch"])
        for key in ("best_per_batch", f"best_per_batch_{r['precision']}"):
            cur = s[key].get(b)
            if cur is None or r["ms_per_step"] < cur["ms_per_step"]:
                s[key][b] = {"variant": r["variant"], "ms_per_step": r["ms_per_step"],
                             "steps_per_s": r["steps_per_s"]}
    for key, prec in (("best_epoch", None), ("best_epoch_fp32", "fp32"), ("best_epoch_bf16", "bf16")):
        ep = [r for r in ok if r.get("epoch_ms") and prec in (None, r["precision"])]
        if ep:
            best = min(ep, key=lambda r: r["epoch_ms"])
            s[key] = {"variant": best["variant"], "batch": best["batch"], "epoch_ms": best["epoch_ms"]}

    def get(v, b):
        for r in ok:
            if r["variant"] == v and r["batch"] == b:
                return r["ms_per_step"]
        return None

    pairs = [("eager", 256, "eager_fp32_b256_ms_per_step"),
             ("compile", 256, "compile_fp32_b256_ms_per_step"),
             ("graph", 256, "graph_fp32_b256_ms_per_step"),
             ("graph-bf16", 16384, "graph_bf16_b16384_ms_per_step")]
    cmp = {}
    for v, b, key in pairs:
        ms = get(v, b)
        if ms is not None:
            ref = DESIGN_REFERENCE[key]
            cmp[key] = {"measured": ms, "design": ref, "speedup_vs_design": round(ref / ms, 3)}
    # DESIGN.md's figures are the H200's; a CPU run has nothing to compare.
    s["vs_design"] = cmp if d["env"].get("kind") != "cpu" else {}
    return s


def fmt(x, spec):
    """x formatted by spec, or '-' as wide as spec says when x is missing."""
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return format(x, spec)
    width = spec.split(".")[0]
    return "-".rjust(int(width)) if width.isdigit() else "-"


def table(d):
    lines = ["", f"dqnflow PyTorch reference, {d['env'].get('device', {}).get('name', '?')}, "
                 f"torch {d['env'].get('torch', '?')}{' (smoke)' if d['smoke'] else ''}"]
    c = d.get("ceilings", {})
    mm, cp = c.get("bf16_matmul", {}), c.get("copy", {})
    if c:
        lines.append(f"ceilings: bf16 GEMM {fmt(mm.get('tflops'), '.0f')} TFLOP/s"
                     f"{' (' + mm['error'][:60] + ')' if 'error' in mm else ''}; "
                     f"copy {fmt(cp.get('gb_per_s'), '.0f')} GB/s"
                     f"{' (' + cp['error'][:60] + ')' if 'error' in cp else ''}")
        for b, g in sorted(c.get("step_gemms", {}).get("batches", {}).items(), key=lambda x: int(x[0])):
            lines.append(f"cuBLAS on the step's GEMM shapes, batch {b}: {fmt(g.get('ms'), '.3f')} ms "
                         f"({fmt(g.get('gflop'), '.1f')} GFLOP, {fmt(g.get('tflops'), '.0f')} TFLOP/s)")
    else:
        lines.append("ceilings: not measured")
    ck = d.get("checks", {})
    if ck:
        lines.append(f"self-checks: {'ok' if ck.get('ok') else 'FAILED ' + str(ck.get('error', ''))[:80]}")
    lines.append(f"{'variant':<26} {'batch':>6} {'ms/step':>9} {'steps/s':>9} {'ms/epoch':>9} "
                 f"{'TFLOP/s':>8} {'setup s':>8}  status")
    for r in d["results"]:
        st = r.get("status", "?")
        if st != "ok":
            st += ": " + str(r.get("error") or r.get("reason") or "")[:70].replace("\n", " ")
        lines.append(f"{r['variant']:<26} {r['batch']:>6} {fmt(r.get('ms_per_step'), '9.3f')} "
                     f"{fmt(r.get('steps_per_s'), '9.1f')} {fmt(r.get('epoch_ms'), '9.1f')} "
                     f"{fmt(r.get('model_tflops'), '8.2f')} {fmt(r.get('setup_s'), '8.1f')}  {st}")
    vs = d.get("summary", {}).get("vs_design", {})
    for k, v in vs.items():
        lines.append(f"vs DESIGN.md: {k}: {v['measured']:.3f} ms here, {v['design']} ms there "
                     f"({v['speedup_vs_design']}x)")
    if d.get("aborted"):
        lines.append(f"ABORTED: {d['aborted']}")
    lines.append(f"elapsed {d.get('elapsed_s')} s of a {d['budget_s']} s budget")
    return "\n".join(lines) + "\n"


def short_error(e):
    return f"{type(e).__name__}: {e}"[:2000]


# --- Measurement ----------------------------------------------------------------


def main(argv):
    args = parse_args(argv)
    if args.list:
        for n, v in VARIANTS.items():
            star = "*" if n in DEFAULT_VARIANTS else " "
            print(f"{star} {n:<28} kind={v['kind']:<16} precision={v['precision']:<5} "
                  f"mode={v['mode']} optimizer={v['opt']}")
        print("(* run by default, in the order of --variants)")
        return 0

    rep = Report(args)
    deadline = max(args.budget_s - 3.0, 1.0)  # leave time to write and exit
    watchdog = threading.Timer(
        max(deadline - (time.monotonic() - T_START), 0.1),
        lambda: (rep.emit(aborted=f"hard deadline {args.budget_s:.0f} s reached during "
                                  f"{rep.current or 'start-up'}; results so far"), os._exit(3)))
    watchdog.daemon = True
    watchdog.start()
    try:
        run(args, rep)
    except BaseException as e:  # noqa: BLE001 - record anything, even Ctrl-C
        rep.doc["aborted"] = short_error(e)
        rep.doc["traceback"] = traceback.format_exc()[-4000:]
    finally:
        watchdog.cancel()
        rep.emit()
    return 0


def run(args, rep):
    doc = rep.doc
    rep.current = "import torch"
    import torch  # noqa: E402 (lazy: --help and --list need no torch)

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import dqn  # noqa: E402

    env = doc["env"]
    env["torch"] = torch.__version__
    env["cuda"] = torch.version.cuda
    for mod in ("triton", "numpy"):
        try:
            env[mod] = __import__(mod).__version__
        except Exception as e:
            env[mod] = f"unavailable: {short_error(e)}"
    env["import_s"] = round(time.monotonic() - T_START, 2)
    dev = torch.device(args.device)
    env["kind"] = dev.type
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError("no CUDA device visible to torch")
        prop = torch.cuda.get_device_properties(dev)
        env["device"] = {
            "name": prop.name, "capability": f"{prop.major}.{prop.minor}",
            "multiprocessors": prop.multi_processor_count, "memory_bytes": prop.total_memory,
            "l2_bytes": getattr(prop, "L2_cache_size", None),
        }
        try:
            q = subprocess.run(["nvidia-smi", "--query-gpu=driver_version,clocks.sm,clocks.max.sm,power.limit",
                                "--format=csv,noheader"], capture_output=True, text=True, timeout=10)
            env["nvidia_smi"] = q.stdout.strip() or q.stderr.strip()
        except Exception as e:
            env["nvidia_smi"] = f"unavailable: {short_error(e)}"
    else:
        if args.threads > 0:
            torch.set_num_threads(args.threads)
        env["threads"] = torch.get_num_threads()
        env["interop_threads"] = torch.get_num_interop_threads()
        try:
            affinity = len(os.sched_getaffinity(0))
        except Exception:
            affinity = None
        env["device"] = {"name": f"{dev} ({cpu_model()}, {torch.get_num_threads()} threads, "
                                 f"{affinity or os.cpu_count()} of {os.cpu_count()} CPUs usable)",
                         "threads": torch.get_num_threads(), "cpus_usable": affinity,
                         "cpus": os.cpu_count(), "parallel_info": torch.__config__.parallel_info()}

    torch.set_float32_matmul_precision("high" if args.tf32 else "highest")
    try:
        import torch._dynamo as dynamo
        dynamo.config.cache_size_limit = max(dynamo.config.cache_size_limit, 64)
        if hasattr(dynamo.config, "recompile_limit"):
            dynamo.config.recompile_limit = max(dynamo.config.recompile_limit, 64)
    except Exception as e:
        env["dynamo_config"] = f"not set: {short_error(e)}"

    cfg = dqn.Config(capacity=args.capacity, bars=args.bars)
    doc["settings"] = {
        "variants": args.variant_list, "batches": args.batch_list, "epoch_batch": args.epoch_batch,
        "repeats": args.repeats, "rep_ms": args.rep_ms, "warmup": args.warmup, "seed": args.seed,
        "next_forward": args.next_forward, "net": args.net,
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "replay": {"capacity": cfg.capacity, "bars": cfg.bars, "storage": "bar index + 8 agent features per "
                   "state, device feature matrix bars x 56", "sampling": "stratified proportional, "
                   "float64 cumsum + searchsorted", "alpha": cfg.alpha, "beta0": cfg.beta0,
                   "beta_steps": cfg.beta_steps},
        "optim": {"lr": cfg.lr, "betas": [cfg.beta1, cfg.beta2], "eps": cfg.eps,
                  "weight_decay": cfg.weight_decay, "clip_norm": cfg.clip_norm,
                  "spectral_bound": cfg.spectral_bound, "gamma": cfg.gamma, "n_step": cfg.n_step,
                  "target_tau": cfg.target_tau, "steps_per_epoch": cfg.steps_per_epoch},
    }
    doc["model"] = {
        "obs_dim": dqn.OBS_DIM, "trunk": [cfg.trunk1, cfg.trunk2], "head": cfg.head, "atoms": cfg.atoms,
        "support": [cfg.v_min, cfg.v_max], "branches": list(dqn.BRANCHES),
        "parameters": dqn.num_params(cfg),
        "layers": [{"name": n, "in": i, "out": o} for n, i, o in dqn.logical_layers(cfg)],
        "model_flops_per_step": {str(b): dqn.model_flops_per_step(cfg, b) for b in args.batch_list},
    }

    if not args.no_ceilings and dev.type == "cuda":
        rep.current = "ceilings"
        doc["ceilings"] = ceilings(torch, dev)
        doc["ceilings"]["step_gemms"] = step_gemms(torch, dev, dqn, cfg, args.batch_list)
    if not args.no_checks:
        rep.current = "checks"
        doc["checks"] = checks(torch, dqn, cfg, dev, args)

    for name in args.variant_list:
        spec = VARIANTS[name]
        for i, batch in enumerate(args.batch_list):
            left = args.budget_s - (time.monotonic() - T_START)
            need = spec["est_s"] if i == 0 else max(spec["est_s"] // 2, 5)
            if args.smoke:
                need = min(need, 20)
            if left < need:
                reason = (f"budget: {left:.0f} s of {args.budget_s:.0f} s left, "
                          f"{name} needs about {need} s")
                with rep.lock:
                    doc["results"].append({"variant": name, "batch": batch, "status": "skipped",
                                           "reason": reason})
                    doc["skipped"].append(f"{name} batch {batch}: {reason}")
                continue
            if dev.type != "cuda" and ("graph" in name or "capture" in name):
                reason = "needs CUDA (CUDA graphs)"
                with rep.lock:
                    doc["results"].append({"variant": name, "batch": batch, "status": "skipped", "reason": reason})
                    doc["skipped"].append(f"{name} batch {batch}: {reason}")
                continue
            rep.current = f"{name} batch {batch}"
            rep.running = {"variant": name, "batch": batch}
            r = run_one(torch, dqn, cfg, dev, name, spec, batch, args)
            with rep.lock:
                rep.running = None
                doc["results"].append(r)
            sys.stderr.write(f"bench: {name:<26} batch {batch:>6}: {r['status']}"
                             f"{'' if r.get('ms_per_step') is None else ' %.3f ms/step' % r['ms_per_step']}"
                             f"{'' if r.get('epoch_ms') is None else ', %.1f ms/epoch' % r['epoch_ms']}"
                             f"{'' if r['status'] == 'ok' else ' ' + str(r.get('error'))[:200]}"
                             f"  [{time.monotonic() - T_START:.0f} s]\n")
            sys.stderr.flush()
    rep.current = "done"


def cpu_model():
    """The CPU's model name (Linux /proc/cpuinfo), or the platform's guess."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def sync(torch):
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def time_ms(torch, fn, n):
    """Time of n calls of fn in ms, from CUDA events on the current stream
    (host clock without CUDA), and the host wall time."""
    if not (torch.cuda.is_available() and torch.cuda.is_initialized()):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        ms = (time.perf_counter() - t0) * 1e3
        return ms, ms
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t0 = time.perf_counter()
    start.record()
    for _ in range(n):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end), (time.perf_counter() - t0) * 1e3


def ceilings(torch, dev):
    out = {}
    try:
        n = 8192
        a = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
        b = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
        for _ in range(3):
            torch.matmul(a, b)
        reps = [time_ms(torch, lambda: torch.matmul(a, b), 10)[0] / 10 for _ in range(3)]
        ms = statistics.median(reps)
        out["bf16_matmul"] = {"m": n, "n": n, "k": n, "data": "randn", "ms": round(ms, 4),
                              "tflops": round(2 * n ** 3 / (ms * 1e-3) / 1e12, 1),
                              "method": "torch.matmul, median of 3 x 10 products after 3 warm-ups"}
        a = b = None  # free before the copy test
    except Exception as e:
        out["bf16_matmul"] = {"error": short_error(e)}
    try:
        nbytes = 2 << 30
        src = torch.empty(nbytes // 4, device=dev, dtype=torch.float32).uniform_()
        dst = torch.empty_like(src)
        for _ in range(3):
            dst.copy_(src)
        reps = [time_ms(torch, lambda: dst.copy_(src), 10)[0] / 10 for _ in range(3)]
        ms = statistics.median(reps)
        out["copy"] = {"bytes_per_copy": nbytes, "ms": round(ms, 4),
                       "gb_per_s": round(2 * nbytes / (ms * 1e-3) / 1e9, 1),
                       "method": "device-to-device Tensor.copy_ of 2 GiB, bytes read + written, "
                                 "median of 3 x 10 copies"}
        src = dst = None
    except Exception as e:
        out["copy"] = {"error": short_error(e)}
    torch.cuda.empty_cache()
    return out



def step_gemms(torch, dev, dqn, cfg, batches):
    """cuBLAS on the step's own GEMM shapes: the bound a backend that calls
    cuBLAS once per matrix could reach on the GEMMs alone.

    For each logical layer (in -> out) and batch n, the step multiplies:
    forward, online at s and s' (2n rows) and target at s' (n rows);
    backward (n rows), the weight gradient G^T.X (out x in, K = n) and,
    except for the first layer, the input gradient G.W (n x in, K = out).
    Each product is one torch.mm in bf16 (cuBLAS, f32 accumulation, bf16
    out). All the products of a step are captured in one CUDA graph, so the
    time is the GPU's and not the host's launch rate; each product is also
    timed alone (20 copies in a graph). FLOPs are counted as dqnflow's
    GEMMFlops does (gpu/profile.go)."""
    out = {"method": "one torch.mm (bf16, cuBLAS) per product of a step, captured in one CUDA graph; "
                     "median of 5 replays x 10 after warm-up; per product: 20 copies in a graph",
           "batches": {}}
    try:
        layers = list(dqn.logical_layers(cfg))
        for n in batches:
            prods = []
            for li, (name, i, o) in enumerate(layers):
                shapes = [("fwd_online", 2 * n, i, o), ("fwd_target", n, i, o), ("bwd_dW", o, n, i)]
                if li > 0:
                    shapes.append(("bwd_dX", n, o, i))
                for kind, m, k, nn in shapes:
                    a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
                    b = torch.randn(k, nn, device=dev, dtype=torch.bfloat16)
                    prods.append((name, kind, m, k, nn, a, b, torch.empty(m, nn, device=dev, dtype=torch.bfloat16)))

            def graph_of(fns):
                side = torch.cuda.Stream()
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    for _ in range(3):
                        for f in fns:
                            f()
                torch.cuda.current_stream().wait_stream(side)
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    for f in fns:
                        f()
                return g

            def replay_ms(g, reps):
                g.replay()
                return statistics.median([time_ms(torch, g.replay, reps)[0] / reps for _ in range(5)])

            fns = [(lambda a=a, b=b, c=c: torch.mm(a, b, out=c)) for (_, _, _, _, _, a, b, c) in prods]
            total_ms = replay_ms(graph_of(fns), 10)
            rows, flops = [], 0.0
            for (name, kind, m, k, nn, a, b, c), f in zip(prods, fns):
                ms = replay_ms(graph_of([f] * 20), 3) / 20
                fl = 2.0 * m * k * nn
                flops += fl
                rows.append({"layer": name, "product": kind, "m": m, "k": k, "n": nn,
                             "us": round(ms * 1e3, 2), "tflops": round(fl / (ms * 1e-3) / 1e12, 1)})
            out["batches"][str(n)] = {"ms": round(total_ms, 4), "gflop": round(flops / 1e9, 3),
                                      "tflops": round(flops / (total_ms * 1e-3) / 1e12, 1),
                                      "products": rows}
            sys.stderr.write(f"bench: cuBLAS on the step's GEMM shapes, batch {n}: {total_ms:.3f} ms, "
                             f"{flops / (total_ms * 1e-3) / 1e12:.0f} TFLOP/s\n")
            prods = fns = None
    except Exception as e:
        out["error"] = short_error(e)
    torch.cuda.empty_cache()
    return out


def checks(torch, dqn, cfg, dev, args):
    """Cheap numerical self-checks of the reference (fp32)."""
    out = {}
    try:
        out["parameters"] = dqn.num_params(cfg)
        out["parameters_ok"] = (out["parameters"] == 286_385) if (cfg.trunk1, cfg.trunk2, cfg.head, cfg.atoms) \
            == (256, 256, 128, 51) else None
        L = dqn.Learner(cfg, 256, dev, precision="fp32", opt_impl="foreach", seed=args.seed)
        blocks = L.online.logical_blocks()
        out["logical_blocks_parameters"] = sum(t.numel() for t in blocks.values())
        torch.manual_seed(args.seed)
        idx, w = L.replay.sample(256, L.beta(), L.arange_b)
        obs, act, rd = L.replay.gather(idx)
        with torch.no_grad():
            g = L.online(obs)
            p = L.online.forward_plain(obs)
            # float64 copy of the plain network as the ground truth
            ref = dqn.Net(cfg, dev)
            ref.load_state_dict(L.online.state_dict())
            ref = ref.double()
            r = ref.forward_plain(obs.double())
        out["grouped_vs_plain_max_abs"] = float((g - p).abs().max())
        out["grouped_vs_float64_rel"] = float((g.double() - r).norm() / r.norm())
        with torch.no_grad():
            pt = torch.softmax(torch.randn(256, 3, cfg.atoms, device=dev), -1)
            m = L.project(pt, rd[:, 0], rd[:, 1])
        out["projection_mass_max_err"] = float((m.sum(-1) - 1).abs().max())
        out["is_weights_max"] = float(w.max())
        out["is_weights_min"] = float(w.min())
        L.step()
        sync(torch)
        out["wo_padding_grad_max_abs"] = max(
            float(L.online.wo.grad[gi, cfg.head_rows(gi):].abs().max()) if cfg.head_rows(gi) < cfg.pad_out else 0.0
            for gi in range(dqn.NUM_HEADS))
        for _ in range(4):
            L.step()
        out["wo_padding_max_abs_after_5_steps"] = max(
            float(L.online.wo[gi, cfg.head_rows(gi):].abs().max()) if cfg.head_rows(gi) < cfg.pad_out else 0.0
            for gi in range(dqn.NUM_HEADS))
        out["loss_after_5_steps"] = float(L.last_loss)
        out["grad_norm_step_5"] = float(L.last_norm)
        # The largest singular values after 5 steps: the bound scales the updated
        # weights by σ taken before the update (ADR 0025), so it holds within one
        # AdamW step (reported, not checked).
        sig = []
        with torch.no_grad():
            for wgrp in L.online.spectral_groups():
                sig += [float(s) for s in torch.linalg.matrix_norm(wgrp.double(), ord=2)]
        out["largest_singular_values"] = [round(s, 4) for s in sig]
        out["ok"] = (out["grouped_vs_float64_rel"] < 1e-5 and out["projection_mass_max_err"] < 1e-5
                     and out["wo_padding_grad_max_abs"] == 0.0 and out["wo_padding_max_abs_after_5_steps"] == 0.0
                     and abs(out["is_weights_max"] - 1.0) < 1e-6)
        del L, ref
    except Exception as e:
        out["error"] = short_error(e)
        out["traceback"] = traceback.format_exc()[-3000:]
    gc.collect()
    cuda = dev.type == "cuda"
    if cuda:
        torch.cuda.empty_cache()
    return out


def run_one(torch, dqn, cfg, dev, name, spec, batch, args):
    """One variant at one batch size. A fused AdamW that fails (to build or
    to be captured) is retried once as foreach, and the first error kept."""
    impls = [spec["opt"]]
    if spec["opt"].startswith("fused"):
        impls.append(spec["opt"].replace("fused", "foreach"))
    first = None
    for i, impl in enumerate(impls):
        r = attempt(torch, dqn, cfg, dev, name, spec, batch, args, impl)
        if r["status"] == "ok" or i == len(impls) - 1:
            break
        first = {"optimizer": impl, "error": r.get("error"), "traceback": r.get("traceback")}
    if first:
        r["first_attempt"] = first
    return r


def attempt(torch, dqn, cfg, dev, name, spec, batch, args, opt_impl):
    r = {"variant": name, "kind": spec["kind"], "precision": spec["precision"], "mode": spec["mode"],
         "batch": batch, "optimizer": opt_impl, "status": "error"}
    keep = []  # graphs and compiled functions that must outlive setup
    L = None
    cuda = dev.type == "cuda"
    try:
        gc.collect()
        if cuda:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        if spec["kind"].startswith("compile"):
            import torch._dynamo
            torch._dynamo.reset()
            try:
                from torch._dynamo.utils import counters
                counters.clear()
            except Exception:
                pass
        t0 = time.monotonic()
        L = dqn.Learner(cfg, batch, dev, precision=spec["precision"], opt_impl=opt_impl,
                        next_forward=args.next_forward, net=args.net, seed=args.seed)
        torch.manual_seed(args.seed)  # the sampling stream
        step = build_step(torch, L, spec, args, keep)
        sync(torch)
        r["setup_s"] = round(time.monotonic() - t0, 2)
        r["loss_after_warmup"] = float(L.last_loss)

        if args.smoke:
            ms, wall = time_ms(torch, step, 3)
            per = [ms / 3]
            r["steps_timed"], r["repeats"] = 3, 1
            r["wall_ms_per_step"] = round(wall / 3, 4)
        else:
            ms, _ = time_ms(torch, step, 3)  # calibrate the repeat length
            k = int(min(max(round(args.rep_ms / max(ms / 3, 1e-3)), 5), 2000))
            per, walls = [], []
            for _ in range(args.repeats):
                ms, wall = time_ms(torch, step, k)
                per.append(ms / k)
                walls.append(wall / k)
            r["steps_timed"], r["repeats"] = k * args.repeats, args.repeats
            r["wall_ms_per_step"] = round(statistics.median(walls), 4)
        med = statistics.median(per)
        r["ms_per_step"] = round(med, 4)
        r["ms_per_step_min"] = round(min(per), 4)
        r["ms_per_step_max"] = round(max(per), 4)
        r["steps_per_s"] = round(1e3 / med, 1)
        r["samples_per_s"] = round(1e3 / med * batch, 0)
        r["ms_per_epoch_from_steps"] = round(med * cfg.steps_per_epoch, 2)
        r["model_tflops"] = round(dqn.model_flops_per_step(cfg, batch) / (med * 1e-3) / 1e12, 3)

        if args.epoch_batch and batch == args.epoch_batch:
            def epoch():
                for _ in range(cfg.steps_per_epoch):
                    step()
                L.sync_target()
            est = med * cfg.steps_per_epoch / 1e3  # seconds per epoch
            n = max(args.epoch_repeats, 1) if est < 1.5 else 1
            left = args.budget_s - (time.monotonic() - T_START)
            if est * n > left - 10:
                r["epoch_skipped"] = f"budget: {left:.0f} s left, {n} epoch(s) need about {est * n:.0f} s"
            else:
                eps = [time_ms(torch, epoch, 1)[0] for _ in range(n)]
                r["epoch_ms"] = round(statistics.median(eps), 2)
                r["epoch_ms_all"] = [round(e, 2) for e in eps]
                r["epoch_includes"] = f"{cfg.steps_per_epoch} steps + EMA target sync (tau {cfg.target_tau})"

        sync(torch)
        loss, norm = float(L.last_loss), float(L.last_norm)
        r["loss_last"], r["grad_norm_last"] = loss, norm
        r["finite"] = all(map(lambda x: x == x and abs(x) != float("inf"), (loss, norm)))
        if cuda:
            r["peak_memory_bytes"] = torch.cuda.max_memory_allocated()
        r["status"] = "ok" if r["finite"] else "error"
        if not r["finite"]:
            r["error"] = f"non-finite loss {loss} or gradient norm {norm}"
    except Exception as e:
        r["error"] = short_error(e)
        r["traceback"] = traceback.format_exc()[-4000:]
        try:
            sync(torch)
        except Exception as e2:
            r["error_after"] = short_error(e2)
    if spec["kind"].startswith("compile"):
        try:
            from torch._dynamo.utils import counters
            r["graph_breaks"] = sum(counters["graph_break"].values())
            skips = counters["inductor"].get("cudagraph_skips", 0) if "inductor" in counters else 0
            if skips:
                r["cudagraph_skips"] = skips
        except Exception:
            pass
    keep.clear()
    L = None  # noqa: F841 (frees the learner before the next variant)
    gc.collect()
    try:
        if cuda:
            torch.cuda.empty_cache()
    except Exception:
        pass
    return r


def capture(torch, fn, warm, keep):
    """Warm fn up on a side stream, then capture one call in a CUDA graph;
    returns its replay."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(max(warm, 1)):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    torch.cuda.synchronize()
    keep.append(g)
    return g.replay


def build_step(torch, L, spec, args, keep):
    """The variant's step function, warmed up (compiled, captured)."""
    kind, mode = spec["kind"], spec["mode"]
    if kind == "eager":
        for _ in range(args.warmup):
            L.step()
        return L.step
    if kind == "graph":
        replay = capture(torch, L.step, 3, keep)
        for _ in range(args.warmup):
            replay()
        return replay

    kw = dict(dynamic=False)
    if mode and mode != "default":
        kw["mode"] = mode
    fwd = torch.compile(L.forward_loss, **kw)
    upd = torch.compile(L.update, **kw)
    keep += [fwd, upd]
    mark = mode == "reduce-overhead"

    def step():
        if mark:
            torch.compiler.cudagraph_mark_step_begin()
        L.opt.zero_grad(set_to_none=True)
        loss, per_sample, idx = fwd()
        loss.backward()
        upd(per_sample, idx)
        L.last_loss.copy_(loss.detach())

    if kind == "compile+capture":
        replay = capture(torch, step, 3, keep)
        for _ in range(args.warmup):
            replay()
        return replay
    for _ in range(args.warmup + (2 if mark else 0)):  # reduce-overhead records on the 2nd-3rd call
        step()
    return step


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
