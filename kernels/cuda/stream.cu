// Device-memory (HBM/GDDR) bandwidth: read (sum), copy and triad in double precision, with
// 128-bit (double2) accesses in a grid-stride loop. Also used with small arrays for L2 (reps > 1).
//
// Napkin math (STREAM counting, no write-allocate): read 8 B/elem, copy 16, triad 24.
// An H200 moves ~4.8 TB/s: a 2 GiB triad pass is ~0.45 ms, so samples are single passes.
// L2: l2_read re-reads a working set that fits in L2 `reps` times. Its loads are __ldcg (cached in
// L2, not in L1), and every repetition hands each block another block's slice of the array, so
// every SM reads the whole working set over a launch and both halves of a partitioned L2 (H100/
// H200: 2 x 25-30 MB) serve it. Without both measures the small per-SM share (under 100 KB) would
// stay in L1 and the "L2" figure would be L1's.
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
l2_read(const double2* __restrict__ a, i64 n2, int reps, double* __restrict__ out) {
    double s0 = 0.0, s1 = 0.0;
    const i64 stride = (i64)gridDim.x * BLOCK;
    for (int r = 0; r < reps; ++r) {
        const i64 slice = (blockIdx.x + (i64)r * 97) % gridDim.x;  // a permutation of the blocks
        for (i64 i = slice * BLOCK + threadIdx.x; i < n2; i += stride) {
            double2 v = __ldcg(a + i);
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
