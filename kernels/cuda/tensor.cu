// Tensor-core throughput with mma.sync.m16n8k16 (FP16 and BF16 inputs, FP32 accumulate): each warp
// keeps its A/B fragments in registers and runs CHAINS independent accumulators, so the loop is
// nothing but MMAs. (Hopper's full rate needs wgmma; mma.sync reaches roughly 2/3 of it.)
//
// FLOPs per mma per warp = 2 x 16 x 8 x 16 = 4096; per launch = warps x iters x UNROLL x CHAINS x 4096.
// The SM clock during the launch is probed per block (common.cuh) when clk is not null.
// Check: every A element is 1/16 and every B element 1 (bit patterns passed from the host, no
// headers needed), so each mma adds exactly 1.0 to every accumulator: after m = iters x UNROLL
// mmas every thread's 4 x CHAINS accumulators hold m, and out = 4 x CHAINS x m exactly.
#include "common.cuh"

#ifndef CHAINS
#define CHAINS 4
#endif
#ifndef UNROLL
#define UNROLL 8
#endif

#define MMA_KERNEL(NAME, TYPE)                                                                   \
    extern "C" __global__ void NAME(float* __restrict__ out, int iters, unsigned a_bits, unsigned b_bits, \
                                    u64* __restrict__ clk) {                                     \
        SmClock clock;                                                                           \
        clock.start(clk);                                                                        \
        float d[CHAINS][4];                                                                      \
        _Pragma("unroll") for (int c = 0; c < CHAINS; ++c)                                       \
            _Pragma("unroll") for (int r = 0; r < 4; ++r) d[c][r] = 0.f;                         \
        const unsigned a0 = a_bits, a1 = a_bits, a2 = a_bits, a3 = a_bits, b0 = b_bits, b1 = b_bits; \
        for (int i = 0; i < iters; ++i) {                                                        \
            _Pragma("unroll") for (int u = 0; u < UNROLL; ++u)                                   \
                _Pragma("unroll") for (int c = 0; c < CHAINS; ++c)                               \
                    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." TYPE "." TYPE ".f32 "  \
                                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"        \
                                 : "+f"(d[c][0]), "+f"(d[c][1]), "+f"(d[c][2]), "+f"(d[c][3])   \
                                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));      \
        }                                                                                        \
        float s = 0.f;                                                                           \
        _Pragma("unroll") for (int c = 0; c < CHAINS; ++c)                                       \
            _Pragma("unroll") for (int r = 0; r < 4; ++r) s += d[c][r];                          \
        out[(i64)blockIdx.x * blockDim.x + threadIdx.x] = s;                                     \
        clock.stop(clk);                                                                         \
    }

MMA_KERNEL(mma_f16, "f16")
MMA_KERNEL(mma_bf16, "bf16")
