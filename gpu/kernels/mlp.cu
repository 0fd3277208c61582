// mlp.cu: the network's whole forward pass in one kernel (bf16 modes).
//
// mlp_forward computes, for every row of each job, the four stages of the
// layered forward pass (gpu/gemm.go forwardJobs) without sending the
// hidden layers through device memory:
//
//   h1  = relu(x·W_s1ᵀ + b_s1)             [BM×T1]  shared memory, buffer A
//   h2  = relu(h1·W_s2ᵀ + b_s2)            [BM×T2]  shared memory, buffer B (over x)
//   for h = 0, 1, 2, 3 (v, a_0, a_1, a_2):
//     z_h = relu(h2·W_catᵀ[h] + bcat[h])   [BM×HD]  shared memory, buffer A (over h1)
//     O[:, col_h …] = z_h·W_outᵀ[h] + b_out[h]      device memory, float32
//
// Rows below a job's keep also write h1, h2 and z to device memory: the
// backward pass reads them for the online network at s. Rows past a job's
// rows are computed from zeros and never stored.
//
// Bits: every output is the float32 sum the gemm kernel forms for the same
// product (mma.sync m16n8k16 over k in ascending steps of 16 into one
// accumulator, then + bias, ReLU, one cvt.rn to bf16), so the fused and
// the layered forward agree bit for bit (TestFusedForwardMatchesLayered).
//
// Work: a block owns BM rows at a time and walks row tiles blockIdx.x,
// blockIdx.x + gridDim.x, … (a persistent grid). Each pass runs over its
// output columns in chunks of MLP_NC, 8 warps as 2 (rows) × 4 (columns),
// warp tiles of (BM/2)×32. The weights stream through shared memory in
// units of MLP_NC output rows × MLP_BK k, MLP_STAGES deep by cp.async, in
// one sequence over every pass, chunk and k tile of the block's row tiles:
// the pipeline does not drain between layers or tiles, and a tile's x
// rows travel with its first unit. The last units of a tile are the
// output layer of head 3, which reads buffer A only, so the next tile's x
// may land in buffer B while they run.
//
// Ordering: every unit begins with a barrier, so a pass's epilogue (which
// writes the buffer the next pass reads) is seen by every warp before the
// next pass computes, and every warp has finished reading a buffer before
// any warp's next epilogue overwrites it: the pass that writes a buffer
// always reads the other one (x → A, A → B, B → A, A → device memory).
//
// Needs (gpu/mlp.go fusedForwardFits): T1, T2 and HD multiples of 64,
// T1, T2, HD ≤ 256, OBS a multiple of 8; T1, T2 and HD come as -D options.

#if DQN_BF16 && MLP_FUSED
#define MLP_NC 128
#define MLP_BK 32
#define MLP_STAGES 3
#define MLP_THREADS 256
#define MLP_PASSES 10
#define MLP_MAXJOBS 4  // jobs per launch (gpu/mlp.go mlpMaxJobs)

// MlpJob is 29 64-bit words; gpu/mlp.go writes the same layout.
struct MlpJob {
  const E* x;         // [rows×OBS]
  float* o;           // [rows×OUTW] head outputs
  E* h1;              // [keep×T1], null when keep = 0
  E* h2;              // [keep×T2]
  E* z;               // [keep×4·HD]
  const E* w[MLP_PASSES];      // pass p's weights [N_p×K_p], row stride K_p
  const float* b[MLP_PASSES];  // pass p's biases [N_p]
  long long rows, keep;
  long long firstTile;         // first row tile of this job in the launch
  long long pad;
};

__host__ __device__ constexpr int mlpRound64(int v) { return (v + 63) / 64 * 64; }
__host__ __device__ constexpr int mlpMax(int a, int b) { return a > b ? a : b; }
// Row strides of the two activation buffers, in elements: a multiple of 64
// plus 8, so that ldmatrix's eight 16-byte rows fall in distinct banks.
#define MLP_SA (mlpRound64(mlpMax(T1, HD)) + 8)
#define MLP_SB (mlpRound64(mlpMax(OBS, T2)) + 8)
#define MLP_WS (MLP_BK + 8)

__host__ __device__ constexpr int mlpHeadOut(int h) { return h == 0 ? ATOMS : (h == 2 ? 4 : 3) * ATOMS; }
static_assert(mlpHeadOut(1) == branchSize(0) * ATOMS && mlpHeadOut(2) == branchSize(1) * ATOMS &&
                  mlpHeadOut(3) == branchSize(2) * ATOMS,
              "mlpHeadOut: the branches' action counts");
// Pass p: 0 s1, 1 s2, 2+2h head h's hidden layer, 3+2h head h's output.
__host__ __device__ constexpr int mlpN(int p) {
  return p == 0 ? T1 : p == 1 ? T2 : (p % 2 == 0 ? HD : mlpHeadOut((p - 3) / 2));
}
__host__ __device__ constexpr int mlpK(int p) { return p == 0 ? OBS : p == 1 ? T1 : (p % 2 == 0 ? T2 : HD); }
__host__ __device__ constexpr int mlpKTiles(int p) { return (mlpK(p) + MLP_BK - 1) / MLP_BK; }
__host__ __device__ constexpr int mlpChunks(int p) { return (mlpN(p) + MLP_NC - 1) / MLP_NC; }
__host__ __device__ constexpr int mlpUnits(int p) { return mlpKTiles(p) * mlpChunks(p); }
// MlpStart<p>::v is the first unit of pass p within a tile, a constant
// (measured: a constexpr loop called with an unrolled index stayed a loop
// in the SASS, about 700 instructions per unit; as constants the kernel
// went from 722 to 416 µs at batch 16384, ADR 0018).
template <int P> struct MlpStart { static constexpr int v = MlpStart<P - 1>::v + mlpUnits(P - 1); };
template <> struct MlpStart<0> { static constexpr int v = 0; };
#define MLP_UNITS (MlpStart<MLP_PASSES>::v)
static_assert(MLP_PASSES == 10, "mlpPassOf lists the passes");

// mlpPassOf is the pass of unit lu of a tile (the starts ascend).
__device__ __forceinline__ int mlpPassOf(int lu) {
  return (lu >= MlpStart<1>::v) + (lu >= MlpStart<2>::v) + (lu >= MlpStart<3>::v) + (lu >= MlpStart<4>::v) +
         (lu >= MlpStart<5>::v) + (lu >= MlpStart<6>::v) + (lu >= MlpStart<7>::v) + (lu >= MlpStart<8>::v) +
         (lu >= MlpStart<9>::v);
}
__device__ __forceinline__ int mlpStartOf(int p) {
  switch (p) {
  case 0: return MlpStart<0>::v;
  case 1: return MlpStart<1>::v;
  case 2: return MlpStart<2>::v;
  case 3: return MlpStart<3>::v;
  case 4: return MlpStart<4>::v;
  case 5: return MlpStart<5>::v;
  case 6: return MlpStart<6>::v;
  case 7: return MlpStart<7>::v;
  case 8: return MlpStart<8>::v;
  default: return MlpStart<9>::v;
  }
}
static_assert(mlpUnits(MLP_PASSES - 1) >= MLP_STAGES - 1, "the next tile's x must land while head 3's output layer runs");
static_assert(OBS % 8 == 0 && T1 % 64 == 0 && T2 % 64 == 0 && HD % 64 == 0, "mlp_forward: sizes");

// mlpJobOf returns the job of row tile tile (firsts ascend).
__device__ __forceinline__ int mlpJobOf(const MlpJob* jobs, int njobs, long long tile) {
  int j = 0;
  while (j + 1 < njobs && jobs[j + 1].firstTile <= tile) j++;
  return j;
}

// mlpIssue starts the loads of the block's unit u (its u-th weight tile
// over all of its row tiles; nothing past the last one) into stage buffer
// ws, with the tile's x rows into xb when u begins a tile, and commits
// them as one group. Thread t moves the 16-byte pieces t, t + 256, … of
// each tile: weight rows t/4 + 64·i, k offset 8·(t%4); x rows t/8 + 32·i,
// k offset 8·(t%8).
template <int BM>
__device__ __forceinline__ void mlpIssue(const MlpJob* jobs, int njobs, long long tiles, int u, bf16_t* ws, bf16_t* xb) {
  static_assert(MLP_NC * MLP_BK / 8 == 2 * MLP_THREADS && MLP_BK == 32, "mlpIssue: two weight pieces per thread");
  const int seq = u / MLP_UNITS;
  const int lu = u - seq * MLP_UNITS;
  const long long tile = blockIdx.x + (long long)seq * gridDim.x;
  if (tile < tiles) {
    const MlpJob& j = jobs[mlpJobOf(jobs, njobs, tile)];
    const int p = mlpPassOf(lu);
    const int N = mlpN(p), K = mlpK(p), kt = mlpKTiles(p);
    const int within = lu - mlpStartOf(p);
    const int n0 = (within / kt) * MLP_NC, k0 = (within % kt) * MLP_BK;
    const bf16_t* W = j.w[p];
    const int tr = threadIdx.x >> 2, tk = (threadIdx.x & 3) * 8;
    const int gk = k0 + tk;
#pragma unroll
    for (int i = 0; i < 2; i++) {
      const int r = tr + 64 * i, gn = n0 + r;
      const bool in = gn < N && gk < K;
      cpAsync(ws + r * MLP_WS + tk, in ? W + gn * K + gk : W, in ? 16 : 0);
    }
    if (lu == 0) {
      const long long row0 = (tile - j.firstTile) * BM;
      const int xr = threadIdx.x >> 3, xk = (threadIdx.x & 7) * 8;
#pragma unroll
      for (int k0x = 0; k0x < OBS; k0x += 64)
#pragma unroll
        for (int i = 0; i < BM / 32; i++) {
          const int r = xr + 32 * i, k = k0x + xk;
          const long long gr = row0 + r;
          const bool in = gr < j.rows && k < OBS;
          cpAsync(xb + r * MLP_SB + k, in ? j.x + gr * OBS + k : j.x, in ? 16 : 0);
        }
    }
  }
  cpCommit();
}

// The jobs live in shared memory for the whole launch: every unit's loads
// start from them, and a chain of global loads there would stall the warp
// that issues them before its own arithmetic at every unit.
template <int BM>
__device__ __forceinline__ void mlpForward(const MlpJob* gjobs, int njobs, long long tiles, const StepState* st) {
  constexpr int WTM = BM / 2, MI = WTM / 16, NI = 4;
  extern __shared__ __align__(16) unsigned char msm[];
  __shared__ MlpJob jobs[MLP_MAXJOBS];
  bf16_t* bufA = (bf16_t*)msm;
  bf16_t* bufB = bufA + BM * MLP_SA;
  bf16_t* wst = bufB + BM * MLP_SB;
  if (st && st->abort) return;
  {
    const unsigned long long* src = (const unsigned long long*)gjobs;
    unsigned long long* dst = (unsigned long long*)jobs;
    const int words = njobs * (int)(sizeof(MlpJob) / 8);
    for (int i = threadIdx.x; i < words; i += MLP_THREADS) dst[i] = src[i];
    __syncthreads();
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int wm = (warp / 4) * WTM, wn = (warp % 4) * 32;
  const int g = lane >> 2, t4 = lane & 3;
  const int mine = blockIdx.x < tiles ? (int)((tiles - 1 - blockIdx.x) / gridDim.x) + 1 : 0;
  const int units = mine * MLP_UNITS;
#pragma unroll
  for (int s = 0; s < MLP_STAGES - 1; s++)
    if (s < units) mlpIssue<BM>(jobs, njobs, tiles, s, wst + s * MLP_NC * MLP_WS, bufB);
    else cpCommit();
  int u = 0;
  for (int seq = 0; seq < mine; seq++) {
    const long long tile = blockIdx.x + (long long)seq * gridDim.x;
    const MlpJob& j = jobs[mlpJobOf(jobs, njobs, tile)];
    const long long row0 = (tile - j.firstTile) * BM;
    // The tile's outputs, in registers for the epilogues.
    const long long rows = j.rows, keep = j.keep;
    float* const jo = j.o;
    E* const jh1 = j.h1;
    E* const jh2 = j.h2;
    E* const jz = j.z;
#pragma unroll 1
    for (int p = 0; p < MLP_PASSES; p++) {
      // The pass's operand buffer A (k-contiguous rows) and where its
      // epilogue writes.
      const bool out = p >= 3 && p % 2 == 1;
      const int head = p >= 2 ? (p - 2) / 2 : 0;
      const bf16_t* A = (p == 0 || (p >= 2 && !out)) ? bufB : bufA;
      const int lda = A == bufB ? MLP_SB : MLP_SA;
      bf16_t* sOut = p == 1 ? bufB : bufA;
      const int sld = p == 1 ? MLP_SB : MLP_SA;
      const int N = mlpN(p), kts = mlpKTiles(p), chunks = mlpChunks(p);
      const float* bias = j.b[p];
      const int ocol = out && head > 0 ? kHeadCol[head - 1] : 0;
      for (int ch = 0; ch < chunks; ch++) {
        const int n0 = ch * MLP_NC;
        const bool active = n0 + wn < N;
        float acc[MI][NI][4];
        zeroAcc(acc);
        for (int kt = 0; kt < kts; kt++, u++) {
          cpWait<MLP_STAGES - 2>();
          __syncthreads();
          const int nx = u + MLP_STAGES - 1;
          if (nx < units) mlpIssue<BM>(jobs, njobs, tiles, nx, wst + (nx % MLP_STAGES) * MLP_NC * MLP_WS, bufB);
          else cpCommit();
          if (!active) continue;
          const bf16_t* b = wst + (u % MLP_STAGES) * MLP_NC * MLP_WS;
#pragma unroll
          for (int ks = 0; ks < MLP_BK; ks += 16) {
            const int k = kt * MLP_BK + ks;
            unsigned af[MI][4], bfr[NI][2];
#pragma unroll
            for (int mi = 0; mi < MI; mi++) ldsm4(af[mi], A + (wm + mi * 16 + (lane & 15)) * lda + k + (lane >> 4) * 8);
#pragma unroll
            for (int ni = 0; ni < NI; ni += 2)
              ldsmPair<false>(bfr[ni], bfr[ni + 1], b + (wn + ni * 8 + (lane & 7) + ((lane >> 4) << 3)) * MLP_WS + ks + ((lane >> 3) & 1) * 8);
#pragma unroll
            for (int mi = 0; mi < MI; mi++)
#pragma unroll
              for (int ni = 0; ni < NI; ni++) mma16816(acc[mi][ni], af[mi], bfr[ni]);
          }
        }
        if (!active) continue;
        // Epilogue: lane (g, t4) holds rows g and g+8 of columns 2·t4 and
        // 2·t4+1 of each 16×8 tile.
#pragma unroll
        for (int ni = 0; ni < NI; ni++) {
          const int n = n0 + wn + ni * 8 + 2 * t4;  // column in the pass (N is even but for ATOMS-wide outputs)
          if (n >= N) continue;
          const bool two = n + 1 < N;
          const float b0 = bias[n], b1 = two ? bias[n + 1] : 0.0f;
#pragma unroll
          for (int mi = 0; mi < MI; mi++)
#pragma unroll
            for (int hh = 0; hh < 2; hh++) {
              const int r = wm + mi * 16 + g + 8 * hh;
              const long long gr = row0 + r;
              const float v0 = acc[mi][ni][2 * hh] + b0, v1 = acc[mi][ni][2 * hh + 1] + b1;
              if (out) {
                if (gr < rows) {
                  float* o = jo + gr * OUTW + ocol + n;
                  if (two)
                    stF2(o, v0, v1);
                  else
                    o[0] = v0;
                }
                continue;
              }
              const float y0 = fmaxf(v0, 0.0f), y1 = fmaxf(v1, 0.0f);
              unsigned pr;
              asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(pr) : "f"(y1), "f"(y0));
              *(unsigned*)(sOut + r * sld + n) = pr;
              if (gr < keep) {
                E* dst = p == 0 ? jh1 + gr * T1 + n : p == 1 ? jh2 + gr * T2 + n : jz + gr * (4 * HD) + head * HD + n;
                *(unsigned*)dst = pr;
              }
            }
        }
      }
    }
  }
  cpWait<0>();
}

// Dynamic shared memory: 2·(BM·MLP_SA + BM·MLP_SB + MLP_STAGES·MLP_NC·MLP_WS)
// bytes (gpu/mlp.go mlpShared).
extern "C" __global__ void __launch_bounds__(MLP_THREADS, 1) mlp_forward128(const MlpJob* jobs, int njobs, long long tiles,
                                                                          const StepState* st) {
  pdlEnter();
  mlpForward<128>(jobs, njobs, tiles, st);
}
extern "C" __global__ void __launch_bounds__(MLP_THREADS, 2) mlp_forward64(const MlpJob* jobs, int njobs, long long tiles,
                                                                         const StepState* st) {
  pdlEnter();
  mlpForward<64>(jobs, njobs, tiles, st);
}
#endif
