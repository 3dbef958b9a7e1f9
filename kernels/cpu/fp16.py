"""FP16 FMA peak: ``vfmadd231ph`` zmm (AVX-512 FP16), 32 half-precision FMAs per instruction.

One instruction: 32 fp16 lanes x (multiply + add) = 64 FLOP, accumulated in fp16. Each thread runs
``STREAMS`` accumulators (kernels/cpu/asm_loop.py, the zmm count) for ``reps`` steps; the
accumulators are carried as 512-bit registers (the asm sees a zmm; numba has no float16 model, so
the data are uint16 bit patterns and the results are read back as float16).

Napkin math: a Sapphire Rapids class core runs it on both FMA ports like FP32 (2 per cycle, 4-cycle
latency: 8 in flight, 12 accumulators): 128 FLOP per cycle per core, twice its FP32 FMA rate
(../shared/research/lowprec.md: 128 measured on one of these VMs).

Verified: the inputs are small integers (exact in fp16) and each accumulator is reps x a x b, exact
while below 2048 (checked at a few reps against numpy's float16): a skipped step, a wrong stream or
a dropped lane changes it. The timed calls overflow to inf, which costs a core nothing more.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, prange

import rooflab._numba_env  # noqa: F401

from .asm_loop import ZMM_STREAMS as STREAMS
from .asm_loop import accumulate_loop, asm_step, missing

BYTES, HALVES = 64, 32  # one zmm: 32 fp16 lanes
INSTRUCTION = "vfmadd231ph zmm"
_F32x16 = ir.VectorType(ir.FloatType(), 16)  # the register's 512 bits, as numba can carry them

_step = asm_step(
    "vfmadd231ph $2, $1, $0", "=v,v,v,0", _F32x16,
    lambda bl, a, b, acc: [bl.bitcast(a, _F32x16), bl.bitcast(b, _F32x16), acc],
)  # fmt: skip
_loop = accumulate_loop(BYTES, ir.FloatType(), 16, _step, STREAMS)


@njit(parallel=True, cache=True)
def fma_fp16(a, b, out, reps, nthreads):
    """out[t] = the STREAMS accumulators of thread t (32 fp16 each, as 16 float32 words) after
    ``reps`` steps acc += a * b[t, s] (a, b: fp16 bit patterns as uint16)."""
    for t in prange(nthreads):
        _loop(a, b[t], out[t], reps)


def available(features: str | None = None, arch: str | None = None) -> str | None:
    """None where vfmadd231ph zmm can run here, else why not (asm_loop.missing)."""
    return missing({"+avx512fp16", "+avx512f"}, "AVX-512 FP16", features, arch)


def results(out: np.ndarray) -> np.ndarray:
    """The accumulators as float16: [threads, STREAMS, 32]."""
    return np.ascontiguousarray(out).view(np.float16)


def reference(a: np.ndarray, b: np.ndarray, reps: int) -> np.ndarray:
    """reps x a x b per lane, in float16 (exact for the small integers used): [threads, STREAMS, 32]."""
    prod = a.view(np.float16).astype(np.float64)[None, None, :] * b.view(np.float16).astype(np.float64)
    return (prod * int(reps)).astype(np.float16)
