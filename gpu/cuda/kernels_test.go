package cuda

// Test kernels, free of toolkit headers as DESIGN.md §5 requires: bf16 is an
// unsigned short, converted with the cvt.rn.bf16.f32 instruction.

// bf16MMASource converts two f32 matrices to bf16 and multiplies them with
// one warp-wide m16n8k16 tensor-core MMA (f32 accumulation). The fragment
// layout is the one the PTX ISA gives for mma.m16n8k16 with .bf16 operands
// (groupID = lane/4, t = lane%4).
const bf16MMASource = `
__device__ __forceinline__ unsigned short f32_to_bf16(float x) {
    unsigned short r;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(x));
    return r;
}

__device__ __forceinline__ unsigned pack_bf16(float lo, float hi) {
    return (unsigned)f32_to_bf16(lo) | ((unsigned)f32_to_bf16(hi) << 16);
}

// to_bf16: x [n] f32, y [n] bf16 bits.
extern "C" __global__ void to_bf16(const float* x, unsigned short* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = f32_to_bf16(x[i]);
}

// mma_bf16_16x8x16: a [16*16] f32 row-major (m, k), b [8*16] f32 column-major
// (element (k, n) at n*16+k), d [16*8] f32 row-major. One warp.
extern "C" __global__ void mma_bf16_16x8x16(const float* a, const float* b, float* d) {
    int lane = threadIdx.x & 31;
    int g = lane >> 2, t = lane & 3;
    unsigned a0 = pack_bf16(a[g * 16 + t * 2],           a[g * 16 + t * 2 + 1]);
    unsigned a1 = pack_bf16(a[(g + 8) * 16 + t * 2],     a[(g + 8) * 16 + t * 2 + 1]);
    unsigned a2 = pack_bf16(a[g * 16 + t * 2 + 8],       a[g * 16 + t * 2 + 9]);
    unsigned a3 = pack_bf16(a[(g + 8) * 16 + t * 2 + 8], a[(g + 8) * 16 + t * 2 + 9]);
    unsigned b0 = pack_bf16(b[g * 16 + t * 2],     b[g * 16 + t * 2 + 1]);
    unsigned b1 = pack_bf16(b[g * 16 + t * 2 + 8], b[g * 16 + t * 2 + 9]);
    float d0 = 0.f, d1 = 0.f, d2 = 0.f, d3 = 0.f;
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};"
        : "=f"(d0), "=f"(d1), "=f"(d2), "=f"(d3)
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1),
          "f"(d0), "f"(d1), "f"(d2), "f"(d3));
    d[g * 8 + t * 2]           = d0;
    d[g * 8 + t * 2 + 1]       = d1;
    d[(g + 8) * 8 + t * 2]     = d2;
    d[(g + 8) * 8 + t * 2 + 1] = d3;
}
`

// saxpySource: y = a*x + y, and add_one for graph tests.
const saxpySource = `
// saxpy: x [n] f32, y [n] f32.
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

// add_one: x [n] f32, incremented in place.
extern "C" __global__ void add_one(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += 1.0f;
}

// shift_one: dst[i] = src[(i + 4099) % n] + 1, each element from another
// block's, after the kernel before it has finished (griddepcontrol.wait,
// a no-op when not launched as a programmatic dependent).
extern "C" __global__ void shift_one(const float* src, float* dst, int n) {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = src[(i + 4099) % n] + 1.0f;
}
`

// phaseSource: the floor under a chain of dependent phases
// (BenchmarkGPUPhaseFloor). Each phase, every block reads words floats that
// another block wrote in the phase before, from L2 (__ldcg: the line may
// sit stale in this SM's L1 from two phases ago), and writes words floats:
// block b's slice of dst is block b+1's slice of src, plus 1.
const phaseSource = `
__device__ __forceinline__ void phase_body(const float* src, float* dst, int words) {
    const int nb = gridDim.x, b = blockIdx.x;
    const float* s = src + (long long)((b + 1) % nb) * words;
    float* d = dst + (long long)b * words;
    for (int i = threadIdx.x; i < words; i += blockDim.x) d[i] = __ldcg(s + i) + 1.0f;
}

// phase_link: one phase a kernel, which waits for the kernel before it
// (griddepcontrol.wait, a no-op when not launched as a programmatic
// dependent) and triggers nothing early, as the trainer's kernels do.
extern "C" __global__ void phase_link(const float* src, float* dst, int words) {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
    phase_body(src, dst, words);
}

// grid_barrier: every block of the grid arrives before any leaves. count
// and gen sit on separate lines; the last block to arrive resets count and
// then advances gen, for which the others spin. The blocks must all be
// resident at once: phase_persist is launched cooperatively.
__device__ void grid_barrier(unsigned int* count, unsigned int* gen) {
    __syncthreads();
    if (threadIdx.x == 0) {
        const unsigned int g = *(volatile unsigned int*)gen;
        __threadfence();
        if (atomicAdd(count, 1u) == gridDim.x - 1) {
            atomicExch(count, 0u);
            __threadfence();
            atomicAdd(gen, 1u);
        } else {
            while (*(volatile unsigned int*)gen == g) {
            }
        }
        __threadfence();
    }
    __syncthreads();
}

// phase_persist: phases phases in one kernel, a grid barrier after each,
// alternating between a and b as a chain of phase_link kernels does.
// bar: 64 words, zero before the first launch (the barrier leaves count
// at zero).
extern "C" __global__ void phase_persist(float* a, float* b, int words, int phases, unsigned int* bar) {
    for (int p = 0; p < phases; p++) {
        phase_body((p & 1) ? b : a, (p & 1) ? a : b, words);
        grid_barrier(bar, bar + 32);
    }
}
`
