// gemm.cu: the one GEMM of the trainer, grouped, split in k, with fused
// epilogues.
//
// A launch runs njobs independent jobs over one linear grid: job z owns the
// blocks [first_z, first_z + tilesM·tilesN·splits). Each job computes
//
//   C(m, n) = epilogue( Σ_k A(m, k)·B(k, n) ),  0 ≤ m < M, 0 ≤ n < N, 0 ≤ k < K
//
// with A(m, k) = A[m·sam + k·sak] and B(k, n) = B[k·sbk + n·sbn] of the
// storage type E. One of each operand's strides is 1: A is k-contiguous
// (sak = 1: activations, upstream gradients) or m-contiguous (sam = 1: a
// transposed gradient), B is k-contiguous (sbk = 1: W for x·Wᵀ) or
// n-contiguous (sbn = 1: W for G·W, activations for Gᵀ·x). So one kernel
// does the forward product, the input gradient and the weight gradient
// without transposed copies. The Go side (gpu/gemm.go) guarantees that the
// other stride and every base address are multiples of 16 bytes, so tiles
// move in 16-byte pieces; edges are zero-filled.
//
// Split in k: a job with kchunk < K runs ⌈K/kchunk⌉ splits; split s sums k
// in [s·kchunk, (s+1)·kchunk) into C + s·splitStride (EPI_STORE only), and
// grad_reduce adds the splits in order. Nothing is added atomically, so the
// result is the same bits on every run.
//
// Accumulation is float32. bf16 mode: mma.sync m16n8k16 on the tensor
// cores, operands staged through shared memory by cp.async in a
// three-stage pipeline and read with ldmatrix (.trans for the m- and
// n-contiguous operands). fp32 mode: by default 3xTF32, three mma.sync
// m16n8k8 TF32 products per product (gemmTf32, ADR 0021); with
// DQNFLOW_FP32_GEMM=simt, fmaf in k order on the CUDA cores, the next k
// tile loaded into registers while the current one is used. On sm_90a
// the forward jobs of both modes run on wgmma (gemmWgmma, at the end).
//
// Epilogues (v the accumulated value, applied per element):
//   EPI_STORE      C = v
//   EPI_BIAS       C = v + bias[n]
//   EPI_BIAS_RELU  Ce = E(max(v + bias[n], 0)), C too if given  (hidden layers)
//   EPI_MASK       y = mask(m, n) > 0 ? v : 0; C = y; Ce = E(y)  (ReLU backward)
// C (float32) and Ce (E) may each be null where a mode writes it optionally.
// An EPI_MASK job may also sum its float32 results by column, per tile of
// rows: colsum[mt·scs + n] = Σ_{m in row tile mt} y(m, n) (the bias
// gradient of the layer, before any rounding to E; grad_reduce adds the
// row tiles in order). Each block sums its rows in a fixed tree: a
// thread's rows in order, then the lanes that share its columns by
// butterfly, then the warps down the tile in order, so the result is the
// same bits on every run.
//
// Three tile shapes, chosen per launch by the Go side (gpu/gemm.go
// gemmCall): gemm64 (64×64 tiles, for launches that would not fill the GPU
// with bigger ones), gemm128o (128×128) and gemm128x64o (for narrow outputs
// such as the head's).

#define EPI_STORE 0
#define EPI_BIAS 1
#define EPI_BIAS_RELU 2
#define EPI_MASK 3

// GemmJob is 28 64-bit words; the Go side (gpu/gemm.go) writes the same layout.
struct GemmJob {
  const E* A; long long sam, sak;
  const E* B; long long sbk, sbn;
  float* C; long long scm, scn;
  E* Ce; long long sem, sen;
  const E* mask; long long smm, smn;
  const float* bias;
  long long M, N, K, epi;
  long long first;        // first block of this job in the launch
  long long tilesM, tilesN;
  long long kchunk;       // k per split (K: no split)
  long long splitStride;  // elements between the C of consecutive splits
  float* colsum;          // EPI_MASK: per row tile column sums of y, or null
  long long scs;          // elements between the colsum rows of consecutive row tiles
  long long csbm;         // rows of a colsum row tile: the mma.sync kernels' BM; wgColSums's reference tile
};

// Pairs of neighbouring columns (n even) move as one 8-byte (float) or
// 4-byte (bf16) access where the job's rows are aligned for it.
struct __align__(8) f2 {
  float x, y;
};
__device__ __forceinline__ void stF2(float* p, float a, float b) { *(f2*)p = f2{a, b}; }
#if DQN_BF16
// stE2 rounds a pair to bf16 with the hardware's round-to-nearest-even
// (the bits of f2bf for every non-NaN value).
__device__ __forceinline__ void stE2(E* p, float a, float b) {
  unsigned u;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(u) : "f"(b), "f"(a));
  *(unsigned*)p = u;
}
__device__ __forceinline__ void ldE2(const E* p, float& a, float& b) {
  const unsigned u = *(const unsigned*)p;
  a = bf2f((bf16_t)(u & 0xffffu));
  b = bf2f((bf16_t)(u >> 16));
}
#else
__device__ __forceinline__ void stE2(E* p, float a, float b) { *(f2*)p = f2{a, b}; }
__device__ __forceinline__ void ldE2(const E* p, float& a, float& b) {
  const f2 u = *(const f2*)p;
  a = u.x;
  b = u.y;
}
#endif

// The output rows of one row m of a job: C (float32, may be null), Ce (E,
// may be null) and the mask, each with unit column stride (checked by the
// Go side).
struct EpiRow {
  float* c;
  E* e;
  const E* mask;
};

__device__ __forceinline__ EpiRow epiRow(const GemmJob& j, float* C, long long m) {
  EpiRow r;
  r.c = C ? C + m * j.scm : (float*)0;
  r.e = j.Ce ? j.Ce + m * j.sem : (E*)0;
  r.mask = j.mask ? j.mask + m * j.smm : (const E*)0;
  return r;
}

// epiValue is the epilogue of one element: the float32 result y of v at
// column n (b the bias of column n, mk the mask value).
template <int EPI>
__device__ __forceinline__ float epiValue(float v, float b, float mk) {
  if (EPI == EPI_STORE) return v;
  if (EPI == EPI_BIAS) return v + b;
  if (EPI == EPI_BIAS_RELU) return fmaxf(v + b, 0.0f);
  return mk > 0.0f ? v : 0.0f;
}

// epiOne stores the result of one element at column n of row r.
template <int EPI>
__device__ __forceinline__ void epiOne(const EpiRow& r, const float* bias, long long n, float v) {
  const float b = (EPI == EPI_BIAS || EPI == EPI_BIAS_RELU) ? bias[n] : 0.0f;
  const float mk = EPI == EPI_MASK ? ldE(r.mask + n) : 0.0f;
  const float y = epiValue<EPI>(v, b, mk);
  if (r.c) r.c[n] = y;
  if (EPI >= EPI_BIAS_RELU && r.e) r.e[n] = toE(y);
}

// epiTwo stores the results of columns n and n+1 (both inside the job) of
// row r, as pairs where vec says the rows are aligned for it; b0 and b1 are
// their biases (read once per column by the caller).
template <int EPI>
__device__ __forceinline__ void epiTwo(const EpiRow& r, const float* bias, long long n, float v0, float v1, bool vec,
                                       float b0, float b1) {
  if (!vec) {
    epiOne<EPI>(r, bias, n, v0);
    epiOne<EPI>(r, bias, n + 1, v1);
    return;
  }
  float m0 = 0.0f, m1 = 0.0f;
  if (EPI == EPI_MASK) ldE2(r.mask + n, m0, m1);
  const float y0 = epiValue<EPI>(v0, b0, m0), y1 = epiValue<EPI>(v1, b1, m1);
  if (r.c) stF2(r.c + n, y0, y1);
  if (EPI >= EPI_BIAS_RELU && r.e) stE2(r.e + n, y0, y1);
}

// pairAligned reports whether every row of the job's outputs and mask
// starts where a pair of elements can be accessed at once.
__device__ __forceinline__ bool pairAligned(const GemmJob& j, const float* C) {
  const unsigned long long pe = 2 * sizeof(E) - 1;
  bool ok = !C || ((((unsigned long long)C) & 7) == 0 && (j.scm & 1) == 0);
  ok = ok && (!j.Ce || ((((unsigned long long)j.Ce) & pe) == 0 && (j.sem & 1) == 0));
  ok = ok && (!j.mask || ((((unsigned long long)j.mask) & pe) == 0 && (j.smm & 1) == 0));
  return ok;
}

// findJob returns the job of this block: the number of jobs whose first
// block is at or below blockIdx.x, less one (firsts ascend). The first warp
// looks at 32 jobs per round.
__device__ __forceinline__ int findJob(const GemmJob* jobs, int njobs) {
  __shared__ int sj;
  if (threadIdx.x < 32) {
    const long long bid = blockIdx.x;
    int below = 0;
    for (int base = 0; base < njobs; base += 32) {
      const int i = base + (int)threadIdx.x;
      const bool p = i < njobs && jobs[i].first <= bid;
      below += __popc(__ballot_sync(0xffffffffu, p));
    }
    if (threadIdx.x == 0) sj = below - 1;
  }
  __syncthreads();
  return sj;
}

// Where a block works: its job, the tile origin, the k range and its C.
struct GemmTile {
  long long m0, n0, kb, ke;
  float* C;
};

__device__ __forceinline__ GemmTile gemmTile(const GemmJob& j, int BM, int BN) {
  GemmTile t;
  const long long local = (long long)blockIdx.x - j.first;
  const long long tiles = j.tilesM * j.tilesN;
  const long long split = local / tiles, tile = local - split * tiles;
  t.m0 = (tile / j.tilesN) * BM;
  t.n0 = (tile % j.tilesN) * BN;
  t.kb = split * j.kchunk;
  t.ke = t.kb + j.kchunk < j.K ? t.kb + j.kchunk : j.K;
  t.C = j.C ? j.C + split * j.splitStride : j.C;
  return t;
}

// storeColSums finishes a block's column sums: red holds NW partial sums
// of each of the tile's BN columns (NW·BN floats, written before the
// barrier), which one thread a column adds in order and stores in the row
// of colsum that belongs to the block's row tile.
template <int BM, int BN, int NW>
__device__ __forceinline__ void storeColSums(const GemmJob& j, const GemmTile& t, const float* red) {
  __syncthreads();
  const int col = threadIdx.x;
  if (col < BN && t.n0 + col < j.N) {
    float v = red[col];
#pragma unroll
    for (int w = 1; w < NW; w++) v += red[w * BN + col];
    j.colsum[(t.m0 / BM) * j.scs + t.n0 + col] = v;
  }
}

// The mma.sync kernels of both storage modes (bf16 products in bf16 modes,
// 3xTF32 products in fp32 with DQN_TF32X3): cp.async staging, the m16n8
// accumulators and their epilogue.
#if DQN_BF16 || DQN_TF32X3
__device__ __forceinline__ unsigned smemAddr(const void* p) {
  unsigned r;
  asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(r) : "l"(p));
  return r;
}

// cpAsyncS copies bytes (0…16) from src to the 16 bytes at shared-space
// address dst and zero-fills the rest; cpAsync takes a generic pointer.
__device__ __forceinline__ void cpAsyncS(unsigned dst, const void* src, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void cpAsync(void* dst, const void* src, int bytes) { cpAsyncS(smemAddr(dst), src, bytes); }
__device__ __forceinline__ void cpCommit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cpWait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

// zeroAcc clears a warp's accumulators of MI×NI m16n8 tiles.
template <int MI, int NI>
__device__ __forceinline__ void zeroAcc(float (&acc)[MI][NI][4]) {
#pragma unroll
  for (int a = 0; a < MI; a++)
#pragma unroll
    for (int b = 0; b < NI; b++)
#pragma unroll
      for (int c = 0; c < 4; c++) acc[a][b][c] = 0.0f;
}

// mmaEpilogue stores a warp's accumulators: in the m16n8 layout, lane
// (g, t4) holds rows g and g+8 of columns 2·t4 and 2·t4+1 of each tile.
template <int EPI, int MI, int NI>
__device__ __forceinline__ void mmaEpilogue(const GemmJob& j, const GemmTile& t, float (&acc)[MI][NI][4], int wm, int wn,
                                            int lane) {
  const int g = lane >> 2, t4 = lane & 3;
  const bool vec = pairAligned(j, t.C);
  float bias0[NI], bias1[NI];
#pragma unroll
  for (int ni = 0; ni < NI; ni++) {
    const long long n = t.n0 + wn + ni * 8 + 2 * t4;
    const bool biased = EPI == EPI_BIAS || EPI == EPI_BIAS_RELU;
    bias0[ni] = biased && n < j.N ? j.bias[n] : 0.0f;
    bias1[ni] = biased && n + 1 < j.N ? j.bias[n + 1] : 0.0f;
  }
  // A warp tile wholly inside the job, with rows aligned for pairs (the
  // common case), stores without a test per element.
  if (vec && t.m0 + wm + MI * 16 <= j.M && t.n0 + wn + NI * 8 <= j.N) {
#pragma unroll
    for (int mi = 0; mi < MI; mi++)
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const EpiRow r = epiRow(j, t.C, t.m0 + wm + mi * 16 + g + 8 * h);
#pragma unroll
        for (int ni = 0; ni < NI; ni++)
          epiTwo<EPI>(r, j.bias, t.n0 + wn + ni * 8 + 2 * t4, acc[mi][ni][2 * h], acc[mi][ni][2 * h + 1], true,
                      bias0[ni], bias1[ni]);
      }
    return;
  }
#pragma unroll
  for (int mi = 0; mi < MI; mi++)
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const long long m = t.m0 + wm + mi * 16 + g + 8 * h;
      if (m >= j.M) continue;
      const EpiRow r = epiRow(j, t.C, m);
#pragma unroll
      for (int ni = 0; ni < NI; ni++) {
        const long long n = t.n0 + wn + ni * 8 + 2 * t4;
        if (n + 1 < j.N)
          epiTwo<EPI>(r, j.bias, n, acc[mi][ni][2 * h], acc[mi][ni][2 * h + 1], vec, bias0[ni], bias1[ni]);
        else if (n < j.N)
          epiOne<EPI>(r, j.bias, n, acc[mi][ni][2 * h]);
      }
    }
}

// mmaColSums writes the block's column sums of y (EPI_MASK) to j.colsum:
// each lane adds its rows (mi, then g and g+8) in order, lanes of the same
// columns add by butterfly over g, and the WARPS_M warps of a column add
// in order (storeColSums) through red (WARPS_M·BN floats of shared
// memory, free by now).
template <int BM, int BN, int WARPS_M, int WARPS_N, int MI, int NI>
__device__ __forceinline__ void mmaColSums(const GemmJob& j, const GemmTile& t, const float (&acc)[MI][NI][4], int wm,
                                           int wn, int lane, int warp, float* red) {
  const int g = lane >> 2, t4 = lane & 3;
  float s[NI][2];
#pragma unroll
  for (int ni = 0; ni < NI; ni++) {
    const long long n = t.n0 + wn + ni * 8 + 2 * t4;
    float s0 = 0.0f, s1 = 0.0f;
#pragma unroll
    for (int mi = 0; mi < MI; mi++)
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const long long m = t.m0 + wm + mi * 16 + g + 8 * h;
        if (m < j.M) {
          const E* mk = j.mask + m * j.smm;
          if (n < j.N && ldE(mk + n) > 0.0f) s0 += acc[mi][ni][2 * h];
          if (n + 1 < j.N && ldE(mk + n + 1) > 0.0f) s1 += acc[mi][ni][2 * h + 1];
        }
      }
#pragma unroll
    for (int o = 4; o < 32; o <<= 1) {
      s0 += __shfl_xor_sync(0xffffffffu, s0, o);
      s1 += __shfl_xor_sync(0xffffffffu, s1, o);
    }
    s[ni][0] = s0;
    s[ni][1] = s1;
  }
  __syncthreads(); // every warp is done with the pipeline's shared memory
  if (g == 0) {
    const int wmi = warp / WARPS_N;
#pragma unroll
    for (int ni = 0; ni < NI; ni++) {
      red[wmi * BN + wn + ni * 8 + 2 * t4] = s[ni][0];
      red[wmi * BN + wn + ni * 8 + 2 * t4 + 1] = s[ni][1];
    }
  }
  storeColSums<BM, BN, WARPS_M>(j, t, red);
}


// TileLoadT stages one operand's k tiles of element type T into shared
// memory: rows [r0, r0+R) × k [k0, k0+BK) of X with X(r, k) = X[r·ld + k]
// (KC: k-contiguous, fixed per instantiation) or X[k·ld + r], rows r <
// rows and k < ke, zero elsewhere, into [R][BK+PK] (KC) or [BK][R+PR]
// elements. The tile moves in CH 16-byte chunks of CE elements, PER per
// thread. Chunk c = tid + i·NT covers CE consecutive k (KC: row
// c/(BK/CE), k (c%(BK/CE))·CE) or CE consecutive rows (k row c/(R/CE),
// rows (c%(R/CE))·CE). NT is a multiple of BK/CE and of R/CE, so a
// thread's chunks differ only in their row (KC) or k row, by a fixed
// stride: everything but the k position is worked out once per block,
// and a k tile costs each chunk a compare and a pointer step. TileLoad
// (bf16) and TileLoad32 (float32) name its two uses.
template <typename T, int R, int NT, int BK, bool KC, int PK, int PR>
struct TileLoadT {
  static constexpr int ES = (int)sizeof(T), CE = 16 / ES;
  static constexpr int CH = R * BK / CE, PER = CH / NT;
  static_assert(CH % NT == 0, "tile chunks must divide among the threads");
  static constexpr int RS = NT / (BK / CE); // KC: rows between a thread's chunks
  static constexpr int KS = NT / (R / CE);  // otherwise: k rows between them
  const T* X;    // the operand's base (the address of a zero-filled chunk)
  const T* p;    // this thread's first chunk at k tile kt
  long long ci;  // elements between this thread's consecutive chunks
  long long step; // elements from one k tile to the next
  unsigned soff; // byte offset of the first chunk in the stage's tile
  int q;         // KC: the chunk's k in the tile; otherwise its first k row
  int lim;       // KC: rows left from the first chunk's row; otherwise bytes of row data (0…16)

  __device__ __forceinline__ void init(const T* X_, long long ld, long long r0, long long rows, long long k0) {
    const int tid = threadIdx.x;
    X = X_;
    if (KC) {
      const int r = tid / (BK / CE);
      q = (tid % (BK / CE)) * CE;
      const long long left = rows - (r0 + r);
      lim = left < 0 ? 0 : (left > R ? R : (int)left);
      p = X_ + (r0 + r) * ld + k0 + q;
      ci = (long long)RS * ld;
      step = BK;
      soff = (unsigned)(r * (BK + PK) + q) * (unsigned)ES;
    } else {
      q = tid / (R / CE);
      const int rc = (tid % (R / CE)) * CE;
      const long long left = rows - (r0 + rc);
      lim = left <= 0 ? 0 : (left >= CE ? 16 : (int)left * ES);
      p = X_ + (k0 + q) * ld + r0 + rc;
      ci = (long long)KS * ld;
      step = (long long)BK * ld;
      soff = (unsigned)(q * (R + PR) + rc) * (unsigned)ES;
    }
  }

  // load issues the cp.async of the k tile starting at kt0 (its k, which
  // init's k0 plus the tiles stepped so far) into the tile at shared
  // address s, then steps to the next k tile.
  __device__ __forceinline__ void load(unsigned s, long long kt0, long long ke) {
    if (KC) {
      const long long left = ke - (kt0 + q);
      const int kb = left <= 0 ? 0 : (left >= CE ? 16 : (int)left * ES);
#pragma unroll
      for (int i = 0; i < PER; i++) {
        const int bytes = i * RS < lim ? kb : 0;
        cpAsyncS(s + soff + (unsigned)(i * RS * (BK + PK) * ES), bytes ? p + i * ci : X, bytes);
      }
    } else {
#pragma unroll
      for (int i = 0; i < PER; i++) {
        const int bytes = kt0 + q + i * KS < ke ? lim : 0;
        cpAsyncS(s + soff + (unsigned)(i * KS * (R + PR) * ES), bytes ? p + i * ci : X, bytes);
      }
    }
    p += step;
  }
};

// mmaStore runs the job's epilogue on a warp's accumulators, then, for a
// masked job that asks for them, the column sums (red: the block's
// shared memory, free once the k loop is done). gemmMma and gemmTf32 end
// with it.
template <int BM, int BN, int WARPS_M, int WARPS_N, int MI, int NI>
__device__ __forceinline__ void mmaStore(const GemmJob& j, const GemmTile& t, float (&acc)[MI][NI][4], int wm, int wn,
                                         int lane, int warp, float* red) {
  switch (j.epi) {
  case EPI_STORE: mmaEpilogue<EPI_STORE, MI, NI>(j, t, acc, wm, wn, lane); break;
  case EPI_BIAS: mmaEpilogue<EPI_BIAS, MI, NI>(j, t, acc, wm, wn, lane); break;
  case EPI_BIAS_RELU: mmaEpilogue<EPI_BIAS_RELU, MI, NI>(j, t, acc, wm, wn, lane); break;
  default: mmaEpilogue<EPI_MASK, MI, NI>(j, t, acc, wm, wn, lane);
  }
  if (j.epi == EPI_MASK && j.colsum) mmaColSums<BM, BN, WARPS_M, WARPS_N, MI, NI>(j, t, acc, wm, wn, lane, warp, red);
}

// gemmTiles is the body of the mma.sync kernels: the block's job and
// tile, the k loop L::run (gemmLoop for bf16, tfLoop for 3xTF32) with the
// operands' layouts fixed at compile time, then mmaStore. gsm is the
// dynamic shared memory of the loop's stages.
template <int BM, int BN, int WARPS_M, int WARPS_N, class L>
__device__ __forceinline__ void gemmTiles(const GemmJob* jobs, int njobs, const StepState* st) {
  constexpr int WTM = BM / WARPS_M, WTN = BN / WARPS_N;
  constexpr int MI = WTM / 16, NI = WTN / 8;
  extern __shared__ __align__(16) unsigned char gsm[];
  if (st && st->abort) return;
  const GemmJob j = jobs[findJob(jobs, njobs)];
  const GemmTile t = gemmTile(j, BM, BN);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int wm = (warp / WARPS_N) * WTM, wn = (warp % WARPS_N) * WTN;
  float acc[MI][NI][4];
  zeroAcc(acc);
  const bool aK = j.sak == 1, bK = j.sbk == 1;
  if (aK && bK)
    L::template run<BM, BN, WARPS_M, WARPS_N, true, true>(acc, j, t, gsm);
  else if (aK)
    L::template run<BM, BN, WARPS_M, WARPS_N, true, false>(acc, j, t, gsm);
  else if (bK)
    L::template run<BM, BN, WARPS_M, WARPS_N, false, true>(acc, j, t, gsm);
  else
    L::template run<BM, BN, WARPS_M, WARPS_N, false, false>(acc, j, t, gsm);
  mmaStore<BM, BN, WARPS_M, WARPS_N, MI, NI>(j, t, acc, wm, wn, lane, warp, (float*)gsm);
}
#endif

#if DQN_BF16
// GSTAGES (a template parameter of gemmMma, 3) is the depth of the
// cp.async pipeline: k tiles in shared memory.

// ldsm4s and ldsm4ts load four 8×8 b16 matrices (.trans: transposed) from
// this lane's row address a in shared space; ldsm4 and ldsm4t take a
// generic pointer.
__device__ __forceinline__ void ldsm4s(unsigned r[4], unsigned a) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}
__device__ __forceinline__ void ldsm4ts(unsigned r[4], unsigned a) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}
__device__ __forceinline__ void ldsm4(unsigned r[4], const bf16_t* p) { ldsm4s(r, smemAddr(p)); }
__device__ __forceinline__ void ldsm4t(unsigned r[4], const bf16_t* p) { ldsm4ts(r, smemAddr(p)); }

// ldsmPair loads the B fragments of two neighbouring 8-column tiles (lo,
// hi) with one ldmatrix.x4 from this lane's row address p (TRANS: the
// operand is n-contiguous in shared memory).
template <bool TRANS>
__device__ __forceinline__ void ldsmPair(unsigned lo[2], unsigned hi[2], const bf16_t* p) {
  unsigned r[4];
  if (TRANS)
    ldsm4t(r, p);
  else
    ldsm4(r, p);
  lo[0] = r[0];
  lo[1] = r[1];
  hi[0] = r[2];
  hi[1] = r[3];
}

// mma16816 adds the m16n8k16 product of the A fragment a (four registers
// of bf16 pairs, row-major) and the B fragment b (two, column-major) to
// the float32 accumulators d, on the tensor cores. The one matrix
// instruction of the bf16 gemm kernels.
__device__ __forceinline__ void mma16816(float d[4], const unsigned a[4], const unsigned b[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Shared-memory elements of one operand tile of R rows (m or n) by BK:
// [R][BK+8] when k-contiguous, [BK][R+8] otherwise; the padding keeps
// ldmatrix free of bank conflicts and every row 16-byte aligned.
__host__ __device__ constexpr int tileElems(int R, int BK) {
  return R * (BK + 8) > BK * (R + 8) ? R * (BK + 8) : BK * (R + 8);
}

// TileLoad stages a bf16 operand: chunks of 8 elements, rows padded by 8
// (ldmatrix reads them without bank conflicts, every row 16-byte aligned).
template <int R, int NT, int BK, bool KC>
using TileLoad = TileLoadT<bf16_t, R, NT, BK, KC, 8, 8>;

// gemmLoop accumulates the block's tile over its k range into acc, with
// the operands' layouts (AK: A k-contiguous, BKC: B k-contiguous) fixed at
// compile time so that every shared-memory offset is a constant off one
// base per thread. sbase is the shared-space address of the pipeline's
// stages: GSTAGES A tiles, then GSTAGES B tiles.
template <int BM, int BN, int WARPS_M, int WARPS_N, int BK, int GSTAGES, bool AK, bool BKC, int MI, int NI>
__device__ __forceinline__ void gemmLoop(float (&acc)[MI][NI][4], const GemmJob& j, const GemmTile& t, unsigned sbase) {
  constexpr int NT = 32 * WARPS_M * WARPS_N;
  constexpr int WTM = BM / WARPS_M, WTN = BN / WARPS_N;
  constexpr unsigned ASZB = 2u * tileElems(BM, BK), BSZB = 2u * tileElems(BN, BK);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int wm = (warp / WARPS_N) * WTM, wn = (warp % WARPS_N) * WTN;
  TileLoad<BM, NT, BK, AK> la;
  TileLoad<BN, NT, BK, BKC> lb;
  la.init(j.A, AK ? j.sam : j.sak, t.m0, j.M, t.kb);
  lb.init(j.B, BKC ? j.sbn : j.sbk, t.n0, j.N, t.kb);
  // This lane's ldmatrix row addresses in a stage (bytes), at ks = 0 and
  // mi = 0 (A) or the first column pair (B); the rest are constant steps.
  const unsigned aoff = AK ? 2u * ((wm + (lane & 15)) * (BK + 8) + (lane >> 4) * 8)
                           : 2u * (((lane & 7) + ((lane >> 4) << 3)) * (BM + 8) + wm + ((lane >> 3) & 1) * 8);
  const unsigned boff = BKC ? 2u * ((wn + (lane & 7) + ((lane >> 4) << 3)) * (BK + 8) + ((lane >> 3) & 1) * 8)
                            : 2u * (((lane & 7) + ((lane >> 3) & 1) * 8) * (BN + 8) + wn + (lane >> 4) * 8);
  constexpr unsigned AMI = AK ? 32u * (BK + 8) : 32u, AKS = AK ? 2u : 2u * (BM + 8);
  constexpr unsigned BNI = BKC ? 16u * (BK + 8) : 16u, BKS = BKC ? 2u : 2u * (BN + 8);
  const unsigned sB = sbase + GSTAGES * ASZB;
  const int nk = (int)((t.ke - t.kb + BK - 1) / BK);
#pragma unroll
  for (int s = 0; s < GSTAGES - 1; s++) {
    if (s < nk) {
      la.load(sbase + s * ASZB, t.kb + (long long)s * BK, t.ke);
      lb.load(sB + s * BSZB, t.kb + (long long)s * BK, t.ke);
    }
    cpCommit();
  }
  int cs = 0, ls = GSTAGES - 1; // the stages computed and loaded next
  for (int kt = 0; kt < nk; kt++) {
    cpWait<GSTAGES - 2>();
    __syncthreads();
    const int nx = kt + GSTAGES - 1;
    if (nx < nk) {
      la.load(sbase + ls * ASZB, t.kb + (long long)nx * BK, t.ke);
      lb.load(sB + ls * BSZB, t.kb + (long long)nx * BK, t.ke);
    }
    cpCommit();
    const unsigned a = sbase + cs * ASZB + aoff, b = sB + cs * BSZB + boff;
#pragma unroll
    for (int ks = 0; ks < BK; ks += 16) {
      unsigned af[MI][4], bfr[NI][2];
#pragma unroll
      for (int mi = 0; mi < MI; mi++) {
        if (AK)
          ldsm4s(af[mi], a + mi * AMI + ks * AKS);
        else
          ldsm4ts(af[mi], a + mi * AMI + ks * AKS);
      }
#pragma unroll
      for (int ni = 0; ni < NI; ni += 2) {
        unsigned r[4];
        if (BKC)
          ldsm4s(r, b + ni * BNI + ks * BKS);
        else
          ldsm4ts(r, b + ni * BNI + ks * BKS);
        bfr[ni][0] = r[0];
        bfr[ni][1] = r[1];
        bfr[ni + 1][0] = r[2];
        bfr[ni + 1][1] = r[3];
      }
#pragma unroll
      for (int mi = 0; mi < MI; mi++)
#pragma unroll
        for (int ni = 0; ni < NI; ni++) mma16816(acc[mi][ni], af[mi], bfr[ni]);
    }
    cs = cs + 1 == GSTAGES ? 0 : cs + 1;
    ls = ls + 1 == GSTAGES ? 0 : ls + 1;
  }
  cpWait<0>();
}

// MmaLoop is gemmTiles's k loop for bf16: gemmLoop, k tiles of BK in
// GSTAGES stages.
template <int BK, int GSTAGES>
struct MmaLoop {
  template <int BM, int BN, int WARPS_M, int WARPS_N, bool AK, bool BKC, int MI, int NI>
  static __device__ __forceinline__ void run(float (&acc)[MI][NI][4], const GemmJob& j, const GemmTile& t,
                                             unsigned char* sm) {
    gemmLoop<BM, BN, WARPS_M, WARPS_N, BK, GSTAGES, AK, BKC>(acc, j, t, smemAddr(sm));
  }
};

template <int BM, int BN, int WARPS_M, int WARPS_N, int BK, int GSTAGES = 3>
__device__ __forceinline__ void gemmMma(const GemmJob* jobs, int njobs, const StepState* st) {
  gemmTiles<BM, BN, WARPS_M, WARPS_N, MmaLoop<BK, GSTAGES>>(jobs, njobs, st);
}

// Dynamic shared memory of each shape: GSTAGES·(A tile + B tile) bf16.
extern "C" __global__ void __launch_bounds__(128) gemm64(const GemmJob* jobs, int njobs, const StepState* st) {
  pdlEnter();
  gemmMma<64, 64, 2, 2, 32>(jobs, njobs, st);
}
// The large tiles hold at most 128 registers a thread, so that two blocks
// of 256 threads (four of 128) share an SM, with k tiles of 32 (gpu/gemm.go
// gemmShapes: the variants with k tiles of 64 or one block an SM were
// measured slower and removed).
extern "C" __global__ void __launch_bounds__(256, 2) gemm128o(const GemmJob* jobs, int njobs, const StepState* st) {
  pdlEnter();
  gemmMma<128, 128, 2, 4, 32>(jobs, njobs, st);
}
extern "C" __global__ void __launch_bounds__(128, 4) gemm128x64o(const GemmJob* jobs, int njobs, const StepState* st) {
  pdlEnter();
  gemmMma<128, 64, 2, 2, 32>(jobs, njobs, st);
}
#elif DQN_TF32X3
// float32 on the tensor cores (3xTF32). TF32 keeps float32's exponent and
// 10 fraction bits. Each operand x is split into big = tf32(x) (rounded to
// nearest, ties away) and small = tf32(x − big), so that big + small holds
// x to about 2⁻²² relative, and each product is
//
//   a·b ≈ a_small·b_big + a_big·b_small + a_big·b_big
//
// three mma.sync m16n8k8 TF32 products (exact: 11-bit by 11-bit
// significands) summed into float32 accumulators in that order, k steps
// of 8 ascending; only a_small·b_small (about 2⁻²² of a·b) is dropped.
// The tiles, the cp.async pipeline (three stages, k tiles of 32 floats)
// and the epilogues are gemmMma's; operands are read from shared memory
// one float per register (ldmatrix moves b16 elements), in padded layouts
// where the 32 lanes of a fragment load hit 32 banks: [R][BK+4] when
// k-contiguous, [BK][R+8] otherwise.
#define TBK 32
#define TSTAGES 3

__host__ __device__ constexpr int tfElems(int R) { return R * (TBK + 4) > TBK * (R + 8) ? R * (TBK + 4) : TBK * (R + 8); }

// TileLoad32 stages a float32 operand in k tiles of TBK: chunks of 4
// floats, rows padded by 4 (k-contiguous) or 8 (the fragment loads' banks).
template <int R, int NT, bool KC>
using TileLoad32 = TileLoadT<float, R, NT, TBK, KC, 4, 8>;

// ldsF loads the float at shared-space address a.
__device__ __forceinline__ float ldsF(unsigned a) {
  float v;
  asm volatile("ld.shared.f32 %0, [%1];\n" : "=f"(v) : "r"(a));
  return v;
}

// tfSplit splits x into its TF32 big and small parts (registers of .b32).
__device__ __forceinline__ void tfSplit(float x, unsigned& big, unsigned& small) {
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(big) : "f"(x));
  const float rest = x - __uint_as_float(big);
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(small) : "f"(rest));
}

// mma1688 adds the m16n8k8 TF32 product of a (four registers, row-major)
// and b (two, column-major) to the float32 accumulators d.
__device__ __forceinline__ void mma1688(float d[4], const unsigned a[4], const unsigned b[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// tfLoop accumulates the block's tile over its k range, as gemmLoop does.
// Fragments of m16n8k8 (lane g = lane/4, t = lane mod 4): A holds (g, t),
// (g+8, t), (g, t+4), (g+8, t+4) of its 16×8 tile, B (k t, n g) and
// (k t+4, n g) of its 8×8 one. A warp takes B's fragments for its NI
// column tiles once per k step, then each row tile's A in turn.
template <int BM, int BN, int WARPS_M, int WARPS_N, bool AK, bool BKC, int MI, int NI>
__device__ __forceinline__ void tfLoop(float (&acc)[MI][NI][4], const GemmJob& j, const GemmTile& t, const float* sm) {
  constexpr int NT = 32 * WARPS_M * WARPS_N;
  constexpr int WTM = BM / WARPS_M, WTN = BN / WARPS_N;
  constexpr int ASZ = tfElems(BM), BSZ = tfElems(BN);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t4 = lane & 3;
  const int wm = (warp / WARPS_N) * WTM, wn = (warp % WARPS_N) * WTN;
  TileLoad32<BM, NT, AK> la;
  TileLoad32<BN, NT, BKC> lb;
  la.init(j.A, AK ? j.sam : j.sak, t.m0, j.M, t.kb);
  lb.init(j.B, BKC ? j.sbn : j.sbk, t.n0, j.N, t.kb);
  const unsigned sbase = smemAddr(sm), sB = sbase + TSTAGES * ASZ * 4u;
  // This lane's element offsets in a stage: A at (row wm+g, k t), B at
  // (column wn+g, k t); a step in rows, columns or k is a constant.
  const int aoff = AK ? (wm + g) * (TBK + 4) + t4 : t4 * (BM + 8) + wm + g;
  const int boff = BKC ? (wn + g) * (TBK + 4) + t4 : t4 * (BN + 8) + wn + g;
  constexpr int AR = AK ? TBK + 4 : 1, AKS = AK ? 1 : BM + 8; // A: next row, next k
  constexpr int BR = BKC ? TBK + 4 : 1, BKS = BKC ? 1 : BN + 8;
  const int nk = (int)((t.ke - t.kb + TBK - 1) / TBK);
#pragma unroll
  for (int s = 0; s < TSTAGES - 1; s++) {
    if (s < nk) {
      la.load(sbase + s * ASZ * 4u, t.kb + (long long)s * TBK, t.ke);
      lb.load(sB + s * BSZ * 4u, t.kb + (long long)s * TBK, t.ke);
    }
    cpCommit();
  }
  int cs = 0, ls = TSTAGES - 1;
  for (int kt = 0; kt < nk; kt++) {
    cpWait<TSTAGES - 2>();
    __syncthreads();
    const int nx = kt + TSTAGES - 1;
    if (nx < nk) {
      la.load(sbase + ls * ASZ * 4u, t.kb + (long long)nx * TBK, t.ke);
      lb.load(sB + ls * BSZ * 4u, t.kb + (long long)nx * TBK, t.ke);
    }
    cpCommit();
    const unsigned a = sbase + (unsigned)(cs * ASZ + aoff) * 4u;
    const unsigned b = sB + (unsigned)(cs * BSZ + boff) * 4u;
#pragma unroll 1
    for (int ks = 0; ks < TBK; ks += 8) {
      unsigned bb[NI][2], bs[NI][2];
#pragma unroll
      for (int ni = 0; ni < NI; ni++) {
        const unsigned q = b + 4u * (unsigned)(ni * 8 * BR + ks * BKS);
        tfSplit(ldsF(q), bb[ni][0], bs[ni][0]);
        tfSplit(ldsF(q + 16u * BKS), bb[ni][1], bs[ni][1]);
      }
#pragma unroll
      for (int mi = 0; mi < MI; mi++) {
        const unsigned q = a + 4u * (unsigned)(mi * 16 * AR + ks * AKS);
        unsigned ab[4], as[4];
        tfSplit(ldsF(q), ab[0], as[0]);
        tfSplit(ldsF(q + 32u * AR), ab[1], as[1]);
        tfSplit(ldsF(q + 16u * AKS), ab[2], as[2]);
        tfSplit(ldsF(q + 32u * AR + 16u * AKS), ab[3], as[3]);
#pragma unroll
        for (int ni = 0; ni < NI; ni++) {
          mma1688(acc[mi][ni], as, bb[ni]);
          mma1688(acc[mi][ni], ab, bs[ni]);
          mma1688(acc[mi][ni], ab, bb[ni]);
        }
      }
    }
    cs = cs + 1 == TSTAGES ? 0 : cs + 1;
    ls = ls + 1 == TSTAGES ? 0 : ls + 1;
  }
  cpWait<0>();
}

// TfLoop is gemmTiles's k loop for 3xTF32: tfLoop.
struct TfLoop {
  template <int BM, int BN, int WARPS_M, int WARPS_N, bool AK, bool BKC, int MI, int NI>
  static __device__ __forceinline__ void run(float (&acc)[MI][NI][4], const GemmJob& j, const GemmTile& t,
                                             unsigned char* sm) {
    tfLoop<BM, BN, WARPS_M, WARPS_N, AK, BKC>(acc, j, t, (const float*)sm);
  }
};

template <int BM, int BN, int WARPS_M, int WARPS_N>
__device__ __forceinline__ void gemmTf32(const GemmJob* jobs, int njobs, const StepState* st) {
  gemmTiles<BM, BN, WARPS_M, WARPS_N, TfLoop>(jobs, njobs, st);
}

// Dynamic shared memory of each shape: TSTAGES·(A tile + B tile) floats
// (gpu/gemm.go gemmShapes). Every name of the bf16 module is defined.
// The square tile runs two blocks an SM at 128 registers, spilling some;
// a warp's 64×32 tile takes about 190 registers (gemm128x64o).
extern "C" __global__ void __launch_bounds__(128) gemm64(const GemmJob* jobs, int njobs, const StepState* st) {
  pdlEnter();
  gemmTf32<64, 64, 2, 2>(jobs, njobs, st);
}
extern "C" __global__ void __launch_bounds__(256, 2) gemm128o(const GemmJob* jobs, int njobs, const StepState* st) {
  pdlEnter();
  gemmTf32<128, 128, 2, 4>(jobs, njobs, st);
}
extern "C" __global__ void __launch_bounds__(128, 2) gemm128x64o(const GemmJob* jobs, int njobs, const StepState* st) {
  pdlEnter();
  gemmTf32<128, 64, 2, 2>(jobs, njobs, st);
}
#else
// float32: 256 threads as 16×16, each (BM/16)×(BN/16) outputs (rows and
// columns by simtIdx); k tiles of 16 held in shared memory as [k][m] and
// [k][n]; products accumulated with fmaf in k order.
#define FBK 16

// Tiles move in 16-byte pieces of four floats: piece q of the R×FBK tile
// at (r0, k0) is rows r..r+3 of column k when the operand is r-contiguous,
// or row r, k..k+3 otherwise, so that neighbouring threads read
// neighbouring addresses. Pieces outside rows × [k0, ke) are zero.
struct __align__(16) f4 {
  float x, y, z, w;
};

template <int R>
__device__ __forceinline__ void loadRegs(f4 v[R / 64], const float* X, long long ld, bool kContig, long long r0,
                                         long long rows, long long k0, long long ke) {
#pragma unroll
  for (int e = 0; e < R / 64; e++) {
    const int q = e * 256 + threadIdx.x;
    long long gr, gk, lim;
    const float* p;
    if (kContig) {
      gr = r0 + q / (FBK / 4);
      gk = k0 + (q % (FBK / 4)) * 4;
      lim = ke - gk; // valid k in this piece
      p = X + gr * ld + gk;
      if (gr >= rows) lim = 0;
    } else {
      gk = k0 + q / (R / 4);
      gr = r0 + (q % (R / 4)) * 4;
      lim = rows - gr; // valid rows in this piece
      p = X + gk * ld + gr;
      if (gk >= ke) lim = 0;
    }
    if (lim >= 4) {
      v[e] = *(const f4*)p;
    } else {
      v[e].x = lim > 0 ? p[0] : 0.0f;
      v[e].y = lim > 1 ? p[1] : 0.0f;
      v[e].z = lim > 2 ? p[2] : 0.0f;
      v[e].w = 0.0f;
    }
  }
}

template <int R>
__device__ __forceinline__ void storeRegs(float (*s)[R + 4], const f4 v[R / 64], bool kContig) {
#pragma unroll
  for (int e = 0; e < R / 64; e++) {
    const int q = e * 256 + threadIdx.x;
    if (kContig) {
      const int r = q / (FBK / 4), k = (q % (FBK / 4)) * 4;
      s[k][r] = v[e].x;
      s[k + 1][r] = v[e].y;
      s[k + 2][r] = v[e].z;
      s[k + 3][r] = v[e].w;
    } else {
      const int k = q / (R / 4), r = (q % (R / 4)) * 4;
      *(f4*)&s[k][r] = v[e];
    }
  }
}

// A thread's rows and columns in the float32 kernel: four neighbours, then
// the next four 64 further on (simtIdx(i, t) for i < 8), so that operands
// come from shared memory as float4 and outputs leave in pairs.
__device__ __forceinline__ int simtIdx(int i, int t) { return (i >> 2) * 64 + t * 4 + (i & 3); }

// simtEpilogue stores a thread's outputs at rows simtIdx(r, ty) and columns
// simtIdx(c, tx), in pairs of columns.
template <int EPI, int TM, int TN>
__device__ __forceinline__ void simtEpilogue(const GemmJob& j, const GemmTile& t, float (&acc)[TM][TN], int tx, int ty) {
  const bool vec = pairAligned(j, t.C);
  const bool biased = EPI == EPI_BIAS || EPI == EPI_BIAS_RELU;
#pragma unroll
  for (int r = 0; r < TM; r++) {
    const long long m = t.m0 + simtIdx(r, ty);
    if (m >= j.M) continue;
    const EpiRow row = epiRow(j, t.C, m);
#pragma unroll
    for (int c = 0; c < TN; c += 2) {
      const long long n = t.n0 + simtIdx(c, tx);
      if (n + 1 < j.N)
        epiTwo<EPI>(row, j.bias, n, acc[r][c], acc[r][c + 1], vec, biased ? j.bias[n] : 0.0f, biased ? j.bias[n + 1] : 0.0f);
      else if (n < j.N)
        epiOne<EPI>(row, j.bias, n, acc[r][c]);
    }
  }
}

// simtColSums writes the block's column sums of y (EPI_MASK) to j.colsum:
// each thread adds its rows r in order, the two row groups of a warp
// (ty even and odd) add by one butterfly, and the eight warps add in
// order (storeColSums) through red (8·BN floats of shared memory).
template <int BM, int BN, int TM, int TN>
__device__ __forceinline__ void simtColSums(const GemmJob& j, const GemmTile& t, const float (&acc)[TM][TN], int tx, int ty,
                                            float* red) {
  float s[TN];
#pragma unroll
  for (int c = 0; c < TN; c++) {
    const long long n = t.n0 + simtIdx(c, tx);
    float v = 0.0f;
#pragma unroll
    for (int r = 0; r < TM; r++) {
      const long long m = t.m0 + simtIdx(r, ty);
      if (m < j.M && n < j.N && ldE(j.mask + m * j.smm + n) > 0.0f) v += acc[r][c];
    }
    s[c] = v + __shfl_xor_sync(0xffffffffu, v, 16);
  }
  const int warp = threadIdx.x >> 5;
  if ((threadIdx.x & 16) == 0) {
#pragma unroll
    for (int c = 0; c < TN; c++) red[warp * BN + simtIdx(c, tx)] = s[c];
  }
  storeColSums<BM, BN, 8>(j, t, red);
}

template <int BM, int BN>
__device__ __forceinline__ void gemmSimt(const GemmJob* jobs, int njobs, const StepState* st) {
  constexpr int TM = BM / 16, TN = BN / 16;
  __shared__ __align__(16) float As[2][FBK][BM + 4];
  __shared__ __align__(16) float Bs[2][FBK][BN + 4];
  if (st && st->abort) return;
  const GemmJob j = jobs[findJob(jobs, njobs)];
  const GemmTile t = gemmTile(j, BM, BN);
  const bool aK = j.sak == 1, bK = j.sbk == 1;
  const long long lda = aK ? j.sam : j.sak, ldb = bK ? j.sbn : j.sbk;
  const float* A = j.A;
  const float* B = j.B;
  const long long M = j.M, N = j.N;
  const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
  float acc[TM][TN];
#pragma unroll
  for (int a = 0; a < TM; a++)
#pragma unroll
    for (int b = 0; b < TN; b++) acc[a][b] = 0.0f;
  f4 ra[BM / 64], rb[BN / 64];
  const int nk = (int)((t.ke - t.kb + FBK - 1) / FBK);
  if (nk > 0) {
    loadRegs<BM>(ra, A, lda, aK, t.m0, M, t.kb, t.ke);
    loadRegs<BN>(rb, B, ldb, bK, t.n0, N, t.kb, t.ke);
    storeRegs<BM>(As[0], ra, aK);
    storeRegs<BN>(Bs[0], rb, bK);
  }
  __syncthreads();
  for (int kt = 0; kt < nk; kt++) {
    const int cur = kt & 1;
    if (kt + 1 < nk) {
      loadRegs<BM>(ra, A, lda, aK, t.m0, M, t.kb + (long long)(kt + 1) * FBK, t.ke);
      loadRegs<BN>(rb, B, ldb, bK, t.n0, N, t.kb + (long long)(kt + 1) * FBK, t.ke);
    }
#pragma unroll
    for (int kk = 0; kk < FBK; kk++) {
      float a[TM], b[TN];
#pragma unroll
      for (int i = 0; i < TM; i += 4) {
        const f4 v = *(const f4*)&As[cur][kk][simtIdx(i, ty)];
        a[i] = v.x;
        a[i + 1] = v.y;
        a[i + 2] = v.z;
        a[i + 3] = v.w;
      }
#pragma unroll
      for (int i = 0; i < TN; i += 4) {
        const f4 v = *(const f4*)&Bs[cur][kk][simtIdx(i, tx)];
        b[i] = v.x;
        b[i + 1] = v.y;
        b[i + 2] = v.z;
        b[i + 3] = v.w;
      }
#pragma unroll
      for (int r = 0; r < TM; r++)
#pragma unroll
        for (int c = 0; c < TN; c++) acc[r][c] = fmaf(a[r], b[c], acc[r][c]);
    }
    if (kt + 1 < nk) {
      storeRegs<BM>(As[cur ^ 1], ra, aK);
      storeRegs<BN>(Bs[cur ^ 1], rb, bK);
    }
    __syncthreads();
  }
  switch (j.epi) {
  case EPI_STORE: simtEpilogue<EPI_STORE, TM, TN>(j, t, acc, tx, ty); break;
  case EPI_BIAS: simtEpilogue<EPI_BIAS, TM, TN>(j, t, acc, tx, ty); break;
  case EPI_BIAS_RELU: simtEpilogue<EPI_BIAS_RELU, TM, TN>(j, t, acc, tx, ty); break;
  default: simtEpilogue<EPI_MASK, TM, TN>(j, t, acc, tx, ty);
  }
  if (j.epi == EPI_MASK && j.colsum) {
    __shared__ float red[8 * BN];
    simtColSums<BM, BN, TM, TN>(j, t, acc, tx, ty, red);
  }
}

extern "C" __global__ void __launch_bounds__(256) gemm64(const GemmJob* jobs, int njobs, const StepState* st) {
  pdlEnter();
  gemmSimt<64, 64>(jobs, njobs, st);
}
// The bf16 module's names of the large tiles.
extern "C" __global__ void __launch_bounds__(256) gemm128o(const GemmJob* jobs, int njobs, const StepState* st) {
  pdlEnter();
  gemmSimt<128, 128>(jobs, njobs, st);
}
extern "C" __global__ void __launch_bounds__(256) gemm128x64o(const GemmJob* jobs, int njobs, const StepState* st) {
  pdlEnter();
  gemmSimt<128, 64>(jobs, njobs, st);
}
#endif

// ---- Hopper's warpgroup MMA (wgmma), sm_90a ----
//
// The wgmma kernels compute the jobs whose A and B are both k-contiguous,
// unsplit in k (the Go side sends no others: gpu/gemm.go wgmmaFits):
// wgmma128 and wgmma128x64 the forward products, wgmma128m and
// wgmma128x64m the backward's input gradients against transposed weight
// copies (their masked epilogue, and its column sums in the order of an
// mma.sync tile: wgColSums). They run wgmma.mma_async: two warpgroups per
// block, each a 64-row
// half of the tile, k tiles of 128 bytes a row (64 bf16 or 32 floats)
// staged by cp.async in a pipeline of WGS stages, in the 128-byte swizzled
// layout wgmma reads (16-byte piece c of row r at piece c ^ (r mod 8),
// rows of 128 bytes, 8-row atoms of 1024 bytes). A k step is 32 bytes of
// a row in both modes (k16 of bf16, k8 of TF32), so the descriptors and
// the layout are the same. The k steps run in ascending order into
// float32 accumulators, as in gemmMma and tfLoop. The accumulators of a
// warp are those of an m16 row band of mma.sync's layout (16w..16w+15 of
// its warpgroup's 64 rows, column pairs 8i + 2(lane mod 4)), so
// mmaEpilogue stores them.
//
// In fp32 (DQN_TF32X3) each k tile, once in, is split in shared memory:
// every thread rounds the pieces it copied to their TF32 big parts in
// place and writes their small parts (tfSplit) at the same offsets of one
// more pair of tiles, and each k step issues tfLoop's three products in
// its order: a_small·b_big, a_big·b_small, a_big·b_big (TF32 wgmma takes
// both operands from shared memory, k-major).
//
// Compiled only for sm_90a with NVRTC 12 or newer (DQN_WGMMA, gpu/module.go).
#if DQN_WGMMA && (DQN_BF16 || DQN_TF32X3)
#define WG_ROWB 128                  // bytes of a tile row
#define WG_EPP (16 / (int)sizeof(E)) // elements of a 16-byte piece
#define WG_BK (WG_ROWB / (int)sizeof(E))
#define WG_KSTEPS (WG_ROWB / 32)     // k steps of 32 bytes in a k tile
#if DQN_BF16
#define WG_SHAPE "k16.f32.bf16.bf16"
#define WG_TAIL "p, 1, 1, 0, 0" // scale-d, scale a and b, no transposes
#else
#define WG_SHAPE "k8.f32.tf32.tf32"
#define WG_TAIL "p, 1, 1" // TF32 has no transposes
#endif

// wgDesc is the shared-memory matrix descriptor of a K-major operand at
// shared-space address a in the 128-byte swizzled layout: start address
// (bits 0-13, in 16 bytes), leading byte offset 16 (unused for this
// layout), stride byte offset 1024 between 8-row atoms (bits 32-45) and
// the 128-byte swizzle (bits 62-63 = 1).
__device__ __forceinline__ unsigned long long wgDesc(unsigned a) {
  return (unsigned long long)((a & 0x3FFFF) >> 4) | ((unsigned long long)(16 >> 4) << 16) |
         ((unsigned long long)(1024 >> 4) << 32) | (1ull << 62);
}

__device__ __forceinline__ void wgFence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgCommit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgWait0() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }
// proxyFence makes this thread's generic-proxy writes to shared memory
// (the cp.async copies, the split's stores) visible to wgmma, which reads
// through the async proxy.
__device__ __forceinline__ void proxyFence() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
// holdAcc keeps the compiler from moving accumulator accesses across the
// asynchronous MMAs that own the registers.
template <int NI>
__device__ __forceinline__ void holdAcc(float (&d)[NI][4]) {
#pragma unroll
  for (int i = 0; i < NI; i++)
#pragma unroll
    for (int q = 0; q < 4; q++) asm volatile("" : "+f"(d[i][q])::"memory");
}

// wgmma128 and wgmma64 issue one m64nN product of a k step (WG_SHAPE) for
// the warpgroup, d += A·B with N = 128 or 64: A (64 rows) and B (N rows)
// from the shared-memory descriptors da and db, both K-major, scale-d 1
// (add to d). d[i][q] is the warp's value q of its 8-column group i, in
// mma.sync's m16n8 accumulator order.
__device__ __forceinline__ void wgmma128(float (&d)[16][4], unsigned long long da, unsigned long long db) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128" WG_SHAPE " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, " WG_TAIL ";\n}\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3]), "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]), "+f"(d[8][3]), "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]), "+f"(d[10][0]), "+f"(d[10][1]), "+f"(d[10][2]), "+f"(d[10][3]), "+f"(d[11][0]), "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3]), "+f"(d[12][0]), "+f"(d[12][1]), "+f"(d[12][2]), "+f"(d[12][3]), "+f"(d[13][0]), "+f"(d[13][1]), "+f"(d[13][2]), "+f"(d[13][3]), "+f"(d[14][0]), "+f"(d[14][1]), "+f"(d[14][2]), "+f"(d[14][3]), "+f"(d[15][0]), "+f"(d[15][1]), "+f"(d[15][2]), "+f"(d[15][3])
      : "l"(da), "l"(db), "r"(1));
}
__device__ __forceinline__ void wgmma64(float (&d)[8][4], unsigned long long da, unsigned long long db) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64" WG_SHAPE " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, " WG_TAIL ";\n}\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3])
      : "l"(da), "l"(db), "r"(1));
}

template <int BN>
__device__ __forceinline__ void wgmmaStep(float (&d)[BN / 8][4], unsigned long long da, unsigned long long db);
template <>
__device__ __forceinline__ void wgmmaStep<128>(float (&d)[16][4], unsigned long long da, unsigned long long db) { wgmma128(d, da, db); }
template <>
__device__ __forceinline__ void wgmmaStep<64>(float (&d)[8][4], unsigned long long da, unsigned long long db) { wgmma64(d, da, db); }

// WgLoad issues the cp.async copies of a k-contiguous operand X (leading
// stride ld) into swizzled tiles of R rows × WG_BK k: 256 threads, R·8
// pieces of 16 bytes. Thread x copies piece x mod 8 of rows x/8 + 32e, so
// its source moves by 32·ld elements from one of its pieces to the next
// and by WG_BK from one k tile to the next, and its destination by 32 rows
// (the swizzle of row r depends on r mod 8 only). Pieces outside the rows
// or past ke are zero-filled, so every piece of a tile is written.
template <int R>
struct WgLoad {
  const E* src;    // this thread's first piece in the k tile at k0
  long long step;  // 32·ld
  int rows;        // of this thread's R/32 rows, how many are valid
  int c;           // this thread's piece within a row
  unsigned dst;    // offset of its first piece in a tile
  __device__ __forceinline__ void init(const E* X, long long ld, long long r0, long long M, long long kb) {
    const int r = (int)(threadIdx.x >> 3);
    c = (int)(threadIdx.x & 7);
    step = 32 * ld;
    const long long left = M - r0 - r; // rows r, r+32, … below M
    rows = left <= 0 ? 0 : (int)min((left + 31) / 32, (long long)(R / 32));
    src = X + (r0 + r) * ld + kb + c * WG_EPP;
    if (rows == 0) src = X;
    dst = (unsigned)(r * WG_ROWB + ((c ^ (r & 7)) << 4));
  }
  // load copies the k tile at k0 (k0 − kb elements past init's) into the
  // tile at shared-space address tile.
  __device__ __forceinline__ void load(unsigned tile, long long k0, long long kb, long long ke) const {
    const long long gk = k0 + c * WG_EPP;
    const int bytes = gk >= ke ? 0 : (ke - gk >= WG_EPP ? 16 : (int)(sizeof(E) * (ke - gk)));
    const E* p = src + (k0 - kb);
#pragma unroll
    for (int e = 0; e < R / 32; e++) {
      const bool ok = e < rows && bytes > 0;
      cpAsyncS(tile + dst + e * 32 * WG_ROWB, ok ? (const void*)(p + e * step) : (const void*)src, ok ? bytes : 0);
    }
  }
#if DQN_TF32X3
  // split rounds the four floats of each of this thread's pieces of the
  // tile at tile to their TF32 big parts in place and writes their small
  // parts at the same offsets from small (tfSplit). The pieces are the
  // ones this thread copied, so its cp.async wait is all they need.
  __device__ __forceinline__ void split(unsigned tile, unsigned small) const {
#pragma unroll
    for (int e = 0; e < R / 32; e++) {
      const unsigned o = dst + e * 32 * WG_ROWB;
      float x0, x1, x2, x3;
      asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];\n" : "=f"(x0), "=f"(x1), "=f"(x2), "=f"(x3) : "r"(tile + o));
      unsigned b0, b1, b2, b3, s0, s1, s2, s3;
      tfSplit(x0, b0, s0);
      tfSplit(x1, b1, s1);
      tfSplit(x2, b2, s2);
      tfSplit(x3, b3, s3);
      asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(tile + o), "r"(b0), "r"(b1), "r"(b2), "r"(b3) : "memory");
      asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(small + o), "r"(s0), "r"(s1), "r"(s2), "r"(s3) : "memory");
    }
  }
#endif
};

// wgColSums writes the block's column sums of y (EPI_MASK) to j.colsum in
// the order of the mma.sync kernel whose row tiles are j.csbm rows (64 or
// 128; mmaColSums with WARPS_M = 2 warps down a tile of MI = csbm/32 m16
// bands each), so that a masked job gives the same bits on either kernel:
// for each half of a reference tile (its warp wmi) and each g < 8, the sum
// s_g of rows g + 16·mi + 8·h in the order (mi, h) from +0; the butterfly
// over g, ((s0+s1)+(s2+s3))+((s4+s5)+(s6+s7)); then wmi 0 plus wmi 1. The
// values pass through ys, the block's shared memory (128 rows of BN + 8
// floats: 69,632 bytes at BN = 128; free once both warpgroups are past
// their k loop). A row at or past M, or a masked-out value, enters as +0,
// which leaves a sum started at +0 unchanged, as mmaColSums's skip does.
template <int BN>
__device__ __forceinline__ void wgColSums(const GemmJob& j, const GemmTile& t, const float (&acc)[1][BN / 8][4], int wm,
                                          int lane, float* ys) {
  constexpr int LD = BN + 8;
  const int g = lane >> 2, t4 = lane & 3;
  __syncthreads(); // every warpgroup is done with the pipeline's shared memory
#pragma unroll
  for (int ni = 0; ni < BN / 8; ni++)
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const int r = wm + g + 8 * h, c = ni * 8 + 2 * t4;
      const long long m = t.m0 + r, n = t.n0 + c;
      float y0 = 0.0f, y1 = 0.0f;
      if (m < j.M) {
        const E* mk = j.mask + m * j.smm;
        if (n < j.N && ldE(mk + n) > 0.0f) y0 = acc[0][ni][2 * h];
        if (n + 1 < j.N && ldE(mk + n + 1) > 0.0f) y1 = acc[0][ni][2 * h + 1];
      }
      stF2(ys + r * LD + c, y0, y1);
    }
  __syncthreads();
  const int bm = (int)j.csbm, half = bm / 2, bands = bm / 32;
  for (int q = threadIdx.x; q < (128 / bm) * BN; q += blockDim.x) {
    const int col = q % BN, r0 = (q / BN) * bm;
    float tw[2];
#pragma unroll
    for (int w = 0; w < 2; w++) {
      float s[8];
#pragma unroll
      for (int gg = 0; gg < 8; gg++) {
        float v = 0.0f;
        for (int mi = 0; mi < bands; mi++) {
          const float* y = ys + (r0 + w * half + mi * 16 + gg) * LD + col;
          v += y[0];
          v += y[8 * LD];
        }
        s[gg] = v;
      }
      tw[w] = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
    }
    const long long n = t.n0 + col, m0 = t.m0 + r0;
    if (n < j.N && m0 < j.M) j.colsum[(m0 / bm) * j.scs + n] = tw[0] + tw[1];
  }
}

// gemmWgmma runs a block of the tile BM = 128 by BN with a pipeline of WGS
// stages (and, in fp32, one pair of tiles for the small parts). EPI is
// EPI_MASK for the kernels of the mask epilogue and its column sums
// (wgmma128m, wgmma128x64m), −1 for the forward kernels, which choose
// among the other epilogues per job: compiled into one kernel, the mask
// code made ptxas spill more in the forward's (bf16 wgmma128x64: 72 bytes
// of spill stores against 24).
template <int BN, int WGS, int EPI>
__device__ __forceinline__ void gemmWgmma(const GemmJob* jobs, int njobs, const StepState* st) {
  constexpr int BM = 128, NI = BN / 8;
  constexpr unsigned ASZ = BM * WG_ROWB, BSZ = BN * WG_ROWB; // bytes of a stage's tiles
  extern __shared__ __align__(16) unsigned char gsm[];
  if (st && st->abort) return;
  const GemmJob j = jobs[findJob(jobs, njobs)];
  const GemmTile t = gemmTile(j, BM, BN);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, wg = warp >> 2;
  // Stages start at a multiple of 1024 bytes (the swizzle's period).
  const unsigned sA = (smemAddr(gsm) + 1023u) & ~1023u, sB = sA + WGS * ASZ;
#if DQN_TF32X3
  const unsigned xA = sB + WGS * BSZ, xB = xA + ASZ; // the small parts of the stage in use
#endif
  float acc[1][NI][4];
  zeroAcc(acc);
  const int nk = (int)((t.ke - t.kb + WG_BK - 1) / WG_BK);
  WgLoad<BM> la;
  WgLoad<BN> lb;
  la.init(j.A, j.sam, t.m0, j.M, t.kb);
  lb.init(j.B, j.sbn, t.n0, j.N, t.kb);
#pragma unroll
  for (int s = 0; s < WGS - 1; s++) {
    if (s < nk) {
      la.load(sA + s * ASZ, t.kb + (long long)s * WG_BK, t.kb, t.ke);
      lb.load(sB + s * BSZ, t.kb + (long long)s * WG_BK, t.kb, t.ke);
    }
    cpCommit();
  }
  int cs = 0, ls = WGS - 1;
  for (int kt = 0; kt < nk; kt++) {
    cpWait<WGS - 2>();
    proxyFence();
    __syncthreads(); // stage cs is in; every warpgroup is done with stage ls (and the small tiles)
    const int nx = kt + WGS - 1;
    if (nx < nk) {
      la.load(sA + ls * ASZ, t.kb + (long long)nx * WG_BK, t.kb, t.ke);
      lb.load(sB + ls * BSZ, t.kb + (long long)nx * WG_BK, t.kb, t.ke);
    }
    cpCommit();
    const unsigned a = sA + cs * ASZ + wg * (64 * WG_ROWB), b = sB + cs * BSZ;
#if DQN_TF32X3
    la.split(sA + cs * ASZ, xA);
    lb.split(sB + cs * BSZ, xB);
    proxyFence();
    __syncthreads(); // every piece of stage cs is split
    const unsigned as = xA + wg * (64 * WG_ROWB);
#endif
    holdAcc(acc[0]);
    wgFence();
#pragma unroll
    for (int ks = 0; ks < WG_KSTEPS; ks++) {
#if DQN_TF32X3
      wgmmaStep<BN>(acc[0], wgDesc(as + 32 * ks), wgDesc(b + 32 * ks));
      wgmmaStep<BN>(acc[0], wgDesc(a + 32 * ks), wgDesc(xB + 32 * ks));
#endif
      wgmmaStep<BN>(acc[0], wgDesc(a + 32 * ks), wgDesc(b + 32 * ks));
    }
    wgCommit();
    wgWait0();
    holdAcc(acc[0]);
    cs = cs + 1 == WGS ? 0 : cs + 1;
    ls = ls + 1 == WGS ? 0 : ls + 1;
  }
  cpWait<0>();
  const int wm = wg * 64 + (warp & 3) * 16;
  if constexpr (EPI == EPI_MASK) {
    mmaEpilogue<EPI_MASK, 1, NI>(j, t, acc, wm, 0, lane);
    if (j.colsum) wgColSums<BN>(j, t, acc, wm, lane, (float*)gsm);
  } else if constexpr (EPI >= 0) {
    mmaEpilogue<EPI, 1, NI>(j, t, acc, wm, 0, lane);
  } else {
    switch (j.epi) {
    case EPI_STORE: mmaEpilogue<EPI_STORE, 1, NI>(j, t, acc, wm, 0, lane); break;
    case EPI_BIAS: mmaEpilogue<EPI_BIAS, 1, NI>(j, t, acc, wm, 0, lane); break;
    default: mmaEpilogue<EPI_BIAS_RELU, 1, NI>(j, t, acc, wm, 0, lane);
    }
  }
}

// Dynamic shared memory (gpu/gemm.go wgmmaShapes): WGS·(128 + BN)·128
// bytes, in fp32 (128 + BN)·128 more for the small parts, and 1 KB for the
// alignment. bf16: three stages, two or three blocks an SM; fp32: two
// stages of 128 columns or three of 64, two blocks an SM (97 KB each).
#if DQN_BF16
#define WG_SQUARE_STAGES 3
#define WG_NARROW_BLOCKS 3
#else
#define WG_SQUARE_STAGES 2
#define WG_NARROW_BLOCKS 2
#endif
extern "C" __global__ void __launch_bounds__(256, 2) wgmma128(const GemmJob* jobs, int njobs, const StepState* st) {
  pdlEnter();
  gemmWgmma<128, WG_SQUARE_STAGES, -1>(jobs, njobs, st);
}
extern "C" __global__ void __launch_bounds__(256, WG_NARROW_BLOCKS) wgmma128x64(const GemmJob* jobs, int njobs, const StepState* st) {
  pdlEnter();
  gemmWgmma<64, 3, -1>(jobs, njobs, st);
}
// The backward's input gradients (ADR 0023): the mask epilogue only.
extern "C" __global__ void __launch_bounds__(256, 2) wgmma128m(const GemmJob* jobs, int njobs, const StepState* st) {
  pdlEnter();
  gemmWgmma<128, WG_SQUARE_STAGES, EPI_MASK>(jobs, njobs, st);
}
extern "C" __global__ void __launch_bounds__(256, WG_NARROW_BLOCKS) wgmma128x64m(const GemmJob* jobs, int njobs, const StepState* st) {
  pdlEnter();
  gemmWgmma<64, 3, EPI_MASK>(jobs, njobs, st);
}
#endif
