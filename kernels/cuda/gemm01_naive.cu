// GEMM ladder rung 01, naive: one thread per element of C, a K-long dot product straight from
// global memory. Threads of a warp take CONSECUTIVE ROWS of C (siboehm's SGEMM_CUDA kernel 1), so
// a warp's loads of A are 32 rows apart (K x 4 bytes: one 32-byte sector per thread, nothing
// shared) and its stores of C are strided too; only B's element is shared (broadcast).
// Napkin math: 2 FLOP per 2 loads, ~1/32 of each A sector used -> memory-bound far below the
// FP32 roof at any size. Kernels gemm01_naive_f32 / _f64, C = A x B row-major, any M, N, K.
// Grid: ceil(M/BM) x ceil(N/BN) blocks of BM x BN threads (1-D, tile index = tm * tiles_n + tn).
// Build alone: nvcc -arch=sm_90 -cubin -Xptxas -v kernels/cuda/gemm01_naive.cu
#include "gemm_common.cuh"

#ifndef BM
#define BM 32  // rows of C per block: consecutive threads, consecutive rows
#endif
#ifndef BN
#define BN 8  // columns of C per block
#endif
#define THREADS (BM * BN)

template <typename T>
__device__ __forceinline__ void naive(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C, int M,
                                      int N, int K) {
    const int tiles_n = CEIL_DIV(N, BN);
    const int row = (blockIdx.x / tiles_n) * BM + threadIdx.x % BM;
    const int col = (blockIdx.x % tiles_n) * BN + threadIdx.x / BM;
    if (row >= M || col >= N) return;
    const T* a = A + (i64)row * K;
    T acc = 0;
    for (int k = 0; k < K; ++k) acc += a[k] * B[(i64)k * N + col];
    C[(i64)row * N + col] = acc;
}

GEMM_SIMT_KERNELS(gemm01_naive, naive, THREADS)
