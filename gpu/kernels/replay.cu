// replay.cu: the prioritised replay buffer in device memory, with the
// semantics of the replay package (replay/doc.go): a ring of transitions,
// masses m_i = p_i^α in a float64 sum tree (node 1 the root, node k's
// children 2k and 2k+1, leaf i at node L+i), stratified sampling and
// importance weights (the weights are computed in c51_loss).

// Replay storage: struct of arrays over capacity slots.
struct ReplayArrays {
  int* bar; float* agent; int* action; float* ret; float* disc; int* nextBar; float* nextAgent;
  double* tree; long long base; // L: leaves start at node L
};

// splitmix64 finaliser (Steele, Lea and Flood 2014), the mixer of the
// counter-based stream of the sampler.
__device__ __forceinline__ unsigned long long mix64(unsigned long long z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// uniform01 is the k-th uniform [0, 1) draw (53 bits) of step t under key.
__device__ __forceinline__ double uniform01(unsigned long long key, long long t, long long k) {
  unsigned long long x = mix64(key ^ mix64((unsigned long long)t * 0x9e3779b97f4a7c15ull + (unsigned long long)k));
  return (double)(x >> 11) * (1.0 / 9007199254740992.0);
}

// find descends the tree as replay's sumTree.find: left when u < left sum
// or the right subtree is empty, otherwise right with u − left. A node's
// two children are neighbours (2k, 2k+1) and move as one 16-byte load.
struct __align__(16) ChildSums {
  double left, right;
};
__device__ __forceinline__ long long treeFind(const double* tree, long long base, double u) {
  long long k = 1;
  while (k < base) {
    const ChildSums c = *(const ChildSums*)&tree[2 * k];
    if (u < c.left || c.right <= 0) {
      k = 2 * k;
    } else {
      u -= c.left;
      k = 2 * k + 1;
    }
  }
  return k - base;
}

struct SampleArgs {
  ReplayArrays r;
  const float* features; // [bars×NFEAT] normalised market features
  E* X;                  // [2n×OBS] observations: rows [0, n) s, [n, 2n) s′
  int* act; float* ret; float* disc; // [n×3], [n], [n]
  long long* idx; double* mass;       // [n]
  long long n;
  unsigned long long key; // this Train call's key, from the run's sample stream
};

// sample draws the batch:
//
//   u_k = (k + r_k)·T/n,  r_k = uniform01(key, t, k),  slot = find(u_k)
//
// and gathers each sample's transition: the observation of s and s′
// rebuilt from the bar's features and the agent features, the actions, R
// and γⁿ(1−done). A block takes spb ≤ SAMPLE_BLOCK samples: its first warp
// descends the tree for all of them at once, a lane each (the descents are
// chains of dependent loads, so the more of them in flight the better: one
// per warp took two waves of them at batch 16384), then its eight warps
// gather the block's samples, warp w those w, w+8, …; small batches take
// fewer samples a block, so that more SMs share them (gpu/replay.go
// samplesPerBlock). The smallest sampled mass goes to
// st->mmin: the block's smallest, then one atomic minimum of positive
// float64 bits per block, which is exact in any order.
#define SAMPLE_BLOCK 32
#define SAMPLE_THREADS 256
extern "C" __global__ void __launch_bounds__(SAMPLE_THREADS) sample(const SampleArgs* pa, StepState* st, int spb) {
  pdlEnter();
  if (st->abort) return;
  __shared__ long long sslot[SAMPLE_BLOCK];
  __shared__ unsigned long long smin[SAMPLE_BLOCK];
  const SampleArgs a = *pa;
  const long long k0 = (long long)blockIdx.x * spb;
  if (threadIdx.x < spb) {
    const long long k = k0 + threadIdx.x;
    unsigned long long mb = 0x7ff0000000000000ull; // +Inf
    long long slot = 0;
    if (k < a.n) {
      const double total = a.r.tree[1];
      const double u = ((double)k + uniform01(a.key, st->t, k)) * (total / (double)a.n);
      slot = treeFind(a.r.tree, a.r.base, u);
      const double m = a.r.tree[a.r.base + slot];
      a.idx[k] = slot;
      a.mass[k] = m;
      mb = (unsigned long long)__double_as_longlong(m);
    }
    sslot[threadIdx.x] = slot;
    smin[threadIdx.x] = mb;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned long long mb = smin[0];
    for (int j = 1; j < spb; j++) mb = smin[j] < mb ? smin[j] : mb;
    atomicMin(&st->mmin, mb);
  }
  const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
  constexpr int warps = SAMPLE_THREADS / 32;
#pragma unroll
  for (int q = 0; q < SAMPLE_BLOCK / warps; q++) {
    const int j = wid + warps * q;
    const long long k = k0 + j;
    if (j < spb && k < a.n) {
      const long long slot = sslot[j];
      const long long bar = a.r.bar[slot], nbar = a.r.nextBar[slot];
      E* xs = a.X + k * OBS;
      E* xn = a.X + (a.n + k) * OBS;
      for (int f = lane; f < OBS; f += 32) {
        float vs, vn;
        if (f < NFEAT) {
          vs = a.features[bar * NFEAT + f];
          vn = a.features[nbar * NFEAT + f];
        } else {
          vs = f - NFEAT < NAGENT ? a.r.agent[slot * NAGENT + (f - NFEAT)] : 0.0f;
          vn = f - NFEAT < NAGENT ? a.r.nextAgent[slot * NAGENT + (f - NFEAT)] : 0.0f;
        }
        xs[f] = toE(vs);
        xn[f] = toE(vn);
      }
      if (lane < 3) a.act[k * 3 + lane] = a.r.action[slot * 3 + lane];
      if (lane == 3) a.ret[k] = a.r.ret[slot];
      if (lane == 4) a.disc[k] = a.r.disc[slot];
    }
  }
}

struct PrioArgs {
  double* tree; long long base;
  const long long* idx; const float* sample; // [n]
  unsigned long long* owner;  // [capacity] claims (t << 32 | k); 0 after a state load
  long long n;
  double eps, alpha;
};

// The new priorities (replay.UpdatePriorities) in two launches over the
// batch, one thread per sample k:
//
//   p = float64(ℓ_k) + ε,  m = p^α,  p_max = max(p_max, p)
//
// where an index appears more than once the last sample wins: prio_claim
// puts t·2³² + k into the index's claim by an atomic maximum (t, the
// step, rises from step to step, so no claim needs clearing; a state load
// clears them, gpu/replay.go resetClaims), and in prio_set the sample
// whose claim stands writes the leaf. p_max is an atomic maximum of the
// bits of positive float64 values, exact in any order. The inner nodes
// follow in tree_sub and tree_top. prio_set also resets st->mmin for the
// next step.
//
// They run on a branch of the step's graph (gpu/plan.go trainParts), beside
// AdamW and the refresh: t is st->tc, the step's number copied by
// grad_norm before the update advances st->t, and a step whose loss is
// not finite (which AdamW will abort) is skipped here on the loss itself,
// without waiting for AdamW's flag.
__device__ __forceinline__ bool prioSkip(const StepState* st) { return st->abort || !finitef(st->loss); }

extern "C" __global__ void prio_claim(const PrioArgs* pa, const StepState* st) {
  pdlEnter();
  if (prioSkip(st)) return;
  const long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= pa->n) return;
  atomicMax(&pa->owner[pa->idx[k]], ((unsigned long long)st->tc << 32) | (unsigned long long)k);
}

extern "C" __global__ void __launch_bounds__(256) prio_set(const PrioArgs* pa, StepState* st) {
  pdlEnter();
  if (prioSkip(st)) return;
  const PrioArgs a = *pa;
  const long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  double pmax = 0.0;
  if (k < a.n) {
    const double p = (double)a.sample[k] + a.eps;
    pmax = p;
    if (a.owner[a.idx[k]] == (((unsigned long long)st->tc << 32) | (unsigned long long)k)) a.tree[a.base + a.idx[k]] = pow(p, a.alpha);
  }
  __shared__ double red[8];
  for (int o = 16; o > 0; o >>= 1) pmax = fmax(pmax, __shfl_xor_sync(0xffffffffu, pmax, o));
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = pmax;
  __syncthreads();
  if (threadIdx.x == 0) {
    double m = 0.0;
    for (int i = 0; i < (int)(blockDim.x >> 5); i++) m = fmax(m, red[i]);
    if (m > 0.0) atomicMax((unsigned long long*)&st->maxPrio, (unsigned long long)__double_as_longlong(m));
    if (blockIdx.x == 0) st->mmin = 0x7ff0000000000000ull; // +Inf
  }
}

// The sum tree's inner nodes from its leaves, in two launches whatever the
// capacity: tree_sub builds the subtrees of TREE_SPAN leaves, one block
// each, in shared memory; tree_top builds the nodes above their roots.
// Every node is the sum of its two children, so the bits are those of any
// order of updates.
// TREE_SPAN comes as a -D option (gpu/replay.go treeSpan).

extern "C" __global__ void __launch_bounds__(1024) tree_sub(double* tree, long long base, const StepState* st) {
  pdlEnter();
  if (st && st->abort) return;
  __shared__ double cur[TREE_SPAN];
  const long long span = base < TREE_SPAN ? base : TREE_SPAN;
  const long long b = blockIdx.x;
  for (long long i = threadIdx.x; i < span; i += blockDim.x) cur[i] = tree[base + b * span + i];
  long long lo = base, cnt = span;
  const long long i = threadIdx.x;
  while (cnt > 1) {
    cnt >>= 1;
    lo >>= 1;
    __syncthreads();
    const double v = i < cnt ? cur[2 * i] + cur[2 * i + 1] : 0.0;
    __syncthreads();
    if (i < cnt) {
      cur[i] = v;
      tree[lo + b * cnt + i] = v;
    }
  }
}

// tree_top: one block; top is the number of subtree roots (nodes [top, 2·top)).
extern "C" __global__ void __launch_bounds__(1024) tree_top(double* tree, long long top, const StepState* st) {
  pdlEnter();
  if (st && st->abort) return;
  for (long long lo = top >> 1; lo >= 1; lo >>= 1) {
    for (long long i = threadIdx.x; i < lo; i += blockDim.x) tree[lo + i] = tree[2 * (lo + i)] + tree[2 * (lo + i) + 1];
    __syncthreads();
  }
}
