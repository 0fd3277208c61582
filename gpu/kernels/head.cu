// head.cu: the dueling C51 head: distributions, greedy actions, the
// double-DQN target projection, the loss and its gradient. A warp owns one
// branch of one row (an observation or a sample); lane l holds atoms l,
// l+32, ….
//
// Row layout of the head outputs O (OUTW floats, bias added): V at
// [0, ATOMS), branch d's advantages A_d[a, j] at branchCol(d) + a·ATOMS + j.
// For branch d with n_d actions:
//
//   mean_j  = (Σ_a A_d[a, j]) / n_d            (sum in action order)
//   L[a, j] = (V[j] + A_d[a, j]) − mean_j
//   p_j     = exp(L_j − max L) / Σ_k exp(L_k − max L)
//   Q(a)    = Σ_j p_j·z_j

// meanOf writes mean_j of the branch of row o with nd actions whose
// advantages start at column col into mean (lane's atoms).
__device__ __forceinline__ void meanOf(const float* o, int col, int nd, int lane, float mean[JPL]) {
  const float* adv = o + col;
#pragma unroll
  for (int q = 0; q < JPL; q++) {
    int j = lane + 32 * q;
    if (j < ATOMS) {
      float s = adv[j];
      for (int b = 1; b < nd; b++) s += adv[b * ATOMS + j];
      mean[q] = s / (float)nd;
    } else {
      mean[q] = 0.0f;
    }
  }
}

// logitsOf writes the logits of action a of that branch into l, given
// its mean.
__device__ __forceinline__ void logitsOf(const float* o, int col, int a, int lane, const float mean[JPL], float l[JPL]) {
  const float* adv = o + col;
#pragma unroll
  for (int q = 0; q < JPL; q++) {
    int j = lane + 32 * q;
    l[q] = j < ATOMS ? (o[j] + adv[a * ATOMS + j]) - mean[q] : -3.402823466e38f;
  }
}

// softmaxBy turns the logits l into probabilities p and returns log Σ
// exp(l − max) and max; the probabilities are the quotients e/Σ, or with
// RECIP the products with one correctly rounded 1/Σ (within an ulp of the
// quotients). softmax (head_infer: the greedy actions) keeps the quotients,
// the CPU's formula; lossSoftmax (c51_loss) takes the products.
template <bool RECIP>
__device__ __forceinline__ void softmaxBy(const float l[JPL], float p[JPL], float* mx, float* lse) {
  float m = -3.402823466e38f;
#pragma unroll
  for (int q = 0; q < JPL; q++) m = fmaxf(m, l[q]);
  m = warpMax(m);
  float s = 0.0f;
#pragma unroll
  for (int q = 0; q < JPL; q++) {
    int j = (threadIdx.x & 31) + 32 * q;
    p[q] = j < ATOMS ? expf(l[q] - m) : 0.0f;
    s += p[q];
  }
  s = warpSum(s);
  if (RECIP) {
    const float r = 1.0f / s;
#pragma unroll
    for (int q = 0; q < JPL; q++) p[q] = p[q] * r;
  } else {
#pragma unroll
    for (int q = 0; q < JPL; q++) p[q] = p[q] / s;
  }
  *mx = m;
  *lse = logf(s);
}
__device__ __forceinline__ void softmax(const float l[JPL], float p[JPL], float* mx, float* lse) {
  softmaxBy<false>(l, p, mx, lse);
}
__device__ __forceinline__ void lossSoftmax(const float l[JPL], float p[JPL], float* mx, float* lse) {
  softmaxBy<true>(l, p, mx, lse);
}

// expectation returns Σ_j p_j·z_j over the warp.
__device__ __forceinline__ float expectation(const float p[JPL], const float* z, int lane) {
  float s = 0.0f;
#pragma unroll
  for (int q = 0; q < JPL; q++) {
    int j = lane + 32 * q;
    if (j < ATOMS) s += p[q] * z[j];
  }
  return warpSum(s);
}

// expectedQ returns Q = Σ_j p_j·z_j of the logits l as (Σ_j e_j·z_j) /
// (Σ_j e_j), e_j = exp(l_j − max l), the two sums reduced over the warp
// side by side (c51_loss's choice of a*; head_infer keeps softmax then
// expectation, the CPU's order).
__device__ __forceinline__ float expectedQ(const float l[JPL], const float* z, int lane) {
  float m = -3.402823466e38f;
#pragma unroll
  for (int q = 0; q < JPL; q++) m = fmaxf(m, l[q]);
  m = warpMax(m);
  float s = 0.0f, t = 0.0f;
#pragma unroll
  for (int q = 0; q < JPL; q++) {
    const int j = lane + 32 * q;
    if (j < ATOMS) {
      const float e = expf(l[q] - m);
      s += e;
      t += e * z[j];
    }
  }
  for (int o = 16; o > 0; o >>= 1) {
    s += __shfl_xor_sync(0xffffffffu, s, o);
    t += __shfl_xor_sync(0xffffffffu, t, o);
  }
  return t / s;
}

// branchMean and meanLogits are meanOf and logitsOf of branch D, its
// action count and columns constants (c51_loss, head_infer).
template <int D>
__device__ __forceinline__ void branchMean(const float* o, int lane, float mean[JPL]) {
  meanOf(o, branchCol(D), branchSize(D), lane, mean);
}
template <int D>
__device__ __forceinline__ void meanLogits(const float* o, int a, int lane, const float mean[JPL], float l[JPL]) {
  logitsOf(o, branchCol(D), a, lane, mean, l);
}

// firstArgmax returns the first index of the largest of q[0..N) and
// stores that value in best.
template <int N>
__device__ __forceinline__ int firstArgmax(const float q[N], float* best) {
  int k = 0;
  float m = q[0];
#pragma unroll
  for (int a = 1; a < N; a++)
    if (q[a] > m) {
      k = a;
      m = q[a];
    }
  *best = m;
  return k;
}

// branchGreedy returns the greedy action of branch D of the head outputs o
// (one warp): the first argmax of Q(a) = Σ_j p_j·z_j, and in the direction
// branch flat unless the position beats flat by margin (greedyDir,
// model.Greedy). It leaves every action's logits, probabilities and Q in
// l, p and q. The actions are independent chains that the scheduler
// interleaves, each with the arithmetic of a lone softmax; nothing is
// stored, so no load waits for a store.
template <int D>
__device__ __forceinline__ int branchGreedy(const float* o, const float* z, int lane, float margin,
                                            float l[branchSize(D)][JPL], float p[branchSize(D)][JPL], float q[branchSize(D)]) {
  constexpr int nd = branchSize(D);
  float mean[JPL];
  branchMean<D>(o, lane, mean);
#pragma unroll
  for (int a = 0; a < nd; a++) {
    float mx, lse;
    meanLogits<D>(o, a, lane, mean, l[a]);
    softmax(l[a], p[a], &mx, &lse);
    q[a] = expectation(p[a], z, lane);
  }
  float bestQ;
  int best = firstArgmax<nd>(q, &bestQ);
  if (D == 0) best = greedyDir(best, bestQ, q[FLAT_DIR], margin);
  return best;
}

// inferRow is head_infer's work for branch D of row r (one warp).
template <int D>
__device__ __forceinline__ void inferRow(const float* o, long long r, const float* z, float* logits, float* probs,
                                         float* qout, int* act, float margin, int lane) {
  constexpr int nd = branchSize(D);
  float l[nd][JPL], p[nd][JPL], q[nd];
  const int best = branchGreedy<D>(o, z, lane, margin, l, p, q);
#pragma unroll
  for (int a = 0; a < nd; a++) {
    const long long k = r * NACT + branchOff(D) + a;
#pragma unroll
    for (int s = 0; s < JPL; s++) {
      const int j = lane + 32 * s;
      if (j < ATOMS) {
        if (logits) logits[k * ATOMS + j] = l[a][s];
        if (probs) probs[k * ATOMS + j] = p[a][s];
      }
    }
    if (qout && lane == 0) qout[k] = q[a];
  }
  if (act && lane == 0) act[r * 3 + D] = best;
}

// head_infer: for rows observations with head outputs O [rows×OUTW],
// writes (each output optional, null to skip) the logits and the
// probabilities [rows×NACT×ATOMS], the expected values Q [rows×NACT] and the
// greedy action of every branch act [rows×3] (branchGreedy). One warp per
// (row, branch): warp w takes row w/3, branch w mod 3.
extern "C" __global__ void head_infer(const float* O, int rows, const float* z, float* logits,
                                      float* probs, float* qout, int* act, float margin) {
  pdlEnter();
  const int lane = threadIdx.x & 31;
  const long long w = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (w >= (long long)NBRANCH * rows) return;
  const long long r = w / NBRANCH;
  const float* o = O + r * OUTW;
  switch ((int)(w - r * NBRANCH)) {
  case 0: inferRow<0>(o, r, z, logits, probs, qout, act, margin, lane); break;
  case 1: inferRow<1>(o, r, z, logits, probs, qout, act, margin, lane); break;
  default: inferRow<2>(o, r, z, logits, probs, qout, act, margin, lane);
  }
}

// Arguments of c51_loss that stay fixed for a trainer.
struct LossArgs {
  const float* O;      // [2n×OUTW] online outputs: rows [0, n) at s, [n, 2n) at s′
  const float* Ot;     // [n×OUTW]  target outputs at s′
  const float* z;      // [ATOMS] support
  const int* act;      // [n×3] actions taken
  const float* ret;    // [n] n-step returns R
  const float* disc;   // [n] γⁿ·(1 − done)
  const double* mass;  // [n] sampled masses m_i = p_i^α (weights from masses when sampled)
  float* w;            // [n] importance weights: computed (sampled) or read (given)
  float* G;            // [n×OUTW] ∂loss/∂O, float32 (fp32 mode), or null
  E* Ge;               // [n×OUTW] the same rounded to E (bf16 modes), or null
  float* sample;       // [n] per-sample loss ℓ_i
  float* targets;      // [n×3×ATOMS] projected targets m, or null
  double beta0;        // PER β schedule: β = β0 + (1 − β0)·min(t, betaSteps)/betaSteps
  long long betaSteps;
  float vmin, vmax, dz;
  int n;
  int sampled;         // 1: weights from masses and StepState.mmin; 0: given in w
  int rows;            // rows (samples) per block, a multiple of LOSS_SPB
  float* part;         // [gridDim.x×OUTW] per block: Σ over its rows of ∂loss/∂O
};

// c51_loss computes, for each sample i, the double-DQN C51 target of
// every branch and the loss with its gradient; formulas as the CPU
// reference (trainer/cpu/learner.go, backward.go, c51.go):
//
//   a*_d = argmax_a Q_online(s′, a)          (first on ties; Q from expectedQ,
//                                             equal to the CPU's within rounding)
//   m_d  = projection of p_target(s′, a*_d) onto the support for R, γⁿ(1−done)
//   ℓ_i  = (1/3)·Σ_d −Σ_j m_dj·log p_online(s, a_d)_j
//   ∂loss/∂L_d[a_d, j] = k·(p_j·S − m_j),  k = w_i/float(3n),  S = Σ_j m_j
//   ∂/∂V[j] = Σ_d ∂L_d,   ∂/∂A_d[a, j] = [a = a_d]·∂L_d[j] − ∂L_d[j]/n_d
//
// One warp per (sample, branch): LOSS_SPB samples of three warps per block
// at a time, the block's rows [b·rows, (b+1)·rows) in turn.
// The projection sums the mass arriving at each atom in source-atom order,
// as the CPU does (each source atom's two shares are tabulated first, then
// every target atom adds its shares j = 0, 1, … with zeros for the others,
// which leaves the sum's bits unchanged), and ∂/∂V and ℓ_i add the
// branches in order 0, 1, 2: equal inputs give equal bits.
// LOSS_SPB comes as a -D option (gpu/plan.go lossSamplesPerBlock).
//
// Each warp runs lossBranch<d> for its branch, with the branch's action
// count and columns known at compile time, so the n_d softmaxes of the
// a* choice are independent chains the scheduler interleaves; each
// action's arithmetic is that of a lone softmax. The importance weight (a
// float64 power) is computed once per sample, by branch 0's warp.
//
// The head outputs' bias gradients are the column sums of ∂loss/∂O over
// the batch. Each block adds its rows' gradients as it makes them: the
// warps of sample slot s (rows b·rows + s, + s + LOSS_SPB, …) add theirs
// in row order into acc[s], which only they touch, and the block writes
// part[b][c] = acc[0][c] + acc[1][c] + …; grad_reduce adds the blocks'
// parts in a fixed order (kind 0). Nothing rereads the gradient for
// them, and in the bf16 modes its float32 copy is not written at all.
#define LOSS_WARPS (NBRANCH * LOSS_SPB)

struct LossShared {
  // Per warp: each source atom's shares for its lower and upper target,
  // and for each target atom the first source and the number of sources
  // whose lower (L) or upper (U) target it is.
  float wl[LOSS_WARPS][ATOMS], wu[LOSS_WARPS][ATOMS];
  int fL[LOSS_WARPS][ATOMS], nL[LOSS_WARPS][ATOMS], fU[LOSS_WARPS][ATOMS], nU[LOSS_WARPS][ATOMS];
  float gsh[LOSS_WARPS][ATOMS];
  float ces[LOSS_WARPS];
  float w[LOSS_SPB];
  float acc[LOSS_SPB][OUTW]; // per sample slot: Σ of its rows' ∂loss/∂O so far
};

template <int D>
__device__ __forceinline__ void lossBranch(const LossArgs& a, LossShared& sh, long long i, int lane, int wid, int si, float w) {
  constexpr int nd = branchSize(D);
  const long long n = a.n;
  const float k = w / (float)(NBRANCH * n);
  const float* on = a.O + i * OUTW;
  const float* onNext = a.O + (n + i) * OUTW;
  const float* tg = a.Ot + i * OUTW;
  const float top = (float)(ATOMS - 1);
  const float R = a.ret[i], Dd = a.disc[i];
  // Double DQN: the online network picks a*, the target network rates it.
  int best = 0;
  {
    float meanNext[JPL], qb[nd];
    branchMean<D>(onNext, lane, meanNext);
#pragma unroll
    for (int b = 0; b < nd; b++) {
      float l[JPL];
      meanLogits<D>(onNext, b, lane, meanNext, l);
      qb[b] = expectedQ(l, a.z, lane);
    }
    float bestQ;
    best = firstArgmax<nd>(qb, &bestQ);
  }
  for (int t = lane; t < ATOMS; t += 32) {
    sh.fL[wid][t] = ATOMS;
    sh.fU[wid][t] = ATOMS;
    sh.nL[wid][t] = 0;
    sh.nU[wid][t] = 0;
  }
  __syncwarp();
  {
    // Where each source atom's mass goes: atoms l ≤ u with shares.
    float mean[JPL], l[JPL], p[JPL], mx, lse;
    branchMean<D>(tg, lane, mean);
    meanLogits<D>(tg, best, lane, mean, l);
    lossSoftmax(l, p, &mx, &lse);
#pragma unroll
    for (int q = 0; q < JPL; q++) {
      int j = lane + 32 * q;
      if (j >= ATOMS) continue;
      float pj = p[q];
      float tz = R + Dd * a.z[j];
      tz = fminf(fmaxf(tz, a.vmin), a.vmax);
      float bj = fminf(fmaxf((tz - a.vmin) / a.dz, 0.0f), top);
      float lo = floorf(bj), hi = ceilf(bj);
      int lj = (int)lo, uj = (int)hi;
      if (lj == uj) {
        sh.wl[wid][j] = pj;
        sh.wu[wid][j] = 0.0f;
      } else {
        sh.wl[wid][j] = pj * (hi - bj);
        sh.wu[wid][j] = pj * (bj - lo);
      }
      atomicMin(&sh.fL[wid][lj], j);
      atomicAdd(&sh.nL[wid][lj], 1);
      atomicMin(&sh.fU[wid][uj], j);
      atomicAdd(&sh.nU[wid][uj], 1);
    }
  }
  __syncwarp();
  // Projection: m_t = Σ_j (mass of source atom j landing on atom t), j
  // ascending. b_j rises with j (γⁿ(1−done) ≥ 0), so the sources whose
  // upper target is t are consecutive, and so are those whose lower target
  // is t, and the former all come before the latter (b_j ≤ t ≤ b_j′; a
  // source with b_j = t is in both, with a zero upper share). Adding them in
  // that order is the CPU's j-ascending sum, bit for bit.
  float m[JPL];
#pragma unroll
  for (int q = 0; q < JPL; q++) {
    const int t = lane + 32 * q;
    m[q] = 0.0f;
    if (t >= ATOMS) continue;
    // Not unrolled: a target atom has one or two sources of each kind
    // unless the transition is terminal, and the unrolled loops' set-up
    // cost more than their bodies.
#pragma unroll 1
    for (int j = sh.fU[wid][t], e = sh.fU[wid][t] + sh.nU[wid][t]; j < e; j++) m[q] += sh.wu[wid][j];
#pragma unroll 1
    for (int j = sh.fL[wid][t], e = sh.fL[wid][t] + sh.nL[wid][t]; j < e; j++) m[q] += sh.wl[wid][j];
  }
  if (a.targets) {
#pragma unroll
    for (int q = 0; q < JPL; q++) {
      int j = lane + 32 * q;
      if (j < ATOMS) a.targets[(i * NBRANCH + D) * ATOMS + j] = m[q];
    }
  }
  // Online distribution of the action taken at s.
  const int ad = a.act[i * 3 + D];
  float mean[JPL], l[JPL], p[JPL], mx, lse;
  branchMean<D>(on, lane, mean);
  meanLogits<D>(on, ad, lane, mean, l);
  lossSoftmax(l, p, &mx, &lse);
  float c = 0.0f, S = 0.0f;
#pragma unroll
  for (int q = 0; q < JPL; q++) {
    int j = lane + 32 * q;
    if (j < ATOMS) {
      float logp = (l[q] - mx) - lse;
      c += m[q] * logp;
      S += m[q];
    }
  }
  const float ce = -warpSum(c);
  S = warpSum(S);
  if (lane == 0) sh.ces[wid] = ce;
  float* G = a.G ? a.G + i * OUTW + branchCol(D) : 0;
  E* Ge = a.Ge ? a.Ge + i * OUTW + branchCol(D) : 0;
  float* acc = sh.acc[si] + branchCol(D);
#pragma unroll
  for (int q = 0; q < JPL; q++) {
    int j = lane + 32 * q;
    if (j >= ATOMS) continue;
    float g = k * (p[q] * S - m[q]);
    sh.gsh[wid][j] = g;
#pragma unroll
    for (int b = 0; b < nd; b++) {
      float v = -(g / (float)nd);
      if (b == ad) v += g;
      if (G) G[b * ATOMS + j] = v;
      if (Ge) Ge[b * ATOMS + j] = toE(v);
      acc[b * ATOMS + j] += v;
    }
  }
}

extern "C" __global__ void __launch_bounds__(32 * LOSS_WARPS, 8) c51_loss(const LossArgs* pa, const StepState* st) {
  pdlEnter();
  if (st->abort) return;
  // Read where they are (a copy in registers spills in the row loop, one
  // in shared memory measured no faster).
  const LossArgs& a = *pa;
  __shared__ LossShared sh;
  // Each slot's warps add into their own columns only, after this barrier.
  for (int c = threadIdx.x; c < LOSS_SPB * OUTW; c += blockDim.x) (&sh.acc[0][0])[c] = 0.0f;
  __syncthreads();
  const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
  const int d = wid % NBRANCH, si = wid / NBRANCH;
  const long long n = a.n;
  const long long r0 = (long long)blockIdx.x * a.rows;
  const long long r1 = r0 + a.rows < n ? r0 + a.rows : n;
  for (long long i0 = r0; i0 < r1; i0 += LOSS_SPB) {
    const long long i = i0 + si;
    const bool live = i < r1;
    if (live && d == 0 && lane == 0) {
      float w;
      if (a.sampled) {
        double t = (double)st->t;
        double beta = 1.0;
        if (a.betaSteps > 0) beta = a.beta0 + (1.0 - a.beta0) * fmin(fmax(t, 0.0), (double)a.betaSteps) / (double)a.betaSteps;
        double mmin = __longlong_as_double((long long)st->mmin);
        w = (float)pow(mmin / a.mass[i], beta);
        a.w[i] = w;
      } else {
        w = a.w[i];
      }
      sh.w[si] = w;
    }
    __syncthreads();
    if (live) {
      const float w = sh.w[si];
      switch (d) {
      case 0: lossBranch<0>(a, sh, i, lane, wid, si, w); break;
      case 1: lossBranch<1>(a, sh, i, lane, wid, si, w); break;
      default: lossBranch<2>(a, sh, i, lane, wid, si, w);
      }
    }
    __syncthreads();
    // Branch 0's warp finishes the row: ∂/∂V and ℓ_i. The next row's
    // branch warps overwrite gsh and ces only after the next barrier,
    // which this warp reaches once it is done here.
    if (live && d == 0) {
      const int w0 = si * NBRANCH;
      for (int j = lane; j < ATOMS; j += 32) {
        float gv = 0.0f;
        gv += sh.gsh[w0][j];
        gv += sh.gsh[w0 + 1][j];
        gv += sh.gsh[w0 + 2][j];
        if (a.G) a.G[i * OUTW + j] = gv;
        if (a.Ge) a.Ge[i * OUTW + j] = toE(gv);
        sh.acc[si][j] += gv;
      }
      if (lane == 0) a.sample[i] = (sh.ces[w0] + sh.ces[w0 + 1] + sh.ces[w0 + 2]) / (float)NBRANCH;
    }
  }
  __syncthreads();
  float* part = a.part + (long long)blockIdx.x * OUTW;
  for (int c = threadIdx.x; c < OUTW; c += blockDim.x) {
    float s = sh.acc[0][c];
#pragma unroll
    for (int q = 1; q < LOSS_SPB; q++) s += sh.acc[q][c];
    part[c] = s;
  }
}
