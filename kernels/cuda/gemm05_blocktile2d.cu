// GEMM ladder rung 05, 2-D register blocking: each thread computes a TM x TN tile of C as an
// outer product of TM values of A and TN values of B held in registers (SGEMM_CUDA kernel 5).
// Block tile BM x BN, K step BK, (BM/TM) x (BN/TN) threads.
// Napkin math (128 x 128 x 8, 8 x 8): per k step a thread does 64 FMAs for 16 shared loads (4 FMA
// per load, rung 04 had ~1); a block reads (128 + 128) x 8 elements per 2 x 128 x 128 x 8 FLOP =
// 32 FLOP per element from global memory. Scalar loads (rung 06 makes them 128-bit).
// Kernels gemm05_blocktile2d_f32 / _f64, C = A x B row-major, any M, N, K (edge tiles zero-padded).
// Grid: ceil(M/BM) x ceil(N/BN) blocks (1-D). Build alone: nvcc -arch=sm_90 -cubin -Xptxas -v <file>
#include "gemm_common.cuh"

#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 128
#endif
#ifndef BK
#define BK 8
#endif
#ifndef TM
#define TM 8
#endif
#ifndef TN
#define TN 8
#endif
#define THREADS ((BM / TM) * (BN / TN))

template <typename T>
__device__ __forceinline__ void blocktile2d(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C, int M,
                                            int N, int K) {
    static_assert(BM % TM == 0 && BN % TN == 0, "tile must divide the block tile");
    __shared__ T As[BM * BK];  // [BM][BK]
    __shared__ T Bs[BK * BN];  // [BK][BN]
    const int tiles_n = CEIL_DIV(N, BN);
    const int m0 = (blockIdx.x / tiles_n) * BM, n0 = (blockIdx.x % tiles_n) * BN;
    const int tc = threadIdx.x % (BN / TN), tr = threadIdx.x / (BN / TN);
    T acc[TM][TN], ra[TM], rb[TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = T(0);
    for (int k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
        for (int i = threadIdx.x; i < BM * BK; i += THREADS) {
            const int r = m0 + i / BK, c = k0 + i % BK;
            As[i] = (r < M && c < K) ? A[(i64)r * K + c] : T(0);
        }
#pragma unroll
        for (int i = threadIdx.x; i < BK * BN; i += THREADS) {
            const int r = k0 + i / BN, c = n0 + i % BN;
            Bs[i] = (r < K && c < N) ? B[(i64)r * N + c] : T(0);
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
#pragma unroll
            for (int i = 0; i < TM; ++i) ra[i] = As[(tr * TM + i) * BK + k];
#pragma unroll
            for (int j = 0; j < TN; ++j) rb[j] = Bs[k * BN + tc * TN + j];
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] += ra[i] * rb[j];
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = m0 + tr * TM + i;
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int col = n0 + tc * TN + j;
            if (row < M && col < N) C[(i64)row * N + col] = acc[i][j];
        }
    }
}

GEMM_SIMT_KERNELS(gemm05_blocktile2d, blocktile2d, THREADS)
