// FP32 and FP64 FMA throughput: CHAINS independent chains x = x*a + b per thread, UNROLL FMAs per
// chain per loop trip, all in registers (no memory traffic in the loop). One template, two
// instantiations: fma_peak<float> and fma_peak<double> (NVRTC name expressions; the explicit
// instantiations below let nvcc emit them too).
//
// Napkin math: an SM issues 4 warp-instructions per clock; with CHAINS=8 independent chains and a
// 4-cycle FMA latency every scheduler always has a ready FMA. H200: 132 SMs x 128 lanes x 2 x
// 1.98 GHz = 66.9 TFLOP/s FP32; FP64 is half of that.
// FLOPs per launch = threads x iters x UNROLL x CHAINS x 2.
// Check: closed form x_m = a^m x0 + b (1 - a^m) / (1 - a) with m = iters x UNROLL, per thread.
// The SM clock during the launch is probed per block (common.cuh) when clk is not null.
// __launch_bounds__(BLOCK, 2048 / BLOCK) keeps registers <= 32 so a full 2048-thread wave fits.
#include "common.cuh"

#ifndef CHAINS
#define CHAINS 8
#endif
#ifndef UNROLL
#define UNROLL 16
#endif

__device__ __forceinline__ float fma_rn(float x, float a, float b) { return __fmaf_rn(x, a, b); }
__device__ __forceinline__ double fma_rn(double x, double a, double b) { return __fma_rn(x, a, b); }

template <typename T>
__global__ void __launch_bounds__(BLOCK, 2048 / BLOCK) fma_peak(T* __restrict__ out, int iters, T a, T b, u64* __restrict__ clk) {
    SmClock clock;
    clock.start(clk);
    const i64 gid = (i64)blockIdx.x * BLOCK + threadIdx.x;
    T x[CHAINS];
#pragma unroll
    for (int k = 0; k < CHAINS; ++k) x[k] = (T)(1 + k) + (T)(gid & 1023) * (T)1e-3;
    for (int i = 0; i < iters; ++i) {
#pragma unroll
        for (int u = 0; u < UNROLL; ++u)
#pragma unroll
            for (int k = 0; k < CHAINS; ++k) x[k] = fma_rn(x[k], a, b);
    }
    T s = 0;
#pragma unroll
    for (int k = 0; k < CHAINS; ++k) s += x[k];
    out[gid] = s;
    clock.stop(clk);
}

template __global__ void fma_peak<float>(float* __restrict__, int, float, float, u64* __restrict__);
template __global__ void fma_peak<double>(double* __restrict__, int, double, double, u64* __restrict__);
