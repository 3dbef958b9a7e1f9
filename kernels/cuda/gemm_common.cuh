// Shared pieces of the GEMM ladder (kernels/cuda/gemm*.cu): C = A x B, all three row-major and
// C-contiguous, A is M x K, B is K x N, C is M x N, every kernel with the same signature
//     (const T* A, const T* B, T* C, int M, int N, int K)
// and a 1-D grid of output tiles (the launcher in rooflab/families/gemm/cuda.py computes it).
// Every knob has an #ifndef default in its .cu file and can be set with -DNAME=value.
//
// FP16/BF16 values travel as their 16-bit patterns (unsigned short): NVRTC has no include path to
// cuda_fp16.h, and the tensor-core instructions only need the bits. Every inline-PTX instruction
// the ladder uses (cp.async, ldmatrix, mma.sync, wgmma, cvt to f16x2/bf16x2) lives in the small
// wrappers below, so that tests/cuda_emu/emu.h can give the same functions in plain C++ and run
// the kernels on the CPU (the test builds them with -DROOFLAB_CPU_EMULATION="<path of emu.h>").
#pragma once

typedef long long i64;
typedef unsigned short u16;

#define CEIL_DIV(a, b) (((a) + (b) - 1) / (b))

#if defined(ROOFLAB_CPU_EMULATION)
#include ROOFLAB_CPU_EMULATION  // test-only: the same functions in C++ (tests/cuda_emu/emu.h)
#else

__device__ __forceinline__ unsigned smem_u32(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }

// The dynamic shared memory of a block, aligned up to 1024 bytes (128-byte swizzle atoms repeat
// every 1024 bytes, and wgmma's descriptors assume atoms start on that boundary); launchers ask
// for 1 KiB more than the kernel uses. The offset is added to the __shared__ array itself (not to
// an integer copy of its address), so that the compiler still sees shared memory: LDS, not LD.
#define GEMM_DYNAMIC_SMEM(name)                                            \
    extern __shared__ __align__(16) unsigned char gemm_dynamic_smem_raw[]; \
    unsigned char* name = gemm_dynamic_smem_raw + ((1024u - (smem_u32(gemm_dynamic_smem_raw) & 1023u)) & 1023u)

// cp.async of 16 bytes, global -> shared, bypassing L1 (.cg); src_bytes = 0 writes 16 zero bytes
// and reads nothing (edge tiles).
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(smem)), "l"(gmem),
                 "r"(valid ? 16 : 0)
                 : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Four 8x8 b16 matrices from shared memory; lane l gives the address of row l % 8 of matrix l / 8.
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const void* smem) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_u32(smem)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], const void* smem) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_u32(smem)));
}

// d += a x b, one m16n8k16 per warp, FP32 accumulate; BF16 when bf16, else FP16.
template <bool bf16>
__device__ __forceinline__ void mma_16816(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    if (bf16)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                     "{%8, %9}, {%0, %1, %2, %3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    else
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                     "{%8, %9}, {%0, %1, %2, %3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two floats -> two FP16 / BF16 (round to nearest even) in one word, lo in the low half.
template <bool bf16>
__device__ __forceinline__ unsigned pack2(float lo, float hi) {
    unsigned r;
    if (bf16)
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    else
        asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

// wgmma (sm_90a): fences, groups, and m64n128k16 with A and B from shared memory (descriptors),
// B N-major (imm-trans-b = 1: B is read as row-major K x N, the layout of the global array).
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

#define WGMMA_64_ACC(d)                                                                                              \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),     \
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),      \
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),     \
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]),     \
        "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]),     \
        "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),     \
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),     \
        "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
#define WGMMA_64_REGS                                                                                              \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, " \
    "%23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, "   \
    "%44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"

template <bool bf16>
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], unsigned long long desc_a,
                                                 unsigned long long desc_b) {
    if (bf16)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " WGMMA_64_REGS
                     ", %64, %65, p, 1, 1, 0, 1;\n}\n"
                     : WGMMA_64_ACC(d)
                     : "l"(desc_a), "l"(desc_b));
    else
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " WGMMA_64_REGS
                     ", %64, %65, p, 1, 1, 0, 1;\n}\n"
                     : WGMMA_64_ACC(d)
                     : "l"(desc_a), "l"(desc_b));
}
#endif  // __CUDA_ARCH_FEAT_SM90_ALL
#endif  // ROOFLAB_CPU_EMULATION

// 16 bytes of T: float4 (4 floats) or double2 (2 doubles), for LDG.128 / LDS.128 / STG.128.
template <typename T>
struct Vec16;
template <>
struct Vec16<float> {
    typedef float4 type;
    static constexpr int N = 4;
};
template <>
struct Vec16<double> {
    typedef double2 type;
    static constexpr int N = 2;
};
__device__ __forceinline__ void vec_unpack(const float4& v, float* o) {
    o[0] = v.x;
    o[1] = v.y;
    o[2] = v.z;
    o[3] = v.w;
}
__device__ __forceinline__ void vec_unpack(const double2& v, double* o) {
    o[0] = v.x;
    o[1] = v.y;
}
__device__ __forceinline__ void vec_pack(const float* o, float4& v) { v = make_float4(o[0], o[1], o[2], o[3]); }
__device__ __forceinline__ void vec_pack(const double* o, double2& v) { v = make_double2(o[0], o[1]); }

// Eight 16-bit values as one 16-byte vector (element 0 at the lowest address).
__device__ __forceinline__ uint4 pack8(const u16 (&t)[8]) {
    uint4 v;
    v.x = t[0] | ((unsigned)t[1] << 16);
    v.y = t[2] | ((unsigned)t[3] << 16);
    v.z = t[4] | ((unsigned)t[5] << 16);
    v.w = t[6] | ((unsigned)t[7] << 16);
    return v;
}

// Whether a pointer is 16-byte aligned (the launcher's arrays are; a view into one may not be).
__device__ __forceinline__ bool aligned16(const void* p) { return ((unsigned long long)p & 15ull) == 0; }

// Output tile (tm, tn) of block b in a grid of tiles_m x tiles_n tiles, in groups of GROUP_M tile
// rows (Triton's grouped order): consecutive blocks share B panels and a few A panels in L2.
__device__ __forceinline__ void grouped_tile(int b, int tiles_m, int tiles_n, int group_m, int& tm, int& tn) {
    const int width = group_m * tiles_n;
    const int first_m = (b / width) * group_m;
    const int rows = min(tiles_m - first_m, group_m);
    tm = first_m + (b % width) % rows;
    tn = (b % width) / rows;
}


// Shared-memory matrix descriptor of wgmma (PTX ISA "Matrix Descriptor Format"): bits 0-13 start
// address >> 4, 16-29 leading-dimension byte offset >> 4, 32-45 stride-dimension byte offset >> 4,
// 62-63 layout (1 = 128-byte swizzle). See gemm09_wgmma.cu for the two layouts it describes.
__device__ __forceinline__ unsigned long long wgmma_desc(unsigned smem_addr, unsigned lbo, unsigned sbo) {
    return (unsigned long long)((smem_addr & 0x3FFFF) >> 4) | ((unsigned long long)((lbo & 0x3FFFF) >> 4) << 16) |
           ((unsigned long long)((sbo & 0x3FFFF) >> 4) << 32) | (1ull << 62);
}

// extern "C" kernels NAME_f32 and NAME_f64 (plain names: no name expressions needed) running the
// device template BODY<T> with the ladder's signature, at most THREADS threads per block.
#define GEMM_SIMT_KERNELS(NAME, BODY, THREADS)                                                                 \
    extern "C" __global__ void __launch_bounds__(THREADS)                                                      \
        NAME##_f32(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int M, int N, \
                   int K) {                                                                                    \
        BODY<float>(A, B, C, M, N, K);                                                                         \
    }                                                                                                          \
    extern "C" __global__ void __launch_bounds__(THREADS)                                                      \
        NAME##_f64(const double* __restrict__ A, const double* __restrict__ B, double* __restrict__ C, int M,  \
                   int N, int K) {                                                                             \
        BODY<double>(A, B, C, M, N, K);                                                                        \
    }

// The same for the tensor-core rungs: NAME_f16 and NAME_bf16 over 16-bit patterns, BODY<bool bf16>.
#define GEMM_TC_KERNELS(NAME, BODY, THREADS, MIN_BLOCKS)                                                        \
    extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)                                           \
        NAME##_f16(const u16* __restrict__ A, const u16* __restrict__ B, u16* __restrict__ C, int M, int N, int K) { \
        BODY<false>(A, B, C, M, N, K);                                                                          \
    }                                                                                                           \
    extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)                                           \
        NAME##_bf16(const u16* __restrict__ A, const u16* __restrict__ B, u16* __restrict__ C, int M, int N, int K) { \
        BODY<true>(A, B, C, M, N, K);                                                                           \
    }
