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
// Bytes in flight: HBM needs bandwidth x latency ~ 4.8 TB/s x ~600 ns ~ 3 MB across 132 SMs, about
// 22 KB per SM. One wave of 2048 threads/SM with one 16 B load each holds 32 KB, too close to that
// for comfort, so copy and triad issue ILP independent loads per thread before their stores.
// Host side: rooflab/cuda/suite.py (closed-form checks: a=1, b=2, c=0.5 -> triad 3.5, sum = n).
#include "common.cuh"

#ifndef ILP
#define ILP 4  // independent 16 B loads in flight per thread (copy, triad)
#endif
#ifndef L2_ROTATE
#define L2_ROTATE 97  // l2_read: block b reads slice (b + L2_ROTATE r) mod blocks in repetition r
#endif
#ifndef TRIAD_SM_THREADS
#define TRIAD_SM_THREADS 1024  // triad's resident threads per SM: 2 x ILP loads each need 64 registers
#endif

extern "C" __global__ void __launch_bounds__(BLOCK, 2048 / BLOCK)
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

extern "C" __global__ void __launch_bounds__(BLOCK, 2048 / BLOCK)
l2_read(const double2* __restrict__ a, i64 n2, int reps, double* __restrict__ out) {
    double s0 = 0.0, s1 = 0.0;
    const i64 stride = (i64)gridDim.x * BLOCK;
    for (int r = 0; r < reps; ++r) {
        const i64 slice = (blockIdx.x + (i64)r * L2_ROTATE) % gridDim.x;  // a permutation of the blocks
        for (i64 i = slice * BLOCK + threadIdx.x; i < n2; i += stride) {
            double2 v = __ldcg(a + i);
            s0 += v.x;
            s1 += v.y;
        }
    }
    double s = block_sum(s0 + s1);
    if (threadIdx.x == 0) out[blockIdx.x] = s;
}

extern "C" __global__ void __launch_bounds__(BLOCK, 2048 / BLOCK)
stream_copy(double2* __restrict__ c, const double2* __restrict__ a, i64 n2) {
    const i64 stride = (i64)gridDim.x * BLOCK;
    for (i64 base = (i64)blockIdx.x * BLOCK + threadIdx.x; base < n2; base += stride * ILP) {
        double2 v[ILP];
#pragma unroll
        for (int u = 0; u < ILP; ++u)
            if (base + u * stride < n2) v[u] = a[base + u * stride];
#pragma unroll
        for (int u = 0; u < ILP; ++u)
            if (base + u * stride < n2) c[base + u * stride] = v[u];
    }
}

extern "C" __global__ void __launch_bounds__(BLOCK, TRIAD_SM_THREADS / BLOCK)
stream_triad(double2* __restrict__ a, const double2* __restrict__ b, const double2* __restrict__ c,
             double s, i64 n2) {
    const i64 stride = (i64)gridDim.x * BLOCK;
    for (i64 base = (i64)blockIdx.x * BLOCK + threadIdx.x; base < n2; base += stride * ILP) {
        double2 x[ILP], y[ILP];
#pragma unroll
        for (int u = 0; u < ILP; ++u)
            if (base + u * stride < n2) {
                x[u] = b[base + u * stride];
                y[u] = c[base + u * stride];
            }
#pragma unroll
        for (int u = 0; u < ILP; ++u)
            if (base + u * stride < n2) a[base + u * stride] = make_double2(fma(s, y[u].x, x[u].x), fma(s, y[u].y, x[u].y));
    }
}
