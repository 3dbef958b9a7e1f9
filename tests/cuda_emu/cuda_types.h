// What both CPU emulations of CUDA share (tests/cuda_emu.h: one OS thread per CUDA thread, for the
// family kernels; tests/cuda_emu/emu.h: fibers and the warp-collective PTX, for the GEMM kernels):
// the CUDA qualifiers as no-ops, and the vector types and their make_* helpers kernels use.
// dim3 stays with each emulation (their defaults differ: launch geometry vs. a fiber's index).
#pragma once
#include <algorithm>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))

using std::max;
using std::min;

struct alignas(8) float2 {
    float x, y;
};
struct alignas(16) float4 {
    float x, y, z, w;
};
struct alignas(16) double2 {
    double x, y;
};
struct alignas(16) uint4 {
    unsigned x, y, z, w;
};
inline float2 make_float2(float x, float y) { return {x, y}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
inline double2 make_double2(double x, double y) { return {x, y}; }
