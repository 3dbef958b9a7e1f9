// GEMM ladder rung 07, warp tiling + double buffering: the best SIMT rung. Each warp owns a WM x WN
// tile of the block's BM x BN tile; its 32 lanes form an 8 x 4 grid and each lane computes
// WMITER x WNITER sub-tiles of TM x TN (4 x 4) spaced 32 rows / 16 columns apart, so a warp's
// 128-bit shared loads of A hit 8 consecutive float4 (one wavefront) and those of B 4 (broadcast),
// with no bank conflicts (SGEMM_CUDA kernel 10's warp tiling). Shared memory is double-buffered:
// the next K step's tile is loaded from global memory into registers (LDG.128) while the current
// one is multiplied, then stored into the other buffer: one __syncthreads per K step.
// Napkin math (FP32 defaults: 128 x 128 x 8 block, 64 x 32 warp, 8 x 8 per thread, 256 threads):
// per k a thread does 64 FFMA for 4 LDS.128; per K step a block reads 2 x 1024 floats of global
// memory (1 LDG.128 of A and 1 of B per thread) for 262,144 FLOP: 64 FLOP per 4-byte element.
// About 128 registers per thread -> 2 blocks (16 warps) per SM. The two buffers live in dynamic
// shared memory (2 x BK x (BM + 4 + BN) x sizeof(T) + 1 KiB), so that larger tiles (and FP64) can
// opt in past 48 KiB.
// The 128-bit global paths need K (A) / N (B, C) multiples of 16 / sizeof(T) and 16-byte aligned
// arrays; otherwise, and at ragged edges, elements are loaded one by one (zero-padded).
// Kernels gemm07_warptile_f32 / _f64, C = A x B row-major, any M, N, K.
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
#ifndef WM
#define WM 64  // warp tile rows
#endif
#ifndef WN
#define WN 32  // warp tile columns
#endif
#ifndef TM
#define TM 4  // rows of one thread sub-tile
#endif
#ifndef TN
#define TN 4  // columns of one thread sub-tile
#endif
#ifndef LANES_N
#define LANES_N 4  // lanes across a warp sub-tile's columns (32 / LANES_N across its rows)
#endif
#define LANES_M (32 / LANES_N)
#define WSUB_M (LANES_M * TM)  // rows covered by one sub-tile of the whole warp
#define WSUB_N (LANES_N * TN)
#define WMITER (WM / WSUB_M)
#define WNITER (WN / WSUB_N)
#define THREADS ((BM / WM) * (BN / WN) * 32)

template <typename T>
__device__ __forceinline__ void warptile(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C, int M,
                                         int N, int K) {
    typedef typename Vec16<T>::type V;
    constexpr int VEC = Vec16<T>::N;
    constexpr int AS = BM + VEC;  // As row pitch (16-byte pad: conflict-free transposed stores)
    constexpr int NA = BM * BK / VEC / THREADS;  // 16-byte chunks of A per thread per K step
    constexpr int NB = BK * BN / VEC / THREADS;
    static_assert(BM % WM == 0 && BN % WN == 0 && WM % WSUB_M == 0 && WN % WSUB_N == 0, "warp tiling");
    static_assert(TM % VEC == 0 && TN % VEC == 0 && BK % VEC == 0 && BN % VEC == 0, "16-byte vectors");
    static_assert(NA * VEC * THREADS == BM * BK && NB * VEC * THREADS == BK * BN, "whole chunks per thread");
    GEMM_DYNAMIC_SMEM(smem);                   // 2 x (BK x (BM + pad) + BK x BN) x sizeof(T) (+1 KiB slack)
    T(*As)[BK * AS] = reinterpret_cast<T(*)[BK * AS]>(smem);  // [buffer][k][m], transposed
    T(*Bs)[BK * BN] = reinterpret_cast<T(*)[BK * BN]>(smem + 2 * BK * AS * sizeof(T));  // [buffer][k][n]
    const int tiles_n = CEIL_DIV(N, BN);
    const int m0 = (blockIdx.x / tiles_n) * BM, n0 = (blockIdx.x % tiles_n) * BN;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wm0 = (warp / (BN / WN)) * WM, wn0 = (warp % (BN / WN)) * WN;
    const int lm = lane / LANES_N, ln = lane % LANES_N;
    const bool vec_a = aligned16(A) && K % VEC == 0;
    const bool vec_b = aligned16(B) && N % VEC == 0;
    const bool vec_c = aligned16(C) && N % VEC == 0;

    T sa[NA][VEC], sb[NB][VEC];  // the next K step, staged in registers
    auto load = [&](int k0) {
#pragma unroll
        for (int c = 0; c < NA; ++c) {
            const int i = threadIdx.x + c * THREADS;
            const int gr = m0 + i / (BK / VEC), gk = k0 + (i % (BK / VEC)) * VEC;
            if (vec_a && gr < M && gk < K) {
                vec_unpack(*reinterpret_cast<const V*>(A + (i64)gr * K + gk), sa[c]);
            } else {
#pragma unroll
                for (int e = 0; e < VEC; ++e) sa[c][e] = (gr < M && gk + e < K) ? A[(i64)gr * K + gk + e] : T(0);
            }
        }
#pragma unroll
        for (int c = 0; c < NB; ++c) {
            const int i = threadIdx.x + c * THREADS;
            const int gk = k0 + i / (BN / VEC), gn = n0 + (i % (BN / VEC)) * VEC;
            if (vec_b && gk < K && gn < N) {
                vec_unpack(*reinterpret_cast<const V*>(B + (i64)gk * N + gn), sb[c]);
            } else {
#pragma unroll
                for (int e = 0; e < VEC; ++e) sb[c][e] = (gk < K && gn + e < N) ? B[(i64)gk * N + gn + e] : T(0);
            }
        }
    };
    auto store = [&](int buf) {
#pragma unroll
        for (int c = 0; c < NA; ++c) {
            const int i = threadIdx.x + c * THREADS;
            const int r = i / (BK / VEC), k = (i % (BK / VEC)) * VEC;
#pragma unroll
            for (int e = 0; e < VEC; ++e) As[buf][(k + e) * AS + r] = sa[c][e];
        }
#pragma unroll
        for (int c = 0; c < NB; ++c) {
            const int i = threadIdx.x + c * THREADS;
            const int k = i / (BN / VEC), n = (i % (BN / VEC)) * VEC;
            V v;
            vec_pack(sb[c], v);
            *reinterpret_cast<V*>(&Bs[buf][k * BN + n]) = v;
        }
    };

    T acc[WMITER * TM][WNITER * TN], ra[WMITER * TM], rb[WNITER * TN];
#pragma unroll
    for (int i = 0; i < WMITER * TM; ++i)
#pragma unroll
        for (int j = 0; j < WNITER * TN; ++j) acc[i][j] = T(0);

    const int steps = CEIL_DIV(K, BK);
    load(0);
    store(0);
    __syncthreads();
    for (int s = 0; s < steps; ++s) {
        const int buf = s & 1;
        if (s + 1 < steps) load((s + 1) * BK);  // in flight while this step's FMAs run
        const T* as = As[buf];
        const T* bs = Bs[buf];
#pragma unroll
        for (int k = 0; k < BK; ++k) {
#pragma unroll
            for (int wi = 0; wi < WMITER; ++wi)
#pragma unroll
                for (int i = 0; i < TM; i += VEC)
                    vec_unpack(*reinterpret_cast<const V*>(&as[k * AS + wm0 + wi * WSUB_M + lm * TM + i]),
                               ra + wi * TM + i);
#pragma unroll
            for (int wj = 0; wj < WNITER; ++wj)
#pragma unroll
                for (int j = 0; j < TN; j += VEC)
                    vec_unpack(*reinterpret_cast<const V*>(&bs[k * BN + wn0 + wj * WSUB_N + ln * TN + j]),
                               rb + wj * TN + j);
#pragma unroll
            for (int i = 0; i < WMITER * TM; ++i)
#pragma unroll
                for (int j = 0; j < WNITER * TN; ++j) acc[i][j] += ra[i] * rb[j];
        }
        // The other buffer was last read in step s - 1, which every thread finished before the
        // barrier that ended it: safe to overwrite now; one barrier per step.
        if (s + 1 < steps) store(buf ^ 1);
        __syncthreads();
    }

#pragma unroll
    for (int i = 0; i < WMITER * TM; ++i) {
        const int row = m0 + wm0 + (i / TM) * WSUB_M + lm * TM + i % TM;
        if (row >= M) continue;
#pragma unroll
        for (int j = 0; j < WNITER * TN; j += VEC) {
            const int col = n0 + wn0 + (j / TN) * WSUB_N + ln * TN + j % TN;
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

GEMM_SIMT_KERNELS(gemm07_warptile, warptile, THREADS)
