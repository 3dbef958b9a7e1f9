"""BF16 dot-product peak: ``vdpbf16ps`` zmm (AVX-512 BF16), pairs of bf16 products summed into fp32.

One instruction: 32 bf16 x bf16 products, adjacent pairs added into the 16 fp32 lanes of the
accumulator = 64 FLOPs (a multiply and an add per product, as FLOPs count an FMA). Each thread runs
STREAMS accumulators (kernels/cpu/asm_loop.py) for ``reps`` steps.

Napkin math: one vdpbf16ps zmm per cycle (Zen 4, double-pumped on its two 256-bit pipes, as a
public benchmark, cpufp, reports: twice its FP32 FMA rate) = 64 FLOP/cycle, 236 GFLOP/s at 3.7
GHz; one per 2 cycles on a Sapphire Rapids class core (../shared/research/lowprec.md: the two FMA
ports are shared), 32 FLOP/cycle, half its FP32 rate.

Verified: the inputs are small integers (exact in bf16), so every accumulator is exactly reps x
its stream's dot while it stays below 2^24; checked against a float64 numpy reference of the
same bf16 values (a skipped step, a wrong stream or a dropped lane changes it).
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, prange

import rooflab._numba_env  # noqa: F401

from .asm_loop import ZMM_STREAMS as STREAMS
from .asm_loop import accumulate_loop, asm_step, missing

BYTES, LANES = 64, 16  # 32 bf16 per step and stream; 16 fp32 lanes per accumulator
INSTRUCTION = "vdpbf16ps zmm"
_I32x16, _F32x16 = ir.VectorType(ir.IntType(32), 16), ir.VectorType(ir.FloatType(), 16)

_step = asm_step(
    "vdpbf16ps $2, $1, $0", "=v,v,v,0", _F32x16,
    lambda bl, a, b, acc: [bl.bitcast(a, _I32x16), bl.bitcast(b, _I32x16), acc],
)  # fmt: skip
_loop = accumulate_loop(BYTES, ir.FloatType(), LANES, _step, STREAMS)


@njit(parallel=True, cache=True)
def dot_bf16(a, b, out, reps, nthreads):
    """out[t] = the STREAMS fp32 accumulators of thread t after ``reps`` vdpbf16ps steps (a, b: bf16
    bit patterns as uint16)."""
    for t in prange(nthreads):
        _loop(a, b[t], out[t], reps)


def available(features: str | None = None, arch: str | None = None) -> str | None:
    """None where vdpbf16ps zmm can run here, else why not (asm_loop.missing)."""
    return missing({"+avx512bf16", "+avx512f"}, "AVX-512 BF16", features, arch)


def to_bf16(x: np.ndarray) -> np.ndarray:
    """float32 values exact in bf16 (small integers here) -> their bf16 bit patterns (uint16)."""
    return (np.asarray(x, np.float32).view(np.uint32) >> 16).astype(np.uint16)


def from_bf16(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def reference(a: np.ndarray, b: np.ndarray, reps: int) -> np.ndarray:
    """float64 numpy reference of the same bf16 values: [threads, STREAMS, LANES] as float32."""
    prod = from_bf16(a).astype(np.float64)[None, None, :] * from_bf16(b).astype(np.float64)
    return ((prod[..., 0::2] + prod[..., 1::2]) * int(reps)).astype(np.float32)
