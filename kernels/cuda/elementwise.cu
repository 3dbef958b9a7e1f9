// Elementwise, normalisation and fused kernels, FP32: what rooflab/families/elementwise/cuda.py
// runs as variant 01 (one kernel per op) and 02 (fused chains). All are memory-bound: the figure is
// bytes moved / time, against the HBM roof of stream.cu with the same read/write mix.
//
//   ew_add y = a + b            ew_scale y = s * x          ew_relu y = max(x, 0)
//   ew_gelu y = x * sigmoid(2z), z = sqrt(2/pi) (x + 0.044715 x^3)  (= the tanh form, no cancellation)
//   ew_bias_add y[r, c] = x[r, c] + bias[c]          (the per-channel bias of a linear layer)
//   ew_channel_affine y = x * scale[c] + shift[c]    (inference batch norm; `inner` = H*W for NCHW,
//                                                     1 for NHWC, so c = (i / inner) % C)
//   fused_bias_gelu_residual y = gelu(x + bias[c]) + res    (transformer MLP: one pass, 12 B/elem)
//   fused_bn_add_relu y = max(x * scale[c] + shift[c] + res, 0)  (ResNet block end, 12 B/elem)
//   softmax_warp / softmax_block   row softmax; one warp (cols <= 1024) or one block per row;
//                                  max and sum in one online pass, then one write pass
//   layernorm_warp / layernorm_block  (x - mean) / sqrt(var + eps) * gamma + beta per row,
//                                  mean and variance from sums shifted by the row's first value
//
// Napkin math (H200, ~4.8 TB/s): an 8 B/elem op on 64 Mi floats moves 512 MiB: ~110 us. Unfused,
// bias + GELU + residual is 3 kernels and 28 B/elem; fused it is 12 B/elem: 2.33x fewer bytes.
// Index math runs in 32 bits when n < 2^31 (a 64-bit division costs ~70 instructions, and at
// 150 G float4/s the budget is ~200 integer instructions per float4).
// Grid-stride kernels: one resident wave (EW_SM_THREADS per SM, FUSED_SM_THREADS for the chains,
// ROW_SM_THREADS for the row kernels, whose loops keep ROW_UNROLL float4 loads in flight), float4
// when every pointer is 16-B aligned and 4 consecutive elements share their channel (or their
// channels are consecutive).
// Build alone: nvcc -std=c++17 -arch=sm_90 -cubin kernels/cuda/elementwise.cu
#include "common.cuh"

#ifndef EW_BLOCK
#define EW_BLOCK 256  // threads per block of the grid-stride kernels
#endif
#ifndef EW_SM_THREADS
#define EW_SM_THREADS 2048  // resident threads per SM the launcher fills (one wave)
#endif
#ifndef FUSED_SM_THREADS
#define FUSED_SM_THREADS 1536  // the fused chains: 4 GELUs per float4 need ~40 registers, not 32
#endif
#ifndef ROW_WARPS
#define ROW_WARPS 8  // softmax_warp / layernorm_warp: rows (warps) per block
#endif
#ifndef ROW_BLOCK
#define ROW_BLOCK 512  // softmax_block / layernorm_block: threads per row (a multiple of 32, <= 1024)
#endif
#ifndef ROW_SM_THREADS
#define ROW_SM_THREADS 1024  // the row kernels' resident threads per SM (<= 64 registers each)
#endif
#ifndef ROW_UNROLL
#define ROW_UNROLL 4  // float4 loads a row loop keeps in flight per thread
#endif

#define FULL_MASK 0xffffffffu
constexpr int kRowUnroll = ROW_UNROLL;  // #pragma unroll takes a constant expression, not a macro
#define NEG_INF __int_as_float(0xff800000)  // -infinity (NVRTC has no math.h INFINITY)

__device__ __forceinline__ bool aligned16(const void* p) { return (reinterpret_cast<u64>(p) & 15u) == 0; }

// max(v, 0) that keeps a NaN, as cupy.maximum and numpy do (fmaxf(NaN, 0) is 0, hiding it)
__device__ __forceinline__ float relu_f(float v) { return v < 0.f ? 0.f : v; }

__device__ __forceinline__ float gelu_f(float x) {
    const float z = 0.7978845608028654f * fmaf(0.044715f * x, x * x, x);
    return x / (1.f + expf(-2.f * z));  // 0.5 x (1 + tanh z); exp overflow -> x / inf = 0, the limit
}

// Grid-stride driver: op.vec4(i) handles elements 4i..4i+3, op.one(i) element i. I is the index
// type (unsigned when n < 2^31, else i64).
template <class I, class Op>
__device__ __forceinline__ void grid_stride(const Op& op, I n, bool vec) {
    const I tid = (I)blockIdx.x * EW_BLOCK + threadIdx.x, stride = (I)gridDim.x * EW_BLOCK;
    I done = 0;
    if (vec) {
        const I n4 = n / 4;
        for (I i = tid; i < n4; i += stride) op.vec4(i);
        done = n4 * 4;
    }
    for (I i = done + tid; i < n; i += stride) op.one(i);
}

template <class Op>
__device__ __forceinline__ void dispatch(const Op& op, i64 n, bool vec) {
    if (n < 0x7fffffffLL)
        grid_stride<unsigned>(op, (unsigned)n, vec);
    else
        grid_stride<i64>(op, n, vec);
}

__device__ __forceinline__ float4 ld4(const float* p, u64 i) { return __ldg(reinterpret_cast<const float4*>(p) + i); }
__device__ __forceinline__ void st4(float* p, u64 i, float4 v) { reinterpret_cast<float4*>(p)[i] = v; }

// ---- single ops --------------------------------------------------------------------------------

struct AddOp {
    const float *a, *b;
    float* y;
    template <class I> __device__ void vec4(I i) const {
        const float4 u = ld4(a, i), v = ld4(b, i);
        st4(y, i, make_float4(u.x + v.x, u.y + v.y, u.z + v.z, u.w + v.w));
    }
    template <class I> __device__ void one(I i) const { y[i] = __ldg(a + i) + __ldg(b + i); }
};

struct ScaleOp {
    const float* x;
    float* y;
    float s;
    template <class I> __device__ void vec4(I i) const {
        const float4 u = ld4(x, i);
        st4(y, i, make_float4(s * u.x, s * u.y, s * u.z, s * u.w));
    }
    template <class I> __device__ void one(I i) const { y[i] = s * __ldg(x + i); }
};

struct ReluOp {
    const float* x;
    float* y;
    template <class I> __device__ void vec4(I i) const {
        const float4 u = ld4(x, i);
        st4(y, i, make_float4(relu_f(u.x), relu_f(u.y), relu_f(u.z), relu_f(u.w)));
    }
    template <class I> __device__ void one(I i) const { y[i] = relu_f(__ldg(x + i)); }
};

struct GeluOp {
    const float* x;
    float* y;
    template <class I> __device__ void vec4(I i) const {
        const float4 u = ld4(x, i);
        st4(y, i, make_float4(gelu_f(u.x), gelu_f(u.y), gelu_f(u.z), gelu_f(u.w)));
    }
    template <class I> __device__ void one(I i) const { y[i] = gelu_f(__ldg(x + i)); }
};

// Per-channel parameters: element e belongs to channel (e / inner) % C. Vector path: either inner % 4
// == 0 (4 elements, one channel) or inner == 1 and C % 4 == 0 (4 consecutive channels, a float4 of
// parameters); the kernels check which before choosing it.
struct Channel {
    int inner, C;
    template <class I> __device__ __forceinline__ int of(I e) const { return (int)((e / (I)inner) % (I)C); }
};

template <class I>
__device__ __forceinline__ float4 chan4(const float* p, const Channel& ch, I e) {  // parameters of elements e..e+3
    const int c = ch.of(e);
    if (ch.inner == 1) return __ldg(reinterpret_cast<const float4*>(p + c));  // c % 4 == 0 here
    const float v = __ldg(p + c);
    return make_float4(v, v, v, v);
}

__device__ __forceinline__ bool channel_vec(const Channel& ch, const float* p0, const float* p1) {
    return ch.inner % 4 == 0 || (ch.inner == 1 && ch.C % 4 == 0 && aligned16(p0) && aligned16(p1));
}

struct BiasAddOp {  // y = x + bias[c]
    const float *x, *bias;
    float* y;
    Channel ch;
    template <class I> __device__ void vec4(I i) const {
        const float4 u = ld4(x, i), b = chan4(bias, ch, i * 4);
        st4(y, i, make_float4(u.x + b.x, u.y + b.y, u.z + b.z, u.w + b.w));
    }
    template <class I> __device__ void one(I i) const { y[i] = __ldg(x + i) + __ldg(bias + ch.of(i)); }
};

struct AffineOp {  // y = x * scale[c] + shift[c]
    const float *x, *scale, *shift;
    float* y;
    Channel ch;
    template <class I> __device__ void vec4(I i) const {
        const float4 u = ld4(x, i), a = chan4(scale, ch, i * 4), b = chan4(shift, ch, i * 4);
        st4(y, i, make_float4(fmaf(u.x, a.x, b.x), fmaf(u.y, a.y, b.y), fmaf(u.z, a.z, b.z), fmaf(u.w, a.w, b.w)));
    }
    template <class I> __device__ void one(I i) const {
        const int c = ch.of(i);
        y[i] = fmaf(__ldg(x + i), __ldg(scale + c), __ldg(shift + c));
    }
};

// ---- fused chains ------------------------------------------------------------------------------

struct BiasGeluResOp {  // y = gelu(x + bias[c]) + res
    const float *x, *bias, *res;
    float* y;
    Channel ch;
    template <class I> __device__ void vec4(I i) const {
        const float4 u = ld4(x, i), b = chan4(bias, ch, i * 4), r = ld4(res, i);
        st4(y, i,
            make_float4(gelu_f(u.x + b.x) + r.x, gelu_f(u.y + b.y) + r.y, gelu_f(u.z + b.z) + r.z,
                        gelu_f(u.w + b.w) + r.w));
    }
    template <class I> __device__ void one(I i) const {
        y[i] = gelu_f(__ldg(x + i) + __ldg(bias + ch.of(i))) + __ldg(res + i);
    }
};

struct BnAddReluOp {  // y = max(x * scale[c] + shift[c] + res, 0)
    const float *x, *scale, *shift, *res;
    float* y;
    Channel ch;
    template <class I> __device__ void vec4(I i) const {
        const float4 u = ld4(x, i), a = chan4(scale, ch, i * 4), b = chan4(shift, ch, i * 4), r = ld4(res, i);
        st4(y, i,
            make_float4(relu_f(fmaf(u.x, a.x, b.x) + r.x), relu_f(fmaf(u.y, a.y, b.y) + r.y),
                        relu_f(fmaf(u.z, a.z, b.z) + r.z), relu_f(fmaf(u.w, a.w, b.w) + r.w)));
    }
    template <class I> __device__ void one(I i) const {
        const int c = ch.of(i);
        y[i] = relu_f(fmaf(__ldg(x + i), __ldg(scale + c), __ldg(shift + c)) + __ldg(res + i));
    }
};

#define EW_BOUNDS __launch_bounds__(EW_BLOCK, EW_SM_THREADS / EW_BLOCK)
#define FUSED_BOUNDS __launch_bounds__(EW_BLOCK, FUSED_SM_THREADS / EW_BLOCK)

extern "C" __global__ void EW_BOUNDS ew_add(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ y, i64 n) {
    dispatch(AddOp{a, b, y}, n, aligned16(a) && aligned16(b) && aligned16(y));
}

extern "C" __global__ void EW_BOUNDS ew_scale(const float* __restrict__ x, float* __restrict__ y, float s, i64 n) {
    dispatch(ScaleOp{x, y, s}, n, aligned16(x) && aligned16(y));
}

extern "C" __global__ void EW_BOUNDS ew_relu(const float* __restrict__ x, float* __restrict__ y, i64 n) {
    dispatch(ReluOp{x, y}, n, aligned16(x) && aligned16(y));
}

extern "C" __global__ void EW_BOUNDS ew_gelu(const float* __restrict__ x, float* __restrict__ y, i64 n) {
    dispatch(GeluOp{x, y}, n, aligned16(x) && aligned16(y));
}

extern "C" __global__ void EW_BOUNDS ew_bias_add(const float* __restrict__ x, const float* __restrict__ bias,
                                                 float* __restrict__ y, i64 n, int inner, int C) {
    const Channel ch{inner, C};
    dispatch(BiasAddOp{x, bias, y, ch}, n, aligned16(x) && aligned16(y) && channel_vec(ch, bias, bias));
}

extern "C" __global__ void EW_BOUNDS ew_channel_affine(const float* __restrict__ x, const float* __restrict__ scale,
                                                       const float* __restrict__ shift, float* __restrict__ y, i64 n,
                                                       int inner, int C) {
    const Channel ch{inner, C};
    dispatch(AffineOp{x, scale, shift, y, ch}, n, aligned16(x) && aligned16(y) && channel_vec(ch, scale, shift));
}

extern "C" __global__ void FUSED_BOUNDS fused_bias_gelu_residual(const float* __restrict__ x,
                                                              const float* __restrict__ bias,
                                                              const float* __restrict__ res, float* __restrict__ y,
                                                              i64 n, int inner, int C) {
    const Channel ch{inner, C};
    dispatch(BiasGeluResOp{x, bias, res, y, ch}, n,
             aligned16(x) && aligned16(res) && aligned16(y) && channel_vec(ch, bias, bias));
}

extern "C" __global__ void FUSED_BOUNDS fused_bn_add_relu(const float* __restrict__ x, const float* __restrict__ scale,
                                                       const float* __restrict__ shift, const float* __restrict__ res,
                                                       float* __restrict__ y, i64 n, int inner, int C) {
    const Channel ch{inner, C};
    dispatch(BnAddReluOp{x, scale, shift, res, y, ch}, n,
             aligned16(x) && aligned16(res) && aligned16(y) && channel_vec(ch, scale, shift));
}

// ---- row softmax -------------------------------------------------------------------------------
// Online statistics (Milakov & Gimelshein 2018): m = running max, s = sum of exp(v - m), rescaled
// when m grows. Two partial (m, s) combine as m = max(m1, m2), s = s1 e^(m1-m) + s2 e^(m2-m); an
// empty partial (m = -inf) contributes 0, so rows of -inf (masked) stay NaN-free until the divide.

struct MaxSum {
    float m, s;
};

__device__ __forceinline__ void online(MaxSum& a, float v) {
    if (v > a.m) {
        a.s = a.s * expf(a.m - v) + 1.f;  // a.m = -inf: 0 * 0 + 1
        a.m = v;
    } else if (a.m > NEG_INF) {
        a.s += expf(v - a.m);
    }
}

__device__ __forceinline__ MaxSum combine(MaxSum a, MaxSum b) {
    const float m = fmaxf(a.m, b.m);
    const float s = (a.m == NEG_INF ? 0.f : a.s * expf(a.m - m)) + (b.m == NEG_INF ? 0.f : b.s * expf(b.m - m));
    return {m, s};
}

__device__ __forceinline__ MaxSum warp_combine(MaxSum a) {  // butterfly: every lane ends with the total
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const MaxSum b{__shfl_xor_sync(FULL_MASK, a.m, o), __shfl_xor_sync(FULL_MASK, a.s, o)};
        a = combine(a, b);  // combine is symmetric, so both partners compute the same bits
    }
    return a;
}

// One row's statistics by `lanes` threads starting at `lane` (a warp, or a whole block).
__device__ __forceinline__ MaxSum row_maxsum(const float* xr, int cols, int lane, int lanes, bool vec) {
    MaxSum a{NEG_INF, 0.f};
    if (vec) {
        const float4* x4 = reinterpret_cast<const float4*>(xr);
#pragma unroll(kRowUnroll)
        for (int j = lane; j < cols / 4; j += lanes) {
            const float4 v = __ldg(x4 + j);
            online(a, v.x);
            online(a, v.y);
            online(a, v.z);
            online(a, v.w);
        }
    } else {
        for (int j = lane; j < cols; j += lanes) online(a, __ldg(xr + j));
    }
    return a;
}

__device__ __forceinline__ void row_softmax_write(const float* xr, float* yr, int cols, int lane, int lanes, bool vec,
                                                  MaxSum a) {
    const float inv = 1.f / a.s;
    if (vec) {
        const float4* x4 = reinterpret_cast<const float4*>(xr);
        float4* y4 = reinterpret_cast<float4*>(yr);
#pragma unroll(kRowUnroll)
        for (int j = lane; j < cols / 4; j += lanes) {
            const float4 v = __ldg(x4 + j);
            y4[j] = make_float4(expf(v.x - a.m) * inv, expf(v.y - a.m) * inv, expf(v.z - a.m) * inv,
                                expf(v.w - a.m) * inv);
        }
    } else {
        for (int j = lane; j < cols; j += lanes) yr[j] = expf(__ldg(xr + j) - a.m) * inv;
    }
}

// grid-stride over rows, ROW_WARPS rows per block, one warp per row (the loop condition is uniform
// in a warp, so every shuffle has all 32 lanes)
extern "C" __global__ void __launch_bounds__(ROW_WARPS * 32, ROW_SM_THREADS / (ROW_WARPS * 32))
softmax_warp(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
    const int lane = threadIdx.x & 31;
    const bool vec = cols % 4 == 0 && aligned16(x) && aligned16(y);
    for (int row = blockIdx.x * ROW_WARPS + (threadIdx.x >> 5); row < rows; row += gridDim.x * ROW_WARPS) {
        const float* xr = x + (i64)row * cols;
        const MaxSum a = warp_combine(row_maxsum(xr, cols, lane, 32, vec));
        row_softmax_write(xr, y + (i64)row * cols, cols, lane, 32, vec, a);
    }
}

extern "C" __global__ void __launch_bounds__(ROW_BLOCK, ROW_SM_THREADS / ROW_BLOCK)
softmax_block(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
    __shared__ MaxSum part[ROW_BLOCK / 32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const bool vec = cols % 4 == 0 && aligned16(x) && aligned16(y);
    for (int row = blockIdx.x; row < rows; row += gridDim.x) {  // uniform in the block
        const float* xr = x + (i64)row * cols;
        MaxSum a = warp_combine(row_maxsum(xr, cols, threadIdx.x, ROW_BLOCK, vec));
        if (lane == 0) part[warp] = a;
        __syncthreads();
        a = lane < ROW_BLOCK / 32 ? part[lane] : MaxSum{NEG_INF, 0.f};
        a = warp_combine(a);  // every warp reduces the partials itself: no second barrier needed
        row_softmax_write(xr, y + (i64)row * cols, cols, threadIdx.x, ROW_BLOCK, vec, a);
        __syncthreads();  // part[] is rewritten by the next row
    }
}

// ---- layer norm --------------------------------------------------------------------------------
// Sums of (v - K) and (v - K)^2 with K = the row's first value: the shift keeps the variance from
// cancelling when |mean| >> std; var = E[(v-K)^2] - E[v-K]^2, clamped at 0.

struct Sums {
    float s, q;
};

__device__ __forceinline__ Sums warp_sums(Sums a) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        a.s += __shfl_xor_sync(FULL_MASK, a.s, o);
        a.q += __shfl_xor_sync(FULL_MASK, a.q, o);
    }
    return a;
}

__device__ __forceinline__ Sums row_sums(const float* xr, int cols, int lane, int lanes, bool vec, float K) {
    Sums a{0.f, 0.f};
    if (vec) {
        const float4* x4 = reinterpret_cast<const float4*>(xr);
#pragma unroll(kRowUnroll)
        for (int j = lane; j < cols / 4; j += lanes) {
            const float4 v = __ldg(x4 + j);
            const float d0 = v.x - K, d1 = v.y - K, d2 = v.z - K, d3 = v.w - K;
            a.s += (d0 + d1) + (d2 + d3);
            a.q += fmaf(d0, d0, d1 * d1) + fmaf(d2, d2, d3 * d3);
        }
    } else {
        for (int j = lane; j < cols; j += lanes) {
            const float d = __ldg(xr + j) - K;
            a.s += d;
            a.q = fmaf(d, d, a.q);
        }
    }
    return a;
}

__device__ __forceinline__ void row_norm_write(const float* xr, const float* g, const float* b, float* yr, int cols,
                                               int lane, int lanes, bool vec, float mean, float rstd) {
    if (vec) {
        const float4 *x4 = reinterpret_cast<const float4*>(xr), *g4 = reinterpret_cast<const float4*>(g),
                     *b4 = reinterpret_cast<const float4*>(b);
        float4* y4 = reinterpret_cast<float4*>(yr);
#pragma unroll(kRowUnroll)
        for (int j = lane; j < cols / 4; j += lanes) {
            const float4 v = __ldg(x4 + j), gg = __ldg(g4 + j), bb = __ldg(b4 + j);
            y4[j] = make_float4(fmaf((v.x - mean) * rstd, gg.x, bb.x), fmaf((v.y - mean) * rstd, gg.y, bb.y),
                                fmaf((v.z - mean) * rstd, gg.z, bb.z), fmaf((v.w - mean) * rstd, gg.w, bb.w));
        }
    } else {
        for (int j = lane; j < cols; j += lanes)
            yr[j] = fmaf((__ldg(xr + j) - mean) * rstd, __ldg(g + j), __ldg(b + j));
    }
}

__device__ __forceinline__ void mean_rstd(Sums a, int cols, float K, float eps, float& mean, float& rstd) {
    const float m1 = a.s / cols;
    mean = K + m1;
    rstd = rsqrtf(fmaxf(a.q / cols - m1 * m1, 0.f) + eps);
}

extern "C" __global__ void __launch_bounds__(ROW_WARPS * 32, ROW_SM_THREADS / (ROW_WARPS * 32))
layernorm_warp(const float* __restrict__ x, const float* __restrict__ g, const float* __restrict__ b,
               float* __restrict__ y, int rows, int cols, float eps) {
    const int lane = threadIdx.x & 31;
    const bool vec = cols % 4 == 0 && aligned16(x) && aligned16(y) && aligned16(g) && aligned16(b);
    for (int row = blockIdx.x * ROW_WARPS + (threadIdx.x >> 5); row < rows; row += gridDim.x * ROW_WARPS) {
        const float* xr = x + (i64)row * cols;
        const float K = __ldg(xr);
        float mean, rstd;
        mean_rstd(warp_sums(row_sums(xr, cols, lane, 32, vec, K)), cols, K, eps, mean, rstd);
        row_norm_write(xr, g, b, y + (i64)row * cols, cols, lane, 32, vec, mean, rstd);
    }
}

extern "C" __global__ void __launch_bounds__(ROW_BLOCK, ROW_SM_THREADS / ROW_BLOCK)
layernorm_block(const float* __restrict__ x, const float* __restrict__ g, const float* __restrict__ b,
                float* __restrict__ y, int rows, int cols, float eps) {
    __shared__ Sums part[ROW_BLOCK / 32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const bool vec = cols % 4 == 0 && aligned16(x) && aligned16(y) && aligned16(g) && aligned16(b);
    for (int row = blockIdx.x; row < rows; row += gridDim.x) {
        const float* xr = x + (i64)row * cols;
        const float K = __ldg(xr);
        Sums a = warp_sums(row_sums(xr, cols, threadIdx.x, ROW_BLOCK, vec, K));
        if (lane == 0) part[warp] = a;
        __syncthreads();
        a = lane < ROW_BLOCK / 32 ? part[lane] : Sums{0.f, 0.f};
        a = warp_sums(a);
        float mean, rstd;
        mean_rstd(a, cols, K, eps, mean, rstd);
        row_norm_write(xr, g, b, y + (i64)row * cols, cols, threadIdx.x, ROW_BLOCK, vec, mean, rstd);
        __syncthreads();
    }
}
