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
    "int32": {"rtol": 0.0, "atol": 0.0},
}


def tolerance(dtype) -> dict:
    name = np.dtype(dtype).name if not isinstance(dtype, str) else dtype
    try:
        return TOLERANCES[name]
    except KeyError:
        raise VerificationError(f"no tolerance defined for dtype {name!r}",
                                "add it to rooflab.verify.TOLERANCES") from None


def check(got, expected, dtype=None, what: str = "result", rtol=None, atol=None) -> dict:
    """Raise VerificationError unless ``got`` matches ``expected`` within the dtype's tolerance.

    Returns a small report (max abs and rel error) to store next to the timing.
    """
    got_a = np.asarray(got)
    exp_a = np.asarray(expected, dtype=np.float64) if np.asarray(expected).dtype.kind in "fc" \
        else np.asarray(expected)
    if dtype is None:
        dtype = got_a.dtype
    tol = tolerance(dtype)
    rtol = tol["rtol"] if rtol is None else rtol
    atol = tol["atol"] if atol is None else atol
    if got_a.shape != exp_a.shape:
        raise VerificationError(f"{what}: shape {got_a.shape} != expected {exp_a.shape}")
    g = got_a.astype(np.float64) if got_a.dtype.kind in "fcb" else got_a.astype(np.int64)
    e = exp_a.astype(np.float64) if exp_a.dtype.kind in "fcb" else exp_a.astype(np.int64)
    if not np.all(np.isfinite(g[np.isfinite(e)])):
        bad = np.flatnonzero(~np.isfinite(g) & np.isfinite(e))
        i = np.unravel_index(bad[0], g.shape) if g.ndim else ()
        raise VerificationError(
            f"{what}: {bad.size} non-finite values, first at index {tuple(map(int, i))}: "
            f"got {g[i]!r}, expected {e[i]!r}")
    err = np.abs(g - e)
    limit = atol + rtol * np.abs(e)
    bad_mask = err > limit
    nbad = int(np.count_nonzero(bad_mask))
    scale = float(np.max(np.abs(e))) if e.size else 0.0
    report = {
        "max_abs_err": float(err.max()) if err.size else 0.0,
        "max_rel_err": float((err / np.maximum(np.abs(e), 1e-300)).max()) if err.size else 0.0,
        "rtol": rtol,
        "atol": atol,
        "elements": int(e.size),
    }
    if nbad:
        worst = int(np.argmax(np.where(bad_mask, err - limit, -np.inf)))
        idx = tuple(int(x) for x in np.unravel_index(worst, e.shape)) if e.ndim else ()
        raise VerificationError(
            f"{what}: {nbad} of {e.size} elements outside rtol={rtol:g} atol={atol:g}; worst at index "
            f"{idx}: got {g[idx]!r}, expected {e[idx]!r} (abs err {err[idx]:.3g}, |ref| max {scale:.3g})")
    return report
