"""CPU variants of the gemm family: numpy/BLAS (rung 0) and the numba ladder of kernels/cpu/gemm.py.

  cpu.gemm.00-numpy-blas     numpy.matmul (its BLAS named from threadpoolctl: library, version,
                             kernel architecture, threading)
  cpu.gemm.01-naive          i-j-k triple loop
  cpu.gemm.02-loop-order     i-k-j: unit-stride inner loop, vectorized by LLVM
  cpu.gemm.03-cache-blocked  i-k-j on L2-sized blocks of B
  cpu.gemm.04-packed-panels  BLIS loop nest, packed panels, SIMD register-tile micro-kernel
  cpu.gemm.05-multithreaded  04 over blocks of C with prange, private packing buffers

Every variant: ``C = v(A, B)`` on C-contiguous 2-D float32/float64 arrays of any M, N, K;
``v(A, B, bias)`` adds a bias row after the product; ``out=`` writes into a given array. Bad input
raises RooflabError naming the variant and the constraint. The kernel repeats ``reps`` times into
the same C (allocated once per call, outside the repetitions). Napkin figures: kernels/cpu/gemm.py.

Run: ``python -m pytest -q tests/test_gemm_cpu.py``; ``rooflab run --suite gemm``.
"""

from __future__ import annotations

import numpy as np

from ...kernels.cpu import gemm as K
from ...kernels.cpu import simd
from ...registry import Variant, register
from . import DTYPES, FAMILY, Rung, check_operands, inputs, reference, result_dtype, work


def blas_info() -> dict:
    """The BLAS numpy calls, from threadpoolctl (what OPENBLAS_CORETYPE and the CPU selected)."""
    try:
        from threadpoolctl import threadpool_info

        for lib in threadpool_info():
            if lib.get("user_api") == "blas":
                return {
                    k: lib.get(k) for k in ("internal_api", "version", "architecture", "threading_layer", "filepath")
                }
    except Exception:  # pragma: no cover - threadpoolctl is a dependency
        pass
    return {"internal_api": "unknown BLAS"}


def blas_name(info: dict | None = None) -> str:
    info = info or blas_info()
    arch = f", {info['architecture']} kernels" if info.get("architecture") else ""
    thr = f", {info['threading_layer']} threads" if info.get("threading_layer") else ""
    return f"{info.get('internal_api', 'BLAS')} {info.get('version') or ''}{arch}{thr}".replace("  ", " ").strip()


def _make(name: str, into, threaded: bool):
    """The public call around a numba entry ``into(A, B, C[, threads])`` that fills C."""

    def kernel(A, B, bias=None, reps=1, threads=None, out=None):
        M, N, _ = check_operands(name, A, B, bias, DTYPES, out)
        C = np.empty((M, N), A.dtype) if out is None else out
        if threaded:
            import numba

            t = numba.get_num_threads() if threads is None else int(threads)
        for _ in range(int(reps)):
            if threaded:
                into(A, B, C, t)
            else:
                into(A, B, C)
            if bias is not None:
                np.add(C, bias, out=C)  # "add after": one more pass over C
        return C

    kernel.__name__ = name.replace(".", "_").replace("-", "_")
    return kernel


def _numpy_into(A, B, C, threads):
    np.matmul(A, B, out=C)  # BLAS's pool is sized by the driver's thread control (threadpoolctl)


_TILE = "x".join(map(str, K.TILE["float32"])) + " FP32 / " + "x".join(map(str, K.TILE["float64"])) + " FP64"
RUNGS = [
    Rung(0, "numpy-blas", f"numpy.matmul -> {blas_name()} (the library)", into=_numpy_into, threaded=True,
         model_op=True),
    Rung(1, "naive", "i-j-k triple loop (inner loop strides down a column of B)", into=K.gemm_naive_into,
         max_flops=3e8),
    Rung(2, "loop-order", "i-k-j loop order: unit-stride inner loop C[i,:] += A[i,p]*B[p,:]", into=K.gemm_ikj_into,
         max_flops=3e9),
    Rung(3, "cache-blocked", "i-k-j on 256x256 blocks of B kept in L2", into=K.gemm_blocked_into, max_flops=2e10),
    Rung(4, "packed-panels", f"BLIS loop nest with packed A/B panels and a {_TILE} register tile in explicit "
         f"{simd.BITS}-bit SIMD (skinny M streams B)", into=K.gemm_packed, model_op=True),
    Rung(5, "multithreaded", "04 split over blocks of C with prange, private packing buffers", into=K.gemm_packed,
         threaded=True, model_op=True, best=True),
]  # fmt: skip


def register_rungs(rungs) -> dict:
    """Register each rung as a variant (its roles from its flags); {number: Variant}."""
    out = {}
    for r in rungs:
        name = r.name
        out[r.number] = register(
            Variant(
                name=name,
                family=FAMILY,
                device="cpu",
                number=r.number,
                description=r.description,
                kernel=_make(name, r.into, r.threaded),
                reference=reference,
                work=work,
                inputs=inputs,
                result_dtype=result_dtype,
                op="gemm" if r.model_op else None,
                dtypes=r.dtypes,
                roles=(("best",) if r.best else ()) + (("threaded",) if r.threaded else ()),
                max_flops=r.max_flops,
            )
        )
    return out


VARIANTS = register_rungs(RUNGS)
