// GEMM ladder rung 03, shared-memory tiling: a block of TILE x TILE threads computes a TILE x TILE
// tile of C, staging TILE x TILE tiles of A and B in shared memory (SGEMM_CUDA kernel 3): each
// element loaded from global memory is used TILE times from shared memory.
// Napkin math (TILE 32, FP32): per k step a thread does 1 FMA for 2 shared loads (As is a warp
// broadcast, Bs 32 consecutive words: conflict-free), global traffic / 32 -> bound by shared-memory
// bandwidth, not DRAM. Kernels gemm03_smem_f32 / _f64, C = A x B row-major, any M, N, K (tiles
// zero-padded at the edges). Grid: ceil(M/TILE) x ceil(N/TILE) blocks of TILE^2 threads (1-D).
// Build alone: nvcc -arch=sm_90 -cubin -Xptxas -v kernels/cuda/gemm03_smem.cu
#include "gemm_common.cuh"

#ifndef TILE
#define TILE 32  // tile edge: TILE^2 threads per block, TILE^2 x 2 elements of shared memory
#endif
#define THREADS (TILE * TILE)

template <typename T>
__device__ __forceinline__ void smem_tiled(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C, int M,
                                           int N, int K) {
    __shared__ T As[TILE][TILE];
    __shared__ T Bs[TILE][TILE];
    const int tiles_n = CEIL_DIV(N, TILE);
    const int tx = threadIdx.x % TILE, ty = threadIdx.x / TILE;  // a warp: one ty, 32 consecutive tx
    const int row = (blockIdx.x / tiles_n) * TILE + ty;
    const int col = (blockIdx.x % tiles_n) * TILE + tx;
    T acc = 0;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        As[ty][tx] = (row < M && k0 + tx < K) ? A[(i64)row * K + k0 + tx] : T(0);
        Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(i64)(k0 + ty) * N + col] : T(0);
        __syncthreads();
#pragma unroll
        for (int k = 0; k < TILE; ++k) acc += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    if (row < M && col < N) C[(i64)row * N + col] = acc;
}

GEMM_SIMT_KERNELS(gemm03_smem, smem_tiled, THREADS)
