// GEMM ladder rung 02, coalesced: rung 01 with the thread -> element map turned around, so that
// the 32 threads of a warp take 32 CONSECUTIVE COLUMNS of one row of C (SGEMM_CUDA kernel 2): each
// load of B is one 128-byte line for the whole warp, A's element is a broadcast, stores coalesce.
// Napkin math: still 2 FLOP per 2 loads, but now every byte of a fetched line is used; the A row
// and B panel hit L1/L2, so it runs at cache bandwidth rather than at one sector per thread.
// Kernels gemm02_coalesced_f32 / _f64, C = A x B row-major, any M, N, K.
// Grid: ceil(M/BM) x ceil(N/BN) blocks of BM x BN threads (1-D, tile index = tm * tiles_n + tn).
// Build alone: nvcc -arch=sm_90 -cubin -Xptxas -v kernels/cuda/gemm02_coalesced.cu
#include "gemm_common.cuh"

#ifndef BM
#define BM 8  // rows of C per block
#endif
#ifndef BN
#define BN 32  // columns of C per block: consecutive threads, consecutive columns
#endif
#define THREADS (BM * BN)

template <typename T>
__device__ __forceinline__ void coalesced(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C, int M,
                                          int N, int K) {
    const int tiles_n = CEIL_DIV(N, BN);
    const int row = (blockIdx.x / tiles_n) * BM + threadIdx.x / BN;
    const int col = (blockIdx.x % tiles_n) * BN + threadIdx.x % BN;
    if (row >= M || col >= N) return;
    const T* a = A + (i64)row * K;
    T acc = 0;
    for (int k = 0; k < K; ++k) acc += a[k] * B[(i64)k * N + col];
    C[(i64)row * N + col] = acc;
}

GEMM_SIMT_KERNELS(gemm02_coalesced, coalesced, THREADS)
