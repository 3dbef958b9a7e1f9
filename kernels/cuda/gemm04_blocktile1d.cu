// GEMM ladder rung 04, 1-D register blocking: each thread computes TM consecutive rows of one
// column of C (SGEMM_CUDA kernel 4), so a value of B read from shared memory is reused TM times
// from a register. Block tile BM x BN, K step BK, BM * BN / TM threads.
// Napkin math (64 x 64 x 8, TM 8): per k step a thread does 8 FMAs for 1 Bs load + 8 As loads
// (broadcast: one address per warp), twice rung 03's FMA per shared load.
// Kernels gemm04_blocktile1d_f32 / _f64, C = A x B row-major, any M, N, K (edge tiles zero-padded).
// Grid: ceil(M/BM) x ceil(N/BN) blocks (1-D). Build alone: nvcc -arch=sm_90 -cubin -Xptxas -v <file>
#include "gemm_common.cuh"

#ifndef BM
#define BM 64
#endif
#ifndef BN
#define BN 64
#endif
#ifndef BK
#define BK 8
#endif
#ifndef TM
#define TM 8  // rows of C per thread
#endif
#define THREADS (BM * BN / TM)

template <typename T>
__device__ __forceinline__ void blocktile1d(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C, int M,
                                            int N, int K) {
    static_assert(BM % TM == 0, "BM must be a multiple of TM");
    __shared__ T As[BM * BK];  // [BM][BK]
    __shared__ T Bs[BK * BN];  // [BK][BN]
    const int tiles_n = CEIL_DIV(N, BN);
    const int m0 = (blockIdx.x / tiles_n) * BM, n0 = (blockIdx.x % tiles_n) * BN;
    const int tc = threadIdx.x % BN, tr = threadIdx.x / BN;  // a warp: one tr, 32 consecutive tc
    T acc[TM];
#pragma unroll
    for (int i = 0; i < TM; ++i) acc[i] = T(0);
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
            const T b = Bs[k * BN + tc];
#pragma unroll
            for (int i = 0; i < TM; ++i) acc[i] += As[(tr * TM + i) * BK + k] * b;
        }
        __syncthreads();
    }
    const int col = n0 + tc;
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = m0 + tr * TM + i;
        if (row < M && col < N) C[(i64)row * N + col] = acc[i];
    }
}

GEMM_SIMT_KERNELS(gemm04_blocktile1d, blocktile1d, THREADS)
