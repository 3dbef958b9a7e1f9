// A CPU emulation of the CUDA execution model, just enough to run rooflab's kernels/cuda/*.cu on a
// machine without a GPU (tests/cuda_emu.py compiles a source with g++ against this header).
//
// Faithful where kernels go wrong: every CUDA thread is an OS thread, so __syncthreads is a real
// barrier over the block (threads that returned drop out, as on sm_70+), warp shuffles exchange
// values through a real 32-lane barrier (a full-mask shuffle with a lane missing is reported), and
// __shared__ memory is one buffer per block. Blocks run one after the other, on the same workers. Kernel parameters
// arrive as a void* array; emu_sig_<kernel> reports their sizes so the Python side can refuse a call
// whose argument types differ from the kernel's (the mistake cupy would pass on silently).
// Not emulated: timing, memory ordering between blocks, caches, anything asynchronous.
#pragma once
#include <atomic>
#include <barrier>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "cuda_emu/cuda_types.h"  // qualifiers, vector types (shared with the GEMM emulation)

struct uint3 {
    unsigned x, y, z;
};
struct dim3 {
    unsigned x = 1, y = 1, z = 1;
};

inline thread_local uint3 threadIdx, blockIdx;
inline dim3 blockDim, gridDim;

inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline float __expf(float x) { return std::exp(x); }
template <class T> inline T __ldg(const T* p) { return *p; }
template <class T> inline T __ldca(const T* p) { return *p; }
template <class T> inline T __ldcg(const T* p) { return *p; }
template <class T> inline T __ldcs(const T* p) { return *p; }
inline float __int_as_float(unsigned v) {
    float f;
    std::memcpy(&f, &v, 4);
    return f;
}
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline double __fma_rn(double a, double b, double c) { return std::fma(a, b, c); }
inline long long clock64() {
    return std::chrono::steady_clock::now().time_since_epoch().count();
}
inline unsigned long long emu_globaltimer() {
    return (unsigned long long)std::chrono::steady_clock::now().time_since_epoch().count();
}
inline unsigned atomicAdd(unsigned* p, unsigned v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
inline int atomicAdd(int* p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) {
    return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}

namespace emu {
struct Warp {
    std::unique_ptr<std::barrier<>> bar;
    unsigned long long slot[32];
    std::atomic<int> alive{0};
    int size = 0;
};
inline std::unique_ptr<std::barrier<>> block_bar;
inline std::vector<std::unique_ptr<Warp>> warps;
inline std::vector<unsigned char> smem;  // dynamic shared memory of the running block
inline std::atomic<int> errors{0};
inline char first_error[256] = {0};
inline thread_local int lane = 0, warp = 0;

inline void report(const char* what) {
    if (errors.fetch_add(1) == 0) std::snprintf(first_error, sizeof first_error, "%s", what);
}

template <class T>
inline T shuffle(T v, int src) {
    static_assert(sizeof(T) <= 8, "shuffle of a type wider than 8 bytes");
    Warp& w = *warps[warp];
    if (w.alive.load() != w.size || w.size != 32) report("full-mask warp shuffle with lanes missing (diverged/exited)");
    std::memcpy(&w.slot[lane], &v, sizeof(T));
    w.bar->arrive_and_wait();
    T r = v;
    if (src >= 0 && src < w.size) std::memcpy(&r, &w.slot[src], sizeof(T));
    w.bar->arrive_and_wait();
    return r;
}
}  // namespace emu

inline void* emu_dynamic_smem() { return emu::smem.data(); }
inline void __syncthreads() { emu::block_bar->arrive_and_wait(); }
inline void __syncwarp(unsigned = 0xffffffffu) { emu::warps[emu::warp]->bar->arrive_and_wait(); }
template <class T> inline T __shfl_xor_sync(unsigned mask, T v, int m, int = 32) {
    if (mask != 0xffffffffu) emu::report("partial shuffle mask");
    return emu::shuffle(v, emu::lane ^ m);
}
template <class T> inline T __shfl_down_sync(unsigned mask, T v, unsigned d, int = 32) {
    if (mask != 0xffffffffu) emu::report("partial shuffle mask");
    const int src = emu::lane + (int)d;
    return emu::shuffle(v, src < 32 ? src : emu::lane);
}
template <class T> inline T __shfl_sync(unsigned mask, T v, int src, int = 32) {
    if (mask != 0xffffffffu) emu::report("partial shuffle mask");
    return emu::shuffle(v, src & 31);
}

namespace emu {
template <class... A, std::size_t... I>
inline void call(void (*k)(A...), void** args, std::index_sequence<I...>) {
    k(*static_cast<std::remove_cv_t<std::remove_reference_t<A>>*>(args[I])...);
}

template <class... A>
inline int sig(void (*)(A...), long long* sizes) {  // parameter sizes, pointers as -8
    int i = 0;
    ((sizes[i++] = std::is_pointer_v<A> ? -(long long)sizeof(A) : (long long)sizeof(A)), ...);
    return (int)sizeof...(A);
}

template <class... A>
inline int launch(void (*k)(A...), const unsigned* d, unsigned long long shared, void** args) {
    errors = 0;
    first_error[0] = 0;
    gridDim = {d[0], d[1], d[2]};
    blockDim = {d[3], d[4], d[5]};
    const int n = (int)(d[3] * d[4] * d[5]);
    if (n < 1 || n > 1024 || d[1] > 65535 || d[2] > 65535 || d[0] < 1 || d[1] < 1 || d[2] < 1) {
        report("invalid launch configuration (block > 1024 threads or grid y/z > 65535 or empty)");
        return errors;
    }
    if (shared > 48 * 1024) {
        report("dynamic shared memory above 48 KiB without an opt-in");
        return errors;
    }
    // One worker thread per CUDA thread of a block, reused for every block: a phase barrier's
    // completion step (run once, while every worker waits) prepares the next block (fresh
    // __syncthreads and warp barriers, NaN-filled shared memory) and advances the block index.
    const unsigned long long blocks = (unsigned long long)d[0] * d[1] * d[2];
    unsigned long long next = 0;
    uint3 current{0, 0, 0};
    bool done = false;
    auto prepare = [&]() noexcept {
        if (next == blocks) {
            done = true;
            return;
        }
        current = {(unsigned)(next % d[0]), (unsigned)((next / d[0]) % d[1]), (unsigned)(next / ((unsigned long long)d[0] * d[1]))};
        ++next;
        smem.assign(shared + 16, 0xff);  // NaN-filled: reading unwritten shared memory shows
        block_bar = std::make_unique<std::barrier<>>(n);
        warps.clear();
        for (int w = 0; w * 32 < n; ++w) {
            auto wp = std::make_unique<Warp>();
            wp->size = min(32, n - 32 * w);
            wp->alive = wp->size;
            wp->bar = std::make_unique<std::barrier<>>(wp->size);
            warps.push_back(std::move(wp));
        }
    };
    std::barrier<decltype(prepare)> phase(n, prepare);
    std::vector<std::thread> threads;
    threads.reserve(n);
    for (int t = 0; t < n; ++t)
        threads.emplace_back([&, t] {
            threadIdx = {(unsigned)(t % d[3]), (unsigned)((t / d[3]) % d[4]), (unsigned)(t / (d[3] * d[4]))};
            lane = t % 32;
            warp = t / 32;
            for (;;) {
                phase.arrive_and_wait();
                if (done) return;
                blockIdx = current;
                call(k, args, std::index_sequence_for<A...>{});
                warps[warp]->alive--;
                warps[warp]->bar->arrive_and_drop();
                block_bar->arrive_and_drop();
            }
        });
    for (auto& th : threads) th.join();
    return errors;
}
}  // namespace emu

extern "C" const char* emu_first_error() { return emu::first_error; }
