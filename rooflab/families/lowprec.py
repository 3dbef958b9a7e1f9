"""Family `lowprec`: the low-precision dot peaks, one variant per unit (rooflab/cpu/machine.py
LOWPREC_PER_CYCLE): INT8 u8 x s8 -> s32 on the AVX2 sequence (``int8-avx2``, kernels/cpu/int8.py)
and on vpdpbusd zmm (``int8-vnni``), BF16 pairs -> fp32 on vdpbf16ps zmm (``bf16-avx512``,
kernels/cpu/bf16.py).

A peak has no library variant 0: like the FMA peak it is the instruction's own rate, judged against
its theoretical rate per cycle at the clock the unit ran at. ``available()`` says which units this
CPU runs and why not the others: a kernel for a unit the target lacks is never compiled (LLVM's
assembler would abort the process).

Napkin math: 64 int8 ops per cycle (int8-avx2) at 3.7 GHz = 236 GOPS per core; the Work's
``flops`` are integer ops for INT8, so the record's "gflops" reads GOPS there.
"""

from __future__ import annotations

import numpy as np

from ..kernels.cpu import bf16 as B
from ..kernels.cpu import int8 as K
from ..registry import Variant, register
from ..threads import resolve_threads
from ..work import Work

UNITS = ("int8-avx2", "int8-vnni", "bf16-avx512")


def available(features: str | None = None, arch: str | None = None) -> dict[str, str | None]:
    """unit -> None where this CPU (or the one described by ``features``, ``arch``) runs it, else why not."""
    int8 = K.paths(features, arch)
    return {"int8-avx2": int8["avx2"], "int8-vnni": int8["vnni"], "bf16-avx512": B.available(features, arch)}


def _int8_inputs(path):
    def inputs(n=1, dtype=None, seed=0, **_):
        """n: threads. The activations, each thread's STREAMS weight vectors, the accumulators."""
        rng = np.random.default_rng(seed)
        nb = K.BYTES[path]
        a = rng.integers(0, 256, nb, dtype=np.uint8)
        b = rng.integers(-128, 128, (int(n), K.STREAMS, nb), dtype=np.int8)
        return a, b, np.zeros((int(n), K.STREAMS, K.LANES[path]), np.int32)

    return inputs


def _bf16_inputs(n=1, dtype=None, seed=0, **_):
    """Small integers (exact in bf16) as bf16 bit patterns; fp32 accumulators."""
    rng = np.random.default_rng(seed)
    a = B.to_bf16(rng.integers(-3, 4, B.BYTES // 2).astype(np.float32))
    b = B.to_bf16(rng.integers(-3, 4, (int(n), B.STREAMS, B.BYTES // 2)).astype(np.float32))
    return a, b, np.zeros((int(n), B.STREAMS, B.LANES), np.float32)


def _kernel(fn):
    def kernel(a, b, out, reps=1, threads=None):
        nthreads = resolve_threads(threads)
        if b.shape[0] != nthreads:
            raise ValueError(f"{b.shape[0]} weight rows for {nthreads} threads")
        fn(a, b, out, int(reps), nthreads)
        return out

    return kernel


def _work(a, b, out, reps=1, **_):
    """2 per product: a's elements x the weight rows x steps."""
    return Work(flops=2.0 * a.size * b.shape[0] * b.shape[1] * int(reps))


for _unit, _fn, _inputs, _ref in (
    ("int8-avx2", K.dot_avx2, _int8_inputs("avx2"), lambda a, b, out, reps=1, **_: K.reference("avx2", a, b, reps)),
    ("int8-vnni", K.dot_vnni, _int8_inputs("vnni"), lambda a, b, out, reps=1, **_: K.reference("vnni", a, b, reps)),
    ("bf16-avx512", B.dot_bf16, _bf16_inputs, lambda a, b, out, reps=1, **_: B.reference(a, b, reps)),
):
    register(
        Variant(
            name=f"cpu.lowprec.{_unit}",
            family="lowprec",
            device="cpu",
            description=f"{_unit} dot products, {K.STREAMS} accumulators per thread",
            kernel=_kernel(_fn),
            reference=_ref,
            work=_work,
            inputs=_inputs,
        )
    )
