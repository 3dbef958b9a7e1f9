// Device-memory (HBM/GDDR) bandwidth: read (sum), copy and triad in double precision, with
// 128-bit (double2) accesses in a grid-stride loop. Also used with small arrays for L2 (reps > 1).
//
// Napkin math (STREAM counting, no write-allocate): read 8 B/elem, copy 16, triad 24.
// An H200 moves ~4.8 TB/s: a 2 GiB triad pass is ~0.45 ms, so samples are single passes.
// The L2 variant re-reads a working set that fits in L2 `reps` times from every SM, so after the
// first pass the bytes come from L2 (50 MB on H100/H200).
// Host side: rooflab/cuda/suite.py (closed-form checks: a=1, b=2, c=0.5 -> triad 3.5, sum = n).
#include "common.cuh"

extern "C" __global__ void __launch_bounds__(BLOCK)
stream_read(const double2* __restrict__ a, i64 n2, int reps, double* __restrict__ out) {
    double s0 = 0.0, s1 = 0.0;
    const i64 stride = (i64)gridDim.x * BLOCK;
    for (int r = 0; r < reps; ++r) {
        for (i64 i = (i64)blockIdx.x * BLOCK + threadIdx.x; i < n2; i += stride) {
            double2 v = a[i];
            s0 += v.x;
            s1 += v.y;
        }
    }
    double s = block_sum(s0 + s1);
    if (threadIdx.x == 0) out[blockIdx.x] = s;
}

extern "C" __global__ void __launch_bounds__(BLOCK)
stream_copy(double2* __restrict__ c, const double2* __restrict__ a, i64 n2) {
    const i64 stride = (i64)gridDim.x * BLOCK;
    for (i64 i = (i64)blockIdx.x * BLOCK + threadIdx.x; i < n2; i += stride) c[i] = a[i];
}

extern "C" __global__ void __launch_bounds__(BLOCK)
stream_triad(double2* __restrict__ a, const double2* __restrict__ b, const double2* __restrict__ c,
             double s, i64 n2) {
    const i64 stride = (i64)gridDim.x * BLOCK;
    for (i64 i = (i64)blockIdx.x * BLOCK + threadIdx.x; i < n2; i += stride) {
        double2 x = b[i], y = c[i];
        a[i] = make_double2(fma(s, y.x, x.x), fma(s, y.y, x.y));
    }
}
