// FP32 and FP64 FMA throughput: CHAINS independent chains x = x*a + b per thread, UNROLL FMAs per
// chain per loop trip, all in registers (no memory traffic in the loop).
//
// Napkin math: an SM issues 4 warp-instructions per clock; with CHAINS=8 independent chains and a
// 4-cycle FMA latency every scheduler always has a ready FMA. H200: 132 SMs x 128 lanes x 2 x
// 1.98 GHz = 66.9 TFLOP/s FP32; FP64 is half of that.
// FLOPs per launch = threads x iters x UNROLL x CHAINS x 2.
// Check: closed form x_m = a^m x0 + b (1 - a^m) / (1 - a) with m = iters x UNROLL, per thread.
#include "common.cuh"

#ifndef CHAINS
#define CHAINS 8
#endif
#ifndef UNROLL
#define UNROLL 16
#endif

#define FMA_KERNEL(NAME, T, FMAF)                                                          \
    extern "C" __global__ void __launch_bounds__(BLOCK) NAME(T* __restrict__ out, int iters, T a, T b) { \
        const i64 gid = (i64)blockIdx.x * BLOCK + threadIdx.x;                             \
        T x[CHAINS];                                                                       \
        _Pragma("unroll") for (int k = 0; k < CHAINS; ++k) x[k] = (T)(1 + k) + (T)(gid & 1023) * (T)1e-3; \
        for (int i = 0; i < iters; ++i) {                                                  \
            _Pragma("unroll") for (int u = 0; u < UNROLL; ++u)                             \
                _Pragma("unroll") for (int k = 0; k < CHAINS; ++k) x[k] = FMAF(x[k], a, b); \
        }                                                                                  \
        T s = 0;                                                                           \
        _Pragma("unroll") for (int k = 0; k < CHAINS; ++k) s += x[k];                      \
        out[gid] = s;                                                                      \
    }

FMA_KERNEL(fma_f32, float, fmaf)
FMA_KERNEL(fma_f64, double, fma)
