"""INT8 dot-product peak: u8 x s8 -> s32 multiply-accumulates on every core, the way MLAS runs them.

Two paths, each the real instruction sequence as inline assembly (so LLVM can neither hoist the
loop-invariant multiplies nor fuse them into another instruction: on a VNNI host it rewrites
``pmaddwd + add`` into ``vpdpwssd``):

  avx2  ``vpmaddubsw`` (32 u8 x s8 products, adjacent pairs summed to s16, saturating) +
        ``vpmaddwd`` by ones (pairs of s16 -> s32) + ``vpaddd`` into the accumulator: 32 MACs per
        ymm step, 2 vector-multiply uops. Every AVX2 CPU (onnxruntime's MLAS path without VNNI).
  vnni  ``vpdpbusd`` zmm (AVX-512 VNNI): 64 MACs per instruction, 4 u8 x s8 products summed into
        each s32 lane, no saturation. Where the CPU and numba's target have avx512vnni.

Each thread runs S independent accumulators (S streams of distinct weights, one activation vector)
for ``reps`` steps; ops = 2 per MAC (multiply + add), as FLOPs count an FMA.

Napkin math: a core with 2 vector-multiply pipes does one avx2 step per cycle: 32 MACs = 64 ops per
cycle, 230 GOPS at 3.6 GHz; 2 zmm vpdpbusd per cycle (Intel server cores) = 256 ops per cycle.
A call of 2^20 steps x 6 streams is ~2 ms.

Verified: every accumulator is reps x the dot of its stream's 32 (64) weights with the activations,
wrapped to int32 (tests and the driver check it against an int64 numpy reference with the
instruction's own saturation): a skipped step, a wrong stream or a dropped byte changes it.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic

import rooflab._numba_env  # noqa: F401
from rooflab.cpu.machine import INT8_INSTRUCTION

try:  # numba emits object code directly; inline asm needs the target's asm parser registered
    import llvmlite.binding as _llb

    _llb.initialize_native_asmparser()
except Exception:  # pragma: no cover
    pass

STREAMS = 6  # independent accumulators per thread: 6 x (acc, temp) + 3 inputs fit 16 ymm registers
BYTES = {"avx2": 32, "vnni": 64}  # activation bytes per step and stream
LANES = {"avx2": 8, "vnni": 16}  # int32 accumulator lanes per stream
INSTRUCTION = INT8_INSTRUCTION  # the instruction each path runs, as the machine table names it


def _loop(path: str):
    """An intrinsic running ``reps`` steps of the path on STREAMS accumulators of one thread:
    (a uint8[BYTES], b int8[STREAMS, BYTES], out int32[STREAMS, LANES], reps) -> None."""
    nb, lanes = BYTES[path], LANES[path]

    @intrinsic
    def loop(typingctx, a, b, out, reps):
        sig = types.void(a, b, out, reps)

        def codegen(context, builder, signature, args):
            av, bv, ov, rv = args
            at, bt, ot, _ = signature.args
            i8, i16, i32 = ir.IntType(8), ir.IntType(16), ir.IntType(32)
            vin = ir.VectorType(i8, nb)
            vacc = ir.VectorType(i32, lanes)
            data = [context.make_array(t)(context, builder, v).data for t, v in ((at, av), (bt, bv), (ot, ov))]
            va = builder.load(builder.bitcast(data[0], vin.as_pointer()), align=1)
            vbs = [
                builder.load(
                    builder.bitcast(builder.gep(data[1], [ir.Constant(i32, s * nb)]), vin.as_pointer()), align=1
                )
                for s in range(STREAMS)
            ]
            accs = [cgutils.alloca_once_value(builder, ir.Constant(vacc, None)) for _ in range(STREAMS)]
            if path == "avx2":
                ones = ir.Constant(ir.VectorType(i16, 16), [1] * 16)
                fnty = ir.FunctionType(vacc, [vin, vin, ir.VectorType(i16, 16)])
                asm = "vpmaddubsw $2, $1, $0\n\tvpmaddwd $3, $0, $0"
            else:
                fnty = ir.FunctionType(vacc, [vacc, vacc, vacc])
                asm = "vpdpbusd $2, $1, $0"
            with cgutils.for_range(builder, context.cast(builder, rv, signature.args[3], types.intp)):
                for s in range(STREAMS):
                    acc = builder.load(accs[s])
                    if path == "avx2":  # side effect: never hoisted out of the loop, inputs invariant
                        t = builder.asm(fnty, asm, "=&x,x,x,x", [va, vbs[s], ones], side_effect=True)
                        acc = builder.add(acc, t)
                    else:
                        a32, b32 = builder.bitcast(va, vacc), builder.bitcast(vbs[s], vacc)
                        acc = builder.asm(fnty, asm, "=v,v,v,0", [a32, b32, acc], side_effect=True)
                    builder.store(acc, accs[s])
            for s in range(STREAMS):
                dst = builder.gep(data[2], [ir.Constant(i32, s * lanes)])
                builder.store(builder.load(accs[s]), builder.bitcast(dst, vacc.as_pointer()), align=4)
            return context.get_dummy_value()

        return sig, codegen

    return loop


_avx2_loop = _loop("avx2")
_vnni_loop = _loop("vnni")


@njit(parallel=True, cache=True)
def dot_avx2(a, b, out, reps, nthreads):
    """out[t] = the STREAMS accumulators of thread t after ``reps`` avx2 steps."""
    for t in prange(nthreads):
        _avx2_loop(a, b[t], out[t], reps)


@njit(parallel=True, cache=True)
def dot_vnni(a, b, out, reps, nthreads):
    """out[t] = the STREAMS accumulators of thread t after ``reps`` vpdpbusd steps."""
    for t in prange(nthreads):
        _vnni_loop(a, b[t], out[t], reps)


def paths(features: str | None = None, arch: str | None = None) -> dict[str, str | None]:
    """Each path -> None where it can run here, else why not (the kernel is never compiled then: an
    instruction the target lacks aborts the process in LLVM's assembler). ``features`` (LLVM's
    '+avx2,...') and ``arch`` default to numba's target and this host's."""
    import platform

    from . import simd

    arch = arch or platform.machine()
    if arch.lower() not in ("x86_64", "amd64"):
        why = f"not an x86-64 CPU ({arch})"
        return {"avx2": why, "vnni": why}
    feats = set((simd._target_features() if features is None else features).split(","))
    return {
        "avx2": None if "+avx2" in feats else "the CPU (or numba's target) has no AVX2",
        "vnni": None
        if {"+avx512vnni", "+avx512f"} <= feats
        else "the CPU (or numba's target) has no AVX-512 VNNI (vpdpbusd zmm)",
    }


def reference(path: str, a: np.ndarray, b: np.ndarray, reps: int) -> np.ndarray:
    """int64 numpy reference, wrapped to int32: [threads, STREAMS, LANES]."""
    prod = a.astype(np.int64)[None, None, :] * b.astype(np.int64)  # [threads, STREAMS, BYTES]
    if path == "avx2":  # pairs summed to s16 with saturation, then pairs of s16 summed to s32
        pairs = np.clip(prod[..., 0::2] + prod[..., 1::2], -32768, 32767)
        step = pairs[..., 0::2] + pairs[..., 1::2]
    else:  # four products per lane, no saturation
        step = prod.reshape(*prod.shape[:-1], -1, 4).sum(axis=-1)
    total = step * int(reps)
    return ((total + 2**31) % 2**32 - 2**31).astype(np.int32)
