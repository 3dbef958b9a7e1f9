// 2-D convolution (cross-correlation, as in every DL framework), NCHW, FP32, on the GPU: the
// kernels behind rooflab/families/conv/cuda.py. Variants (the Python side adds the library calls):
//   01 conv_naive        one thread per output element, loops over C/groups x R x S from global
//   02 conv_tiled        a block computes DT_P x DT_Q output pixels x DT_KB output channels; each
//                        thread keeps its pixel's DT_KB accumulators in registers; the input tile
//                        (with halo) and the block's weights go through shared memory, CB input
//                        channels at a time (CB chosen by the host so it fits in 48 KiB)
//   03 conv_depthwise    groups == C: one input plane tile per block in shared memory
//   04 im2col            the column matrix (N, C*R*S, P*Q) for one cuBLAS GEMM (cupy.matmul)
//   05/06 Winograd F(2x2,3x3) / F(4x4,3x3) (Lavin & Gray): filter, input and output transforms
//                        here; the 16 / 36 products are one batched GEMM (cupy.matmul)
// Layouts: x (N, C, H, W), w (K, C/groups, R, S), y (N, K, P, Q).
//
// Napkin math. Direct conv does 2*N*K*P*Q*(C/g)*R*S FLOP. conv_tiled per tap: 1 shared load of the
// input + DT_KB/4 float4 (broadcast) loads of weights for DT_KB FMAs: 5 loads per 16 FMAs at
// DT_KB = 16, vs 2 global loads per FMA for conv_naive. Shared memory per block (floats):
// CB*R*S*DT_KB + CB*((DT_P-1)*sh+R)*((DT_Q-1)*sw+S); 3x3 s1: CB=8 -> 1152 + 1440 = 10.3 KiB.
// Winograd F(m x m, 3x3), alpha = m + 2: per tile and channel alpha^2 multiplies in the GEMM instead
// of 9 m^2 (2.25x fewer for m=2, 4x for m=4); the transforms are O(HWC + HWK + KC).
//
// Host side: rooflab/families/conv/cuda.py (launch shapes, float64 reference, tolerances).
// Build alone: nvcc -std=c++17 -arch=sm_90 -cubin kernels/cuda/conv.cu
#include "common.cuh"

#ifndef CONV_BLOCK
#define CONV_BLOCK 256  // threads per block: naive, im2col and the Winograd transforms
#endif
#ifndef DT_P
#define DT_P 8  // conv_tiled: output rows per block
#endif
#ifndef DT_Q
#define DT_Q 16  // conv_tiled: output columns per block (a warp covers two rows of 16)
#endif
#ifndef DT_KB
#define DT_KB 16  // conv_tiled: output channels per thread, in registers (a multiple of 4)
#endif
#ifndef DW_P
#define DW_P 8  // conv_depthwise: output rows per block
#endif
#ifndef DW_Q
#define DW_Q 32  // conv_depthwise: output columns per block (a warp writes one row)
#endif

#if DT_KB % 4 != 0
#error "DT_KB must be a multiple of 4 (weights are read as float4)"
#endif

// ---- 01: naive direct ------------------------------------------------------------------------

extern "C" __global__ void __launch_bounds__(CONV_BLOCK)
conv_naive(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y, int N, int C, int H,
           int W, int K, int R, int S, int P, int Q, int sh, int sw, int ph, int pw, int G) {
    const int Cg = C / G, Kg = K / G;
    const i64 total = (i64)N * K * P * Q;
    for (i64 i = (i64)blockIdx.x * CONV_BLOCK + threadIdx.x; i < total; i += (i64)gridDim.x * CONV_BLOCK) {
        const int q = (int)(i % Q);
        i64 t = i / Q;
        const int p = (int)(t % P);
        t /= P;
        const int k = (int)(t % K);
        const int n = (int)(t / K);
        const float* xg = x + ((i64)n * C + (i64)(k / Kg) * Cg) * H * W;  // the group's first input plane
        const float* wk = w + (i64)k * Cg * R * S;
        float acc = 0.f;
        for (int c = 0; c < Cg; ++c) {
            for (int r = 0; r < R; ++r) {
                const int h = p * sh - ph + r;
                if (h < 0 || h >= H) continue;
                const float* xrow = xg + ((i64)c * H + h) * W;
                const float* wrow = wk + (c * R + r) * S;
                for (int s = 0; s < S; ++s) {
                    const int v = q * sw - pw + s;
                    if (v >= 0 && v < W) acc = fmaf(__ldg(xrow + v), __ldg(wrow + s), acc);
                }
            }
        }
        y[i] = acc;
    }
}

// ---- 02: tiled direct, output channels blocked in registers ------------------------------------
// grid (tilesP * tilesQ, G * ceil(Kg / DT_KB), N), block DT_P * DT_Q, dynamic shared memory
// (cb * R * S * DT_KB + cb * IH * IW) floats with IH = (DT_P-1)*sh + R, IW = (DT_Q-1)*sw + S.

extern "C" __global__ void __launch_bounds__(DT_P * DT_Q)
conv_tiled(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y, int N, int C, int H,
           int W, int K, int R, int S, int P, int Q, int sh, int sw, int ph, int pw, int G, int cb) {
    extern __shared__ float4 conv_smem4[];  // float4: the weight rows are read 16 B at a time
    float* smem = reinterpret_cast<float*>(conv_smem4);
    const int Cg = C / G, Kg = K / G, RS = R * S;
    const int kblocks = (Kg + DT_KB - 1) / DT_KB;
    const int g = blockIdx.y / kblocks;
    const int k0 = (blockIdx.y % kblocks) * DT_KB;  // first output channel of the block, within group g
    const int n = blockIdx.z;
    const int tilesQ = (Q + DT_Q - 1) / DT_Q;
    const int p0 = (blockIdx.x / tilesQ) * DT_P, q0 = (blockIdx.x % tilesQ) * DT_Q;
    const int tp = threadIdx.x / DT_Q, tq = threadIdx.x % DT_Q;
    const int IH = (DT_P - 1) * sh + R, IW = (DT_Q - 1) * sw + S;
    const int h0 = p0 * sh - ph, w0 = q0 * sw - pw;  // input coordinates of the tile's corner
    float* ws = smem;                  // [cb][R*S][DT_KB]
    float* xs = smem + cb * RS * DT_KB;  // [cb][IH][IW]
    const float* xn = x + ((i64)n * C + (i64)g * Cg) * H * W;
    const float* wg = w + ((i64)g * Kg + k0) * Cg * RS;  // row k0 of group g

    float acc[DT_KB];
#pragma unroll
    for (int j = 0; j < DT_KB; ++j) acc[j] = 0.f;

    for (int c0 = 0; c0 < Cg; c0 += cb) {
        const int cn = min(cb, Cg - c0);
        __syncthreads();  // every thread is done reading the previous chunk
        const int tile = IH * IW;
        for (int e = threadIdx.x; e < cn * tile; e += DT_P * DT_Q) {
            const int c = e / tile, ih = (e % tile) / IW, iw = e % IW;
            const int h = h0 + ih, v = w0 + iw;
            xs[e] = (h >= 0 && h < H && v >= 0 && v < W) ? __ldg(xn + ((i64)(c0 + c) * H + h) * W + v) : 0.f;
        }
        const int crs = cn * RS;  // weights: global reads run along (c, r, s) of one output channel
        for (int e = threadIdx.x; e < DT_KB * crs; e += DT_P * DT_Q) {
            const int kk = e / crs, j = e % crs;
            ws[j * DT_KB + kk] = (k0 + kk < Kg) ? __ldg(wg + (i64)kk * Cg * RS + (i64)c0 * RS + j) : 0.f;
        }
        __syncthreads();
        for (int c = 0; c < cn; ++c) {
            for (int r = 0; r < R; ++r) {
                const float* xrow = xs + (c * IH + tp * sh + r) * IW + tq * sw;
                const float4* wrow = reinterpret_cast<const float4*>(ws + (c * RS + r * S) * DT_KB);
                for (int s = 0; s < S; ++s) {
                    const float v = xrow[s];
#pragma unroll
                    for (int j = 0; j < DT_KB / 4; ++j) {
                        const float4 f = wrow[s * (DT_KB / 4) + j];  // the same address for the whole warp
                        acc[4 * j + 0] = fmaf(v, f.x, acc[4 * j + 0]);
                        acc[4 * j + 1] = fmaf(v, f.y, acc[4 * j + 1]);
                        acc[4 * j + 2] = fmaf(v, f.z, acc[4 * j + 2]);
                        acc[4 * j + 3] = fmaf(v, f.w, acc[4 * j + 3]);
                    }
                }
            }
        }
    }
    const int p = p0 + tp, q = q0 + tq;
    if (p < P && q < Q) {
        float* yp = y + (((i64)n * K + (i64)g * Kg + k0) * P + p) * Q + q;
#pragma unroll
        for (int j = 0; j < DT_KB; ++j)
            if (k0 + j < Kg) yp[(i64)j * P * Q] = acc[j];
    }
}

// ---- 03: depthwise (groups == C, K = C * multiplier) ---------------------------------------------
// grid (tilesP * tilesQ, K, N), block DW_P * DW_Q, dynamic shared memory (IH * IW + R * S) floats.

extern "C" __global__ void __launch_bounds__(DW_P * DW_Q)
conv_depthwise(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y, int N, int C, int H,
               int W, int K, int R, int S, int P, int Q, int sh, int sw, int ph, int pw) {
    extern __shared__ float4 dw_smem4[];
    float* smem = reinterpret_cast<float*>(dw_smem4);
    const int k = blockIdx.y, n = blockIdx.z, c = k / (K / C);
    const int tilesQ = (Q + DW_Q - 1) / DW_Q;
    const int p0 = (blockIdx.x / tilesQ) * DW_P, q0 = (blockIdx.x % tilesQ) * DW_Q;
    const int tp = threadIdx.x / DW_Q, tq = threadIdx.x % DW_Q;
    const int IH = (DW_P - 1) * sh + R, IW = (DW_Q - 1) * sw + S, RS = R * S;
    const int h0 = p0 * sh - ph, w0 = q0 * sw - pw;
    float* xs = smem;
    float* ws = smem + IH * IW;
    const float* xp = x + ((i64)n * C + c) * H * W;
    for (int e = threadIdx.x; e < IH * IW; e += DW_P * DW_Q) {
        const int h = h0 + e / IW, v = w0 + e % IW;
        xs[e] = (h >= 0 && h < H && v >= 0 && v < W) ? __ldg(xp + (i64)h * W + v) : 0.f;
    }
    for (int e = threadIdx.x; e < RS; e += DW_P * DW_Q) ws[e] = __ldg(w + (i64)k * RS + e);
    __syncthreads();
    const int p = p0 + tp, q = q0 + tq;
    if (p >= P || q >= Q) return;  // after the only barrier
    float acc = 0.f;
    for (int r = 0; r < R; ++r) {
        const float* xrow = xs + (tp * sh + r) * IW + tq * sw;
        for (int s = 0; s < S; ++s) acc = fmaf(xrow[s], ws[r * S + s], acc);
    }
    y[(((i64)n * K + k) * P + p) * Q + q] = acc;
}

// ---- 04: im2col ----------------------------------------------------------------------------------
// cols (N, C, R, S, P, Q) = for each image the (C*R*S) x (P*Q) matrix of the GEMM
// y[n] (K x PQ) = w (K x CRS) @ cols[n] (CRS x PQ); with groups the rows of group g are contiguous.
// grid (ceil(P*Q / CONV_BLOCK), min(N*C*R*S, 65535)); each block row walks rows (n, c, r, s).

extern "C" __global__ void __launch_bounds__(CONV_BLOCK)
im2col(const float* __restrict__ x, float* __restrict__ cols, int N, int C, int H, int W, int R, int S, int P, int Q,
       int sh, int sw, int ph, int pw) {
    const int PQ = P * Q;
    const int pq = blockIdx.x * CONV_BLOCK + threadIdx.x;
    if (pq >= PQ) return;
    const int p = pq / Q, q = pq % Q;
    const i64 rows = (i64)N * C * R * S;
    for (i64 row = blockIdx.y; row < rows; row += gridDim.y) {
        const int s = (int)(row % S);
        const int r = (int)((row / S) % R);
        const i64 nc = row / ((i64)R * S);  // n * C + c
        const int h = p * sh - ph + r, v = q * sw - pw + s;
        cols[row * PQ + pq] = (h >= 0 && h < H && v >= 0 && v < W) ? __ldg(x + (nc * H + h) * W + v) : 0.f;
    }
}

// ---- 05/06: Winograd F(m x m, 3 x 3) transforms ----------------------------------------------------
// 1-D transforms (Lavin & Gray 2016; the F(4,3) matrices are wincnn's with points 0, +-1, +-2):
//   F(2,3): B^T (4x4), G (4x3), A^T (2x4);  F(4,3): B^T (6x6), G (6x3), A^T (4x6).
// 2-D: V = B^T d B, U = G g G^T, Y = A^T M A, each a 1-D transform of the columns then the rows.

__device__ __forceinline__ void bt_1d(const float* d, float* o, int M) {  // o = B^T d (alpha values)
    if (M == 2) {
        o[0] = d[0] - d[2];
        o[1] = d[1] + d[2];
        o[2] = d[2] - d[1];
        o[3] = d[1] - d[3];
    } else {
        o[0] = fmaf(4.f, d[0], fmaf(-5.f, d[2], d[4]));
        o[1] = fmaf(-4.f, d[1] + d[2], d[3] + d[4]);
        o[2] = fmaf(4.f, d[1] - d[2], d[4] - d[3]);
        o[3] = fmaf(2.f, d[3] - d[1], d[4] - d[2]);
        o[4] = fmaf(2.f, d[1] - d[3], d[4] - d[2]);
        o[5] = fmaf(4.f, d[1], fmaf(-5.f, d[3], d[5]));
    }
}

__device__ __forceinline__ void g_1d(const float* g, float* o, int M) {  // o = G g (alpha values from 3)
    if (M == 2) {
        o[0] = g[0];
        o[1] = 0.5f * (g[0] + g[1] + g[2]);
        o[2] = 0.5f * (g[0] - g[1] + g[2]);
        o[3] = g[2];
    } else {
        o[0] = 0.25f * g[0];
        o[1] = (-1.f / 6.f) * (g[0] + g[1] + g[2]);
        o[2] = (-1.f / 6.f) * (g[0] - g[1] + g[2]);
        o[3] = (1.f / 24.f) * g[0] + (1.f / 12.f) * g[1] + (1.f / 6.f) * g[2];
        o[4] = (1.f / 24.f) * g[0] - (1.f / 12.f) * g[1] + (1.f / 6.f) * g[2];
        o[5] = g[2];
    }
}

__device__ __forceinline__ void at_1d(const float* m, float* o, int M) {  // o = A^T m (M values from alpha)
    if (M == 2) {
        o[0] = m[0] + m[1] + m[2];
        o[1] = m[1] - m[2] - m[3];
    } else {
        const float a = m[1] + m[2], b = m[1] - m[2], c = m[3] + m[4], d = m[3] - m[4];
        o[0] = m[0] + a + c;
        o[1] = fmaf(2.f, d, b);
        o[2] = fmaf(4.f, c, a);
        o[3] = fmaf(8.f, d, b) + m[5];
    }
}

// U[xi][k][c] (alpha^2, K, C) from w (K, C, 3, 3): one thread per (k, c).
template <int M>
__device__ void winograd_filter(const float* __restrict__ w, float* __restrict__ U, int K, int C) {
    constexpr int A = M + 2;
    const i64 KC = (i64)K * C;
    for (i64 i = (i64)blockIdx.x * CONV_BLOCK + threadIdx.x; i < KC; i += (i64)gridDim.x * CONV_BLOCK) {
        float g[9], col[3], gg[A][3], u[A][A], row[A];
#pragma unroll
        for (int j = 0; j < 9; ++j) g[j] = __ldg(w + i * 9 + j);
#pragma unroll
        for (int s = 0; s < 3; ++s) {  // columns: gg = G g
            col[0] = g[s];
            col[1] = g[3 + s];
            col[2] = g[6 + s];
            g_1d(col, row, M);
#pragma unroll
            for (int a = 0; a < A; ++a) gg[a][s] = row[a];
        }
#pragma unroll
        for (int a = 0; a < A; ++a) g_1d(gg[a], u[a], M);  // rows: u = gg G^T
#pragma unroll
        for (int a = 0; a < A; ++a)
#pragma unroll
            for (int b = 0; b < A; ++b) U[(i64)(a * A + b) * KC + i] = u[a][b];  // i = k * C + c
    }
}

// V[xi][c][t] (alpha^2, C, T) with T = N * tilesP * tilesQ: one thread per (c, t), t fastest.
template <int M>
__device__ void winograd_input(const float* __restrict__ x, float* __restrict__ V, int N, int C, int H, int W, int ph,
                               int pw, int tilesP, int tilesQ) {
    constexpr int A = M + 2;
    const i64 tiles = (i64)tilesP * tilesQ, T = N * tiles, CT = (i64)C * T;
    for (i64 i = (i64)blockIdx.x * CONV_BLOCK + threadIdx.x; i < CT; i += (i64)gridDim.x * CONV_BLOCK) {
        const int c = (int)(i / T);
        const i64 t = i % T;
        const int n = (int)(t / tiles), tt = (int)(t % tiles);
        const int h0 = (tt / tilesQ) * M - ph, w0 = (tt % tilesQ) * M - pw;
        const float* xp = x + ((i64)n * C + c) * H * W;
        float d[A][A], col[A], tmp[A][A], v[A][A];
#pragma unroll
        for (int a = 0; a < A; ++a)
#pragma unroll
            for (int b = 0; b < A; ++b) {
                const int h = h0 + a, u = w0 + b;
                d[a][b] = (h >= 0 && h < H && u >= 0 && u < W) ? __ldg(xp + (i64)h * W + u) : 0.f;
            }
#pragma unroll
        for (int b = 0; b < A; ++b) {  // columns: tmp = B^T d
#pragma unroll
            for (int a = 0; a < A; ++a) col[a] = d[a][b];
            float o[A];
            bt_1d(col, o, M);
#pragma unroll
            for (int a = 0; a < A; ++a) tmp[a][b] = o[a];
        }
#pragma unroll
        for (int a = 0; a < A; ++a) bt_1d(tmp[a], v[a], M);  // rows: v = tmp B
#pragma unroll
        for (int a = 0; a < A; ++a)
#pragma unroll
            for (int b = 0; b < A; ++b) V[(i64)(a * A + b) * CT + i] = v[a][b];  // i = c * T + t
    }
}

// y (N, K, P, Q) from Mt[xi][k][t] (alpha^2, K, T): one thread per (k, t), t fastest.
template <int M>
__device__ void winograd_output(const float* __restrict__ Mt, float* __restrict__ y, int N, int K, int P, int Q,
                                int tilesP, int tilesQ) {
    constexpr int A = M + 2;
    const i64 tiles = (i64)tilesP * tilesQ, T = N * tiles, KT = (i64)K * T;
    for (i64 i = (i64)blockIdx.x * CONV_BLOCK + threadIdx.x; i < KT; i += (i64)gridDim.x * CONV_BLOCK) {
        const int k = (int)(i / T);
        const i64 t = i % T;
        const int n = (int)(t / tiles), tt = (int)(t % tiles);
        const int p0 = (tt / tilesQ) * M, q0 = (tt % tilesQ) * M;
        float m[A][A], col[A], tmp[M][A], o[M][M];
#pragma unroll
        for (int a = 0; a < A; ++a)
#pragma unroll
            for (int b = 0; b < A; ++b) m[a][b] = Mt[(i64)(a * A + b) * KT + i];
#pragma unroll
        for (int b = 0; b < A; ++b) {  // columns: tmp = A^T m
#pragma unroll
            for (int a = 0; a < A; ++a) col[a] = m[a][b];
            float r[M];
            at_1d(col, r, M);
#pragma unroll
            for (int a = 0; a < M; ++a) tmp[a][b] = r[a];
        }
#pragma unroll
        for (int a = 0; a < M; ++a) at_1d(tmp[a], o[a], M);  // rows: o = tmp A
        float* yp = y + ((i64)n * K + k) * P * Q;
#pragma unroll
        for (int a = 0; a < M; ++a)
#pragma unroll
            for (int b = 0; b < M; ++b)
                if (p0 + a < P && q0 + b < Q) yp[(i64)(p0 + a) * Q + q0 + b] = o[a][b];
    }
}

extern "C" __global__ void __launch_bounds__(CONV_BLOCK) winograd_filter_f2(const float* __restrict__ w, float* __restrict__ U, int K, int C) {
    winograd_filter<2>(w, U, K, C);
}
extern "C" __global__ void __launch_bounds__(CONV_BLOCK) winograd_filter_f4(const float* __restrict__ w, float* __restrict__ U, int K, int C) {
    winograd_filter<4>(w, U, K, C);
}
extern "C" __global__ void __launch_bounds__(CONV_BLOCK)
winograd_input_f2(const float* __restrict__ x, float* __restrict__ V, int N, int C, int H, int W, int ph, int pw,
                  int tilesP, int tilesQ) {
    winograd_input<2>(x, V, N, C, H, W, ph, pw, tilesP, tilesQ);
}
extern "C" __global__ void __launch_bounds__(CONV_BLOCK)
winograd_input_f4(const float* __restrict__ x, float* __restrict__ V, int N, int C, int H, int W, int ph, int pw,
                  int tilesP, int tilesQ) {
    winograd_input<4>(x, V, N, C, H, W, ph, pw, tilesP, tilesQ);
}
extern "C" __global__ void __launch_bounds__(CONV_BLOCK)
winograd_output_f2(const float* __restrict__ Mt, float* __restrict__ y, int N, int K, int P, int Q, int tilesP,
                   int tilesQ) {
    winograd_output<2>(Mt, y, N, K, P, Q, tilesP, tilesQ);
}
extern "C" __global__ void __launch_bounds__(CONV_BLOCK)
winograd_output_f4(const float* __restrict__ Mt, float* __restrict__ y, int N, int K, int P, int Q, int tilesP,
                   int tilesQ) {
    winograd_output<4>(Mt, y, N, K, P, Q, tilesP, tilesQ);
}
