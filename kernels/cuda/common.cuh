// Shared definitions for rooflab's CUDA kernels. Every knob has a default here and can be
// overridden with -DNAME=value (nvcc or NVRTC options); no CUDA source is built from strings.
#pragma once

#ifndef BLOCK
#define BLOCK 256  // threads per block for the streaming kernels (a multiple of 32)
#endif

typedef long long i64;

// Block-wide sum of one double per thread; thread 0 gets the result. BLOCK must be a power of 2.
__device__ __forceinline__ double block_sum(double v) {
    __shared__ double part[BLOCK / 32];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = v;
    __syncthreads();
    v = (threadIdx.x < BLOCK / 32) ? part[threadIdx.x] : 0.0;
    if (threadIdx.x < 32)
        for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    return v;
}
