"""Family `int8`: the INT8 compute peak, u8 x s8 -> s32 dot products (kernels/cpu/int8.py).

Variants: ``cpu.int8.dot-avx2`` (vpmaddubsw + vpmaddwd + vpaddd, every AVX2 CPU) and
``cpu.int8.dot-vnni`` (vpdpbusd zmm, AVX-512 VNNI). A peak has no library variant 0: like the FMA
peak it is the instruction's own rate, judged against its theoretical ops per cycle at the clock
the unit ran at (rooflab/cpu/machine.py INT8_OPS_PER_CYCLE).

Napkin math: 64 int8 ops per cycle (avx2) at 3.7 GHz = 236 GOPS per core; the Work's ``flops`` are
integer ops here, so the record's "gflops" reads GOPS.
"""

from __future__ import annotations

import numpy as np

from ..kernels.cpu import int8 as K
from ..registry import Variant, register
from ..threads import resolve_threads
from ..work import Work


def _inputs(path):
    def inputs(n=1, dtype=None, seed=0, **_):
        """n: threads. The activations, each thread's STREAMS weight vectors, the accumulators."""
        rng = np.random.default_rng(seed)
        nb = K.BYTES[path]
        a = rng.integers(0, 256, nb, dtype=np.uint8)
        b = rng.integers(-128, 128, (int(n), K.STREAMS, nb), dtype=np.int8)
        return a, b, np.zeros((int(n), K.STREAMS, K.LANES[path]), np.int32)

    return inputs


def _kernel(path):
    fn = K.dot_avx2 if path == "avx2" else K.dot_vnni

    def kernel(a, b, out, reps=1, threads=None):
        nthreads = resolve_threads(threads)
        if b.shape[0] != nthreads:
            raise ValueError(f"{b.shape[0]} weight rows for {nthreads} threads")
        fn(a, b, out, int(reps), nthreads)
        return out

    return kernel


for _path in ("avx2", "vnni"):
    register(
        Variant(
            name=f"cpu.int8.dot-{_path}",
            family="int8",
            device="cpu",
            description=f"u8 x s8 -> s32 dot products, {K.INSTRUCTION[_path]}, {K.STREAMS} accumulators per thread",
            kernel=_kernel(_path),
            reference=lambda a, b, out, reps=1, _p=_path, **_: K.reference(_p, a, b, reps),
            work=lambda a, b, out, reps=1, **_: Work(flops=2.0 * a.size * b.shape[0] * b.shape[1] * int(reps)),
            inputs=_inputs(_path),
        )
    )
