// GPU memory latency: one thread follows a chain of pointers, each load's address being the value
// the previous load returned, so no two loads overlap and time / hops is the latency of one load at
// the level the working set lives in (L1, L2, HBM; TLB misses included, as for any real access).
// Host side: rooflab/families/chase/cuda.py builds the chain: slots `stride` bytes apart (128 B =
// one L1/L2 line per hop), visited in a random cyclic order (one cycle through every slot, so the
// prefetchers and the coalescer see nothing regular) or in address order ("sequential").
//
//   chase_ca   ld.global.ca: cached in L1 and L2 (the default path of a load)
//   chase_cg   ld.global.cg: cached in L2 only (L2 latency even for working sets that fit in L1)
//
// The kernel walks `warm` hops first (so the set is in the caches it fits in: L1 does not survive
// from one launch to the next), then times `hops` hops on the chip with clock64 (SM cycles) and
// %globaltimer (ns); out = {final slot index, cycles, ns, hops}. The final index is checked on the host
// against the permutation (slot order[(warm + hops) % n]), so a kernel that skips or repeats hops
// fails verification.
// Napkin math: H100/H200 L1 hit ~30-40 cycles (~20 ns at 1.98 GHz), L2 ~200-270 cycles
// (~100-150 ns, the far partition slower), HBM ~500-700 ns; 10^5 HBM hops last ~60 ms.
// Build alone: nvcc -std=c++17 -arch=sm_90 -cubin kernels/cuda/chase.cu
#include "common.cuh"

#ifndef CHASE_UNROLL
#define CHASE_UNROLL 8  // hops per loop trip (the loop counter overlaps with the load latency anyway)
#endif

template <bool L2_ONLY>
__device__ __forceinline__ const u64* hop(const u64* p) {
    const unsigned long long* q = reinterpret_cast<const unsigned long long*>(p);
    return reinterpret_cast<const u64*>(L2_ONLY ? __ldcg(q) : __ldca(q));
}

template <bool L2_ONLY>
__device__ __forceinline__ void chase(const u64* start, i64 warm, i64 hops, u64 base, u64 stride, u64* out) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    const u64* p = start;
    for (i64 h = 0; h < warm; ++h) p = hop<L2_ONLY>(p);
    const u64 ns0 = global_ns();
    const i64 c0 = clock64();
    i64 h = 0;
    for (; h + CHASE_UNROLL <= hops; h += CHASE_UNROLL) {
#pragma unroll
        for (int u = 0; u < CHASE_UNROLL; ++u) p = hop<L2_ONLY>(p);
    }
    for (; h < hops; ++h) p = hop<L2_ONLY>(p);
    const i64 c1 = clock64();
    const u64 ns1 = global_ns();
    out[0] = (reinterpret_cast<u64>(p) - base) / stride;
    out[1] = (u64)(c1 - c0);
    out[2] = ns1 - ns0;
    out[3] = (u64)hops;
}

extern "C" __global__ void __launch_bounds__(32)
chase_ca(const u64* __restrict__ start, i64 warm, i64 hops, u64 base, u64 stride, u64* __restrict__ out) {
    chase<false>(start, warm, hops, base, stride, out);
}

extern "C" __global__ void __launch_bounds__(32)
chase_cg(const u64* __restrict__ start, i64 warm, i64 hops, u64 base, u64 stride, u64* __restrict__ out) {
    chase<true>(start, warm, hops, base, stride, out);
}
