// gemm.cu: the one GEMM of the trainer, grouped, with fused epilogues.
//
// A launch runs up to gridDim.z independent jobs (one per z index), each
//
//   C(m, n) = epilogue( Σ_k A(m, k)·B(k, n) ),  0 ≤ m < M, 0 ≤ n < N, 0 ≤ k < K
//
// with A(m, k) = A[m·sam + k·sak] and B(k, n) = B[k·sbk + n·sbn] of the
// storage type E. Strides are free, so one kernel does the forward product
// x·Wᵀ, the input gradient G·W and the weight gradient Gᵀ·x without
// transposed copies. Accumulation is float32: mma.sync m16n8k16 with bf16
// operands on the tensor cores when E is bf16, fmaf in k order otherwise.
//
// Epilogues (v the accumulated value, applied per element):
//   EPI_STORE      C = v
//   EPI_BIAS       C = v + bias[n]
//   EPI_BIAS_RELU  Ce = E(max(v + bias[n], 0))               (hidden layers)
//   EPI_MASK       y = mask(m, n) > 0 ? v : 0; C = y; Ce = E(y) (ReLU backward)
// C (float32) and Ce (E) may each be null where a mode writes it optionally.

#define EPI_STORE 0
#define EPI_BIAS 1
#define EPI_BIAS_RELU 2
#define EPI_MASK 3

// GemmJob is 20 64-bit words; the Go side (gpu/gemm.go) writes the same layout.
struct GemmJob {
  const E* A; long long sam, sak;
  const E* B; long long sbk, sbn;
  float* C; long long scm, scn;
  E* Ce; long long sem, sen;
  const E* mask; long long smm, smn;
  const float* bias;
  long long M, N, K, epi;
};

__device__ __forceinline__ void gemmStore(const GemmJob& j, long long m, long long n, float v) {
  switch (j.epi) {
  case EPI_STORE:
    j.C[m * j.scm + n * j.scn] = v;
    break;
  case EPI_BIAS:
    j.C[m * j.scm + n * j.scn] = v + j.bias[n];
    break;
  case EPI_BIAS_RELU: {
    float y = fmaxf(v + j.bias[n], 0.0f);
    if (j.C) j.C[m * j.scm + n * j.scn] = y;
    j.Ce[m * j.sem + n * j.sen] = toE(y);
    break;
  }
  default: { // EPI_MASK
    float y = ldE(j.mask + m * j.smm + n * j.smn) > 0.0f ? v : 0.0f;
    if (j.C) j.C[m * j.scm + n * j.scn] = y;
    if (j.Ce) j.Ce[m * j.sem + n * j.sen] = toE(y);
  }
  }
}

#define GBM 64
#define GBN 64

#if DQN_BF16
// Tensor-core version: 128 threads, 4 warps of 32×32 outputs, k tiles of 32.
#define GBK 32
#define GPAD 8

__device__ __forceinline__ unsigned ld2(const bf16_t* p) { return *(const unsigned*)p; }

extern "C" __global__ void __launch_bounds__(128) gemm(const GemmJob* jobs, const StepState* st) {
  if (st && st->abort) return;
  const GemmJob j = jobs[blockIdx.z];
  const long long m0 = (long long)blockIdx.y * GBM, n0 = (long long)blockIdx.x * GBN;
  if (m0 >= j.M || n0 >= j.N) return;
  __shared__ __align__(16) bf16_t As[GBM][GBK + GPAD]; // [m][k]
  __shared__ __align__(16) bf16_t Bs[GBN][GBK + GPAD]; // [n][k]
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t4 = lane & 3;
  const int wm = (warp >> 1) * 32, wn = (warp & 1) * 32;
  float acc[2][4][4];
#pragma unroll
  for (int a = 0; a < 2; a++)
#pragma unroll
    for (int b = 0; b < 4; b++)
#pragma unroll
      for (int c = 0; c < 4; c++) acc[a][b][c] = 0.0f;
  const bool aK = j.sak == 1, bK = j.sbk == 1;
  for (long long k0 = 0; k0 < j.K; k0 += GBK) {
#pragma unroll
    for (int i = 0; i < (GBM * GBK) / 128; i++) {
      int e = tid + 128 * i;
      int r = aK ? e / GBK : e % GBM, kk = aK ? e % GBK : e / GBM;
      long long gm = m0 + r, gk = k0 + kk;
      As[r][kk] = (gm < j.M && gk < j.K) ? j.A[gm * j.sam + gk * j.sak] : (bf16_t)0;
    }
#pragma unroll
    for (int i = 0; i < (GBN * GBK) / 128; i++) {
      int e = tid + 128 * i;
      int c = bK ? e / GBK : e % GBN, kk = bK ? e % GBK : e / GBN;
      long long gn = n0 + c, gk = k0 + kk;
      Bs[c][kk] = (gn < j.N && gk < j.K) ? j.B[gk * j.sbk + gn * j.sbn] : (bf16_t)0;
    }
    __syncthreads();
#pragma unroll
    for (int ks = 0; ks < GBK; ks += 16) {
      unsigned af[2][4], bfr[4][2];
#pragma unroll
      for (int mi = 0; mi < 2; mi++) {
        int r = wm + mi * 16 + g;
        af[mi][0] = ld2(&As[r][ks + 2 * t4]);
        af[mi][1] = ld2(&As[r + 8][ks + 2 * t4]);
        af[mi][2] = ld2(&As[r][ks + 2 * t4 + 8]);
        af[mi][3] = ld2(&As[r + 8][ks + 2 * t4 + 8]);
      }
#pragma unroll
      for (int ni = 0; ni < 4; ni++) {
        int c = wn + ni * 8 + g;
        bfr[ni][0] = ld2(&Bs[c][ks + 2 * t4]);
        bfr[ni][1] = ld2(&Bs[c][ks + 2 * t4 + 8]);
      }
#pragma unroll
      for (int mi = 0; mi < 2; mi++)
#pragma unroll
        for (int ni = 0; ni < 4; ni++) {
          float* d = acc[mi][ni];
          asm volatile(
              "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
              "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
              : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
              : "r"(af[mi][0]), "r"(af[mi][1]), "r"(af[mi][2]), "r"(af[mi][3]),
                "r"(bfr[ni][0]), "r"(bfr[ni][1]));
        }
    }
    __syncthreads();
  }
#pragma unroll
  for (int mi = 0; mi < 2; mi++)
#pragma unroll
    for (int ni = 0; ni < 4; ni++)
#pragma unroll
      for (int r = 0; r < 4; r++) {
        long long m = m0 + wm + mi * 16 + g + (r >= 2 ? 8 : 0);
        long long n = n0 + wn + ni * 8 + 2 * t4 + (r & 1);
        if (m < j.M && n < j.N) gemmStore(j, m, n, acc[mi][ni][r]);
      }
}
#else
// float32 version: 256 threads, 4×4 outputs each, k tiles of 16, products
// accumulated with fmaf in k order.
#define GBK 16

extern "C" __global__ void __launch_bounds__(256) gemm(const GemmJob* jobs, const StepState* st) {
  if (st && st->abort) return;
  const GemmJob j = jobs[blockIdx.z];
  const long long m0 = (long long)blockIdx.y * GBM, n0 = (long long)blockIdx.x * GBN;
  if (m0 >= j.M || n0 >= j.N) return;
  __shared__ float As[GBK][GBM + 4]; // [k][m]
  __shared__ float Bs[GBK][GBN + 4]; // [k][n]
  const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
  float acc[4][4];
#pragma unroll
  for (int a = 0; a < 4; a++)
#pragma unroll
    for (int b = 0; b < 4; b++) acc[a][b] = 0.0f;
  const bool aK = j.sak == 1, bK = j.sbk == 1;
  for (long long k0 = 0; k0 < j.K; k0 += GBK) {
#pragma unroll
    for (int i = 0; i < (GBM * GBK) / 256; i++) {
      int e = tid + 256 * i;
      int r = aK ? e / GBK : e % GBM, kk = aK ? e % GBK : e / GBM;
      long long gm = m0 + r, gk = k0 + kk;
      As[kk][r] = (gm < j.M && gk < j.K) ? j.A[gm * j.sam + gk * j.sak] : 0.0f;
    }
#pragma unroll
    for (int i = 0; i < (GBN * GBK) / 256; i++) {
      int e = tid + 256 * i;
      int c = bK ? e / GBK : e % GBN, kk = bK ? e % GBK : e / GBN;
      long long gn = n0 + c, gk = k0 + kk;
      Bs[kk][c] = (gn < j.N && gk < j.K) ? j.B[gk * j.sbk + gn * j.sbn] : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < GBK; kk++) {
      float a[4], b[4];
#pragma unroll
      for (int i = 0; i < 4; i++) a[i] = As[kk][ty * 4 + i];
#pragma unroll
      for (int i = 0; i < 4; i++) b[i] = Bs[kk][tx * 4 + i];
#pragma unroll
      for (int r = 0; r < 4; r++)
#pragma unroll
        for (int c = 0; c < 4; c++) acc[r][c] = fmaf(a[r], b[c], acc[r][c]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int r = 0; r < 4; r++)
#pragma unroll
    for (int c = 0; c < 4; c++) {
      long long m = m0 + ty * 4 + r, n = n0 + tx * 4 + c;
      if (m < j.M && n < j.N) gemmStore(j, m, n, acc[r][c]);
    }
}
#endif
