"""Verification: every kernel variant is compared with a reference before it is timed.

References are computed once in float64 (numpy); tolerances live in one per-dtype table; a mismatch
reports how many elements are wrong, the worst index, the value got and the value expected
(llm.c's validate_result, gpu-mode reference-kernels).
"""

from __future__ import annotations

import numpy as np

from .errors import VerificationError

# rtol/atol per result dtype. float32 sums and long FMA chains lose ~sqrt(n) ulps: 1e-4 relative
# is loose enough for the kernels here and still 10^3 below any "wrong kernel" error.
TOLERANCES = {
    "float64": {"rtol": 1e-9, "atol": 1e-12},
    "float32": {"rtol": 1e-4, "atol": 1e-6},
    "float16": {"rtol": 1e-2, "atol": 1e-3},
    "bfloat16": {"rtol": 3e-2, "atol": 1e-2},
    "int64": {"rtol": 0.0, "atol": 0.0},
    # Convolution (rooflab/families/conv): each output is a sum of n = C/g*R*S unit-scale products, so its
    # rounding error is absolute, ~eps*sqrt(n) of the output scale however close to 0 the element is
    # (elementwise rtol alone fails correct BLAS results near 0). The conv inputs make outputs
    # unit-variance (max |y| ~5); over the suite's 318 float32 cases direct/im2col/FFT measure at most
    # 3.1e-6 of max|y| (~1.6e-5 abs; the blocked kernel at R=15, n = 7200) -> atol 3e-5.
    "float32/conv": {"rtol": 1e-4, "atol": 3e-5},
    "float64/conv": {"rtol": 1e-9, "atol": 1e-12},
    # Winograd F(4x4,3x3): transform constants up to 8 (A^T) and 1/24 (G) amplify rounding ~10x
    # (research/model-ops.md 2.2); measured at most 1.3e-5 of max|y| (~7e-5 abs) on the suite -> atol 3e-4
    # (tests/test_conv_cpu.py: an output 1.05x this row's bound away fails, 0.95x passes).
    "float32/conv-winograd-f4x4": {"rtol": 1e-3, "atol": 3e-4},
    "float64/conv-winograd-f4x4": {"rtol": 1e-8, "atol": 1e-11},
    "int32": {"rtol": 0.0, "atol": 0.0},
}


def tolerance(dtype) -> dict:
    name = np.dtype(dtype).name if not isinstance(dtype, str) else dtype
    try:
        return TOLERANCES[name]
    except KeyError:
        raise VerificationError(
            f"no tolerance defined for dtype {name!r}", "add it to rooflab.verify.TOLERANCES"
        ) from None


CHUNK = 1 << 22  # elements compared at a time: checks of multi-GiB arrays stay within ~100 MB


def _f64(a):
    return a if a.dtype == np.float64 else a.astype(np.float64)


def check(got, expected, dtype=None, what: str = "result", rtol=None, atol=None) -> dict:
    """Raise VerificationError unless ``got`` matches ``expected`` within the dtype's tolerance.

    ``expected`` may be an array of got's shape or a scalar (a closed form). Large arrays are
    compared in chunks, so a check never needs more than a few chunk-sized temporaries.
    Returns a small report (max abs and rel error) to store next to the timing.
    """
    got_a = np.asarray(got)
    exp_a = np.asarray(expected)
    if dtype is None:
        dtype = got_a.dtype
    tol = tolerance(dtype)
    rtol = tol["rtol"] if rtol is None else rtol
    atol = tol["atol"] if atol is None else atol
    if exp_a.ndim and got_a.shape != exp_a.shape:
        raise VerificationError(f"{what}: shape {got_a.shape} != expected {exp_a.shape}")
    g_flat = got_a.reshape(-1)
    e_flat = exp_a.reshape(-1) if exp_a.ndim else None
    e_scalar = None if exp_a.ndim else float(exp_a)
    nbad = 0
    worst = None  # (excess, index, got, expected, err)
    max_abs = max_rel = 0.0
    scale = 0.0
    for lo in range(0, max(g_flat.size, 1), CHUNK):
        g = _f64(g_flat[lo : lo + CHUNK])
        e = np.float64(e_scalar) if e_flat is None else _f64(e_flat[lo : lo + CHUNK])
        if g.size == 0:
            break
        finite = np.isfinite(g)
        if not finite.all():
            bad = np.flatnonzero(~finite & np.isfinite(e))
            if bad.size:
                i = int(bad[0])
                idx = np.unravel_index(lo + i, got_a.shape) if got_a.ndim else ()
                ev = e if np.ndim(e) == 0 else e[i]
                raise VerificationError(
                    f"{what}: non-finite values, first at index {tuple(map(int, idx))}: "
                    f"got {g[i]!r}, expected {float(ev)!r}"
                )
        err = np.abs(g - e)
        abs_e = np.abs(e)
        excess = err - (atol + rtol * abs_e)
        nb = int(np.count_nonzero(excess > 0))
        max_abs = max(max_abs, float(err.max()))
        max_rel = max(max_rel, float((err / np.maximum(abs_e, 1e-300)).max()))
        scale = max(scale, float(np.max(abs_e)))
        if nb:
            nbad += nb
            i = int(np.argmax(excess))
            if worst is None or excess[i] > worst[0]:
                ev = e if np.ndim(e) == 0 else e[i]
                worst = (float(excess[i]), lo + i, float(g[i]), float(ev), float(err[i]))
    report = {"max_abs_err": max_abs, "max_rel_err": max_rel, "rtol": rtol, "atol": atol, "elements": int(g_flat.size)}
    if nbad:
        _, flat, gv, ev, err = worst
        idx = tuple(int(x) for x in np.unravel_index(flat, got_a.shape)) if got_a.ndim else ()
        raise VerificationError(
            f"{what}: {nbad} of {g_flat.size} elements outside rtol={rtol:g} atol={atol:g}; worst at index "
            f"{idx}: got {gv!r}, expected {ev!r} (abs err {err:.3g}, |ref| max {scale:.3g})"
        )
    return report
