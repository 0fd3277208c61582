"""The dqnflow training step in PyTorch: network, loss and update.

This is the PyTorch reference of the function that trainer/cpu computes (see
trainer/cpu/doc.go and DESIGN.md §3), written for speed the way a strong
PyTorch user would write it, with every part on the GPU and no host
synchronisation inside a step, so that the whole step can be captured in a
CUDA graph. bench.py times it; nothing here measures anything.

Where the arithmetic differs from the Go reference (float32 reductions in
another order, bf16 autocast rounding the outputs of every GEMM, atomics in
the projection, the winner among duplicate indices of a priority update),
it is said at the place, and README.md lists it.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn

# --- Model contract (trainer/cpu/layout.go, config/config.go defaults) -------

NUM_FEATURES = 56  # market.NumFeatures: per-bar features, stored per bar
NUM_AGENT = 8  # market.NumAgentFeatures: stored per transition
OBS_DIM = NUM_FEATURES + NUM_AGENT  # 64
BRANCHES = (3, 4, 3)  # direction, size, exit rule
NUM_ACTIONS = sum(BRANCHES)  # 10
OFFSETS = (0, 3, 7)  # first action of each branch among the 10
NUM_HEADS = 1 + len(BRANCHES)  # value head and three advantage heads


class Config:
    """The defaults of config.Defaults() that the step uses."""

    def __init__(self, **kw):
        # model
        self.trunk1 = 256
        self.trunk2 = 256
        self.head = 128
        self.atoms = 51
        self.v_min = -10.0
        self.v_max = 10.0
        # optim
        self.lr = 3e-4
        self.beta1 = 0.9
        self.beta2 = 0.999
        self.eps = 1e-8
        self.weight_decay = 1e-5
        self.clip_norm = 10.0
        self.spectral_bound = 4.0
        self.gamma = 0.99
        self.n_step = 3
        self.target_tau = 0.5
        # replay
        self.capacity = 100_000
        self.alpha = 0.6
        self.beta0 = 0.4
        self.beta_steps = 6000
        self.priority_eps = 1e-6
        # run
        self.steps_per_epoch = 300
        self.bars = 53_256  # bars of the bundled USA500IDXUSD_H1.csv
        for k, v in kw.items():
            if not hasattr(self, k):
                raise KeyError(k)
            setattr(self, k, v)

    @property
    def dz(self):
        return (self.v_max - self.v_min) / (self.atoms - 1)

    @property
    def pad_out(self):
        """Rows of a padded head output block: the widest of v2 and a2_d."""
        return max([self.atoms] + [n * self.atoms for n in BRANCHES])

    def head_rows(self, g):
        """Real output rows of head g: v2 (g = 0) or a2_{g-1}."""
        return self.atoms if g == 0 else BRANCHES[g - 1] * self.atoms


def logical_layers(c):
    """The ten layers of trainer/cpu/layout.go as (name, in, out), in layout
    order: s1, s2, v1, v2, a1_0, a2_0, a1_1, a2_1, a1_2, a2_2."""
    ls = [("s1", OBS_DIM, c.trunk1), ("s2", c.trunk1, c.trunk2),
          ("v1", c.trunk2, c.head), ("v2", c.head, c.atoms)]
    for d, n in enumerate(BRANCHES):
        ls.append((f"a1_{d}", c.trunk2, c.head))
        ls.append((f"a2_{d}", c.head, n * c.atoms))
    return ls


def num_params(c):
    """cpu.NumParams: 286,385 for the default model."""
    return sum(i * o + o for _, i, o in logical_layers(c))


def model_flops_per_step(c, batch):
    """Floating-point operations of the GEMMs of one training step, counted
    the way the Go backend does its work (no padding, backward on the batch
    rows only): forward of the online net on 2B rows and of the target net on
    B rows, then dW for every layer and dX for every layer but s1 on B rows.
    2·B·(5·M − in_s1·out_s1) with M the multiply-adds of one row's forward
    (284,800 for the default model)."""
    ls = logical_layers(c)
    m = sum(i * o for _, i, o in ls)
    first = ls[0][1] * ls[0][2]
    return 2 * batch * (5 * m - first)


# --- Network -----------------------------------------------------------------


class Net(nn.Module):
    """The network of DESIGN.md §3 with its ten linear layers stored in four
    groups, so that the three advantage heads and the value head run as one
    GEMM per level instead of four:

      w1 [trunk1, 64]             s1
      w2 [trunk2, trunk1]         s2
      wh [4·head, trunk2]         rows g·head..(g+1)·head: v1, a1_0, a1_1, a1_2
      wo [4, pad_out, head]       block g: v2 (51 rows), a2_0 (153), a2_1 (204),
                                  a2_2 (153), zero-padded to pad_out = 204 rows

    Each logical block is laid out exactly as layout.go has it (out×in,
    row-major, a2_d rows action-major: row a·Atoms + j). The padding rows of
    wo and bo are zero and stay zero: they get zero gradient (their outputs
    are never read), so AdamW, weight decay, clipping, the spectral step and
    the EMA leave them at zero, and they add nothing to any norm.
    """

    def __init__(self, c, device, generator=None):
        super().__init__()
        self.c = c
        h4 = NUM_HEADS * c.head
        kw = dict(device=device, dtype=torch.float32)
        self.w1 = nn.Parameter(torch.empty(c.trunk1, OBS_DIM, **kw))
        self.b1 = nn.Parameter(torch.empty(c.trunk1, **kw))
        self.w2 = nn.Parameter(torch.empty(c.trunk2, c.trunk1, **kw))
        self.b2 = nn.Parameter(torch.empty(c.trunk2, **kw))
        self.wh = nn.Parameter(torch.empty(h4, c.trunk2, **kw))
        self.bh = nn.Parameter(torch.empty(h4, **kw))
        self.wo = nn.Parameter(torch.zeros(NUM_HEADS, c.pad_out, c.head, **kw))
        self.bo = nn.Parameter(torch.zeros(NUM_HEADS, c.pad_out, **kw))
        self.reset_parameters(generator)

    @torch.no_grad()
    def reset_parameters(self, gen=None):
        """PyTorch's nn.Linear default, U(−1/√in, 1/√in) for weight and bias of
        each logical layer (the distribution of cpu.initParams; the draws are
        torch's, not Go's PCG stream)."""
        c = self.c

        def uni(t, fan_in):
            k = 1.0 / math.sqrt(fan_in)
            t.uniform_(-k, k, generator=gen)

        uni(self.w1, OBS_DIM)
        uni(self.b1, OBS_DIM)
        uni(self.w2, c.trunk1)
        uni(self.b2, c.trunk1)
        uni(self.wh, c.trunk2)
        uni(self.bh, c.trunk2)
        self.wo.zero_()
        self.bo.zero_()
        for g in range(NUM_HEADS):
            r = c.head_rows(g)
            uni(self.wo[g, :r], c.head)
            uni(self.bo[g, :r], c.head)

    def weights(self):
        return [self.w1, self.w2, self.wh, self.wo]

    def biases(self):
        return [self.b1, self.b2, self.bh, self.bo]

    def spectral_groups(self):
        """The ten weight matrices as four batched views [G, out, in]."""
        c = self.c
        return [self.w1.unsqueeze(0), self.w2.unsqueeze(0),
                self.wh.view(NUM_HEADS, c.head, c.trunk2), self.wo]

    def logical_blocks(self, src=None):
        """Layout name ("s1.weight", …, "a2_2.bias") → view of the 20 blocks
        of layout.go, in layout order, weights unpadded: of the parameters,
        or of src, a dict from parameter name ("w1", …, "bo") to a tensor of
        the parameter's shape (its gradient or an AdamW moment, say)."""
        c = self.c
        t = dict(self.named_parameters()) if src is None else src
        out = {"s1.weight": t["w1"], "s1.bias": t["b1"],
               "s2.weight": t["w2"], "s2.bias": t["b2"]}
        for g in range(NUM_HEADS):
            n1 = "v1" if g == 0 else f"a1_{g - 1}"
            n2 = "v2" if g == 0 else f"a2_{g - 1}"
            rows = slice(g * c.head, (g + 1) * c.head)
            r = c.head_rows(g)
            out[n1 + ".weight"] = t["wh"][rows]
            out[n1 + ".bias"] = t["bh"][rows]
            out[n2 + ".weight"] = t["wo"][g, :r]
            out[n2 + ".bias"] = t["bo"][g, :r]
        return out

    def forward(self, x):
        """Logits L[n, action, atom] (float32) for observations x [N, 64]:
        grouped GEMMs (see the class comment)."""
        c = self.c
        n = x.shape[0]
        h = F.relu(F.linear(x, self.w1, self.b1))
        h = F.relu(F.linear(h, self.w2, self.b2))
        hh = F.relu(F.linear(h, self.wh, self.bh))  # [N, 4·head]
        hh = hh.view(n, NUM_HEADS, c.head).transpose(0, 1)  # [4, N, head]
        out = torch.baddbmm(self.bo.unsqueeze(1), hh, self.wo.transpose(1, 2))
        out = _f32(out)  # [4, N, pad_out]; bf16 under autocast
        return dueling(out[0, :, :c.atoms],
                       [out[d + 1, :, :nd * c.atoms] for d, nd in enumerate(BRANCHES)],
                       c.atoms)

    def forward_plain(self, x):
        """The same function with the ten layers as ten separate GEMMs on the
        unpadded blocks, as net.go computes it; used by the self-check and by
        bench.py --net plain."""
        c = self.c
        h = F.relu(F.linear(x, self.w1, self.b1))
        h = F.relu(F.linear(h, self.w2, self.b2))
        outs = []
        for g in range(NUM_HEADS):
            rows = slice(g * c.head, (g + 1) * c.head)
            hg = F.relu(F.linear(h, self.wh[rows], self.bh[rows]))
            r = c.head_rows(g)
            outs.append(_f32(F.linear(hg, self.wo[g, :r], self.bo[g, :r])))
        return dueling(outs[0], outs[1:], c.atoms)


def _f32(t):
    """Logits are float32 in every precision mode (DESIGN.md §3): a bf16 GEMM
    output under autocast is widened; float64 (the self-check) is kept."""
    return t.float() if t.dtype in (torch.bfloat16, torch.float16) else t


def dueling(v, advs, atoms):
    """L_d[a, j] = (V[j] + A_d[a, j]) − mean_a' A_d[a', j] (net.go dueling),
    branches concatenated: [N, 10, atoms]."""
    v = v.unsqueeze(1)
    ls = []
    for a, nd in zip(advs, BRANCHES):
        a = a.unflatten(-1, (nd, atoms))
        ls.append((v + a) - a.mean(1, keepdim=True))
    return torch.cat(ls, 1)


# --- Replay (replay/doc.go, replay/sample.go) ----------------------------------


class Replay(nn.Module):
    """A full prioritised replay buffer in device memory, stored as the
    backend stores it: per transition the bar index of s and s′ and the eight
    agent features of each, the three actions, the n-step return and
    γⁿ·(1−done); per bar the 56 market features. Observations are gathered
    from these at sampling time, [s; s′] as one [2B, 64] batch.

    Masses m_i = p_i^α live in a float64 vector (the Go sum tree is float64).
    Sampling is stratified proportional sampling by an inclusive cumulative
    sum and a binary search (torch.cumsum + torch.searchsorted): the same
    rule as sumTree.find, at O(capacity) work per step instead of a sum tree's
    O(B log N) — about 0.8 MB read at the default capacity, and it keeps the
    step free of host synchronisation and data-dependent control flow.

    The contents are random (a benchmark needs no market): features and agent
    features N(0, 1), bars uniform with s′ = s + n_step, actions uniform,
    returns N(0, 0.5²), done with probability 5 %, priorities U(0, 2) + ε.
    """

    def __init__(self, c, device, generator):
        super().__init__()
        g = generator
        cap, kw = c.capacity, dict(device=device)
        self.c = c
        self.size = cap  # transitions stored: the buffer is full
        bar = torch.randint(0, c.bars - c.n_step, (cap,), generator=g, **kw)
        self.register_buffer("features", torch.randn(c.bars, NUM_FEATURES, generator=g, **kw))
        self.register_buffer("bar2", torch.stack([bar, bar + c.n_step]))  # [2, cap] int64
        self.register_buffer("agent2", torch.randn(2, cap, NUM_AGENT, generator=g, **kw))
        acts = [torch.randint(0, n, (cap,), generator=g, **kw) + o for n, o in zip(BRANCHES, OFFSETS)]
        # Actions are stored as indices among the 10 branch actions
        # (a_d + OFFSETS[d]), which saves an add per step.
        self.register_buffer("actions", torch.stack(acts, 1))  # [cap, 3] int64
        ret = 0.5 * torch.randn(cap, generator=g, **kw)
        done = torch.rand(cap, generator=g, **kw) < 0.05
        disc = torch.where(done, 0.0, c.gamma ** c.n_step)
        self.register_buffer("retdisc", torch.stack([ret, disc], 1).float())  # [cap, 2]
        prio = 2.0 * torch.rand(cap, generator=g, dtype=torch.float64, **kw) + c.priority_eps
        self.register_buffer("mass", prio.pow(c.alpha))
        self.register_buffer("max_prio", prio.max().reshape(()))

    def sample(self, batch, beta, arange_b):
        """Stratified proportional sampling (replay.Sample):
        u_k = (k + r_k)·T/B, idx_k = the leaf whose cumulative range holds u_k,
        w_k = (m_min / m_idx_k)^β with m_min the smallest mass in the batch.
        beta is a 0-d device tensor; arange_b is float64 [0, B)."""
        cdf = torch.cumsum(self.mass, 0)
        u = (arange_b + torch.rand(batch, device=cdf.device, dtype=torch.float64)) * (cdf[-1] / batch)
        # right=True: the first i with cdf[i] > u, so a zero-mass slot is never
        # taken; u can round up to T, hence the clamp (as sumTree.find).
        idx = torch.searchsorted(cdf, u, right=True).clamp_(max=self.size - 1)
        m = self.mass[idx]
        w = (m.min() / m).pow(beta.double()).float()
        return idx, w

    def gather(self, idx):
        """obs [2B, 64] = [s; s′] rebuilt from bar features and agent
        features, actions [B, 3], return and discount [B, 2]."""
        b = idx.shape[0]
        bars = self.bar2[:, idx].reshape(2 * b)
        agent = self.agent2[:, idx].reshape(2 * b, NUM_AGENT)
        obs = torch.cat([self.features[bars], agent], 1)
        return obs, self.actions[idx], self.retdisc[idx]

    @torch.no_grad()
    def update(self, idx, loss):
        """p = loss + ε, m = p^α, p_max = max(p_max, p) (UpdatePriorities),
        all on the device. With a duplicated index one of its losses wins,
        not necessarily the last one as in Go."""
        p = loss.to(self.mass.dtype) + self.c.priority_eps
        self.mass.index_copy_(0, idx, p.pow(self.c.alpha))
        self.max_prio.copy_(torch.maximum(self.max_prio, p.max()))


# --- The learner ----------------------------------------------------------------


def make_optimizer(net, c, impl):
    """AdamW with decoupled weight decay on the four weight groups only
    (optim.go adamW), in one of torch's implementations:
      "fused":            fused=True (one multi-tensor CUDA kernel per group)
      "fused-capturable": fused=True, capturable=True (CUDA graph capture)
      "foreach":          foreach=True
      "foreach-capturable": foreach=True, capturable=True (torch.compile, graphs)
    """
    groups = [{"params": net.weights(), "weight_decay": c.weight_decay},
              {"params": net.biases(), "weight_decay": 0.0}]
    kw = dict(lr=c.lr, betas=(c.beta1, c.beta2), eps=c.eps)
    if impl == "fused":
        kw.update(fused=True)
    elif impl == "fused-capturable":
        kw.update(fused=True, capturable=True)
    elif impl == "foreach":
        kw.update(foreach=True)
    elif impl == "foreach-capturable":
        kw.update(foreach=True, capturable=True)
    else:
        raise ValueError(f"optimizer impl {impl!r}")
    return torch.optim.AdamW(groups, **kw)


class Learner(nn.Module):
    """Online and target networks, AdamW, the spectral-norm vectors, the
    replay buffer and the step counter, for one batch size.

    step() is one training step (learner.go Step, plus sampling and the
    priority update of the trainer): sample, gather, forward, double-DQN C51
    target, loss, backward, global-norm clip, AdamW, spectral step, priority
    update. It never reads anything back to the host, so it can be captured
    in a CUDA graph. sync_target() is the per-epoch EMA.

    precision: "fp32" or "bf16" (torch.autocast bf16 around the forward passes:
    bf16 GEMM operands with float32 accumulation, float32 masters, AdamW,
    softmax, targets and loss).
    next_forward: "joint" runs the online net on [s; s′] as one 2B-row batch
    (as the Go backend does); autograd then also runs the backward GEMMs over
    the s′ rows, whose gradient is zero. "split" runs s with grad and s′
    under no_grad: one more forward pass of launches, half the backward FLOPs.
    """

    def __init__(self, c, batch, device, *, precision="fp32", opt_impl="fused",
                 next_forward="joint", net="grouped", seed=1):
        super().__init__()
        if precision not in ("fp32", "bf16"):
            raise ValueError(f"precision {precision!r}")
        if next_forward not in ("joint", "split"):
            raise ValueError(f"next_forward {next_forward!r}")
        if net not in ("grouped", "plain"):
            raise ValueError(f"net {net!r}")
        self.c = c
        self.batch = batch
        self.precision = precision
        self.next_forward = next_forward
        self.plain = net == "plain"
        self.opt_impl = opt_impl
        gen = torch.Generator(device=device)
        gen.manual_seed(seed)
        self.online = Net(c, device, gen)
        self.target = Net(c, device, gen)
        with torch.no_grad():
            for t, o in zip(self.target.parameters(), self.online.parameters()):
                t.copy_(o)
        self.target.requires_grad_(False)
        self.replay = Replay(c, device, gen)
        # Spectral-norm left vectors u_i, one row per matrix, ‖u_i‖ = 1, zero
        # on the padding rows of wo (they then stay zero).
        us = []
        for w in self.online.spectral_groups():
            u = torch.randn(w.shape[0], w.shape[1], generator=gen, device=device)
            if w is self.online.wo:
                for g in range(NUM_HEADS):
                    u[g, c.head_rows(g):] = 0
            us.append(u / torch.linalg.vector_norm(u, dim=1, keepdim=True))
        for i, u in enumerate(us):
            self.register_buffer(f"u{i}", u)
        # z_j = v_min + j·Δz in float64, rounded once to float32 (net.go newNet)
        z = c.v_min + torch.arange(c.atoms, dtype=torch.float64, device=device) * c.dz
        self.register_buffer("support", z.float())
        self.register_buffer("steps", torch.zeros((), device=device))  # gradient steps done
        self.register_buffer("arange_b", torch.arange(batch, device=device, dtype=torch.float64))
        pad = []
        for nd, o in zip(BRANCHES, OFFSETS):
            pad += [o + a for a in range(nd)] + [NUM_ACTIONS] * (max(BRANCHES) - nd)
        self.register_buffer("pad_idx", torch.tensor(pad, device=device))
        self.register_buffer("offsets", torch.tensor(OFFSETS, device=device))
        self.register_buffer("last_loss", torch.zeros((), device=device))
        self.register_buffer("last_norm", torch.zeros((), device=device))
        self.opt = make_optimizer(self.online, c, opt_impl)
        self.params = list(self.online.parameters())

    def spectral_vectors(self):
        """Layer name ("s1", …, "a2_2") → view of its spectral-norm vector u
        (out values), as trainer/cpu's Tensors() names them."""
        c = self.c
        out = {"s1": self.u0[0], "s2": self.u1[0], "v1": self.u2[0], "v2": self.u3[0, :c.atoms]}
        for d in range(len(BRANCHES)):
            out[f"a1_{d}"] = self.u2[d + 1]
            out[f"a2_{d}"] = self.u3[d + 1, :c.head_rows(d + 1)]
        return out

    # -- pieces, each usable on its own (torch.compile compiles them apart) --

    def autocast(self):
        return torch.autocast(self.support.device.type, dtype=torch.bfloat16,
                              enabled=self.precision == "bf16", cache_enabled=False)

    def net(self, m, x):
        return m.forward_plain(x) if self.plain else m(x)

    def beta(self):
        c = self.c
        if c.beta_steps <= 0:
            return torch.ones_like(self.steps)
        return c.beta0 + (1 - c.beta0) * torch.clamp(self.steps / c.beta_steps, max=1.0)

    @torch.no_grad()
    def project(self, pt, ret, disc):
        """C51 projection (c51.go project) of the target distributions pt
        [B, 3, atoms] shifted to R + discount·z, with the l = u case keeping the
        whole mass: m_l += p·(u − b + [l = u]), m_u += p·(b − l). One
        scatter_add (float atomics: the order of the adds is not fixed)."""
        c = self.c
        b, _, a = pt.shape
        tz = (ret.unsqueeze(1) + disc.unsqueeze(1) * self.support).clamp(c.v_min, c.v_max)
        pos = ((tz - c.v_min) / c.dz).clamp(0, a - 1)
        lo, hi = pos.floor(), pos.ceil()
        wl = (hi - pos) + (lo == hi).to(pos.dtype)
        wu = pos - lo
        index = torch.cat([lo, hi], 1).long().unsqueeze(1).expand(b, len(BRANCHES), 2 * a)
        src = torch.cat([pt * wl.unsqueeze(1), pt * wu.unsqueeze(1)], 2)
        return torch.zeros_like(pt).scatter_add_(2, index, src)

    def forward_loss(self):
        """Sample, gather, forward passes, double-DQN C51 target and loss.
        Returns (loss, per-sample loss ℓ_i detached, sampled indices)."""
        idx, w = self.replay.sample(self.batch, self.beta(), self.arange_b)
        obs, act, rd = self.replay.gather(idx)
        loss, per_sample = self.batch_loss(obs, act, rd[:, 0], rd[:, 1], w)
        return loss, per_sample.detach(), idx

    def batch_loss(self, obs, act, ret, disc, w):
        """learner.go gradients and backward's loss for one batch: obs is
        [s; s′] [2B, 64], act the taken actions as indices among the ten
        branch actions [B, 3], ret the n-step return, disc γⁿ·(1−done), w the
        importance weights. Returns (loss, per-sample loss ℓ_i)."""
        b, a = act.shape[0], self.c.atoms
        nxt = obs[b:]
        with self.autocast():
            if self.next_forward == "joint":
                logits = self.net(self.online, obs)  # [2B, 10, atoms]
                ls, ln = logits[:b], logits[b:].detach()
            else:
                ls = self.net(self.online, obs[:b])
                with torch.no_grad():
                    ln = self.net(self.online, nxt)
            with torch.no_grad():
                lt = self.net(self.target, nxt)
        with torch.no_grad():
            # Double DQN: the online net picks a*_d = argmax_a Σ_j p_j z_j per
            # branch (first on ties), through a [B, 3, 4] view padded with −inf.
            q = torch.softmax(ln, -1) @ self.support  # [B, 10]
            qp = F.pad(q, (0, 1), value=float("-inf"))[:, self.pad_idx].view(b, len(BRANCHES), -1)
            best = qp.argmax(-1) + self.offsets  # [B, 3]
            pt = torch.softmax(lt.gather(1, best.unsqueeze(-1).expand(-1, -1, a)), -1)
            m = self.project(pt, ret, disc)
        logp = torch.log_softmax(ls.gather(1, act.unsqueeze(-1).expand(-1, -1, a)), -1)
        per_sample = -(m * logp).sum(-1).mean(1)  # ℓ_i = mean over branches of CE
        loss = (w * per_sample).mean()  # (1/n)·Σ w_i ℓ_i
        return loss, per_sample

    @torch.no_grad()
    def clip(self):
        """g ← g·min(1, clip/‖g‖₂) on the device (learner.go step 4; ‖g‖ is
        float32 here, float64 in Go). Returns ‖g‖₂ before clipping."""
        grads = [p.grad for p in self.params]
        norm = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))
        if self.c.clip_norm > 0:
            coef = (self.c.clip_norm / norm).clamp(max=1.0)  # ‖g‖ = 0: inf → 1
            torch._foreach_mul_(grads, coef)
        return norm

    @torch.no_grad()
    def power(self):
        """One power iteration per weight matrix on the weights the gradient
        was taken at (spectral.go powerStep), the ten matrices in four
        batched groups; returns σ per group, for bound() after AdamW
        (ADR 0025: the Go step takes σ before the update and scales the
        weights AdamW leaves):

          v = Wᵀu / ‖Wᵀu‖,  Wv,  σ = ‖Wv‖,  u ← Wv/σ (kept when σ = 0)

        Go also keeps u when Wᵀu is zero or a norm is not finite; here a
        zero Wᵀu gives σ = 0 (same outcome), and non-finite weights, which
        Go's Step refuses earlier as a non-finite loss, are not guarded."""
        if self.c.spectral_bound <= 0:
            return None
        tiny = 1e-30
        us = [self.u0, self.u1, self.u2, self.u3]
        sigmas = []
        for w, u in zip(self.online.spectral_groups(), us):
            v = torch.bmm(u.unsqueeze(1), w).squeeze(1)  # Wᵀu, [G, in]
            v = v / torch.linalg.vector_norm(v, dim=1, keepdim=True).clamp_min(tiny)
            wv = torch.bmm(w, v.unsqueeze(2)).squeeze(2)  # W v, [G, out]
            sigma = torch.linalg.vector_norm(wv, dim=1, keepdim=True)
            u.copy_(torch.where(sigma > 0, wv / sigma.clamp_min(tiny), u))
            sigmas.append(sigma)
        return sigmas

    @torch.no_grad()
    def bound(self, sigmas):
        """W ← W·min(1, bound/σ) with the σ that power() took before the
        update (spectral.go boundScale)."""
        if sigmas is None:
            return
        bound = self.c.spectral_bound
        for w, sigma in zip(self.online.spectral_groups(), sigmas):
            w.mul_((bound / sigma).clamp(max=1.0).unsqueeze(-1))  # σ = 0: inf → 1

    @torch.no_grad()
    def update(self, per_sample, idx):
        """Everything after backward: clip, the power iteration on the
        weights before the update, AdamW, the spectral bound, priorities."""
        norm = self.clip()
        sigmas = self.power()
        self.opt.step()
        self.bound(sigmas)
        self.replay.update(idx, per_sample)
        self.steps.add_(1)
        self.last_norm.copy_(norm)

    def step(self):
        """One whole training step, eager (also what graph capture records)."""
        self.opt.zero_grad(set_to_none=True)
        loss, per_sample, idx = self.forward_loss()
        loss.backward()
        self.update(per_sample, idx)
        self.last_loss.copy_(loss.detach())

    @torch.no_grad()
    def sync_target(self):
        """target ← τ·online + (1 − τ)·target (learner.go SyncTarget)."""
        tp = list(self.target.parameters())
        torch._foreach_lerp_(tp, self.params, self.c.target_tau)
