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
