// Test-only: run rooflab's GEMM kernels (kernels/cuda/gemm*.cu) on the CPU, so that their index
// math, edge guards, shared-memory layouts, swizzles, pipelines and fragment layouts are checked
// on every commit without a GPU. Included by kernels/cuda/gemm_common.cuh in place of its inline
// PTX when the test compiles a kernel with g++ -DROOFLAB_CPU_EMULATION="<path of this file>".
//
// Model: every CUDA thread of a block is a fiber (ucontext) on one OS thread, and a fiber runs
// until it has to wait at a barrier (__syncthreads, or the warp barrier of a warp-collective
// instruction): the blocks of the grid run one after another, the threads of a block as far ahead
// of each other as the barriers allow, so a missing barrier shows up as wrong data, every time.
// __shared__ is a function-local static. Warp-collective instructions (ldmatrix, mma.sync) exchange
// their operands through a per-warp scratch area between two warp barriers and compute exactly what
// the PTX ISA specifies each lane receives. wgmma is computed per thread (its accumulator
// fragment), reading A and B from the emulated shared memory by decoding the matrix descriptors
// (128-byte swizzle, K-major and MN-major canonical layouts, the XOR applied to the address).
//
// Asynchrony: cp.async copies land, and wgmma reads its operands, either when issued (early) or
// only when a wait_group retires their group (late), chosen separately. A kernel that reads shared
// memory before waiting for its copies fails with late copies; one that refills a buffer the tensor
// cores may still be reading fails with late wgmma and early copies. Ops still pending when a
// thread ends, misaligned cp.async / ldmatrix addresses, descriptors outside shared memory or of
// another layout, and deadlocked barriers abort the run.
// Not modelled: memory ordering beyond that (fences are no-ops), bank conflicts, timing.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <ucontext.h>
#include <vector>

#include "cuda_types.h"  // qualifiers, vector types (shared with tests/cuda_emu.h)

#define __CUDA_ARCH_FEAT_SM90_ALL 1  // the real wgmma kernel, not the stub

struct dim3 {
    unsigned x = 0, y = 0, z = 0;
};

inline dim3 blockIdx, blockDim, gridDim;
namespace emu {
inline dim3* current_thread_idx = nullptr;  // the running fiber's threadIdx
}
#define threadIdx (*emu::current_thread_idx)

namespace emu {

[[noreturn]] inline void fail(const char* what) {
    std::fprintf(stderr, "emulation error: %s (block %u, thread %u)\n", what, blockIdx.x, threadIdx.x);
    std::fflush(stderr);
    std::abort();
}

struct Warp {
    const unsigned char* ptr[32];
    unsigned regs[32][6];
    int arrived = 0;
};

struct CpOp {
    unsigned char* dst;
    const unsigned char* src;
    bool valid;
};
struct WgOp {
    float* d;
    uint64_t da, db;
    bool bf16;
};

// Switching between fibers: on x86-64 a 7-instruction switch of the callee-saved registers and the
// stack pointer (emu_switch, defined in harness.cpp); elsewhere ucontext (slower: a system call
// per switch for the signal mask).
#if defined(__x86_64__)
#define EMU_FAST_SWITCH 1
extern "C" void emu_switch(void** save_sp, void* load_sp);
#endif

constexpr size_t STACK_BYTES = 256 << 10;

struct Fiber {
    ucontext_t ctx;
    void* sp = nullptr;
    dim3 tid;
    bool done = false;
    int waiting = 0;  // 0 runnable, 1 at __syncthreads, 2 at its warp's barrier
    unsigned char* stack = nullptr;  // STACK_BYTES, owned by the launch
    std::vector<CpOp> cp_open;
    std::deque<std::vector<CpOp>> cp_groups;
    std::vector<WgOp> wg_open;
    std::deque<std::vector<WgOp>> wg_groups;
};

struct Launch {
    bool cp_late = false;  // cp.async copies land at the wait_group that retires them (else at issue)
    bool wg_late = false;  // wgmma computes at the wait_group that retires it (else at issue)
    unsigned char* smem_base = nullptr;  // shared address 0 (1024-byte aligned)
    unsigned char* dynamic = nullptr;    // what `extern __shared__` points at
    size_t smem_bytes = 0;
    std::vector<Fiber> fibers;
    std::vector<std::unique_ptr<unsigned char[]>> stacks;  // one per thread, reused by every block
    std::vector<Warp> warps;
    int current = -1;
    int block_arrived = 0;
    ucontext_t scheduler;
    void* scheduler_sp = nullptr;
};
inline Launch* L = nullptr;

inline Fiber& me() { return L->fibers[L->current]; }

inline void to_scheduler() {
#ifdef EMU_FAST_SWITCH
    emu_switch(&me().sp, L->scheduler_sp);
#else
    swapcontext(&me().ctx, &L->scheduler);
#endif
}

// Wait at a barrier of `kind` with `count` participants; the last to arrive releases the others.
inline void barrier(int kind, int& arrived, int count, int first, int step) {
    if (++arrived == count) {
        arrived = 0;
        for (int i = first; i < first + count * step; i += step)
            if (L->fibers[i].waiting == kind) L->fibers[i].waiting = 0;
        return;
    }
    me().waiting = kind;
    to_scheduler();  // back here once released
}
inline void warp_barrier() {
    const int w = threadIdx.x / 32;
    barrier(2, L->warps[w].arrived, 32, w * 32, 1);
}

inline Warp& warp() { return L->warps.at(threadIdx.x / 32); }
inline unsigned lane() { return threadIdx.x % 32; }

inline float half_to_float(uint16_t h, bool bf16) {
    if (bf16) {
        uint32_t u = uint32_t(h) << 16;
        float f;
        std::memcpy(&f, &u, 4);
        return f;
    }
    _Float16 x;
    std::memcpy(&x, &h, 2);
    return float(x);
}
inline uint16_t float_to_half(float f, bool bf16) {
    if (bf16) {
        uint32_t u;
        std::memcpy(&u, &f, 4);
        if (std::isnan(f)) return 0x7FC0;
        u += 0x7FFFu + ((u >> 16) & 1u);  // round to nearest even
        return uint16_t(u >> 16);
    }
    _Float16 x = (_Float16)f;  // IEEE round to nearest even
    uint16_t h;
    std::memcpy(&h, &x, 2);
    return h;
}

inline void run_cp(const CpOp& op) {
    if (op.valid)
        std::memcpy(op.dst, op.src, 16);
    else
        std::memset(op.dst, 0, 16);
}

// Element (row, col) of a 16-bit operand described by a wgmma descriptor, 128-byte swizzle.
// K-major (A, and B without transpose): ((8,m),(8,2)) in 16-byte units, strides ((8, SBO), (1, 1)):
//   byte = start + (row % 8) * 128 + (row / 8) * SBO + col * 2      (row = m or n, col = k < 16)
// MN-major (imm-trans = 1): ((8,n),(8,k)) strides ((1, LBO), (8, SBO)):
//   byte = start + (mn % 64) * 2 + (mn / 64) * LBO + (k % 8) * 128 + (k / 8) * SBO
// then the swizzle: bits 4-6 of the shared address ^= bits 7-9.
inline uint16_t desc_elem(uint64_t desc, bool mn_major, int mn, int k) {
    const unsigned start = unsigned(desc & 0x3FFF) << 4;
    const unsigned lbo = unsigned((desc >> 16) & 0x3FFF) << 4;
    const unsigned sbo = unsigned((desc >> 32) & 0x3FFF) << 4;
    if ((desc >> 62) != 1) fail("descriptor layout is not the 128-byte swizzle");
    if ((desc >> 49) & 7) fail("descriptor base offset is not 0");
    unsigned addr;
    if (!mn_major)
        addr = start + (mn % 8) * 128 + (mn / 8) * sbo + k * 2;
    else
        addr = start + (mn % 64) * 2 + (mn / 64) * lbo + (k % 8) * 128 + (k / 8) * sbo;
    addr ^= ((addr >> 7) & 7) << 4;
    if (addr + 2 > L->smem_bytes) fail("wgmma operand outside shared memory");
    uint16_t v;
    std::memcpy(&v, L->smem_base + addr, 2);
    return v;
}

// One m64n128k16 (A K-major, B N-major): this thread's 64 accumulators.
inline void run_wg(const WgOp& op) {
    const int t = threadIdx.x % 128, w = t / 32, l = t % 32;
    for (int i = 0; i < 64; ++i) {
        const int row = 16 * w + l / 4 + 8 * ((i / 2) % 2);
        const int col = 8 * (i / 4) + 2 * (l % 4) + i % 2;
        float s = 0.f;
        for (int k = 0; k < 16; ++k)
            s += half_to_float(desc_elem(op.da, false, row, k), op.bf16) *
                 half_to_float(desc_elem(op.db, true, col, k), op.bf16);
        op.d[i] += s;
    }
}

// The tensor-core peak kernel's wgmma (kernels/cuda/wgmma.cu): m64n256k16, A and B K-major without
// swizzle (8-row x 16-byte core matrices; LBO = the next core matrix along K, SBO = the next 8-row
// group), computed at issue. The accumulator map is the m64nNk16 one of run_wg with N = 256.
inline uint16_t desc_elem_interleave(uint64_t desc, int mn, int k) {
    const unsigned start = unsigned(desc & 0x3FFF) << 4;
    const unsigned lbo = unsigned((desc >> 16) & 0x3FFF) << 4;
    const unsigned sbo = unsigned((desc >> 32) & 0x3FFF) << 4;
    if ((desc >> 62) != 0) fail("descriptor layout is not the no-swizzle interleave");
    const unsigned addr = start + (mn % 8) * 16 + (mn / 8) * sbo + (k / 8) * lbo + (k % 8) * 2;
    if (addr + 2 > L->smem_bytes) fail("wgmma operand outside shared memory");
    uint16_t v;
    std::memcpy(&v, L->smem_base + addr, 2);
    return v;
}

inline void wgmma_m64n256k16_interleave(float* d, uint64_t da, uint64_t db, bool bf16) {
    const int t = threadIdx.x % 128, w = t / 32, l = t % 32;
    for (int i = 0; i < 128; ++i) {
        const int row = 16 * w + l / 4 + 8 * ((i / 2) % 2);
        const int col = 8 * (i / 4) + 2 * (l % 4) + i % 2;
        float s = 0.f;
        for (int k = 0; k < 16; ++k)
            s += half_to_float(desc_elem_interleave(da, row, k), bf16) * half_to_float(desc_elem_interleave(db, col, k), bf16);
        d[i] += s;
    }
}

inline void thread_end() {
    Fiber& f = me();
    for (auto& g : f.cp_groups)
        if (!g.empty()) fail("cp.async copies still pending when the thread ended");
    if (!f.cp_open.empty()) fail("uncommitted cp.async copies when the thread ended");
    for (auto& g : f.wg_groups)
        if (!g.empty()) fail("wgmma still pending when the thread ended");
    if (!f.wg_open.empty()) fail("uncommitted wgmma when the thread ended");
}

}  // namespace emu

inline void __syncthreads() { emu::barrier(1, emu::L->block_arrived, (int)blockDim.x, 0, 1); }

#define GEMM_DYNAMIC_SMEM(name) \
    unsigned char* name = (unsigned char*)(((unsigned long long)emu::L->dynamic + 1023ull) & ~1023ull)

inline unsigned smem_u32(const void* p) {
    const unsigned char* c = static_cast<const unsigned char*>(p);
    if (c < emu::L->smem_base || c >= emu::L->smem_base + emu::L->smem_bytes)
        emu::fail("smem_u32 of an address outside the dynamic shared memory");
    return unsigned(c - emu::L->smem_base);
}

inline void cp_async16(void* smem, const void* gmem, bool valid) {
    if (((uintptr_t)smem & 15) || (valid && ((uintptr_t)gmem & 15))) emu::fail("cp.async address not 16-byte aligned");
    emu::CpOp op{static_cast<unsigned char*>(smem), static_cast<const unsigned char*>(gmem), valid};
    if (emu::L->cp_late)
        emu::me().cp_open.push_back(op);
    else
        emu::run_cp(op);
}
inline void cp_async_commit() {
    emu::Fiber& f = emu::me();
    f.cp_groups.push_back(std::move(f.cp_open));
    f.cp_open.clear();
}
template <int N>
inline void cp_async_wait() {
    emu::Fiber& f = emu::me();
    while ((int)f.cp_groups.size() > N) {
        for (auto& op : f.cp_groups.front()) emu::run_cp(op);
        f.cp_groups.pop_front();
    }
}

inline void ldmatrix_common(unsigned (&r)[4], const void* smem, bool trans) {
    emu::Warp& w = emu::warp();
    const unsigned l = emu::lane();
    if ((uintptr_t)smem & 15) emu::fail("ldmatrix row address not 16-byte aligned");
    w.ptr[l] = static_cast<const unsigned char*>(smem);
    emu::warp_barrier();
    for (int i = 0; i < 4; ++i) {
        if (!trans) {  // row l / 4 of matrix i, elements 2 (l % 4), +1
            std::memcpy(&r[i], w.ptr[8 * i + l / 4] + 4 * (l % 4), 4);
        } else {  // elements (row 2 (l % 4) + h, column l / 4) of matrix i
            uint16_t lo, hi;
            std::memcpy(&lo, w.ptr[8 * i + 2 * (l % 4)] + 2 * (l / 4), 2);
            std::memcpy(&hi, w.ptr[8 * i + 2 * (l % 4) + 1] + 2 * (l / 4), 2);
            r[i] = unsigned(lo) | (unsigned(hi) << 16);
        }
    }
    emu::warp_barrier();
}
inline void ldmatrix_x4(unsigned (&r)[4], const void* smem) { ldmatrix_common(r, smem, false); }
inline void ldmatrix_x4_trans(unsigned (&r)[4], const void* smem) { ldmatrix_common(r, smem, true); }

// mma.m16n8k16.row.col: A (16 x 16) a0: (g, 2t..2t+1) a1: (g+8, ..) a2: (g, 2t+8..) a3: (g+8, 2t+8..);
// B (16 x 8) b0: (k 2t..2t+1, n g) b1: (k 2t+8.., n g); C c0,c1: (g, 2t..2t+1) c2,c3: (g+8, ..),
// with g = lane / 4, t = lane % 4.
template <bool bf16>
inline void mma_16816(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    emu::Warp& w = emu::warp();
    const unsigned l = emu::lane();
    for (int i = 0; i < 4; ++i) w.regs[l][i] = a[i];
    w.regs[l][4] = b0;
    w.regs[l][5] = b1;
    emu::warp_barrier();
    for (int r = 0; r < 4; ++r) {
        const int row = l / 4 + 8 * (r / 2), col = 2 * (l % 4) + r % 2;
        float s = 0.f;
        for (int k = 0; k < 16; ++k) {
            const unsigned aw = w.regs[(row % 8) * 4 + (k % 8) / 2][(row / 8) + 2 * (k / 8)];
            const unsigned bw = w.regs[col * 4 + (k % 8) / 2][4 + k / 8];
            const uint16_t ah = uint16_t(aw >> (16 * (k % 2))), bh = uint16_t(bw >> (16 * (k % 2)));
            s += emu::half_to_float(ah, bf16) * emu::half_to_float(bh, bf16);
        }
        d[r] += s;
    }
    emu::warp_barrier();
}

template <bool bf16>
inline unsigned pack2(float lo, float hi) {
    return unsigned(emu::float_to_half(lo, bf16)) | (unsigned(emu::float_to_half(hi, bf16)) << 16);
}

inline void fence_proxy_async() {}
inline void wgmma_fence() {}
inline void wgmma_commit() {
    emu::Fiber& f = emu::me();
    f.wg_groups.push_back(std::move(f.wg_open));
    f.wg_open.clear();
}
template <int N>
inline void wgmma_wait() {
    emu::Fiber& f = emu::me();
    while ((int)f.wg_groups.size() > N) {
        for (auto& op : f.wg_groups.front()) emu::run_wg(op);
        f.wg_groups.pop_front();
    }
}
template <bool bf16>
inline void wgmma_m64n128k16(float (&d)[64], unsigned long long desc_a, unsigned long long desc_b) {
    emu::WgOp op{d, desc_a, desc_b, bf16};
    if (emu::L->wg_late)
        emu::me().wg_open.push_back(op);
    else
        emu::run_wg(op);
}
