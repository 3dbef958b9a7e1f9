// Shared definitions for rooflab's CUDA kernels. Every knob has a default here and can be
// overridden with -DNAME=value (nvcc or NVRTC options); no CUDA source is built from strings.
#pragma once

#ifndef BLOCK
#define BLOCK 256  // threads per block for the streaming kernels (a multiple of 32)
#endif

typedef long long i64;
typedef unsigned long long u64;

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

// The SM clock while a kernel runs, measured on the chip: thread 0 of each block reads its SM's
// cycle counter (clock64) and the global nanosecond timer (%globaltimer) when the block starts and
// when it ends, and stores (cycles, ns) at clk[2 * block]. The host divides the sums: cycles / ns
// = GHz. A 10 ms block at 1.98 GHz counts ~2e7 cycles, far above the timer's microsecond ticks.
__device__ __forceinline__ u64 global_ns() {
    u64 t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)::"memory");
    return t;
}

struct SmClock {
    i64 cycles0;
    u64 ns0;
    __device__ __forceinline__ void start(const u64* clk) {
        if (clk != nullptr && threadIdx.x == 0) {
            ns0 = global_ns();
            cycles0 = clock64();
        }
    }
    __device__ __forceinline__ void stop(u64* clk) {
        if (clk != nullptr && threadIdx.x == 0) {
            const i64 cycles1 = clock64();
            const u64 ns1 = global_ns();
            clk[2 * blockIdx.x] = (u64)(cycles1 - cycles0);
            clk[2 * blockIdx.x + 1] = ns1 - ns0;
        }
    }
};
