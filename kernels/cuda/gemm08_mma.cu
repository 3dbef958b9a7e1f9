// GEMM ladder rung 08, tensor cores through mma.sync: FP16 or BF16 inputs, FP32 accumulation,
// C in the input type (round to nearest even). A block of 8 warps computes a BM x BN tile of C;
// each warp a WM x WN tile as (WM/16) x (WN/8) mma.sync.m16n8k16 accumulators in registers.
// Operands: a STAGES-deep cp.async pipeline (16-byte LDGSTS, zero-fill at the edges) brings
// BM x BK tiles of A and BK x BN tiles of B into shared memory, rows padded by 16 bytes so that
// the 8 row addresses of every ldmatrix fall in 8 different bank groups (conflict-free); A
// fragments come from ldmatrix.x4, B fragments from ldmatrix.x4.trans (B is row-major K x N, the
// instruction wants it "col", k-contiguous: the transposing load does that for free).
// Napkin math (defaults 128 x 128 x 32, warp 64 x 32, 256 threads): per k16 step a warp issues
// 16 HMMA.16816 for 4 + 2 LDSM.x4; 64 FP32 accumulators per thread; 3 stages x 18.5 KiB of
// shared memory; a block does 2 x 128 x 128 x 32 = 1 MFLOP per 16 KiB loaded (64 FLOP/byte).
// mma.sync is the Ampere instruction: on Hopper it reaches only part of the dense tensor rate
// (wgmma does the rest, rung 09).
// The 16-byte paths need K (A) and N (B) multiples of 8 and 16-byte aligned arrays; otherwise the
// same kernel fills shared memory element by element. Kernels gemm08_mma_f16 / gemm08_mma_bf16,
// C = A x B row-major, any M, N, K; dynamic shared memory: STAGES x stage bytes + 1 KiB.
// Grid: ceil(M/BM) x ceil(N/BN) blocks in groups of GROUP_M tile rows (1-D).
// Build alone: nvcc -arch=sm_80 -cubin -Xptxas -v kernels/cuda/gemm08_mma.cu
#include "gemm_common.cuh"

#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 128
#endif
#ifndef BK
#define BK 32
#endif
#ifndef WM
#define WM 64
#endif
#ifndef WN
#define WN 32
#endif
#ifndef STAGES
#define STAGES 3
#endif
#ifndef GROUP_M
#define GROUP_M 8
#endif
#define THREADS ((BM / WM) * (BN / WN) * 32)
#define A_PITCH (BK + 8)  // halves per A row in shared memory (+16 bytes)
#define B_PITCH (BN + 8)
#define A_STAGE (BM * A_PITCH)  // halves per stage
#define B_STAGE (BK * B_PITCH)
#define MT (WM / 16)  // m16 tiles per warp
#define NT (WN / 8)   // n8 tiles per warp

// One BM x BK tile of A and one BK x BN tile of B (K step k0) into stage buffers as and bs.
__device__ __forceinline__ void load_stage(u16* as, u16* bs, const u16* __restrict__ A, const u16* __restrict__ B,
                                           int M, int N, int K, int m0, int n0, int k0, bool vec_a, bool vec_b) {
#pragma unroll
    for (int i = threadIdx.x; i < BM * BK / 8; i += THREADS) {
        const int r = i / (BK / 8), c = (i % (BK / 8)) * 8;
        const int gr = m0 + r, gk = k0 + c;
        u16* dst = as + r * A_PITCH + c;
        if (vec_a) {
            const bool ok = gr < M && gk < K;  // K % 8 == 0: a chunk is wholly inside or outside
            cp_async16(dst, ok ? A + (i64)gr * K + gk : A, ok);
        } else {
            u16 t[8];
#pragma unroll
            for (int e = 0; e < 8; ++e) t[e] = (gr < M && gk + e < K) ? A[(i64)gr * K + gk + e] : u16(0);
            *reinterpret_cast<uint4*>(dst) = pack8(t);
        }
    }
#pragma unroll
    for (int i = threadIdx.x; i < BK * BN / 8; i += THREADS) {
        const int r = i / (BN / 8), c = (i % (BN / 8)) * 8;
        const int gk = k0 + r, gn = n0 + c;
        u16* dst = bs + r * B_PITCH + c;
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
__device__ __forceinline__ void mma_gemm(const u16* __restrict__ A, const u16* __restrict__ B, u16* __restrict__ C,
                                         int M, int N, int K) {
    static_assert(BM % WM == 0 && BN % WN == 0 && WM % 16 == 0 && WN % 16 == 0 && BK % 16 == 0, "tiling");
    static_assert((A_PITCH * 2) % 16 == 0 && (B_PITCH * 2) % 16 == 0, "16-byte aligned rows");
    GEMM_DYNAMIC_SMEM(smem);
    u16* const sa = reinterpret_cast<u16*>(smem);
    u16* const sb = sa + STAGES * A_STAGE;

    int tm, tn;
    grouped_tile(blockIdx.x, CEIL_DIV(M, BM), CEIL_DIV(N, BN), GROUP_M, tm, tn);
    const int m0 = tm * BM, n0 = tn * BN;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wm0 = (warp / (BN / WN)) * WM, wn0 = (warp % (BN / WN)) * WN;
    const bool vec_a = aligned16(A) && K % 8 == 0;
    const bool vec_b = aligned16(B) && N % 8 == 0;

    float acc[MT][NT][4];
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
            for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.f;

    const int steps = CEIL_DIV(K, BK);
    // prologue: STAGES - 1 K steps in flight (one commit group each, empty past the end)
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < steps) load_stage(sa + s * A_STAGE, sb + s * B_STAGE, A, B, M, N, K, m0, n0, s * BK, vec_a, vec_b);
        cp_async_commit();
    }
    for (int s = 0; s < steps; ++s) {
        cp_async_wait<STAGES - 2>();  // this thread's copies of step s have landed
        __syncthreads();              // everyone's have; and everyone is done with step s - 1
        {
            const int next = s + STAGES - 1;  // refills the stage step s - 1 used
            if (next < steps) {
                const int st = next % STAGES;
                load_stage(sa + st * A_STAGE, sb + st * B_STAGE, A, B, M, N, K, m0, n0, next * BK, vec_a, vec_b);
            }
            cp_async_commit();
        }
        const u16* as = sa + (s % STAGES) * A_STAGE;
        const u16* bs = sb + (s % STAGES) * B_STAGE;
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            unsigned af[MT][4], bfr[NT][2];
#pragma unroll
            for (int i = 0; i < MT; ++i)  // lanes 0-15: rows 0-15 at k, lanes 16-31: rows 0-15 at k + 8
                ldmatrix_x4(af[i], as + (wm0 + i * 16 + lane % 16) * A_PITCH + kk + (lane / 16) * 8);
#pragma unroll
            for (int j = 0; j < NT; j += 2) {  // matrices (k0-7, n0-7) (k8-15, n0-7) (k0-7, n8-15) (k8-15, n8-15)
                unsigned r[4];
                ldmatrix_x4_trans(r, bs + (kk + lane % 8 + ((lane / 8) % 2) * 8) * B_PITCH + wn0 + j * 8 + (lane / 16) * 8);
                bfr[j][0] = r[0];
                bfr[j][1] = r[1];
                bfr[j + 1][0] = r[2];
                bfr[j + 1][1] = r[3];
            }
#pragma unroll
            for (int i = 0; i < MT; ++i)
#pragma unroll
                for (int j = 0; j < NT; ++j) mma_16816<bf16>(acc[i][j], af[i], bfr[j][0], bfr[j][1]);
        }
    }
    cp_async_wait<0>();

    // accumulator (i, j, r): row lane/4 (+8 for r >= 2), columns 2 (lane % 4) + {0, 1}
    const bool pairs = N % 2 == 0 && aligned16(C);  // 4-byte stores of column pairs
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int row = m0 + wm0 + i * 16 + lane / 4 + h * 8;
                const int col = n0 + wn0 + j * 8 + (lane % 4) * 2;
                if (row >= M || col >= N) continue;
                const unsigned v = pack2<bf16>(acc[i][j][2 * h], acc[i][j][2 * h + 1]);
                u16* c = C + (i64)row * N + col;
                if (pairs) {
                    *reinterpret_cast<unsigned*>(c) = v;  // col even, N even: col + 1 < N
                } else {
                    c[0] = u16(v & 0xFFFF);
                    if (col + 1 < N) c[1] = u16(v >> 16);
                }
            }
}

GEMM_TC_KERNELS(gemm08_mma, mma_gemm, THREADS, 1)
