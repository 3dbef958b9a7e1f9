// Test-only: launch one GEMM kernel of kernels/cuda/gemm*.cu (compiled into the same executable
// with emu.h) on the CPU. Inputs come from files, the launch configuration from the command line
// (the test takes it from the Python launcher's plan), the result goes to a file.
//
//   harness KERNEL GRID BLOCK SMEM M N K ELEM_BYTES LATE PAD_A PAD_B PAD_C SMEM_OFFSET DIR
//
// A, B and C live right before a PROT_NONE page (PAD bytes of slack; 0 = the array ends exactly at
// the guard, so any read or write past its end faults) with another guard page in front; C starts
// filled with 0xFF bytes (NaN in every float type) so unwritten elements show. The dynamic shared
// memory ends at a guard page too, and starts SMEM_OFFSET bytes past a 1024-byte boundary.
// LATE: bit 0 = cp.async copies land late, bit 1 = wgmma runs late (emu.h).
// Exit status 0: C.bin written. A fault or an emulation error kills the process (the test says so).
#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "emu.h"

typedef void (*Kernel)(const void*, const void*, void*, int, int, int);

static size_t page() { return (size_t)sysconf(_SC_PAGESIZE); }

// `bytes` of memory whose end is `pad` bytes before a PROT_NONE page, with one more in front.
static unsigned char* guarded(size_t bytes, size_t pad, size_t align = 16) {
    const size_t pg = page();
    const size_t body = ((bytes + pad + align + pg - 1) / pg) * pg;
    unsigned char* base = (unsigned char*)mmap(nullptr, body + 2 * pg, PROT_READ | PROT_WRITE,
                                               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) {
        perror("mmap");
        exit(3);
    }
    mprotect(base, pg, PROT_NONE);
    mprotect(base + pg + body, pg, PROT_NONE);
    return base + pg + body - pad - bytes;
}

static void read_file(const std::string& path, void* dst, size_t n) {
    FILE* f = fopen(path.c_str(), "rb");
    if (!f || fread(dst, 1, n, f) != n) {
        fprintf(stderr, "cannot read %s\n", path.c_str());
        exit(3);
    }
    fclose(f);
}

struct Args {
    Kernel fn;
    const void *a, *b;
    void* c;
    int m, n, k;
};
static Args g_args;
static void (*g_entry)() = nullptr;  // --peak: the generated entry that launches a peak kernel
extern "C" {
float* emu_peak_out = nullptr;  // the peak kernel's output (--peak)
}

#ifdef EMU_FAST_SWITCH
// void emu_switch(void** save_sp, void* load_sp): push the callee-saved registers, save the stack
// pointer, load the other one, pop its registers and return into it (System V x86-64).
asm(R"(
    .text
    .globl emu_switch
    .type emu_switch, @function
emu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size emu_switch, .-emu_switch
)");
#endif

static void fiber_main() {
    if (g_entry)
        g_entry();
    else
        g_args.fn(g_args.a, g_args.b, g_args.c, g_args.m, g_args.n, g_args.k);
    emu::thread_end();
    emu::me().done = true;
    emu::to_scheduler();  // never resumed
    abort();
}

// A fresh fiber's stack: the first switch into it "returns" into fiber_main, entered with the
// stack aligned as after a call (rsp % 16 == 8).
static void start_fiber(emu::Fiber& f) {
#ifdef EMU_FAST_SWITCH
    uintptr_t top = ((uintptr_t)f.stack + emu::STACK_BYTES) & ~(uintptr_t)15;
    void** sp = (void**)top;
    *--sp = nullptr;                     // fiber_main's return address (it never returns)
    *--sp = (void*)&fiber_main;          // where emu_switch's ret goes
    for (int i = 0; i < 6; ++i) *--sp = nullptr;  // rbp rbx r12 r13 r14 r15
    f.sp = sp;
#else
    getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp = f.stack;
    f.ctx.uc_stack.ss_size = emu::STACK_BYTES;
    f.ctx.uc_link = nullptr;
    makecontext(&f.ctx, fiber_main, 0);
#endif
}

static void enter(emu::Fiber& f) {
#ifdef EMU_FAST_SWITCH
    emu::emu_switch(&emu::L->scheduler_sp, f.sp);
#else
    swapcontext(&emu::L->scheduler, &f.ctx);
#endif
}

// One block: every thread a fiber; run each in turn until it waits or ends, until all have ended.
static void run_block(int block) {
    emu::Launch& L = *emu::L;
    for (int t = 0; t < block; ++t) {
        emu::Fiber& f = L.fibers[t];
        f = emu::Fiber();
        f.tid.x = t;
        f.stack = L.stacks[t].get();
        start_fiber(f);
    }
    L.block_arrived = 0;
    for (auto& w : L.warps) w.arrived = 0;
    for (;;) {
        bool ran = false, all_done = true;
        for (int t = 0; t < block; ++t) {
            emu::Fiber& f = L.fibers[t];
            if (f.done) continue;
            all_done = false;
            if (f.waiting) continue;
            L.current = t;
            emu::current_thread_idx = &f.tid;
            enter(f);
            ran = true;
        }
        if (all_done) return;
        if (!ran) {
            fprintf(stderr, "emulation error: deadlock: every live thread waits at a barrier (block %u)\n", blockIdx.x);
            exit(4);
        }
    }
}

// harness --peak ENTRY GRID BLOCK SMEM OUT: the tensor-core peak kernels (kernels/cuda/tensor.cu,
// wgmma.cu), launched by a generated entry function (their own signatures), out = grid x block floats.
static int peak_main(char** argv) {
    g_entry = (void (*)())dlsym(RTLD_DEFAULT, argv[2]);
    if (!g_entry) {
        fprintf(stderr, "no entry %s in this build\n", argv[2]);
        return 2;
    }
    const int grid = atoi(argv[3]), block = atoi(argv[4]);
    const size_t smem = strtoull(argv[5], nullptr, 10), n = (size_t)grid * block * 4;
    emu_peak_out = (float*)guarded(n, 0);
    memset(emu_peak_out, 0xFF, n);
    emu::Launch launch;
    emu::L = &launch;
    if (smem) {
        const size_t S = ((smem + 1023) / 1024) * 1024;
        launch.smem_base = guarded(S, 0, 1024);
        launch.smem_bytes = S;
        launch.dynamic = launch.smem_base;
    }
    blockDim.x = block;
    gridDim.x = grid;
    launch.fibers.resize(block);
    for (int t = 0; t < block; ++t) launch.stacks.emplace_back(new unsigned char[emu::STACK_BYTES]);
    launch.warps.resize(block / 32);
    for (int b = 0; b < grid; ++b) {
        blockIdx.x = b;
        run_block(block);
    }
    FILE* f = fopen(argv[6], "wb");
    if (!f || fwrite(emu_peak_out, 1, n, f) != n) return 3;
    fclose(f);
    return 0;
}

int main(int argc, char** argv) {
    if (argc == 7 && std::string(argv[1]) == "--peak") return peak_main(argv);
    if (argc != 15) {
        fprintf(stderr, "usage: harness KERNEL GRID BLOCK SMEM M N K ELEM_BYTES LATE PAD_A PAD_B PAD_C SMEM_OFFSET DIR\n");
        return 2;
    }
    const char* name = argv[1];
    const int grid = atoi(argv[2]), block = atoi(argv[3]);
    const size_t smem = strtoull(argv[4], nullptr, 10);
    const int M = atoi(argv[5]), N = atoi(argv[6]), K = atoi(argv[7]);
    const size_t es = strtoull(argv[8], nullptr, 10);
    const int late = atoi(argv[9]);
    const size_t pad_a = strtoull(argv[10], nullptr, 10), pad_b = strtoull(argv[11], nullptr, 10),
                 pad_c = strtoull(argv[12], nullptr, 10), smem_offset = strtoull(argv[13], nullptr, 10);
    const std::string dir = argv[14];

    Kernel fn = (Kernel)dlsym(RTLD_DEFAULT, name);
    if (!fn) {
        fprintf(stderr, "no kernel %s in this build\n", name);
        return 2;
    }
    if (block % 32 || block > 1024) {
        fprintf(stderr, "block of %d threads\n", block);
        return 2;
    }
    const size_t na = (size_t)M * K * es, nb = (size_t)K * N * es, nc = (size_t)M * N * es;
    unsigned char* A = guarded(na, pad_a);
    unsigned char* B = guarded(nb, pad_b);
    unsigned char* C = guarded(nc, pad_c);
    read_file(dir + "/A.bin", A, na);
    read_file(dir + "/B.bin", B, nb);
    memset(C, 0xFF, nc);

    emu::Launch launch;
    emu::L = &launch;
    launch.cp_late = late & 1;
    launch.wg_late = (late & 2) != 0;
    if (smem) {  // [base, base + S) ends at a guard page; base is shared address 0, 1024-aligned
        const size_t S = ((smem + smem_offset + 1023) / 1024) * 1024;
        unsigned char* base = guarded(S, 0, 1024);
        if ((uintptr_t)base % 1024) {
            fprintf(stderr, "arena not 1024-aligned\n");
            return 3;
        }
        launch.smem_base = base;
        launch.smem_bytes = S;
        launch.dynamic = base + smem_offset;
    }
    blockDim.x = block;
    gridDim.x = grid;
    launch.fibers.resize(block);
    for (int t = 0; t < block; ++t) launch.stacks.emplace_back(new unsigned char[emu::STACK_BYTES]);
    launch.warps.resize(block / 32);
    g_args = Args{fn, A, B, C, M, N, K};
    for (int b = 0; b < grid; ++b) {
        blockIdx.x = b;
        run_block(block);
    }

    FILE* f = fopen((dir + "/C.bin").c_str(), "wb");
    if (!f || fwrite(C, 1, nc, f) != nc) return 3;
    fclose(f);
    return 0;
}
