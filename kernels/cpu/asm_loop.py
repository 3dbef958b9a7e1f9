"""One thread's throughput loop around an instruction given as inline assembly (the low-precision
dot peaks: kernels/cpu/int8.py, kernels/cpu/bf16.py).

``accumulate_loop(nbytes, acc, lanes, step, streams)`` returns a numba intrinsic
``loop(a, b, out, reps)``: it loads one ``nbytes`` input vector from ``a`` and ``streams`` from the
rows of ``b``, keeps ``streams`` accumulators of ``lanes`` x ``acc`` (i32 or float) in registers,
runs ``reps`` steps of ``step(builder, a, b_s, acc_s) -> acc_s`` on each, and stores them to ``out``
(streams x lanes). The step emits the instruction as inline assembly marked with a side effect, so
LLVM neither hoists a loop-invariant product nor rewrites the sequence into another instruction.

Napkin math: an instruction of latency L issued P per cycle needs L x P independent accumulators.
zmm (``ZMM_STREAMS`` = 12): an Intel server core issues 2 ``vpdpbusd`` per cycle at latency 5, so 10
in flight (measured on a Xeon VM at ~3.0 GHz: 6 accumulators ran 0.46 of its peak, 10: 0.79,
12: 0.90), and 12 accumulators + 12 weight vectors + 1 input fit the 32 zmm registers. AVX2's
accumulator chain is one ``vpaddd`` (latency 1; the multiplies of a step feed it, not each other):
``YMM_STREAMS`` = 6 accumulators + 6 temporaries + 3 inputs fit its 16 ymm registers.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

try:  # numba emits object code directly; inline asm needs the target's asm parser registered
    import llvmlite.binding as _llb

    _llb.initialize_native_asmparser()
except Exception:  # pragma: no cover
    pass

YMM_STREAMS = 6
ZMM_STREAMS = 12


def accumulate_loop(nbytes: int, acc: ir.Type, lanes: int, step, streams: int):
    vin = ir.VectorType(ir.IntType(8), nbytes)
    vacc = ir.VectorType(acc, lanes)
    i32 = ir.IntType(32)

    @intrinsic
    def loop(typingctx, a, b, out, reps):
        sig = types.void(a, b, out, reps)

        def codegen(context, builder, signature, args):
            at, bt, ot, rt = signature.args
            arrays = zip((at, bt, ot), args[:3])
            data = [context.make_array(t)(context, builder, v).data for t, v in arrays]

            def vec(ptr, offset, ty):  # ``offset`` in bytes, whatever the array's element type
                byte = builder.gep(builder.bitcast(ptr, ir.IntType(8).as_pointer()), [ir.Constant(i32, offset)])
                return builder.bitcast(byte, ty.as_pointer())

            va = builder.load(vec(data[0], 0, vin), align=1)
            vbs = [builder.load(vec(data[1], s * nbytes, vin), align=1) for s in range(streams)]
            accs = [cgutils.alloca_once_value(builder, ir.Constant(vacc, None)) for _ in range(streams)]
            with cgutils.for_range(builder, context.cast(builder, args[3], rt, types.intp)):
                for s in range(streams):
                    builder.store(step(builder, va, vbs[s], builder.load(accs[s])), accs[s])
            for s in range(streams):
                builder.store(
                    builder.load(accs[s]), vec(data[2], s * lanes * 4, vacc), align=4
                )  # 4-byte lanes (i32, float)
            return context.get_dummy_value()

        return sig, codegen

    return loop


def missing(required: set[str], what: str, features: str | None = None, arch: str | None = None) -> str | None:
    """None where numba's target (or ``features``: LLVM's '+avx2,...') on this host's (or ``arch``'s)
    CPU has every feature in ``required``, else why not: a kernel is never compiled for a target that
    lacks its instruction (LLVM's assembler would abort the process)."""
    import platform

    from . import simd

    arch = arch or platform.machine()
    if arch.lower() not in ("x86_64", "amd64"):
        return f"not an x86-64 CPU ({arch})"
    feats = set((simd._target_features() if features is None else features).split(","))
    return None if required <= feats else f"the CPU (or numba's target) has no {what}"


def asm_step(asm: str, constraints: str, result: ir.Type, operands):
    """A step from one asm template: ``operands(builder, a, b, acc) -> [values]`` in the order of
    ``constraints``; returns the asm's value (the new accumulator, or what ``combine`` adds)."""

    def step(builder, a, b, acc):
        vals = operands(builder, a, b, acc)
        fnty = ir.FunctionType(result, [v.type for v in vals])
        return builder.asm(fnty, asm, constraints, vals, side_effect=True)

    return step
