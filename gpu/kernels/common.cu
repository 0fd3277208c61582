// common.cu: types and helpers shared by every dqnflow kernel.
//
// The module is compiled twice by NVRTC, once per storage type E of the
// GEMM operands: -DDQN_BF16=0 gives E = float (precision "fp32"), and
// -DDQN_BF16=1 gives E = bf16 stored as unsigned short (precision
// "bf16-mixed"). Arithmetic inside every kernel is float32 (float64 where
// the CPU reference uses float64). No toolkit header is included: NVRTC 13
// ships no cuda_bf16.h, and GPU hosts may have no include folder.
//
// The model's compile-time sizes come as -D options: OBS (observation
// width), NFEAT (market features per bar), NAGENT (agent features), ATOMS,
// and the head-output row layout OUTW, COLA0, COLA1, COLA2.
// The branches are fixed by the market: 3, 4 and 3 actions.

#ifndef DQN_BF16
#define DQN_BF16 0
#endif
// -DDQN_TF32X3=1 (fp32 modules only, gpu/module.go fp32GEMM): the GEMMs'
// float32 products run on the tensor cores as three TF32 products
// (kernels/gemm.cu gemmTf32) instead of fmaf on the CUDA cores.
#ifndef DQN_TF32X3
#define DQN_TF32X3 0
#endif

typedef unsigned short bf16_t;
#if DQN_BF16
typedef bf16_t E;
#else
typedef float E;
#endif

#define NBRANCH 3
#define NACT 10
#define JPL ((ATOMS + 31) / 32)   // atoms per lane when a warp owns a row

// branchSize(d) is branch d's number of actions (market.BranchSizes);
// branchCol(d) is where its advantages start in a row of the head outputs
// O: OUTW floats, V at [0, ATOMS), each start a multiple of 8 (the padding
// is never read). OUTW and COLA0..COLA2 come as -D options from gpu/gemm.go
// headCols. branchOff(d) is the index of its first action among the NACT.
// The constant arrays hold the same values for run-time d.
__host__ __device__ constexpr int branchSize(int d) { return d == 1 ? 4 : 3; }
__host__ __device__ constexpr int branchCol(int d) { return d == 0 ? COLA0 : d == 1 ? COLA1 : COLA2; }
__host__ __device__ constexpr int branchOff(int d) { return d == 0 ? 0 : d == 1 ? branchSize(0) : branchSize(0) + branchSize(1); }
__device__ __constant__ int kBranchSize[NBRANCH] = {branchSize(0), branchSize(1), branchSize(2)};
__device__ __constant__ int kHeadCol[NBRANCH] = {branchCol(0), branchCol(1), branchCol(2)};

#define FLAT_DIR 1  // the direction action that holds no position (model.FlatDir)

// greedyDir is model.Greedy's rule for the direction branch: best, the
// branch's argmax with expected value qBest, unless it is a position whose
// advantage over flat (expected value qFlat), rounded once to float32, is
// below margin; then flat. Margin 0 keeps the argmax.
__device__ __forceinline__ int greedyDir(int best, float qBest, float qFlat, float margin) {
  return (best != FLAT_DIR && qBest - qFlat < margin) ? FLAT_DIR : best;
}

// pdlEnter is the first statement of every kernel. The trainer's CUDA
// graphs launch each kernel as a programmatic dependent of the one before
// it (gpu/module.go dependentLaunches, ADR 0019): the GPU prepares the
// launch while that kernel runs, and schedules its blocks as soon as the
// blocks before it have exited, without the round trip of an ordinary
// dependency. griddepcontrol.wait holds every thread until the kernels it
// depends on have finished and their writes are visible, so nothing is
// read early. Every block of every kernel passes the wait before it can
// exit, which makes the order transitive: a kernel that returns early
// still ends after its predecessor. No kernel triggers its dependents
// early (griddepcontrol.launch_dependents after the wait was measured
// slower in the step, and removed: ADR 0019). Launched the ordinary way
// (gpu tuning pdl = off), the wait does nothing.
__device__ __forceinline__ void pdlEnter() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// bf2f widens a bf16 exactly.
__device__ __forceinline__ float bf2f(bf16_t h) { return __uint_as_float(((unsigned)h) << 16); }

// f2bf rounds to the nearest bf16, ties to even; NaN stays a quiet NaN with
// its sign (the same bits as bf16.FromFloat32 in Go).
__device__ __forceinline__ bf16_t f2bf(float f) {
  unsigned u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (bf16_t)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (bf16_t)(u >> 16);
}

__device__ __forceinline__ float ldE(const E* p) {
#if DQN_BF16
  return bf2f(*p);
#else
  return *p;
#endif
}

__device__ __forceinline__ E toE(float f) {
#if DQN_BF16
  return f2bf(f);
#else
  return f;
#endif
}

// roundE is f rounded to the storage type and widened back.
__device__ __forceinline__ float roundE(float f) {
#if DQN_BF16
  return bf2f(f2bf(f));
#else
  return f;
#endif
}

__device__ __forceinline__ float warpSum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float warpMax(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ __forceinline__ double warpSumD(double v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ bool finitef(float x) { return fabsf(x) <= 3.402823466e38f; }
__device__ __forceinline__ bool finited(double x) { return fabs(x) <= 1.7976931348623157e308; }

// Training state shared by the kernels of one step, in device memory.
// Every kernel returns at once when abort is set: a non-finite loss or
// gradient norm stops the rest of the epoch without touching the weights.
struct StepState {
  long long t;              // AdamW updates done (the global step)
  long long local;          // steps done in this Train call (index into the histories)
  unsigned long long mmin;  // bits of the smallest sampled mass of the batch (float64, positive)
  int abort;                // 1: non-finite gradient norm, 2: non-finite loss
  int pad;
  double maxPrio;           // p_max of the replay buffer
  float loss;               // loss of the current step
  float pad2;
  long long tc;             // t when the step's loss was summed (grad_norm), for the priority update beside AdamW
};
