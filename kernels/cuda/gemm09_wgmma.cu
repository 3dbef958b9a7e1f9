// GEMM ladder rung 09, tensor cores through wgmma (Hopper, sm_90a): FP16 or BF16 inputs, FP32
// accumulation, C in the input type. A block is BM / 64 warpgroups (128 threads each); warpgroup w
// computes rows 64w..64w+63 of the block's BM x BN tile with wgmma.mma_async.m64n128k16, A and B
// both read by the tensor cores straight from shared memory through matrix descriptors, the
// 64 x BN FP32 accumulator tile in registers (BN / 2 per thread).
// Shared memory, 128-byte swizzle (16-byte chunk c of a 128-byte row r sits at chunk c ^ (r % 8),
// on 1024-byte aligned atoms; the swizzle makes both the cp.async writes and the tensor-core reads
// conflict-free):
//   A tile, BM x BK (BK = 64: one 128-byte row per m), "K-major": row m at byte 128 m. Descriptor:
//     start + 32 per k16 step (the hardware applies the swizzle to the address), stride-dimension
//     offset 1024 (next 8 rows), leading offset unused (16).
//   B tile, BK x BN, "N-major" (imm-trans-b = 1: the global row-major K x N layout): column block
//     nb of 64 columns (128 bytes) x BK rows at byte nb * BK * 128, row k at +128 k. Descriptor:
//     leading-dimension offset BK * 128 (next 64 columns), stride-dimension offset 1024 (next 8
//     k rows), start + 16 x 128 per k16 step.
// Pipeline: STAGES stage buffers, cp.async (16 B, zero-fill at edges) STAGES - 2 K steps ahead;
// wgmma.wait_group 1 keeps one K step of MMAs in flight while the next is issued, so a stage is
// refilled two steps after it was read. Operand writes reach the tensor cores' async proxy
// through fence.proxy.async before the barrier.
// Napkin math (defaults 128 x 256 x 64, 2 warpgroups, 4 stages): a K step is 2 x 128 x 256 x 64 =
// 4.2 MFLOP from 48 KiB of shared memory (85 FLOP/byte from L2); 4 stages = 192 KiB (one block
// per SM); 128 accumulators per thread. An SM's 4096 dense FLOP/clock make a K step ~1024 clocks.
// Requirements: the 16-byte paths need K (A) and N (B) multiples of 8 and 16-byte aligned arrays,
// otherwise shared memory is filled element by element; any M, N, K.
// Kernels gemm09_wgmma_f16 / gemm09_wgmma_bf16; dynamic shared memory STAGES x (BM + BN) x BK x 2
// bytes + 1 KiB. Grid: ceil(M/BM) x ceil(N/BN) blocks in groups of GROUP_M tile rows (1-D).
// The loader builds it for sm_90a only (the line below); any other target gets a stub that writes
// NaN into C (so it can never pass a check). Build alone:
//   nvcc -gencode=arch=compute_90a,code=sm_90a -cubin -Xptxas -v kernels/cuda/gemm09_wgmma.cu
// targets: sm_90a
#include "gemm_common.cuh"

#ifndef BM
#define BM 128  // 64 rows per warpgroup
#endif
#ifndef BN
#define BN 256  // a multiple of 128 (one m64n128k16 per 128 columns)
#endif
#ifndef STAGES
#define STAGES 4
#endif
#ifndef GROUP_M
#define GROUP_M 8
#endif
#define BK 64  // one 128-byte swizzle row of 16-bit elements: fixed by the layout
#define THREADS (BM / 64 * 128)
#define A_BYTES (BM * BK * 2)
#define B_BYTES (BK * BN * 2)
#define STAGE_BYTES (A_BYTES + B_BYTES)
#define NSUB (BN / 128)

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// Byte offset of 16-byte chunk c (0-7) of row r of a 128-byte-swizzled tile of 128-byte rows.
__device__ __forceinline__ int swz(int r, int c) { return r * 128 + ((c ^ (r & 7)) << 4); }

__device__ __forceinline__ void load_stage(unsigned char* st, const u16* __restrict__ A, const u16* __restrict__ B,
                                           int M, int N, int K, int m0, int n0, int k0, bool vec_a, bool vec_b) {
    unsigned char* as = st;
    unsigned char* bs = st + A_BYTES;
#pragma unroll
    for (int i = threadIdx.x; i < BM * BK / 8; i += THREADS) {  // A: row m, chunk c (k0 + 8c ...)
        const int m = i / (BK / 8), c = i % (BK / 8);
        const int gr = m0 + m, gk = k0 + c * 8;
        void* dst = as + swz(m, c);
        if (vec_a) {
            const bool ok = gr < M && gk < K;
            cp_async16(dst, ok ? A + (i64)gr * K + gk : A, ok);
        } else {
            u16 t[8];
#pragma unroll
            for (int e = 0; e < 8; ++e) t[e] = (gr < M && gk + e < K) ? A[(i64)gr * K + gk + e] : u16(0);
            *reinterpret_cast<uint4*>(dst) = pack8(t);
        }
    }
#pragma unroll
    for (int i = threadIdx.x; i < BK * BN / 8; i += THREADS) {  // B: row k, chunk c of BN / 8 (n0 + 8c ...)
        const int k = i / (BN / 8), c = i % (BN / 8);
        const int gk = k0 + k, gn = n0 + c * 8;
        void* dst = bs + (c / 8) * (BK * 128) + swz(k, c % 8);
        if (vec_b) {
            const bool ok = gk < K && gn < N;
            cp_async16(dst, ok ? B + (i64)gk * N + gn : B, ok);
        } else {
            u16 t[8];
#pragma unroll
            for (int e = 0; e < 8; ++e) t[e] = (gk < K && gn + e < N) ? B[(i64)gk * N + gn + e] : u16(0);
            *reinterpret_cast<uint4*>(dst) = pack8(t);
        }
    }
}

template <bool bf16>
__device__ __forceinline__ void wgmma_gemm(const u16* __restrict__ A, const u16* __restrict__ B, u16* __restrict__ C,
                                           int M, int N, int K) {
    static_assert(BM % 64 == 0 && BN % 128 == 0 && STAGES >= 3, "tiling");
    static_assert(STAGE_BYTES % 1024 == 0 && A_BYTES % 1024 == 0, "stages and tiles on 1024-byte swizzle atoms");
    GEMM_DYNAMIC_SMEM(smem);  // 1024-byte aligned

    int tm, tn;
    grouped_tile(blockIdx.x, CEIL_DIV(M, BM), CEIL_DIV(N, BN), GROUP_M, tm, tn);
    const int m0 = tm * BM, n0 = tn * BN;
    const int wg = threadIdx.x / 128, warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
    const bool vec_a = aligned16(A) && K % 8 == 0;
    const bool vec_b = aligned16(B) && N % 8 == 0;

    float acc[NSUB][64];
#pragma unroll
    for (int s = 0; s < NSUB; ++s)
#pragma unroll
        for (int r = 0; r < 64; ++r) acc[s][r] = 0.f;

    const int steps = CEIL_DIV(K, BK);
#pragma unroll
    for (int s = 0; s < STAGES - 2; ++s) {
        if (s < steps) load_stage(smem + s * STAGE_BYTES, A, B, M, N, K, m0, n0, s * BK, vec_a, vec_b);
        cp_async_commit();
    }
    for (int s = 0; s < steps; ++s) {
        cp_async_wait<STAGES - 3>();  // this thread's copies of step s have landed
        fence_proxy_async();          // ... and are visible to the tensor cores (async proxy)
        __syncthreads();              // everyone's; every warpgroup has retired the MMAs of step s - 2
        {
            const int next = s + STAGES - 2;  // refills the stage of step s - 2
            if (next < steps)
                load_stage(smem + (next % STAGES) * STAGE_BYTES, A, B, M, N, K, m0, n0, next * BK, vec_a, vec_b);
            cp_async_commit();
        }
        const unsigned st = smem_u32(smem + (s % STAGES) * STAGE_BYTES);
        const unsigned a_base = st + wg * (64 * 128);  // this warpgroup's 64 rows
        const unsigned b_base = st + A_BYTES;
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk) {
            const unsigned long long da = wgmma_desc(a_base + kk * 32, 16, 1024);
#pragma unroll
            for (int sub = 0; sub < NSUB; ++sub) {
                const unsigned long long db = wgmma_desc(b_base + sub * 2 * (BK * 128) + kk * 16 * 128, BK * 128, 1024);
                wgmma_m64n128k16<bf16>(acc[sub], da, db);
            }
        }
        wgmma_commit();
        wgmma_wait<1>();  // the MMAs of step s - 1 are done; those of step s run on
    }
    wgmma_wait<0>();
    cp_async_wait<0>();

    // accumulator r of sub-tile sub: row 16 warp + lane / 4 (+8 for r % 4 >= 2),
    // column 128 sub + 8 (r / 4) + 2 (lane % 4) + r % 2
    const bool pairs = N % 2 == 0 && aligned16(C);
#pragma unroll
    for (int sub = 0; sub < NSUB; ++sub)
#pragma unroll
        for (int r = 0; r < 64; r += 2) {
            const int row = m0 + wg * 64 + warp * 16 + lane / 4 + ((r / 2) % 2) * 8;
            const int col = n0 + sub * 128 + (r / 4) * 8 + (lane % 4) * 2;
            if (row >= M || col >= N) continue;
            const unsigned v = pack2<bf16>(acc[sub][r], acc[sub][r + 1]);
            u16* c = C + (i64)row * N + col;
            if (pairs) {
                *reinterpret_cast<unsigned*>(c) = v;
            } else {
                c[0] = u16(v & 0xFFFF);
                if (col + 1 < N) c[1] = u16(v >> 16);
            }
        }
}
#else
// Not sm_90a (the host pass, and the sm_80 / sm_90 compile checks every source passes): the same
// kernels, writing NaN, so a build for the wrong target can never pass a check.
template <bool bf16>
__device__ __forceinline__ void wgmma_gemm(const u16* __restrict__ A, const u16* __restrict__ B, u16* __restrict__ C,
                                           int M, int N, int K) {
    if (blockIdx.x == 0 && threadIdx.x == 0 && M > 0 && N > 0) C[0] = bf16 ? u16(0x7FC0) : u16(0x7E00);
}
#endif

GEMM_TC_KERNELS(gemm09_wgmma, wgmma_gemm, THREADS, 1)
