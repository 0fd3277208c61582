#!/usr/bin/env python3
"""Check the PyTorch reference (dqn.py) against the Go CPU reference.

  go run ./bench/pytorch/refcase -out bench/pytorch/refcase.safetensors
  python3 bench/pytorch/crosscheck.py bench/pytorch/refcase.safetensors [--dtype float64|float32] [--json OUT]

refcase writes, for two optimiser configs, the CPU learner's state, one
batch, and what trainer/cpu computed on it (see refcase/main.go). This
script loads the same weights, spectral vectors and batch into dqn.Learner,
runs the same computations and compares: the online distributions, the
loss, the per-sample losses, every gradient block, the gradient norm, the
state after one step (clipping, AdamW, spectral bound) and the target after
the EMA sync. It runs on the GPU when torch sees one, else on the CPU, in
float64 by default (then the differences are the Go float32 rounding).
Exit status 0 when every comparison is within its tolerance, 1 otherwise.
"""

import argparse
import json
import os
import struct
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dqn  # noqa: E402

DTYPES = {"F32": torch.float32, "F64": torch.float64, "I64": torch.int64, "I32": torch.int32, "U8": torch.uint8}

# Relative tolerances, ‖torch − go‖ / ‖go‖ (issue 7: fp32 logits and loss
# 1e-5, gradients 1e-4). The step's parameter change is compared as
# after − before, whose first AdamW step is lr·g/(|g| + ε): elements with
# |g| near ε or below amplify the gradient's float32 rounding, hence 1e-3.
TOLERANCES = {
    "dist": 1e-5, "loss": 1e-5, "per_sample": 1e-5, "grad": 1e-4, "grad_norm": 1e-4,
    "step_grad_norm": 1e-4, "adam_m": 1e-4, "adam_v": 1e-4, "param_delta": 1e-3,
    "params_after": 1e-6, "spectral_u": 1e-4, "target_synced": 1e-6,
}
# bf16 autocast against Go's bf16-mixed emulation. Issue 7 allows 2e-2 for
# a backend that rounds exactly the values Go rounds; autocast rounds other
# ones too (every GEMM output, including dW, is bf16 before it is widened),
# so the two are two different bf16 roundings of one function. How far bf16
# rounding alone moves a result is measured in the same file: Go's
# bf16-mixed against Go's fp32 on the same weights and batch (the check
# "bf16_noise:grad", informational: 3.2e-2 for the gradient at seed 1, with
# up to 6e-2 in single trunk blocks; autocast against Go's bf16-mixed was
# 4.0e-2). The bounds below are two to three times that noise. The first
# AdamW step is lr·sign(g) wherever |g| ≫ ε, so a gradient element whose
# sign the rounding flips moves its parameter by 2·lr: the parameter change
# gets a looser bound still.
TOLERANCES_BF16 = dict(TOLERANCES, dist=2e-2, loss=2e-2, per_sample=2e-2, grad=0.1, grad_norm=2e-2,
                       step_grad_norm=2e-2, adam_m=0.1, adam_v=0.1, param_delta=0.3, params_after=2e-3,
                       spectral_u=2e-2, target_synced=2e-3)


def read_safetensors(path):
    """Tensors and metadata of a safetensors file, without the safetensors
    package."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {}) or {}
    base = 8 + n
    out = {}
    for name, info in header.items():
        s, e = info["data_offsets"]
        buf = bytearray(raw[base + s:base + e])
        dt = DTYPES[info["dtype"]]
        t = torch.frombuffer(buf, dtype=dt) if buf else torch.empty(0, dtype=dt)
        out[name] = t.reshape(info["shape"])
    return out, meta


def compare(name, got, want, results, tolerances=None, tol=None):
    got = got.detach().double().cpu().reshape(-1)
    want = want.detach().double().cpu().reshape(-1)
    if got.shape != want.shape:
        results.append({"check": name, "ok": False, "error": f"shape {tuple(got.shape)} vs {tuple(want.shape)}"})
        return
    diff = got - want
    den = float(want.norm())
    rel = float(diff.norm()) / den if den > 0 else float(diff.norm())
    if tol is None:
        tol = (tolerances or TOLERANCES)[name.split(":")[-1]]
    results.append({"check": name, "rel": rel, "max_abs": float(diff.abs().max()) if diff.numel() else 0.0,
                    "tol": tol, "ok": rel <= tol})


def flat(blocks):
    return torch.cat([t.reshape(-1) for t in blocks.values()])


def run_case(case, ts, meta, dev, dtype, results):
    cfg = json.loads(meta[f"{case}.config"])
    m, o, n = cfg["model"], cfg["optim"], cfg["batch"]
    precision = "bf16" if cfg.get("precision", "fp32") != "fp32" else "fp32"
    tols = TOLERANCES
    if precision == "bf16":
        dtype, tols = torch.float32, TOLERANCES_BF16  # autocast does not cast float64

    def compare(name, got, want, results):
        globals()["compare"](name, got, want, results, tols)

    c = dqn.Config(trunk1=m["trunk1"], trunk2=m["trunk2"], head=m["head"], atoms=m["atoms"],
                   v_min=m["v_min"], v_max=m["v_max"], lr=o["lr"], beta1=o["beta1"], beta2=o["beta2"],
                   eps=o["eps"], weight_decay=o["weight_decay"], clip_norm=o["clip_norm"],
                   spectral_bound=o["spectral_bound"], gamma=o["gamma"], n_step=o["n_step"],
                   target_tau=o["target_tau"], capacity=max(n, 16), bars=64)
    L = dqn.Learner(c, n, dev, precision=precision, opt_impl="foreach", seed=0)
    if dtype != torch.float32:
        L = L.to(dtype)  # parameters in place (the optimiser keeps them), buffers too
    t = {k[len(case) + 1:]: v for k, v in ts.items() if k.startswith(case + ".")}

    with torch.no_grad():
        for net, prefix in ((L.online, "before.online."), (L.target, "before.target.")):
            for name, view in net.logical_blocks().items():
                view.copy_(t[prefix + name].reshape(view.shape))
        for name, view in L.spectral_vectors().items():
            view.copy_(t[f"before.spectral.{name}.u"])
    before = flat(L.online.logical_blocks()).detach().clone()

    obs = torch.cat([t["obs"], t["next_obs"]]).to(dev, dtype)
    act = t["actions"].to(dev).long() + L.offsets
    ret, disc, w = (t[k].to(dev, dtype) for k in ("return", "discount", "weight"))

    with torch.no_grad():
        compare(f"{case}:dist", torch.softmax(L.online(obs[:n]), -1), t["dist"], results)
    L.opt.zero_grad(set_to_none=True)
    loss, per_sample = L.batch_loss(obs, act, ret, disc, w)
    loss.backward()
    compare(f"{case}:loss", loss, t["loss"], results)
    compare(f"{case}:per_sample", per_sample, t["per_sample"], results)
    grads = {k: p.grad for k, p in L.online.named_parameters()}
    g = flat(L.online.logical_blocks(grads))
    compare(f"{case}:grad", g, t["grad"], results)
    compare(f"{case}:grad_norm", g.norm(), t["grad_norm"], results)
    pad = max(float(grads["wo"][gi, c.head_rows(gi):].abs().max()) if c.head_rows(gi) < c.pad_out else 0.0
              for gi in range(dqn.NUM_HEADS))
    results.append({"check": f"{case}:padding_grad_zero", "max_abs": pad, "ok": pad == 0.0})

    L.update(per_sample.detach(), torch.arange(n, device=dev))
    compare(f"{case}:step_grad_norm", L.last_norm, t["grad_norm"], results)
    after = flat(L.online.logical_blocks()).detach()
    go_after = flat({k: t["after.online." + k] for k in L.online.logical_blocks()})
    go_before = flat({k: t["before.online." + k] for k in L.online.logical_blocks()})
    compare(f"{case}:params_after", after, go_after, results)
    compare(f"{case}:param_delta", after - before, go_after - go_before, results)
    st = L.opt.state
    for key, mk in (("exp_avg", "adam_m"), ("exp_avg_sq", "adam_v")):
        mom = flat(L.online.logical_blocks({k: st[p][key] for k, p in L.online.named_parameters()}))
        compare(f"{case}:{mk}", mom, t["after." + mk.replace("_", ".")], results)
    u = torch.cat([v.reshape(-1) for v in L.spectral_vectors().values()])
    go_u = torch.cat([t[f"after.spectral.{k}.u"] for k in L.spectral_vectors()])
    compare(f"{case}:spectral_u", u, go_u, results)

    L.sync_target()
    tgt = flat(L.target.logical_blocks())
    compare(f"{case}:target_synced", tgt, flat({k: t["synced.target." + k] for k in L.target.logical_blocks()}),
            results)


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("refcase", help="safetensors file written by refcase")
    p.add_argument("--dtype", choices=("float64", "float32"), default="float64")
    p.add_argument("--device", default=None, help="cuda or cpu (default: cuda when available)")
    p.add_argument("--json", default=None, help="write the results as JSON to this file")
    a = p.parse_args(argv)
    dev = torch.device(a.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    dtype = getattr(torch, a.dtype)
    if a.dtype == "float32" and dev.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
    ts, meta = read_safetensors(a.refcase)
    cases = sorted({k.split(".")[0] for k in meta if k.endswith(".config")})
    results = []
    for case in cases:
        try:
            run_case(case, ts, meta, dev, dtype, results)
        except Exception as e:  # record and go on with the next case
            import traceback
            results.append({"check": f"{case}:run", "ok": False, "error": f"{type(e).__name__}: {e}",
                            "traceback": traceback.format_exc()[-3000:]})
    if "default.grad" in ts and "mixed.grad" in ts:
        # How far bf16 rounding alone moves the gradient: Go against Go.
        compare("bf16_noise:grad", ts["mixed.grad"], ts["default.grad"], results, tol=1.0)
    ok = bool(results) and all(r["ok"] for r in results)
    doc = {"refcase": os.path.basename(a.refcase), "device": str(dev), "dtype": a.dtype,
           "torch": torch.__version__, "ok": ok, "results": results}
    if a.json:
        with open(a.json, "w") as f:
            json.dump(doc, f, indent=2)
    for r in results:
        if "rel" in r:
            print(f"{'ok  ' if r['ok'] else 'FAIL'} {r['check']:<26} rel {r['rel']:.2e} (tol {r['tol']:.0e}) "
                  f"max_abs {r['max_abs']:.2e}")
        else:
            print(f"{'ok  ' if r['ok'] else 'FAIL'} {r['check']:<26} {r.get('error', r.get('max_abs', ''))}")
    print(f"{sum(r['ok'] for r in results)} passed, {sum(not r['ok'] for r in results)} failed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
