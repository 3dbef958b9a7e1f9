"""Running-clock probe: a chain of dependent integer adds, one per core cycle.

``addq %src, %dst`` (register operands) has a latency of exactly one cycle on every x86-64 core
since the P6, and each add depends on the previous one, so a chain of N adds takes N cycles whatever the out-of-order
engine does. GHz = adds / seconds. This is the clock the cores really run at (turbo included),
which is what a theoretical peak must use: the nominal/TSC clock understates it by up to 25%.
Run on every thread at once, a drop in the per-thread figure reveals a neighbour on the host
(steal time does not show it).
The chain is inline assembly, so LLVM cannot fold it into one add. The addend is a register, not
an immediate: Golden Cove and later Intel cores execute ``add $imm, %reg`` in the renamer at zero
latency (measured here: a "20 GHz" immediate chain).

Many short probes (``add_chain_probes``): each thread runs k chains of ~1 ms back to back and
times every one itself (clock_gettime(CLOCK_MONOTONIC) through the vDSO, ~20 ns, against 1 ms:
2e-5) and notes the CPU it ran on, so a neighbour that takes the core for part of the time spoils
some probes, not all, and the caller keeps the best (interference only ever slows a chain: the
fastest probe is the clock). 1 ms at 3.5 GHz = 35 000 blocks of 100 adds. Linux x86-64 only
(sched_getcpu); elsewhere ``PROBES_SUPPORTED`` is False.
"""

from __future__ import annotations

import platform
import sys

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.extending import intrinsic

import rooflab._numba_env  # noqa: F401

try:  # numba emits object code directly; inline asm needs the target's asm parser registered
    import llvmlite.binding as _llb

    _llb.initialize_native_asmparser()
except Exception:  # pragma: no cover
    pass

ADDS_PER_BLOCK = 100
SUPPORTED = platform.machine().lower() in ("x86_64", "amd64")
PROBES_SUPPORTED = SUPPORTED and sys.platform.startswith("linux")
CLOCK_MONOTONIC = 1  # Linux <time.h>


@intrinsic
def _add_chain(typingctx, x):
    sig = types.int64(types.int64)

    def codegen(context, builder, signature, args):
        i64 = ir.IntType(64)
        fnty = ir.FunctionType(i64, [i64, i64])
        asm = "\n".join(["addq $1, $0"] * ADDS_PER_BLOCK)
        one = ir.Constant(i64, 1)
        return builder.asm(fnty, asm, "=r,r,0", [one, args[0]], side_effect=True)

    return sig, codegen


@njit(cache=True)
def add_chain(blocks, x):
    """Returns x + ADDS_PER_BLOCK * blocks after that many dependent adds."""
    for _ in range(blocks):
        x = _add_chain(x)
    return x


@njit(parallel=True, cache=True)
def add_chain_threads(blocks, nthreads):
    out = np.empty(nthreads, dtype=np.int64)
    for t in prange(nthreads):
        out[t] = add_chain(blocks, np.int64(t))
    return out


@intrinsic
def _monotonic_ns(typingctx):
    """clock_gettime(CLOCK_MONOTONIC) in ns, callable from a parallel region (libc, resolved by
    name when the module is linked, so the function stays cacheable unlike a ctypes pointer)."""
    sig = types.int64()

    def codegen(context, builder, signature, args):
        i32, i64 = ir.IntType(32), ir.IntType(64)
        ts_t = ir.LiteralStructType([i64, i64])  # struct timespec {time_t tv_sec; long tv_nsec}
        fn = builder.module.globals.get("clock_gettime") or ir.Function(
            builder.module, ir.FunctionType(i32, [i32, ts_t.as_pointer()]), "clock_gettime"
        )
        ts = builder.alloca(ts_t)
        builder.call(fn, [ir.Constant(i32, CLOCK_MONOTONIC), ts])
        zero = ir.Constant(i32, 0)
        sec = builder.load(builder.gep(ts, [zero, zero]))
        nsec = builder.load(builder.gep(ts, [zero, ir.Constant(i32, 1)]))
        return builder.add(builder.mul(sec, ir.Constant(i64, 1_000_000_000)), nsec)

    return sig, codegen


@intrinsic
def _current_cpu(typingctx):
    """sched_getcpu(): the CPU this thread runs on now (-1 on error)."""
    sig = types.int64()

    def codegen(context, builder, signature, args):
        i32 = ir.IntType(32)
        fn = builder.module.globals.get("sched_getcpu") or ir.Function(
            builder.module, ir.FunctionType(i32, []), "sched_getcpu"
        )
        return builder.sext(builder.call(fn, []), ir.IntType(64))

    return sig, codegen


@njit(parallel=True, cache=True)
def add_chain_probes(blocks, probes, nthreads):
    """Each of ``nthreads`` threads runs ``probes`` chains of ``blocks`` x ADDS_PER_BLOCK dependent
    adds, back to back, timing each on its own thread.

    Returns (start_ns, end_ns, cpu_start, cpu_end), each [nthreads, probes] int64, and result
    [nthreads]: thread t's chain starts at t, so result[t] must be t + probes x blocks x 100 (the
    adds really ran). GHz of a probe = blocks x 100 / (end - start)."""
    start = np.empty((nthreads, probes), dtype=np.int64)
    end = np.empty((nthreads, probes), dtype=np.int64)
    cpu0 = np.empty((nthreads, probes), dtype=np.int64)
    cpu1 = np.empty((nthreads, probes), dtype=np.int64)
    result = np.empty(nthreads, dtype=np.int64)
    for t in prange(nthreads):
        x = np.int64(t)
        for p in range(probes):
            cpu0[t, p] = _current_cpu()
            start[t, p] = _monotonic_ns()
            x = add_chain(blocks, x)
            end[t, p] = _monotonic_ns()
            cpu1[t, p] = _current_cpu()
        result[t] = x
    return start, end, cpu0, cpu1, result
