// Intensity sweep (ERT/mixbench style) in double precision: every element is loaded, pushed through
// nfma dependent FMAs x = x*alpha + beta and stored back. ELEMS elements per thread give ELEMS
// independent chains.
//
// Bytes per launch = 16 n (read + write), FLOPs = 2 nfma n, intensity = nfma / 8 FLOP/B:
// nfma = 1 is 1/8 FLOP/B (memory-bound everywhere), 2048 is 256 FLOP/B (compute-bound everywhere).
// Check: closed form of nfma steps applied to the known input.
#include "common.cuh"

#ifndef ELEMS
#define ELEMS 4
#endif

extern "C" __global__ void __launch_bounds__(BLOCK, 2048 / BLOCK)
intensity_f64(double* __restrict__ a, i64 n, int nfma, double alpha, double beta) {
    const i64 stride = (i64)gridDim.x * BLOCK;
    for (i64 base = (i64)blockIdx.x * BLOCK + threadIdx.x; base < n; base += stride * ELEMS) {
        double x[ELEMS];
#pragma unroll
        for (int e = 0; e < ELEMS; ++e) x[e] = (base + e * stride < n) ? a[base + e * stride] : 0.0;
#pragma unroll 4
        for (int j = 0; j < nfma; ++j) {
#pragma unroll
            for (int e = 0; e < ELEMS; ++e) x[e] = fma(x[e], alpha, beta);
        }
#pragma unroll
        for (int e = 0; e < ELEMS; ++e)
            if (base + e * stride < n) a[base + e * stride] = x[e];
    }
}
