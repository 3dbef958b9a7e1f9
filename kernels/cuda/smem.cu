// Shared-memory bandwidth: every block fills SMEM_FLOAT4 float4 values of shared memory, then each
// thread re-reads them `reps` times with a conflict-free pattern (consecutive threads, consecutive
// 16 B words) whose index depends on the repetition, so nothing can be hoisted into registers.
//
// Napkin math: 128 B per clock per SM; 132 SMs x 1.98 GHz x 128 B = 33 TB/s on an H200.
// Bytes per launch = blocks x BLOCK x reps x (SMEM_FLOAT4 / BLOCK) x 16.
// Check: word i holds small integers taken from bits of i ((i>>5)&3, i&1, (i>>1)&1, (i>>9)&1), so
// a thread's sum depends on which words it read and stays exact in float32 (< 2^24 for reps < 300k);
// rooflab/families/stream.py computes every thread's sum on the host.
#include "common.cuh"

#ifndef SMEM_FLOAT4
#define SMEM_FLOAT4 2048  // 32 KiB of shared memory per block
#endif

extern "C" __global__ void __launch_bounds__(BLOCK)
smem_read(float* __restrict__ out, int reps) {
    __shared__ float4 buf[SMEM_FLOAT4];
    for (int i = threadIdx.x; i < SMEM_FLOAT4; i += BLOCK) buf[i] = make_float4((float)((i >> 5) & 3), (float)(i & 1), (float)((i >> 1) & 1), (float)((i >> 9) & 1));
    __syncthreads();
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int r = 0; r < reps; ++r) {
        const int rot = (r * 32) & (SMEM_FLOAT4 - 1);
#pragma unroll 8
        for (int j = 0; j < SMEM_FLOAT4 / BLOCK; ++j) {
            float4 v = buf[(threadIdx.x + j * BLOCK + rot) & (SMEM_FLOAT4 - 1)];
            acc.x += v.x; acc.y += v.y; acc.z += v.z; acc.w += v.w;
        }
    }
    out[(i64)blockIdx.x * BLOCK + threadIdx.x] = acc.x + acc.y + acc.z + acc.w;
}
