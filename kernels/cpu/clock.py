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
"""

from __future__ import annotations

import platform

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
