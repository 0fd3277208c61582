// optim.cu: gradient reductions, global-norm clipping, AdamW, the
// spectral-norm bound, the refresh of the GEMM copies of the weights and
// the EMA target update. Formulas as trainer/cpu/optim.go and spectral.go.
// Every reduction runs in a fixed order (no floating-point atomics), so a
// step is bit-reproducible on one GPU.

#define RED_THREADS 256

// Precision "bf16" keeps the trained state as bf16 values (trainer/cpu/doc.go):
// the kernels below take a flag full and then store parameters, moments,
// gradients and spectral vectors rounded to bf16, in their float32 words
// (ADR 0013). Arithmetic stays float32.

// roundBF is f rounded to the nearest bf16 (ties to even) and widened back.
__device__ __forceinline__ float roundBF(float f) { return bf2f(f2bf(f)); }

// srMix is SplitMix64's output function (bf16.mix64; replay.cu's mix64 is
// defined after this file).
__device__ __forceinline__ unsigned long long srMix(unsigned long long z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// srBits are the random bits of the stochastic rounding of parameter index
// at Adam step t of a run seeded with seed: bf16.SRBits, the same wrapping
// 64-bit arithmetic.
__device__ __forceinline__ unsigned srBits(unsigned long long seed, long long t, long long index) {
  const unsigned long long gamma = 0x9e3779b97f4a7c15ull;
  unsigned long long x = srMix((seed ^ 0x626631367372ull) + gamma * (unsigned long long)(t + 1));
  x = srMix(x + gamma * (unsigned long long)(index + 1));
  return (unsigned)(x >> 32);
}

// roundSR is f rounded stochastically to bf16 with the low 16 bits of r and
// widened back (bf16.FromFloat32Stochastic): NaN stays NaN, Inf stays Inf.
__device__ __forceinline__ float roundSR(float f, unsigned r) {
  unsigned u = __float_as_uint(f);
  if ((u & 0x7fffffffu) >= 0x7f800000u) return bf2f(f2bf(f));
  return __uint_as_float(((u + (r & 0xffffu)) >> 16) << 16);
}

// A reduction over parts: dst[e] = Σ_{s < parts} src[s·stride + e].
// kind 0: the head outputs' bias gradients from c51_loss's block parts
// (stride OUTW), into dst[index[e]] (none where index[e] < 0, the padding
// columns); the parts are added in contiguous runs, each in order, then
// the runs in order (reduceRuns). kind 1: the
// masked GEMMs' column sums and the split-K parts, s in order.
struct RedSeg {
  const float* src;
  float* dst;
  const int* index;
  long long count, parts, stride, kind;
};

// sumParts returns Σ_{s < parts} src[s·stride], s in order. A thread's
// parts are loaded RED_AHEAD at a time before they are added, the last
// fewer than RED_AHEAD too: a segment of few elements and many parts (the
// column sums of the masked GEMMs: one part per row tile) is otherwise a
// chain of dependent L2 round trips. The last batch has a loop of its
// own: one predicated loop for every batch took 96 registers, against 48.
#define RED_AHEAD 16
__device__ __forceinline__ float sumParts(const float* __restrict__ src, long long parts, long long stride) {
  float acc = 0.0f;
  long long s = 0;
  for (; s + RED_AHEAD <= parts; s += RED_AHEAD) {
    float v[RED_AHEAD];
#pragma unroll
    for (int i = 0; i < RED_AHEAD; i++) v[i] = src[(s + i) * stride];
#pragma unroll
    for (int i = 0; i < RED_AHEAD; i++) acc += v[i];
  }
  if (s < parts) {
    const int m = (int)(parts - s);
    const float* q = src + s * stride;
    float v[RED_AHEAD];
#pragma unroll
    for (int i = 0; i < RED_AHEAD; i++) v[i] = i < m ? q[i * stride] : 0.0f;
#pragma unroll
    for (int i = 0; i < RED_AHEAD; i++)
      if (i < m) acc += v[i];
  }
  return acc;
}

// reduceRuns is kind 0 of grad_reduce for one block: it takes the
// columns RUN_COLS at a time, thread t adding the parts of run t / RUN_COLS
// (runs = blockDim.x / RUN_COLS contiguous ranges of parts, each in order)
// of column t mod RUN_COLS, and then the runs in order. With thousands
// of parts (one per c51_loss block: 4096 at batch 16384), one thread's
// sum would be a chain of 256 rounds of RED_AHEAD loads; a run is
// blockDim.x / RUN_COLS times shorter. The RUN_COLS threads of a run read
// one 32-byte sector of each part. RUN_COLS comes as a -D option
// (gpu/plan.go reduceRunCols, which also sizes the launch).
__device__ void reduceRuns(const RedSeg& sg) {
  __shared__ float run[1024 / RUN_COLS][RUN_COLS];
  const int col = threadIdx.x % RUN_COLS, r = threadIdx.x / RUN_COLS, runs = blockDim.x / RUN_COLS;
  const long long s0 = sg.parts * r / runs, s1 = sg.parts * (r + 1) / runs;
  for (long long c0 = (long long)blockIdx.x * RUN_COLS; c0 < sg.count; c0 += (long long)gridDim.x * RUN_COLS) {
    const long long e = c0 + col;
    run[r][col] = e < sg.count ? sumParts(sg.src + s0 * sg.stride + e, s1 - s0, sg.stride) : 0.0f;
    __syncthreads();
    if (r == 0 && e < sg.count && sg.index[e] >= 0) {
      float t = run[0][col];
      for (int q = 1; q < runs; q++) t += run[q][col];
      sg.dst[sg.index[e]] = t;
    }
    __syncthreads();
  }
}

// grad_reduce finishes the gradient: the head outputs' bias sums from
// c51_loss's parts, the other biases from the masked GEMMs' column sums,
// and the split-K parts of the weight gradients, each in a fixed order.
// Blocks of at most 1024 threads; a block's segment is blockIdx.y.
extern "C" __global__ void grad_reduce(const RedSeg* segs, const StepState* st) {
  pdlEnter();
  if (st->abort) return;
  const RedSeg sg = segs[blockIdx.y];
  if (sg.kind == 0) {
    reduceRuns(sg);
    return;
  }
  for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < sg.count; e += (long long)gridDim.x * blockDim.x)
    sg.dst[e] = sumParts(sg.src + e, sg.parts, sg.stride);
}

// blockSumD returns the sum of v over the block (up to 1024 threads) in a
// fixed tree order; every thread gets the result.
__device__ double blockSumD(double v) {
  __shared__ double red[32];
  v = warpSumD(v);
  const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) red[wid] = v;
  __syncthreads();
  double s = 0.0;
  for (int i = 0; i < (int)(blockDim.x >> 5); i++) s += red[i];
  return s;
}

// grad_norm: partial[b] = Σ g_i² (float64) over the elements of block b
// (grid-stride), the blocks' parts summed later in block order. Block 0 also
// computes the batch loss (1/n)·Σ_i w_i·ℓ_i, summed in float64, into st->loss,
// and copies the step number t into st->tc for the priority update, which
// runs beside the update that advances t (adamw_refresh, or refresh
// after adamw: gpu/plan.go trainParts).
// With full (precision bf16) every gradient element is first rounded to bf16
// in place, so the norm, the clipping and AdamW read the stored bf16 values.
extern "C" __global__ void grad_norm(float* grad, long long P, double* partial, const float* w,
                                     const float* sample, long long n, StepState* st, int full) {
  pdlEnter();
  if (st->abort) return;
  double s = 0.0;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < P; i += (long long)gridDim.x * blockDim.x) {
    float gf = grad[i];
    if (full) {
      gf = roundBF(gf);
      grad[i] = gf;
    }
    double g = gf;
    s += g * g;
  }
  s = blockSumD(s);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
  if (blockIdx.x == 0) {
    double l = 0.0;
    for (long long i = threadIdx.x; i < n; i += blockDim.x) l += (double)(w[i] * sample[i]);
    l = blockSumD(l);
    if (threadIdx.x == 0) {
      st->loss = (float)(l / (double)n);
      st->tc = st->t;
    }
  }
}

// Parameter blocks of the flat vector for AdamW: [off, off+count), with
// weight decay on weight matrices and none on biases.
struct ParamSeg {
  long long off, count;
  long long decay; // 1: weight matrix
  long long pad;
};

struct AdamArgs {
  float* p; const float* g; float* m; float* v;
  const double* partial; long long nPartial;
  const ParamSeg* segs;
  float* lossHist; float* normHist; // [steps] per Train call, index st->local
  double beta1, beta2, lr, eps, wd, clip;
  long long nparams, nsegs; // the segments cover [0, nparams) in order
  unsigned long long* stag; // [2 × blocks]: per block, updates with a non-zero Adam term and those the stored value absorbed
  long long full;           // precision bf16: store m, v and p as bf16 values
  long long sr;             // with full: round p stochastically (srBits(seed, t, i))
  unsigned long long seed;  // the run's seed
  const float* unext;       // the spectral step's new left vectors (kernel spectral)
  float* u;                 // the left vectors the state keeps: u ← unext unless the step aborts
  long long nu;             // their length, the sum of the weight matrices' rows
};

// adamw: global norm ‖g‖ = √(Σ partials in order); if clip > 0 and ‖g‖ >
// clip, g ← g·float(clip/‖g‖); then AdamW step t = st->t + 1 on every
// parameter, with weight decay on the weight segments (formula at
// trainer/cpu/optim.go adamW). A non-finite norm or loss sets st->abort and
// leaves every parameter as it was. With full, m and v are stored rounded
// to the nearest bf16 and p to the nearest or, with sr, stochastically
// (trainer/cpu/optim.go storedAdamW). Every step counts its stagnation
// into stag: updates whose Adam term lr·m̂/(√v̂ + ε) is not zero, and those
// after which the stored p is the old one, a pair of counters per block
// (integers, so the counts are exact and order-free). A step that does not
// abort also commits the spectral step's new left vectors, u ← unext
// (kernel spectral, which ran on the weights before this update).
//
// Block b updates the ADAM_PER_BLOCK parameters from b·ADAM_PER_BLOCK,
// ADAM_PER_THREAD per thread a block's width apart (coalesced, and
// independent, so their loads overlap). The default model's 286,385
// parameters take 280 blocks, one wave (gpu/learner.go adamBlocks), so the
// block's prologue is paid once, not twice as with one parameter per
// thread (14 µs per step measured on 2026-12-02), and in it thread 0
// adds the partials while warp 1 computes the two bias corrections (float64
// pows), side by side. Each parameter's arithmetic is the same whatever the
// grid, so the grid changes no bit.
#define ADAM_THREADS 256
#define ADAM_PER_THREAD 4
#define ADAM_PER_BLOCK (ADAM_THREADS * ADAM_PER_THREAD)

// One copy of the refresh: count float32 masters from p[src] to dst of
// the copy named by kind (0: gw, E; 2: bcat, float32); layer is the weight
// matrix's layer (kind 0), whose spectral factor applies. A weight with
// tdst ≥ 0 is also written transposed into gw: element (o, i) of the
// out×in matrix (e = o·in + i) at gw[tdst + i·ld + o], the k-contiguous B
// operand of the backward's input gradient on wgmma (gpu/plan.go).
struct CopySeg {
  long long src, count, dst, kind, layer, tdst, in, ld;
};

// The online refresh folded into AdamW (kernel adamw_refresh, the
// training step's update: ADR 0028): the copies of kernel refresh (CopySeg)
// sorted by src, at most MAX_FUSED_COPIES, and a counter of the
// blocks done, zero between launches.
#define MAX_FUSED_COPIES 32
struct FusedRefresh {
  E* gw; float* bcat; const CopySeg* segs; long long nsegs;
  const float* scale;  // the spectral factors, one per weight matrix (kernel spectral)
  unsigned int* done;  // blocks of this launch done: the last one counts the step
};

template <bool REFRESH>
__device__ __forceinline__ void adamwBody(const AdamArgs* pa, StepState* st, const FusedRefresh* fr);

extern "C" __global__ void __launch_bounds__(ADAM_THREADS) adamw(const AdamArgs* pa, StepState* st) {
  pdlEnter();
  adamwBody<false>(pa, st, nullptr);
}

// adamw_refresh is adamw followed, in the same threads, by what the
// training step's refresh does to each element (kernel refresh): the
// thread that stores parameter i applies its matrix's spectral factor,
// rounded as refresh rounds it, stores the result as the master and
// writes its GEMM copies. The arithmetic on every element is that of
// adamw then refresh, so the bits are the same; the step drops one
// launch from its critical path (ADR 0028). The last block to finish
// counts the step (st->t, st->local), which every block read first.
extern "C" __global__ void __launch_bounds__(ADAM_THREADS) adamw_refresh(const AdamArgs* pa, StepState* st, const FusedRefresh* fr) {
  pdlEnter();
  adamwBody<true>(pa, st, fr);
}

template <bool REFRESH>
__device__ __forceinline__ void adamwBody(const AdamArgs* pa, StepState* st, const FusedRefresh* fr) {
  if (st->abort) return;
  const AdamArgs a = *pa;
  __shared__ double snorm, sp[RED_THREADS];
  __shared__ long long segEnd[2 * 16];
  __shared__ int segDecay[2 * 16];
  __shared__ float sbc[2];
  const long long t = st->t + 1;
  // The partials come in parallel; one thread adds them in order.
  for (long long b = threadIdx.x; b < a.nPartial; b += blockDim.x) sp[b] = a.partial[b];
  for (int q = threadIdx.x; q < a.nsegs; q += blockDim.x) {
    segEnd[q] = a.segs[q].off + a.segs[q].count;
    segDecay[q] = (int)a.segs[q].decay;
  }
  __shared__ CopySeg cseg[REFRESH ? MAX_FUSED_COPIES : 1];
  __shared__ float cscale[REFRESH ? MAX_FUSED_COPIES : 1];
  const int ncopies = REFRESH ? (int)fr->nsegs : 0;
  if (REFRESH) {
    for (int q = threadIdx.x; q < ncopies; q += blockDim.x) {
      cseg[q] = fr->segs[q];
      cscale[q] = cseg[q].kind == 0 ? fr->scale[cseg[q].layer] : 1.0f;
    }
  }
  // The bias corrections, once per block, by another warp than the sum's.
  if (threadIdx.x == 32) {
    sbc[0] = (float)(1 - pow(a.beta1, (double)t));
    sbc[1] = (float)(1 - pow(a.beta2, (double)t));
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    double s = 0.0;
    for (long long b = 0; b < a.nPartial; b++) s += sp[b];
    snorm = sqrt(s);
  }
  __syncthreads();
  const double norm = snorm;
  const float loss = st->loss;
  if (!finited(norm) || !finitef(loss)) {
    if (blockIdx.x == 0 && threadIdx.x == 0) {
      a.lossHist[st->local] = loss;
      a.normHist[st->local] = (float)norm;
      st->abort = finitef(loss) ? 1 : 2;
    }
    return;
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    a.lossHist[st->local] = loss;
    a.normHist[st->local] = (float)norm;
  }
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < a.nu; i += (long long)gridDim.x * blockDim.x)
    a.u[i] = a.unext[i];
  const bool clipping = a.clip > 0 && norm > a.clip;
  const float c = (float)(a.clip / norm);
  const float b1 = (float)a.beta1, c1 = (float)(1 - a.beta1);
  const float b2 = (float)a.beta2, c2 = (float)(1 - a.beta2);
  const float bc1 = sbc[0], bc2 = sbc[1];
  const float lr = (float)a.lr, eps = (float)a.eps, lrwdW = (float)(a.lr * a.wd);
  unsigned moved = 0, stuck = 0;
  const long long i0 = (long long)blockIdx.x * ADAM_PER_BLOCK + threadIdx.x;
  // The thread's elements ascend, so its segments only move forward.
  int q = 0, r = 0;
#pragma unroll
  for (int e = 0; e < ADAM_PER_THREAD; e++) {
    const long long i = i0 + (long long)e * ADAM_THREADS;
    if (i >= a.nparams) break;
    while (q + 1 < a.nsegs && i >= segEnd[q]) q++;
    const float lrwd = segDecay[q] ? lrwdW : 0.0f;
    float gi = a.g[i];
    if (clipping) gi = gi * c;
    float mi = b1 * a.m[i] + c1 * gi;
    float vi = b2 * a.v[i] + c2 * (gi * gi);
    float den = sqrtf(vi / bc2) + eps;
    float p = a.p[i];
    float step = lr * ((mi / bc1) / den);
    float pn = (p - lrwd * p) - step;
    if (a.full) {
      mi = roundBF(mi);
      vi = roundBF(vi);
      pn = a.sr ? roundSR(pn, srBits(a.seed, t, i)) : roundBF(pn);
    }
    a.m[i] = mi;
    a.v[i] = vi;
    if (step != 0.0f) {
      moved++;
      if (pn == p) stuck++;
    }
    if (REFRESH) {
      while (r < ncopies && i >= cseg[r].src + cseg[r].count) r++;
      if (r < ncopies && i >= cseg[r].src) {
        const CopySeg& cs = cseg[r];
        const long long e = i - cs.src;
        const float sc = cscale[r];
        if (sc != 1.0f) {
          pn = pn * sc;
          if (a.full) pn = roundBF(pn);
        }
        if (cs.kind == 0) {
          const E x = toE(pn);
          fr->gw[cs.dst + e] = x;
          if (cs.tdst >= 0) fr->gw[cs.tdst + (e % cs.in) * cs.ld + e / cs.in] = x;
        } else {
          fr->bcat[cs.dst + e] = pn;
        }
      }
    }
    a.p[i] = pn;
  }
  // The block's counts (shuffles, then one warp over the warps' sums) go
  // into the block's own pair of counters: no atomics, no contention (one
  // atomic per warp on a single address cost 7 µs per step), and the Go
  // side adds the pairs when it reads them.
  for (int o = 16; o > 0; o >>= 1) {
    moved += __shfl_xor_sync(0xffffffffu, moved, o);
    stuck += __shfl_xor_sync(0xffffffffu, stuck, o);
  }
  __shared__ unsigned wm[32], ws[32];
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
  if (lane == 0) {
    wm[w] = moved;
    ws[w] = stuck;
  }
  __syncthreads();
  if (w == 0) {
    moved = lane < nw ? wm[lane] : 0u;
    stuck = lane < nw ? ws[lane] : 0u;
    for (int o = 16; o > 0; o >>= 1) {
      moved += __shfl_xor_sync(0xffffffffu, moved, o);
      stuck += __shfl_xor_sync(0xffffffffu, stuck, o);
    }
    if (lane == 0 && moved > 0) {
      a.stag[2 * blockIdx.x] += moved;
      a.stag[2 * blockIdx.x + 1] += stuck;
    }
    // Every thread of the block read st->t and st->local before the
    // __syncthreads above; the last block to arrive counts the step.
    if (REFRESH && lane == 0) {
      __threadfence();
      if (atomicAdd(fr->done, 1u) == gridDim.x - 1) {
        st->t += 1;
        st->local += 1;
        *fr->done = 0;
      }
    }
  }
}

// One weight matrix for the spectral step: rows×cols at p[w], its left
// vector at u[uoff].
struct SpecSeg {
  long long w, rows, cols, uoff;
};

// spectral: one power iteration per weight matrix, one block of 1024
// threads each (formulas at trainer/cpu/spectral.go powerStep and
// boundScale):
//
//   v ← Wᵀu/‖Wᵀu‖,  u′ ← Wv/‖Wv‖,  σ = ‖Wv‖,  and later W ← W·float(bound/σ) when σ > bound
//
// on the weights p before the step's AdamW (ADR 0025): in the training
// graph it runs on a branch of its own beside the sampling, the forward
// and the backward passes, joined before AdamW. It writes u′ to un, never
// to u, which it reads: AdamW commits u ← un when the step does not abort,
// so an aborted step leaves the state as it was. A matrix whose Wᵀu or Wv
// is zero or not finite gets u′ = u. The last line is left to the refresh
// that follows AdamW: scale[i] receives float(bound/σ) or 1 for matrix i.
// Wᵀu is summed per warp over rows w, w+32, … and the 32 warp parts are
// added in warp order; Wv is one warp per row; norms are summed in float64
// by blockSumD. Every order is fixed, so the step is bit-reproducible. The
// refresh counts the step (st->t, st->local).
// Dynamic shared memory: (max cols + max rows) floats.
#define SPEC_THREADS 1024
#define SPEC_COLS 256 // columns of Wᵀu per pass

// With full (precision bf16) u′ is stored rounded to the nearest bf16.
extern "C" __global__ void __launch_bounds__(SPEC_THREADS) spectral(const float* p, const float* u, float* un, const SpecSeg* segs,
                                                                   double bound, float* scale, const StepState* st, int full) {
  pdlEnter();
  if (st->abort) return;
  extern __shared__ float sh[];
  __shared__ float part[SPEC_THREADS / 32][SPEC_COLS];
  float factor = 1.0f; // thread 0's: the factor of this matrix, 1 when unchanged
  const SpecSeg sg = segs[blockIdx.x];
  const float* uu = u + sg.uoff;
  float* nu = un + sg.uoff;
  const int rows = (int)sg.rows, cols = (int)sg.cols;
  bool moved = false; // the same in every thread: u′ written
  if (bound > 0) {
    const float* W = p + sg.w;
    float* v = sh;
    float* wv = sh + cols;
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    for (int c0 = 0; c0 < cols; c0 += SPEC_COLS) {
      float acc[SPEC_COLS / 32];
#pragma unroll
      for (int q = 0; q < SPEC_COLS / 32; q++) acc[q] = 0.0f;
#pragma unroll 4
      for (int r = wid; r < rows; r += nw) {
        const float ur = uu[r];
        const float* wr = W + (long long)r * cols + c0;
#pragma unroll
        for (int q = 0; q < SPEC_COLS / 32; q++) {
          const int c = lane + 32 * q;
          if (c0 + c < cols) acc[q] += wr[c] * ur;
        }
      }
#pragma unroll
      for (int q = 0; q < SPEC_COLS / 32; q++) part[wid][lane + 32 * q] = acc[q];
      __syncthreads();
      for (int c = threadIdx.x; c < SPEC_COLS && c0 + c < cols; c += blockDim.x) {
        float s = 0.0f;
        for (int w = 0; w < nw; w++) s += part[w][c];
        v[c0 + c] = s;
      }
      __syncthreads();
    }
    double s2 = 0.0;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) s2 += (double)v[c] * (double)v[c];
    const double nv = sqrt(blockSumD(s2));
    if (nv > 0 && finited(nv)) {
      __syncthreads();
      for (int c = threadIdx.x; c < cols; c += blockDim.x) v[c] = (float)((double)v[c] / nv);
      __syncthreads();
#pragma unroll 2
      for (int r = wid; r < rows; r += nw) {
        float s = 0.0f;
#pragma unroll 8
        for (int c = lane; c < cols; c += 32) s += W[(long long)r * cols + c] * v[c];
        s = warpSum(s);
        if (lane == 0) wv[r] = s;
      }
      __syncthreads();
      double w2 = 0.0;
      for (int r = threadIdx.x; r < rows; r += blockDim.x) w2 += (double)wv[r] * (double)wv[r];
      const double sigma = sqrt(blockSumD(w2));
      if (sigma > 0 && finited(sigma)) {
        for (int r = threadIdx.x; r < rows; r += blockDim.x) {
          const float ur = (float)((double)wv[r] / sigma);
          nu[r] = full ? roundBF(ur) : ur;
        }
        moved = true;
        if (sigma > bound && threadIdx.x == 0) factor = (float)(bound / sigma);
      }
    }
  }
  if (!moved)
    for (int r = threadIdx.x; r < rows; r += blockDim.x) nu[r] = uu[r];
  if (threadIdx.x == 0) scale[blockIdx.x] = factor;
}


// refresh rewrites the GEMM copies of a network after its float32 masters
// changed, one segment per blockIdx.y: every weight matrix into gw (at its
// aligned offset; the head-hidden ones side by side form wcat) and the
// head-hidden biases into bcat. With scale (the training step's refresh),
// a weight whose layer has a factor ≠ 1 from spectral is first scaled in
// the masters, W ← W·factor, as the spectral step's last line (stored
// rounded to the nearest bf16 with full, precision bf16); each element is
// read and written by one thread only, its transposed copy included. The
// training step's refresh (with scale) also counts the step: st->t and
// st->local, which AdamW read before it.
extern "C" __global__ void refresh(float* p, E* gw, float* bcat, const CopySeg* segs, const float* scale,
                                   StepState* st, int full) {
  pdlEnter();
  if (st && st->abort) return;
  if (scale && st && blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) {
    st->t += 1;
    st->local += 1;
  }
  const CopySeg sg = segs[blockIdx.y];
  float* src = p + sg.src;
  const float sc = (scale && sg.kind == 0) ? scale[sg.layer] : 1.0f;
  for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < sg.count; e += (long long)gridDim.x * blockDim.x) {
    float v = src[e];
    if (sc != 1.0f) {
      v = v * sc;
      if (full) v = roundBF(v);
      src[e] = v;
    }
    if (sg.kind == 0) {
      const E x = toE(v);
      gw[sg.dst + e] = x;
      if (sg.tdst >= 0) gw[sg.tdst + (e % sg.in) * sg.ld + e / sg.in] = x;
    } else {
      bcat[sg.dst + e] = v;
    }
  }
}

// ema: target ← a·online + b·target element-wise (a = float(τ), b = float(1−τ));
// copy = 1 copies exactly (τ = 1). With full (precision bf16) the result is
// stored rounded to the nearest bf16.
extern "C" __global__ void ema(const float* online, float* target, long long P, float a, float b, int copy, int full) {
  pdlEnter();
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < P; i += (long long)gridDim.x * blockDim.x) {
    float v = copy ? online[i] : a * online[i] + b * target[i];
    target[i] = full ? roundBF(v) : v;
  }
}

// round_check: for i < n, bits[i] = srBits(seed, t, i), nearest[i] =
// roundBF(x[i]) and stochastic[i] = roundSR(x[i], bits[i]): the rounding of
// AdamW's stores in precision bf16, run by the start-up self-check against
// the Go definitions (bf16.SRBits, bf16.Round, bf16.RoundStochastic).
extern "C" __global__ void round_check(const float* x, long long n, unsigned long long seed, long long t,
                                       unsigned* bits, float* nearest, float* stochastic) {
  pdlEnter();
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    const unsigned r = srBits(seed, t, i);
    bits[i] = r;
    nearest[i] = roundBF(x[i]);
    stochastic[i] = roundSR(x[i], r);
  }
}

// cast_rows: dst[i] = E(src[i]) for count values (observations entering the first GEMM).
extern "C" __global__ void cast_rows(const float* src, E* dst, long long count) {
  pdlEnter();
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += (long long)gridDim.x * blockDim.x)
    dst[i] = toE(src[i]);
}
