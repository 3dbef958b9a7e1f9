// GEMM ladder rung 06, 128-bit loads: rung 05 with every global load, shared load and store of C
// 16 bytes wide (float4 / double2: LDG.E.128, LDS.128, STG.E.128), and A stored transposed in
// shared memory (As[k][m]) so that the TM values of A a thread needs are consecutive (SGEMM_CUDA
// kernel 6). Block tile BM x BN, K step BK, (BM/TM) x (BN/TN) threads, thread tile TM x TN.
// Napkin math (FP32, 128 x 128 x 8, 8 x 8): per k step a thread does 64 FMAs for 4 LDS.128 (16 FMA
// per shared load instruction, 4x rung 05); a block's tile arrives in 2 x 256 LDG.128.
// The 128-bit paths need K (for A) and N (for B and C) to be multiples of 16 / sizeof(T) and the
// arrays 16-byte aligned; otherwise, and at ragged edges, the same kernel loads element by element.
// Kernels gemm06_vectorized_f32 / _f64, C = A x B row-major, any M, N, K.
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
__device__ __forceinline__ void vectorized(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C, int M,
                                           int N, int K) {
    typedef typename Vec16<T>::type V;
    constexpr int VEC = Vec16<T>::N;  // elements per 16 bytes
    constexpr int AS = BM + VEC;      // As row pitch: one 16-byte pad makes the transposed stores conflict-free
    static_assert(BK % VEC == 0 && BN % VEC == 0 && TM % VEC == 0 && TN % VEC == 0, "tiles of whole 16-byte vectors");
    __shared__ __align__(16) T As[BK * AS];  // [BK][BM + pad], transposed
    __shared__ __align__(16) T Bs[BK * BN];  // [BK][BN]
    const int tiles_n = CEIL_DIV(N, BN);
    const int m0 = (blockIdx.x / tiles_n) * BM, n0 = (blockIdx.x % tiles_n) * BN;
    const int tc = threadIdx.x % (BN / TN), tr = threadIdx.x / (BN / TN);
    const bool vec_a = aligned16(A) && K % VEC == 0;
    const bool vec_b = aligned16(B) && N % VEC == 0;
    const bool vec_c = aligned16(C) && N % VEC == 0;
    T acc[TM][TN], ra[TM], rb[TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = T(0);
    for (int k0 = 0; k0 < K; k0 += BK) {
        // A: BM x BK in 16-byte chunks along k, stored transposed
#pragma unroll
        for (int i = threadIdx.x; i < BM * BK / VEC; i += THREADS) {
            const int r = i / (BK / VEC), c = (i % (BK / VEC)) * VEC;
            const int gr = m0 + r, gk = k0 + c;
            T t[VEC];
            if (vec_a && gr < M && gk < K) {
                vec_unpack(*reinterpret_cast<const V*>(A + (i64)gr * K + gk), t);
            } else {
#pragma unroll
                for (int e = 0; e < VEC; ++e) t[e] = (gr < M && gk + e < K) ? A[(i64)gr * K + gk + e] : T(0);
            }
#pragma unroll
            for (int e = 0; e < VEC; ++e) As[(c + e) * AS + r] = t[e];
        }
        // B: BK x BN in 16-byte chunks along n, stored as they are
#pragma unroll
        for (int i = threadIdx.x; i < BK * BN / VEC; i += THREADS) {
            const int r = i / (BN / VEC), c = (i % (BN / VEC)) * VEC;
            const int gk = k0 + r, gn = n0 + c;
            V v;
            if (vec_b && gk < K && gn < N) {
                v = *reinterpret_cast<const V*>(B + (i64)gk * N + gn);
            } else {
                T t[VEC];
#pragma unroll
                for (int e = 0; e < VEC; ++e) t[e] = (gk < K && gn + e < N) ? B[(i64)gk * N + gn + e] : T(0);
                vec_pack(t, v);
            }
            *reinterpret_cast<V*>(&Bs[r * BN + c]) = v;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
#pragma unroll
            for (int i = 0; i < TM; i += VEC) vec_unpack(*reinterpret_cast<const V*>(&As[k * AS + tr * TM + i]), ra + i);
#pragma unroll
            for (int j = 0; j < TN; j += VEC) vec_unpack(*reinterpret_cast<const V*>(&Bs[k * BN + tc * TN + j]), rb + j);
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
        if (row >= M) break;
#pragma unroll
        for (int j = 0; j < TN; j += VEC) {
            const int col = n0 + tc * TN + j;
            if (vec_c && col < N) {
                V v;
                vec_pack(&acc[i][j], v);
                *reinterpret_cast<V*>(C + (i64)row * N + col) = v;
            } else {
#pragma unroll
                for (int e = 0; e < VEC; ++e)
                    if (col + e < N) C[(i64)row * N + col + e] = acc[i][j + e];
            }
        }
    }
}

GEMM_SIMT_KERNELS(gemm06_vectorized, vectorized, THREADS)
