// env.cu: the futures environment of package market on the device, the
// collector around it and the greedy backtest, with the arithmetic of
// market/execution.go and market/env.go written out operation by
// operation in float64 (the same order of operations, so that equal inputs
// give equal bits: the module is compiled with --fmad=false, and Go on
// amd64 contracts nothing either). The doc comment of market.VecEnv states
// the rules; the names here follow market/execution.go.
//
// Random streams (the backend's own, not the CPU's PCG streams): every draw
// is uniform01(key, counter, index) of replay.cu, a counter-based
// splitmix64 stream, so no generator state exists beyond the counters the
// checkpoint already holds:
//
//   exploration   key = streamKey(seed, "exp"), counter = collector step s
//                 (trainer.env_steps / num_envs before the step),
//                 index 2·(3i+d) for env i's branch-d coin and 2·(3i+d)+1
//                 for its random action ⌊u·n_d⌋
//   windows       key = streamKey(seed, "env"), counter 0 for the first
//                 windows and s+1 for the reset at the end of step s,
//                 index i; start = from + ⌊u·(free+1)⌋; on a panel
//                 (several segments, market.Dataset.Segments) index N+i
//                 first picks the segment k, the first with u < cum_k,
//                 whose bars are then from … to (panelStart)
//
// (gpu/env.go streamKey computes the keys on the host.)

// EnvMarket is the dataset as the kernels read it, uploaded once per
// trainer (gpu/env.go devMarket): prices and ATR per bar, the normalised
// features, the per-bar slippage and the resolved instrument.
struct EnvMarket {
  const double* open; const double* high; const double* low; const double* close; const double* atr; // [bars]
  const float* features; // [bars×NFEAT]
  const double* slip;    // [bars] per-fill slippage at each bar (Dataset.Slip), or null: the constant
  double tickSize, slipTicks, commission, pointValue, slipBps, commBps;
  long long maxContracts;
};

// Account is market's account: one environment's position between decisions.
struct Account {
  int pos;      // signed contracts
  int exit;     // exit rule of the open position; 0 when flat
  int held;     // bar closes the open position has been held through
  double entry; // contract-weighted average fill price; 0 when flat
  double stop;  // stop price when pos ≠ 0 and exit > 0; 0 when flat
};

__device__ __forceinline__ Account flatAccount() {
  Account a;
  a.pos = 0; a.exit = 0; a.held = 0; a.entry = 0.0; a.stop = 0.0;
  return a;
}

__device__ __forceinline__ int isign(int x) { return x > 0 ? 1 : (x < 0 ? -1 : 0); }
__device__ __forceinline__ int iabs(int x) { return x < 0 ? -x : x; }

// mSlip is the slippage of one fill at bar t and price p (sim.slipAt): the
// bar's own, slip[t], where the dataset prices it per bar, else
// SlippageTicks·TickSize + SlippageBps·10⁻⁴·|p|   (Instrument.slip).
__device__ __forceinline__ double mSlip(const EnvMarket& m, long long t, double p) {
  if (m.slip != nullptr) return m.slip[t];
  return m.slipTicks * m.tickSize + m.slipBps * 1e-4 * fabs(p);
}

// comm(p) = Commission + CommissionBps·10⁻⁴·|p|·PointValue   (Instrument.comm)
__device__ __forceinline__ double mComm(const EnvMarket& m, double p) {
  return m.commission + m.commBps * 1e-4 * fabs(p) * m.pointValue;
}

// fillCost = |q|·(slip(t, p)·PointValue + comm(p))   (sim.fillCost)
__device__ __forceinline__ double mFillCost(const EnvMarket& m, int q, long long t, double p) {
  return (double)iabs(q) * (mSlip(m, t, p) * m.pointValue + mComm(m, p));
}

// mAtr is ATR_t with its floor: max(ATR[t], TickSize, 1e-6·|close_t|, 1e-12).
__device__ __forceinline__ double mAtr(const EnvMarket& m, long long t) {
  return fmax(fmax(fmax(m.atr[t], m.tickSize), 1e-6 * fabs(m.close[t])), 1e-12);
}

// mRewardScale = ATR_t × PointValue × MaxContracts.
__device__ __forceinline__ double mRewardScale(const EnvMarket& m, long long t) {
  return mAtr(m, t) * m.pointValue * (double)m.maxContracts;
}

// mTarget is the signed position of the action (dir, size):
// ±max(1, round((size+1)/4 × MaxContracts)), 0 for flat.
__device__ __forceinline__ int mTarget(const EnvMarket& m, int dir, int size) {
  if (dir == 1) return 0;
  int c = (int)round((double)(size + 1) / 4.0 * (double)m.maxContracts);
  if (c < 1) c = 1;
  return dir == 0 ? -c : c;
}

__device__ __forceinline__ double stopPrice(double ref, int dir, int k, double atr) {
  if (k == 0) return 0.0;
  return ref - (double)(dir * k) * atr;
}

// mStep plays the decision (dir, size, exit) taken at bar t through bar
// t+1 (market's sim.step) and returns the change of equity in money.
__device__ double mStep(const EnvMarket& m, Account* acc, int dir, int size, int exit, long long t) {
  const double o = m.open[t + 1];
  const double pv = m.pointValue;
  const double slip = mSlip(m, t + 1, o);
  double dE = (double)acc->pos * (o - m.close[t]) * pv;
  const int q = mTarget(m, dir, size);
  const double atr = mAtr(m, t);
  const int d = q - acc->pos;
  if (d != 0) {
    const double price = o + (double)isign(d) * slip;
    const double cost = mFillCost(m, d, t + 1, o);
    dE -= cost;
    if (q == 0) {
      *acc = flatAccount();
    } else if (acc->pos == 0 || isign(q) != isign(acc->pos)) { // open or reverse
      acc->entry = price;
      acc->held = 0;
    } else if (iabs(q) > iabs(acc->pos)) { // add: average the entry
      acc->entry = ((double)iabs(acc->pos) * acc->entry + (double)iabs(d) * price) / (double)iabs(q);
    }
    if (q != 0) {
      acc->pos = q;
      acc->exit = exit;
      acc->stop = stopPrice(price, isign(q), exit, atr);
    }
  } else if (q != 0 && exit != acc->exit) {
    acc->exit = exit;
    acc->stop = stopPrice(m.close[t], isign(q), exit, atr);
  }
  if (acc->pos != 0 && acc->exit > 0) {
    double x = 0.0;
    bool hit = false;
    if (acc->pos > 0 && m.low[t + 1] <= acc->stop) {
      x = fmin(o, acc->stop) - slip;
      hit = true;
    } else if (acc->pos < 0 && m.high[t + 1] >= acc->stop) {
      x = fmax(o, acc->stop) + slip;
      hit = true;
    }
    if (hit) {
      const double comm = (double)iabs(acc->pos) * mComm(m, o);
      dE += (double)acc->pos * (x - o) * pv - comm;
      *acc = flatAccount();
    }
  }
  if (acc->pos != 0) {
    dE += (double)acc->pos * (m.close[t + 1] - o) * pv;
    acc->held++;
  }
  return dE;
}

// mLiquidate closes the position at the close of bar t and returns
// −|p|·(slip(t, c)·PointValue + comm(c)).
__device__ __forceinline__ double mLiquidate(const EnvMarket& m, Account* acc, long long t) {
  if (acc->pos == 0) return 0.0;
  const double cost = mFillCost(m, acc->pos, t, m.close[t]);
  *acc = flatAccount();
  return -cost;
}

__device__ __forceinline__ double clipd(double x, double lim) { return fmax(-lim, fmin(lim, x)); }

// mAgent writes the NAGENT agent features of acc at bar t (market's
// sim.agent; HeldScale 256, clip ±10 ATR).
__device__ void mAgent(const EnvMarket& m, const Account& acc, long long t, float out[NAGENT]) {
  for (int k = 0; k < NAGENT; k++) out[k] = 0.0f;
  if (acc.pos == 0) return;
  const double mc = (double)m.maxContracts;
  const double dir = (double)isign(acc.pos);
  const double atr = mAtr(m, t);
  const double c = m.close[t];
  out[0] = (float)((double)acc.pos / mc);
  out[1] = (float)((double)iabs(acc.pos) / mc);
  if (acc.pos > 0) out[2] = 1.0f; else out[3] = 1.0f;
  out[4] = (float)clipd(dir * (c - acc.entry) / atr, 10.0);
  out[5] = (float)fmin((double)acc.held / 256.0, 1.0);
  if (acc.exit > 0) out[6] = (float)clipd(dir * (c - acc.stop) / atr, 10.0);
  out[7] = (float)acc.exit / 2.0f;
}

// EnvArrays is the state of N environments and their pending n-step
// steps, struct of arrays (the checkpoint's env.* and nstep.* tensors).
struct EnvArrays {
  int* bar; int* start; int* end; int* pos; int* exit; int* held; // [N]
  double* entry; double* stop; double* epReward;                  // [N]
  int* qlen;      // [N] pending steps, oldest first
  int* qbar;      // [N×nstep]
  float* qagent;  // [N×nstep×NAGENT]
  int* qaction;   // [N×nstep×3]
  float* qreward; // [N×nstep]
};

// Counters of the collector in device memory (gpu/env.go envCounters).
struct EnvCounters {
  long long steps;     // collector steps taken: the counter of the random streams
  long long envSteps;  // Σ over envs (trainer.env_steps)
  long long episodes;  // finished since the run began (env.meta)
  long long cursor, size; // the replay ring
  long long added;     // transitions added since the counters were last reset (one Collect call)
  long long callEpisodes;
  double rewardSum;    // Σ rewards since the reset, summed per step (block order)
};

// The kernels that take EnvArgs copy it first (const EnvArgs a = *pa):
// read through a reference, every store through one of its pointers could
// for the compiler have changed the struct, and its fields were loaded
// again after each store, a chain of dependent loads.
struct EnvArgs {
  EnvMarket m;
  EnvArrays s;
  EnvCounters* ctr;
  long long n, from, to, windowLen, nstep;
  double gamma, rewardScale, turnoverPenalty, riskAversion;
  double epsStart, epsEnd; long long epsDecay;
  unsigned long long keyEnv, keyExplore;
  const int* greedy; // [N×3] greedy actions (head_infer), or the actions to take
  E* X;              // [N×OBS] observations for the network
  // Finished transitions of the step: env i's at [i·nstep, i·nstep + tcount[i]).
  int* tcount; int* tbar; float* tagent; int* taction; float* tret; float* tdisc; int* tnext; float* tnextAgent;
  // The step's results per env (tests and statistics).
  float* reward; double* pnl; float* nextAgent; int* done; int* taken;
  ReplayArrays r;
  long long capacity;
  double alpha;
  // env_commit_scan → env_commit: [0] the ring's cursor before the step,
  // [1] the step's transitions, then env i's first transition index at 2+i.
  long long* commit;
  // The panel's series (market.Dataset.Segments): nseg of them, their
  // bars [segFrom[k], segTo[k]) and the cumulative share of their weights
  // segCum[k] (market.SegmentCumulative, the last exactly 1); nseg 0 and
  // null pointers for one series.
  long long nseg;
  const long long* segFrom; const long long* segTo; // [nseg]
  const double* segCum;                             // [nseg]
};

__device__ __forceinline__ Account loadAccount(const EnvArrays& s, long long i) {
  Account a;
  a.pos = s.pos[i]; a.exit = s.exit[i]; a.held = s.held[i]; a.entry = s.entry[i]; a.stop = s.stop[i];
  return a;
}

__device__ __forceinline__ void storeAccount(const EnvArrays& s, long long i, const Account& a) {
  s.pos[i] = a.pos; s.exit[i] = a.exit; s.held[i] = a.held; s.entry[i] = a.entry; s.stop[i] = a.stop;
}

// panelStart is the first bar of env i's window drawn with counter c
// (market.WindowStart, with the device's draws): on a panel the segment
// k, the first with u < segCum[k] for u = uniform01(keyEnv, c, N+i), and
// then, in its bars [from, to) (the whole training range for one
// series), start = from + ⌊uniform01(keyEnv, c, i)·(free+1)⌋ with
// free = to − from − windowLen, so a window never leaves its series.
__device__ long long panelStart(const EnvArgs& a, long long i, long long c) {
  long long from = a.from, to = a.to;
  if (a.nseg > 1) {
    const double u = uniform01(a.keyEnv, c, a.n + i);
    long long k = a.nseg - 1;
    for (long long j = 0; j < a.nseg; j++) {
      if (u < a.segCum[j]) { k = j; break; }
    }
    from = a.segFrom[k];
    to = a.segTo[k];
  }
  long long s = from;
  const long long free = (to - from) - a.windowLen;
  if (free > 0) s += (long long)(uniform01(a.keyEnv, c, i) * (double)(free + 1));
  return s;
}

// resetEnv starts env i flat on the window drawn with counter c.
__device__ void resetEnv(const EnvArgs& a, long long i, long long c) {
  const long long s = panelStart(a, i, c);
  a.s.start[i] = (int)s;
  a.s.end[i] = (int)(s + a.windowLen);
  a.s.bar[i] = (int)s;
  storeAccount(a.s, i, flatAccount());
  a.s.epReward[i] = 0.0;
}

// env_reset draws the first windows of all N environments (counter 0).
extern "C" __global__ void env_reset(const EnvArgs* pa) {
  pdlEnter();
  const EnvArgs a = *pa;
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= a.n) return;
  resetEnv(a, i, 0);
  a.s.qlen[i] = 0;
}

// env_observe writes the N observations at the current bars into X
// (N×OBS, the storage type): the bar's features, then the agent's.
extern "C" __global__ void env_observe(const EnvArgs* pa) {
  pdlEnter();
  const EnvArgs a = *pa;
  const long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= a.n * OBS) return;
  const long long i = k / OBS;
  const int f = (int)(k - i * OBS);
  const long long t = a.s.bar[i];
  float v;
  if (f < NFEAT) {
    v = a.m.features[t * NFEAT + f];
  } else {
    float ag[NAGENT];
    mAgent(a.m, loadAccount(a.s, i), t, ag);
    v = ag[f - NFEAT];
  }
  a.X[k] = toE(v);
}

// env_step takes one ε-greedy step in every environment (one thread per
// env), as rollout.Collector.Collect and market.VecEnv.Step:
//
//   ε = ε_start + min(envSteps/decay, 1)·(ε_end − ε_start)
//   each branch d: the greedy action, or with probability ε a uniform one
//   ΔE = sim.step (+ the liquidation at the window's last bar)
//   u  = ATR_t·PV·MaxContracts, x = ΔE/u
//   r  = float32(reward_scale·ΔE/u − ½·reward_scale·risk_aversion·x² − penalty·|Δ|/MaxContracts)
//
// and pushes (s, a, r) onto the env's n-step queue (rollout's nstep):
// the transitions it completes go to the staging area (tcount per env),
// R = Σ_j γʲ r_j in float64, discount γᵐ(1 − done). An env whose window
// ended starts a new one (counter s+1 of the window stream).
extern "C" __global__ void env_step(const EnvArgs* pa) {
  pdlEnter();
  const EnvArgs a = *pa;
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= a.n) return;
  const long long step = a.ctr->steps;
  const double f = fmin((double)a.ctr->envSteps / (double)a.epsDecay, 1.0);
  const double eps = a.epsStart + f * (a.epsEnd - a.epsStart);
  int act[3];
  for (int d = 0; d < 3; d++) {
    act[d] = a.greedy[i * 3 + d];
    const double u = uniform01(a.keyExplore, step, 2 * (3 * i + d));
    if (u < eps) act[d] = (int)(uniform01(a.keyExplore, step, 2 * (3 * i + d) + 1) * (double)kBranchSize[d]);
  }
  const long long t = a.s.bar[i];
  Account acc = loadAccount(a.s, i);
  float cur[NAGENT];
  mAgent(a.m, acc, t, cur);
  const int traded = iabs(mTarget(a.m, act[0], act[1]) - acc.pos);
  double dE = mStep(a.m, &acc, act[0], act[1], act[2], t);
  const bool done = t + 1 == (long long)a.s.end[i] - 1;
  if (done) dE += mLiquidate(a.m, &acc, t + 1);
  // market.RewardShape.reward, the same expression in the same order.
  const double unit = mRewardScale(a.m, t), x = dE / unit;
  const double rw = a.rewardScale * dE / unit - 0.5 * a.rewardScale * a.riskAversion * x * x -
                    a.turnoverPenalty * (double)traded / (double)a.m.maxContracts;
  const float r = (float)rw;
  float nxt[NAGENT];
  mAgent(a.m, acc, t + 1, nxt);
  a.s.epReward[i] += (double)r;

  // The n-step queue.
  const long long ns = a.nstep, base = i * ns;
  int len = a.s.qlen[i];
  {
    const long long k = base + len;
    a.s.qbar[k] = (int)t;
    for (int j = 0; j < NAGENT; j++) a.s.qagent[k * NAGENT + j] = cur[j];
    for (int j = 0; j < 3; j++) a.s.qaction[k * 3 + j] = act[j];
    a.s.qreward[k] = r;
    len++;
  }
  int cnt = 0;
  while (len == ns || (done && len > 0)) {
    double ret = 0.0, disc = 1.0;
    for (int j = 0; j < len; j++) {
      ret += disc * (double)a.s.qreward[base + j];
      disc *= a.gamma;
    }
    if (done) disc = 0.0;
    const long long o = base + cnt;
    a.tbar[o] = a.s.qbar[base];
    a.tret[o] = (float)ret;
    a.tdisc[o] = (float)disc;
    a.tnext[o] = (int)(t + 1);
    for (int j = 0; j < 3; j++) a.taction[o * 3 + j] = a.s.qaction[base * 3 + j];
    for (int j = 0; j < NAGENT; j++) {
      a.tagent[o * NAGENT + j] = a.s.qagent[base * NAGENT + j];
      a.tnextAgent[o * NAGENT + j] = nxt[j];
    }
    cnt++;
    for (int j = 0; j + 1 < len; j++) { // pop the oldest
      a.s.qbar[base + j] = a.s.qbar[base + j + 1];
      for (int q = 0; q < NAGENT; q++) a.s.qagent[(base + j) * NAGENT + q] = a.s.qagent[(base + j + 1) * NAGENT + q];
      for (int q = 0; q < 3; q++) a.s.qaction[(base + j) * 3 + q] = a.s.qaction[(base + j + 1) * 3 + q];
      a.s.qreward[base + j] = a.s.qreward[base + j + 1];
    }
    len--;
  }
  a.s.qlen[i] = len;
  a.tcount[i] = cnt;

  a.reward[i] = r;
  a.pnl[i] = dE;
  a.done[i] = done ? 1 : 0;
  for (int j = 0; j < NAGENT; j++) a.nextAgent[i * NAGENT + j] = nxt[j];
  for (int j = 0; j < 3; j++) a.taken[i * 3 + j] = act[j];
  storeAccount(a.s, i, acc);
  if (done) {
    resetEnv(a, i, step + 1);
  } else {
    a.s.bar[i] = (int)(t + 1);
  }
}

// The step's finished transitions go into the replay ring in env order, as
// the CPU collector adds them one by one: env i's j-th at slot
// (cursor + Σ_{i'<i} tcount[i'] + j) mod capacity, mass p_max^α
// (replay.Add); when a step finishes more than the capacity only the last
// capacity survive. Two kernels: env_commit_scan (one block) numbers the
// transitions (an exclusive scan of tcount) and advances the counters;
// env_commit (one thread per env, any number of blocks) writes them. The
// tree's inner nodes are rebuilt once per Collect call (tree_sub, tree_top).
#define COMMIT_THREADS 1024
extern "C" __global__ void __launch_bounds__(COMMIT_THREADS) env_commit_scan(const EnvArgs* pa) {
  pdlEnter();
  const EnvArgs a = *pa;
  __shared__ long long wsum[COMMIT_THREADS / 32];
  __shared__ double rsum[COMMIT_THREADS / 32];
  __shared__ int dsum[COMMIT_THREADS / 32];
  __shared__ long long carry;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  if (tid == 0) carry = 0;
  double rs = 0.0;
  int dn = 0;
  // Tiles of COMMIT_THREADS envs, coalesced: a warp scan, a scan of the
  // warp totals, and the running total of the tiles before.
  for (long long t0 = 0; t0 < a.n; t0 += COMMIT_THREADS) {
    const long long i = t0 + tid;
    long long c = 0;
    if (i < a.n) {
      c = a.tcount[i];
      rs += (double)a.reward[i];
      dn += a.done[i];
    }
    long long x = c; // inclusive scan within the warp
    for (int o = 1; o < 32; o <<= 1) {
      const long long y = __shfl_up_sync(0xffffffffu, x, o);
      if (lane >= o) x += y;
    }
    if (lane == 31) wsum[warp] = x;
    __syncthreads();
    if (warp == 0) {
      long long w = wsum[lane];
      for (int o = 1; o < 32; o <<= 1) {
        const long long y = __shfl_up_sync(0xffffffffu, w, o);
        if (lane >= o) w += y;
      }
      wsum[lane] = w; // inclusive over warps
    }
    __syncthreads();
    const long long before = carry + (warp > 0 ? wsum[warp - 1] : 0) + x - c;
    if (i < a.n) a.commit[2 + i] = before;
    __syncthreads();
    if (tid == 0) carry += wsum[COMMIT_THREADS / 32 - 1];
    __syncthreads();
  }
  rs = warpSumD(rs);
  for (int o = 16; o > 0; o >>= 1) dn += __shfl_xor_sync(0xffffffffu, dn, o);
  if (lane == 0) {
    rsum[warp] = rs;
    dsum[warp] = dn;
  }
  __syncthreads();
  if (tid == 0) {
    double r = 0.0;
    long long d = 0;
    for (int w = 0; w < COMMIT_THREADS / 32; w++) {
      r += rsum[w];
      d += dsum[w];
    }
    const long long total = carry;
    EnvCounters* c = a.ctr;
    a.commit[0] = c->cursor;
    a.commit[1] = total;
    c->cursor = (c->cursor + total) % a.capacity;
    c->size = c->size + total < a.capacity ? c->size + total : a.capacity;
    c->added += total;
    c->episodes += d;
    c->callEpisodes += d;
    c->rewardSum += r;
    c->envSteps += a.n;
    c->steps += 1;
  }
}

extern "C" __global__ void env_commit(const EnvArgs* pa, const StepState* st) {
  pdlEnter();
  const EnvArgs a = *pa;
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= a.n) return;
  const int c = a.tcount[i];
  if (c == 0) return;
  const long long cursor = a.commit[0], total = a.commit[1];
  const double mass = pow(st->maxPrio, a.alpha);
  long long j = a.commit[2 + i];
  for (int q = 0; q < c; q++, j++) {
    if (total - j > a.capacity) continue;
    const long long src = i * a.nstep + q;
    const long long s = (cursor + j) % a.capacity;
    a.r.bar[s] = a.tbar[src];
    a.r.nextBar[s] = a.tnext[src];
    for (int f = 0; f < NAGENT; f++) {
      a.r.agent[s * NAGENT + f] = a.tagent[src * NAGENT + f];
      a.r.nextAgent[s * NAGENT + f] = a.tnextAgent[src * NAGENT + f];
    }
    for (int f = 0; f < 3; f++) a.r.action[s * 3 + f] = a.taction[src * 3 + f];
    a.r.ret[s] = a.tret[src];
    a.r.disc[s] = a.tdisc[src];
    a.r.tree[a.r.base + s] = mass;
  }
}

// RowLayer is one product of the forward pass for a single observation:
// out[outOff + j] = act(Σ_k W[j·K + k]·in[inOff + k] + bias[j]), j < N,
// with act ReLU and the result rounded to the storage type when relu is
// set (the GEMM epilogue bias+ReLU+cast), else the plain float32 sum (the
// head outputs). Buffers: 0 the observation, 1 h1, 2 h2, 3 z, 4 O.
struct RowLayer {
  const E* W; const float* bias;
  long long N, K, in, inOff, out, outOff, relu;
};

#define ROW_LAYERS 7  // s1, s2, the head-hidden block, v2, a2_0, a2_1, a2_2

struct BacktestArgs {
  EnvMarket m;
  long long from, to;       // the range
  double capital, floor;    // InitialCapital, MarginFloor × InitialCapital
  RowLayer layer[ROW_LAYERS];
  long long stageEnd[4];    // layers [stageEnd[s−1], stageEnd[s]) run together
  long long width[5];       // floats of each buffer
  const float* z;           // [ATOMS] support
  int* act;                 // [(to−from)×3] the action decided at bar from + i
  double* equity;           // [to−from] equity at the close of each bar
  long long* result;        // [2]: decisions taken, ruin bar (0: none)
  float margin;             // the greedy margin for a position over flat (greedyDir)
  int pad;
};

// btObserve writes the observation of bar t into x (all threads of the
// block): the bar's features and thread 0's account's agent features,
// rounded to the storage type as cast_rows does for the GEMMs. Thread 0
// also prefetches bar t+1's prices for the step.
__device__ __forceinline__ void btObserve(const BacktestArgs& a, const Account& acc, long long t, float* x) {
  for (int f = threadIdx.x; f < NFEAT; f += blockDim.x) x[f] = roundE(a.m.features[t * NFEAT + f]);
  if (threadIdx.x == 0) {
    float ag[NAGENT];
    mAgent(a.m, acc, t, ag);
    for (int k = 0; k < NAGENT; k++) x[NFEAT + k] = roundE(ag[k]);
  } else if (threadIdx.x <= 4) {
    const double* p[4] = {a.m.open, a.m.high, a.m.low, a.m.close};
    asm volatile("prefetch.global.L1 [%0];" ::"l"(p[threadIdx.x - 1] + t + 1));
  }
}

// btRow computes row j of layer L from the input in (one warp; w is the
// row's K weights): Σ_k w_k·in_k with lane l summing k ≡ l mod 32 in
// order, then the warp's butterfly sum, so every kernel that computes a
// row this way gets the same bits.
__device__ __forceinline__ void btRow(const RowLayer& L, const E* w, const float* in, float* out, long long j, int lane) {
  float s = 0.0f;
  for (long long k = lane; k < L.K; k += 32) s += ldE(w + k) * in[k];
  s = warpSum(s);
  if (lane == 0) {
    const float v = s + L.bias[j];
    out[j] = L.relu ? roundE(fmaxf(v, 0.0f)) : v;
  }
}

// btHead writes the greedy action of branch warp (warps 0, 1, 2) from the
// head outputs O into act, as head_infer (branchGreedy).
template <int D>
__device__ __forceinline__ void btBranch(const BacktestArgs& a, const float* O, int* act, int lane) {
  constexpr int nd = branchSize(D);
  float l[nd][JPL], p[nd][JPL], q[nd];
  const int best = branchGreedy<D>(O, a.z, lane, a.margin, l, p, q);
  if (lane == 0) act[D] = best;
}
__device__ __forceinline__ void btHead(const BacktestArgs& a, const float* O, int* act) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  switch (warp) {
  case 0: btBranch<0>(a, O, act, lane); break;
  case 1: btBranch<1>(a, O, act, lane); break;
  case 2: btBranch<2>(a, O, act, lane); break;
  }
}

// btStep books the action act taken at bar t as market's sim.run (thread
// 0): the fill, the stop and the mark, the liquidation at the range's last
// bar or at the margin floor. It returns whether trading ended (ruin).
__device__ __forceinline__ bool btStep(const BacktestArgs& a, Account* acc, double* e, long long t, const int* act, bool record) {
  const long long i = t + 1 - a.from;
  if (record) {
    a.act[(i - 1) * 3 + 0] = act[0];
    a.act[(i - 1) * 3 + 1] = act[1];
    a.act[(i - 1) * 3 + 2] = act[2];
  }
  *e += mStep(a.m, acc, act[0], act[1], act[2], t);
  if (*e <= a.floor || t + 1 == a.to - 1) *e += mLiquidate(a.m, acc, t + 1);
  bool ruin = false;
  if (*e <= a.floor) {
    ruin = true;
    if (*e < 0) *e = 0;
  }
  if (record) a.equity[i] = *e;
  return ruin;
}

// btFinish fills the equity after a ruin (flat to the end) and the result.
__device__ __forceinline__ void btFinish(const BacktestArgs& a, double e, long long decided, long long ruinBar) {
  for (long long i = decided + 1; i < a.to - a.from; i++) a.equity[i] = e;
  a.result[0] = decided;
  a.result[1] = ruinBar;
}

// bt_run plays the greedy backtest of bars [from, to) in one block: at
// each bar the observation (features and agent features), the online
// network's forward pass (a warp per output row, btRow, weights read from
// the GEMM copies; the storage type's rounding between layers as the GEMM
// epilogues), the greedy action of every branch (btHead), then market's
// sim.run (btStep). The host books the report from the recorded actions
// with market.Backtest. bt_run_cluster is the same on a thread-block
// cluster; this one runs on any architecture and any model size.
extern "C" __global__ void __launch_bounds__(1024) bt_run(const BacktestArgs* __restrict__ pa) {
  pdlEnter();
  const BacktestArgs& a = *pa;
  extern __shared__ float buf[];
  __shared__ int bact[3];
  __shared__ int stopFlag;
  float* bufs[5];
  {
    long long off = 0;
    for (int b = 0; b < 5; b++) {
      bufs[b] = buf + off;
      off += a.width[b];
    }
  }
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nwarps = blockDim.x >> 5;
  Account acc = flatAccount(); // thread 0's
  double e = a.capital;
  long long decided = 0, ruinBar = 0;
  if (tid == 0) {
    a.equity[0] = e;
    stopFlag = 0;
  }
  __syncthreads();
  for (long long t = a.from; t < a.to - 1; t++) {
    btObserve(a, acc, t, bufs[0]);
    __syncthreads();
    long long first = 0;
    for (int s = 0; s < 4; s++) {
      for (long long li = first; li < a.stageEnd[s]; li++) {
        const RowLayer L = a.layer[li];
        for (long long j = warp; j < L.N; j += nwarps) btRow(L, L.W + j * L.K, bufs[L.in] + L.inOff, bufs[L.out] + L.outOff, j, lane);
      }
      first = a.stageEnd[s];
      __syncthreads();
    }
    btHead(a, bufs[4], bact);
    __syncthreads();
    if (tid == 0) {
      decided++;
      if (btStep(a, &acc, &e, t, bact, true)) {
        ruinBar = t + 1;
        stopFlag = 1;
      }
    }
    __syncthreads();
    if (stopFlag) break;
  }
  if (tid == 0) btFinish(a, e, decided, ruinBar);
}

// bt_run_cluster is bt_run on a cluster of BT_CLUSTER blocks (Hopper and
// later): block r keeps rows [N·r/C, N·(r+1)/C) of every layer's weights
// in its shared memory, loaded once, computes those rows (btRow, the same
// bits as bt_run), and after a cluster barrier gathers the other blocks'
// rows from their shared memory (distributed shared memory), so every
// block holds the whole activation vector. Every block computes the head
// and books the step itself (the same inputs give the same bits), so only
// activations cross blocks: four cluster barriers per bar. Block 0 records
// the actions and the equity. A block writes its rows of a buffer again
// only three barriers after the others read them, so no other barrier is
// needed. The host uses it when the weights fit (gpu/backtest.go).
#define BT_CLUSTER 8
#define BT_THREADS 512
#if __CUDA_ARCH__ >= 900
#define BT_CLUSTER_DIMS __cluster_dims__(BT_CLUSTER, 1, 1)
__device__ __forceinline__ unsigned clusterRank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
// clusterSync is a cluster-wide barrier; arrive has release and wait
// acquire semantics by default (PTX ISA 7.8, which NVRTC 11.8 speaks, has
// no explicit .release/.acquire qualifiers), so shared-memory writes before
// it are visible to every block of the cluster after it.
__device__ __forceinline__ void clusterSync() {
  asm volatile("barrier.cluster.arrive.aligned;\n\tbarrier.cluster.wait.aligned;" ::: "memory");
}
// ldRemote reads the float at p in the shared memory of cluster block rank.
__device__ __forceinline__ float ldRemote(const float* p, unsigned rank) {
  unsigned local, remote;
  float v;
  asm volatile("{ .reg .u64 g; cvta.to.shared.u64 g, %1; cvt.u32.u64 %0, g; }" : "=r"(local) : "l"(p));
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"(rank));
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(remote) : "memory");
  return v;
}
#else
#define BT_CLUSTER_DIMS
#endif

// btRows is the first row of layer L that cluster block r computes.
__device__ __forceinline__ long long btRows(const RowLayer& L, unsigned r) { return L.N * (long long)r / BT_CLUSTER; }

extern "C" __global__ void __launch_bounds__(BT_THREADS) BT_CLUSTER_DIMS bt_run_cluster(const BacktestArgs* __restrict__ pa) {
  pdlEnter();
#if __CUDA_ARCH__ >= 900
  const BacktestArgs& a = *pa;
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ int bact[3];
  __shared__ int stopFlag;
  const unsigned rank = clusterRank();
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nwarps = blockDim.x >> 5;
  float* bufs[5];
  long long off = 0;
  for (int b = 0; b < 5; b++) {
    bufs[b] = (float*)smem + off;
    off += a.width[b];
  }
  // The weight slices, each 16-byte aligned, after the activations.
  E* ws[ROW_LAYERS];
  unsigned long long bytes = ((unsigned long long)off * 4 + 15) & ~15ull;
  for (int li = 0; li < ROW_LAYERS; li++) {
    const RowLayer& L = a.layer[li];
    const long long lo = btRows(L, rank), hi = btRows(L, rank + 1);
    ws[li] = (E*)(smem + bytes);
    const E* src = L.W + lo * L.K;
    for (long long k = tid; k < (hi - lo) * L.K; k += blockDim.x) ws[li][k] = src[k];
    bytes += ((unsigned long long)((L.N + BT_CLUSTER - 1) / BT_CLUSTER * L.K) * sizeof(E) + 15) & ~15ull;
  }
  Account acc = flatAccount();
  double e = a.capital;
  long long decided = 0, ruinBar = 0;
  if (tid == 0) {
    if (rank == 0) a.equity[0] = e;
    stopFlag = 0;
  }
  __syncthreads();
  clusterSync(); // every block has started: its shared memory may be read
  for (long long t = a.from; t < a.to - 1; t++) {
    btObserve(a, acc, t, bufs[0]);
    __syncthreads();
    long long first = 0;
    for (int s = 0; s < 4; s++) {
      for (long long li = first; li < a.stageEnd[s]; li++) {
        const RowLayer& L = a.layer[li];
        const long long lo = btRows(L, rank), hi = btRows(L, rank + 1);
        for (long long j = lo + warp; j < hi; j += nwarps)
          btRow(L, ws[li] + (j - lo) * L.K, bufs[L.in] + L.inOff, bufs[L.out] + L.outOff, j, lane);
      }
      clusterSync();
      for (long long li = first; li < a.stageEnd[s]; li++) {
        const RowLayer& L = a.layer[li];
        float* out = bufs[L.out] + L.outOff;
        for (unsigned r = 1; r < BT_CLUSTER; r++) {
          const unsigned c = (rank + r) % BT_CLUSTER;
          const long long lo = btRows(L, c), hi = btRows(L, c + 1);
          for (long long j = lo + tid; j < hi; j += blockDim.x) out[j] = ldRemote(out + j, c);
        }
      }
      first = a.stageEnd[s];
      __syncthreads();
    }
    btHead(a, bufs[4], bact);
    __syncthreads();
    if (tid == 0) {
      decided++;
      if (btStep(a, &acc, &e, t, bact, rank == 0)) {
        ruinBar = t + 1;
        stopFlag = 1;
      }
    }
    __syncthreads();
    if (stopFlag) break;
  }
  if (tid == 0 && rank == 0) btFinish(a, e, decided, ruinBar);
  clusterSync(); // no block leaves while another may still read its shared memory
#endif
}
