"""Family `lowprec`: the low-precision dot peaks, one variant per unit (rooflab/cpu/machine.py
LOWPREC_PER_CYCLE): INT8 u8 x s8 -> s32 on the AVX2 sequence (``int8-avx2``, kernels/cpu/int8.py)
and on vpdpbusd zmm (``int8-vnni``), BF16 pairs -> fp32 on vdpbf16ps zmm (``bf16-avx512``,
kernels/cpu/bf16.py), FP16 FMAs on vfmadd231ph zmm (``fp16-avx512``, kernels/cpu/fp16.py), and the
AMX tile products tdpbf16ps (``amx-bf16``) and tdpbssd (``amx-int8``, kernels/cpu/amx.py), which
also need Linux's permission for the tile state (asked once per process; refused: skipped, said).

A peak has no library variant 0: like the FMA peak it is the instruction's own rate, judged against
its theoretical rate per cycle at the clock the unit ran at. ``available()`` says which units this
CPU runs and why not the others: a kernel for a unit the target lacks is never compiled (LLVM's
assembler would abort the process).

``w4-dequant-fma``: the 4-bit GEMV kernel of the qgemm family (kernels/cpu/qgemm_w.py) on weights
that stay in L2, so its rate is the widening + FMA work, not memory: the compute roof of a
weight-only 4-bit GEMM (the FP32 FMA peak is far above what those ops can reach).

Napkin math: 64 int8 ops per cycle (int8-avx2) at 3.7 GHz = 236 GOPS per core; the Work's
``flops`` are integer ops for INT8, so the record's "gflops" reads GOPS there.
"""

from __future__ import annotations

import numpy as np

from ..errors import RooflabError
from ..kernels.cpu import amx as X
from ..kernels.cpu import bf16 as B
from ..kernels.cpu import fp16 as H
from ..kernels.cpu import int8 as K
from ..kernels.cpu import qgemm_w as WQ
from ..registry import Variant, register
from ..threads import resolve_threads
from ..work import Work

UNITS = ("int8-avx2", "int8-vnni", "bf16-avx512", "fp16-avx512", "amx-bf16", "amx-int8", "w4-dequant-fma")
# each unit's compiled kernel (rooflab/compile_ahead.py checks numba's cache of these)
KERNELS = {
    "int8-avx2": K.dot_avx2, "int8-vnni": K.dot_vnni, "bf16-avx512": B.dot_bf16, "fp16-avx512": H.fma_fp16,
    "amx-bf16": X.tiles_bf16, "amx-int8": X.tiles_int8, "w4-dequant-fma": WQ.gemv_rows,
}  # fmt: skip
W4_ROWS, W4_K = 512, 1024  # per thread: 256 KiB of 4-bit codes + 64 KiB of scales, L2-resident


def available(features: str | None = None, arch: str | None = None) -> dict[str, str | None]:
    """unit -> None where this CPU (or the one described by ``features``, ``arch``) runs it, else why not."""
    int8 = K.paths(features, arch)
    return {
        "int8-avx2": int8["avx2"],
        "int8-vnni": int8["vnni"],
        "bf16-avx512": B.available(features, arch),
        "fp16-avx512": H.available(features, arch),
        "amx-bf16": X.available("bf16", features, arch),
        "amx-int8": X.available("int8", features, arch),
        "w4-dequant-fma": None,  # plain vector IR: every CPU
    }


def _w4_inputs(n=1, dtype=None, seed=0, **_):
    """A 4-bit weight of W4_ROWS rows per thread (qgemm's inputs), one activation row reordered."""
    from .qgemm import nbits_inputs

    A, P, S = nbits_inputs({"M": 1, "N": W4_ROWS * int(n), "K": W4_K, "bits": 4}, seed=seed)
    aq = np.empty_like(A)
    asum = np.empty((1, W4_K // WQ.BLOCK), np.float32)
    WQ.prepare_a(A, 4, aq, asum)
    return A, P, S, aq, asum, np.zeros((1, P.shape[0]), np.float32)


def _w4_kernel(A, P, S, aq, asum, Y, reps=1, threads=None):
    nthreads = resolve_threads(threads)
    if P.shape[0] != W4_ROWS * nthreads:
        raise ValueError(f"{P.shape[0]} weight rows for {nthreads} threads")
    WQ.gemv_rows(P.reshape(-1), S.reshape(-1), aq, asum, Y, 4, nthreads, int(reps))
    return Y


def _w4_reference(A, P, S, *_, **__):
    from .qgemm import nbits_reference

    return nbits_reference(A, P, S)


def _w4_work(A, P, S, *_, reps=1, **__):
    return Work(flops=2.0 * P.shape[0] * A.shape[1] * int(reps))


def _int8_inputs(path):
    def inputs(n=1, dtype=None, seed=0, **_):
        """n: threads. The activations, each thread's STREAMS weight vectors, the accumulators."""
        rng = np.random.default_rng(seed)
        nb = K.BYTES[path]
        a = rng.integers(0, 256, nb, dtype=np.uint8)
        b = rng.integers(-128, 128, (int(n), K.STREAMS[path], nb), dtype=np.int8)
        return a, b, np.zeros((int(n), K.STREAMS[path], K.LANES[path]), np.int32)

    return inputs


def _bf16_inputs(n=1, dtype=None, seed=0, **_):
    """Small integers (exact in bf16) as bf16 bit patterns; fp32 accumulators."""
    rng = np.random.default_rng(seed)
    a = B.to_bf16(rng.integers(-3, 4, B.BYTES // 2).astype(np.float32))
    b = B.to_bf16(rng.integers(-3, 4, (int(n), B.STREAMS, B.BYTES // 2)).astype(np.float32))
    return a, b, np.zeros((int(n), B.STREAMS, B.LANES), np.float32)


def _fp16_inputs(n=1, dtype=None, seed=0, **_):
    """Small integers (exact in fp16) as fp16 bit patterns; the accumulators' 512-bit registers."""
    rng = np.random.default_rng(seed)
    a = rng.integers(-3, 4, H.HALVES).astype(np.float16).view(np.uint16)
    b = rng.integers(-3, 4, (int(n), H.STREAMS, H.HALVES)).astype(np.float16).view(np.uint16)
    return a, b, np.zeros((int(n), H.STREAMS, 16), np.float32)


def _fp16_kernel(a, b, out, reps=1, threads=None):
    nthreads = resolve_threads(threads)
    if b.shape[0] != nthreads:
        raise ValueError(f"{b.shape[0]} weight rows for {nthreads} threads")
    H.fma_fp16(a, b, out, int(reps), nthreads)
    return H.results(out)


def _amx(kind):
    fn = X.tiles_bf16 if kind == "bf16" else X.tiles_int8

    def kernel(cfg, a, b, out, reps=1, threads=None):
        why = X.available(kind)  # also asks Linux for the tile state: a process that never did dies of SIGILL
        if why:
            raise RooflabError(f"cpu.lowprec.amx-{kind}: {why}")
        nthreads = resolve_threads(threads)
        if a.shape[0] != nthreads:
            raise ValueError(f"{a.shape[0]} tile sets for {nthreads} threads")
        fn(cfg, a, b, out, int(reps), nthreads)
        return out

    def work(cfg, a, b, out, reps=1, **_):
        return Work(flops=float(X.OPS_PER_PRODUCT[kind] * X.PRODUCTS_PER_REP * a.shape[0] * int(reps)))

    def inputs(n=1, dtype=None, seed=0, **_):
        return X.inputs(kind, int(n), seed)

    def reference(cfg, a, b, out, reps=1, **_):
        return X.reference(kind, a, b, reps)

    return kernel, work, inputs, reference


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


for _unit, _fn, _inputs, _ref, _streams in (
    ("int8-avx2", K.dot_avx2, _int8_inputs("avx2"), lambda a, b, out, reps=1, **_: K.reference("avx2", a, b, reps), K.STREAMS["avx2"]),
    ("int8-vnni", K.dot_vnni, _int8_inputs("vnni"), lambda a, b, out, reps=1, **_: K.reference("vnni", a, b, reps), K.STREAMS["vnni"]),
    ("bf16-avx512", B.dot_bf16, _bf16_inputs, lambda a, b, out, reps=1, **_: B.reference(a, b, reps), B.STREAMS),
    ("fp16-avx512", None, _fp16_inputs, lambda a, b, out, reps=1, **_: H.reference(a, b, reps), H.STREAMS),
):  # fmt: skip
    register(
        Variant(
            name=f"cpu.lowprec.{_unit}",
            family="lowprec",
            device="cpu",
            description=f"{_unit} dot products, {_streams} accumulators per thread",
            kernel=_kernel(_fn) if _fn is not None else _fp16_kernel,
            reference=_ref,
            work=_work,
            inputs=_inputs,
        )
    )
for _kind in ("bf16", "int8"):
    _k, _w, _i, _r = _amx(_kind)
    register(
        Variant(
            name=f"cpu.lowprec.amx-{_kind}",
            family="lowprec",
            device="cpu",
            description=f"AMX {X.INSTRUCTION[_kind]} tile products, 4 per step into one accumulator tile per thread",
            kernel=_k,
            reference=_r,
            work=_w,
            inputs=_i,
        )
    )
register(
    Variant(
        name="cpu.lowprec.w4-dequant-fma",
        family="lowprec",
        device="cpu",
        description=f"4-bit GEMV on cache-resident weights ({W4_ROWS} x {W4_K} per thread): the codes widened "
        "in registers + fp32 FMAs, the dequantize-and-FMA roof of weight-only quantized GEMMs",
        kernel=_w4_kernel,
        reference=_w4_reference,
        work=_w4_work,
        inputs=_w4_inputs,
        result_dtype=lambda *_, **__: "float32/quant",
    )
)
