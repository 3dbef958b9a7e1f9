"""INT8 dot-product peak: u8 x s8 -> s32 multiply-accumulates on every core, the way MLAS runs them.

Two paths, each the real instruction sequence as inline assembly (so LLVM can neither hoist the
loop-invariant multiplies nor fuse them into another instruction: on a VNNI host it rewrites
``pmaddwd + add`` into ``vpdpwssd``):

  avx2  ``vpmaddubsw`` (32 u8 x s8 products, adjacent pairs summed to s16, saturating) +
        ``vpmaddwd`` by ones (pairs of s16 -> s32) + ``vpaddd`` into the accumulator: 32 MACs per
        ymm step, 2 vector-multiply uops. Every AVX2 CPU (onnxruntime's MLAS path without VNNI).
  vnni  ``vpdpbusd`` zmm (AVX-512 VNNI): 64 MACs per instruction, 4 u8 x s8 products summed into
        each s32 lane, no saturation. Where the CPU and numba's target have avx512vnni.

Each thread runs S independent accumulators (``STREAMS[path]`` streams of distinct weights, one activation vector)
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
from numba import njit, prange

import rooflab._numba_env  # noqa: F401
from rooflab.cpu.machine import LOWPREC_INSTRUCTION

from .asm_loop import YMM_STREAMS, ZMM_STREAMS, accumulate_loop, asm_step, missing

BYTES = {"avx2": 32, "vnni": 64}  # activation bytes per step and stream
LANES = {"avx2": 8, "vnni": 16}  # int32 accumulator lanes per stream
STREAMS = {"avx2": YMM_STREAMS, "vnni": ZMM_STREAMS}  # accumulators per thread (asm_loop: the napkin)
INSTRUCTION = {p: LOWPREC_INSTRUCTION[f"int8-{p}"] for p in BYTES}  # as the machine table names it
_I16x16 = ir.VectorType(ir.IntType(16), 16)
_I32x8, _I32x16 = ir.VectorType(ir.IntType(32), 8), ir.VectorType(ir.IntType(32), 16)


def _avx2_step(builder, a, b, acc):
    """acc += vpmaddwd(vpmaddubsw(a, b), ones): the products summed to s32 in the asm, added in IR."""
    madd = asm_step(
        "vpmaddubsw $2, $1, $0\n\tvpmaddwd $3, $0, $0", "=&x,x,x,x", _I32x8,
        lambda bl, a, b, acc: [a, b, ir.Constant(_I16x16, [1] * 16)],
    )  # fmt: skip
    return builder.add(acc, madd(builder, a, b, acc))


_vnni_step = asm_step(
    "vpdpbusd $2, $1, $0", "=v,v,v,0", _I32x16,
    lambda bl, a, b, acc: [bl.bitcast(a, _I32x16), bl.bitcast(b, _I32x16), acc],
)  # fmt: skip

_avx2_loop = accumulate_loop(BYTES["avx2"], ir.IntType(32), LANES["avx2"], _avx2_step, STREAMS["avx2"])
_vnni_loop = accumulate_loop(BYTES["vnni"], ir.IntType(32), LANES["vnni"], _vnni_step, STREAMS["vnni"])


@njit(parallel=True, cache=True)
def dot_avx2(a, b, out, reps, nthreads):
    """out[t] = the STREAMS["avx2"] accumulators of thread t after ``reps`` avx2 steps."""
    for t in prange(nthreads):
        _avx2_loop(a, b[t], out[t], reps)


@njit(parallel=True, cache=True)
def dot_vnni(a, b, out, reps, nthreads):
    """out[t] = the STREAMS["vnni"] accumulators of thread t after ``reps`` vpdpbusd steps."""
    for t in prange(nthreads):
        _vnni_loop(a, b[t], out[t], reps)


def paths(features: str | None = None, arch: str | None = None) -> dict[str, str | None]:
    """Each path -> None where it can run here, else why not (asm_loop.missing)."""
    return {
        "avx2": missing({"+avx2"}, "AVX2", features, arch),
        "vnni": missing({"+avx512vnni", "+avx512f"}, "AVX-512 VNNI (vpdpbusd zmm)", features, arch),
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
