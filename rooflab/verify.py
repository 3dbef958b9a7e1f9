"""Verification: every kernel variant is compared with a reference before it is timed.

References are computed once in float64 (numpy); tolerances live in one per-dtype table; a mismatch
reports how many elements are wrong, the worst index, the value got and the value expected
(llm.c's validate_result, gpu-mode reference-kernels).
"""

from __future__ import annotations

import numpy as np

from .errors import VerificationError

# The one tolerance table: rtol/atol per result dtype and per kind of computation.
#   default    elementwise results and short chains: float32 sums and long FMA chains lose
#              ~sqrt(n) ulps; 1e-4 relative is loose enough and still 10^3 below a wrong kernel.
#   reduction  dot products of thousands of terms (GEMM, convolution, softmax/layernorm rows) in
#              float32 with random N(0,1)-scaled data: ~sqrt(K) * 6e-8 relative to the terms, so up
#              to ~2e-5 at K=50k before cancellation; 2e-3 of the O(1) outputs leaves room for
#              blocked summation orders and is still far below a missing term (~1/sqrt(K) > 4e-3).
#   winograd4  Winograd F(4x4,3x3): its transforms have constants up to 5.25 (Lavin & Gray), the
#              error grows ~10x over direct convolution (measured 0.7-1.5e-5 relative).
#   conv       the CPU convolution family's unit-variance outputs (x ~ N(0,1), w ~ N(0, 1/n)): each
#              output is a sum of n = C/g*R*S products, its rounding error absolute, ~eps*sqrt(n);
#              float32 direct/im2col/FFT measured <= 3e-6 abs up to n = 4608 -> atol 3e-5.
#   conv-winograd-f4x4  the same for F(4x4,3x3): transform constants up to 8 (A^T) and 1/24 (G)
#              amplify rounding ~10x; measured <= 1.2e-4 abs -> atol 3e-4.
# A kind may be named with the dtype as "float32/conv" (the result_dtype a family declares).
# tests/test_verify.py pins every entry with a result off by just more than it.
TOLERANCES = {
    "float64": {
        "default": (1e-9, 1e-12),
        "reduction": (1e-9, 1e-10),
        "winograd4": (1e-9, 1e-10),
        "conv": (1e-9, 1e-12),
        "conv-winograd-f4x4": (1e-8, 1e-11),
    },
    "float32": {
        "default": (1e-4, 1e-6),
        "reduction": (2e-3, 2e-3),
        "winograd4": (5e-3, 5e-3),
        "conv": (1e-4, 3e-5),
        "conv-winograd-f4x4": (1e-3, 3e-4),
        # weight-only quantized products (qgemm_nbits), |Y| ~ 10: fp32 sums of K terms with the zero
        # point folded out (x15 cancellation in 4 bits, x128 in 8) stay below 5e-3; one block's scale
        # dropped or taken from its neighbour moves Y by ~0.1 (tests/test_qgemm.py)
        "quant": (1e-3, 2e-2),
    },
    "float16": {"default": (1e-2, 1e-3), "reduction": (2e-2, 2e-2), "winograd4": (5e-2, 5e-2)},
    "bfloat16": {"default": (3e-2, 1e-2), "reduction": (6e-2, 6e-2), "winograd4": (1e-1, 1e-1)},
    # 8-bit codes (a quantize): float32 x * (1/s) and the float64 x / s round a tie apart by one step;
    # a dropped scale, zero point or clamp moves codes by many
    "uint8": {"default": (0.0, 1.0)},
    "int64": {"default": (0.0, 0.0)},
    "int32": {"default": (0.0, 0.0)},
}


def tolerance(dtype, kind: str = "default") -> dict:
    name = np.dtype(dtype).name if not isinstance(dtype, str) else dtype
    if "/" in name:  # "float32/conv": the dtype and the kind in one (a family's result_dtype)
        name, kind = name.split("/", 1)
    try:
        rtol, atol = TOLERANCES[name][kind]
    except KeyError:
        raise VerificationError(
            f"no tolerance defined for dtype {name!r}, kind {kind!r}", "add it to rooflab.verify.TOLERANCES"
        ) from None
    return {"rtol": rtol, "atol": atol}


def _device_module(a):
    """cupy when ``a`` is a cupy array (cupy is then imported already), else None."""
    import sys

    cupy = sys.modules.get("cupy")
    nd = getattr(cupy, "ndarray", None) if cupy is not None else None
    return cupy if nd is not None and isinstance(a, nd) else None


def _same_device(got, expected):
    """(array module, got, expected) with both on the device ``got`` lives on. A host result against
    a device reference (a device-to-host transfer) brings the reference to the host with ``.get()``:
    cupy refuses ``np.asarray`` of a device array (TypeError), and so does tests/fake_gpu.py."""
    xp = _device_module(got)
    if xp is not None:
        return xp, got, xp.asarray(expected)  # numpy or scalar -> device (an explicit copy)
    if _device_module(expected) is not None:
        expected = expected.get()
    return np, np.asarray(got), np.asarray(expected)


CHUNK = 1 << 22  # elements compared at a time: checks of multi-GiB arrays stay within ~100 MB


ONE_PASS_MIN = 1 << 16  # elements: below this the numpy path is as fast and compiles nothing
# (float32/64 and integer results only: float16, bfloat16 and complex take the numpy path)


def _one_pass(xp, g_flat, e_flat) -> bool:
    """Whether kernels/cpu/compare.py can check these (numpy arrays of plain real dtypes)."""

    def plain(a):
        return (a.dtype.kind == "f" and a.dtype.itemsize >= 4) or a.dtype.kind in "iu"

    return (
        xp is np
        and g_flat.size >= ONE_PASS_MIN
        and plain(g_flat)
        and (e_flat is None or plain(e_flat))
        and g_flat.dtype.isnative
        and (e_flat is None or e_flat.dtype.isnative)
    )


def _non_finite(what: str, where: tuple, got: float, expected: float) -> VerificationError:
    return VerificationError(f"{what}: non-finite mismatch, first at index {where}: got {got!r}, expected {expected!r}")


def check(got, expected, dtype=None, what: str = "result", rtol=None, atol=None, kind: str = "default") -> dict:
    """Raise VerificationError unless ``got`` matches ``expected`` within the dtype's tolerance.

    numpy or cupy arrays (the comparison runs on the device the result lives on). ``expected``
    may be an array of got's shape or a scalar (a closed form). Large arrays are compared in
    chunks, so a check never needs more than a few chunk-sized temporaries. ``dtype`` (default:
    got's) and ``kind`` pick the row and column of TOLERANCES. Returns a small report (max abs
    and rel error) to store next to the timing.
    """
    xp, got_a, exp_a = _same_device(got, expected)
    if dtype is None:
        dtype = got_a.dtype
    if isinstance(dtype, str) and "/" in dtype:
        dtype, kind = dtype.split("/", 1)
    tol = tolerance(dtype, kind)
    rtol = tol["rtol"] if rtol is None else rtol
    atol = tol["atol"] if atol is None else atol
    if exp_a.ndim and got_a.shape != exp_a.shape:
        raise VerificationError(f"{what}: shape {tuple(got_a.shape)} != expected {tuple(exp_a.shape)}")
    g_flat = got_a.reshape(-1)
    e_flat = exp_a.reshape(-1) if exp_a.ndim else None
    e_scalar = None if exp_a.ndim else float(exp_a)
    nbad = 0
    worst = None  # (excess, index, got, expected, err)
    max_abs = max_rel = scale = 0.0

    def index(flat):
        return tuple(int(x) for x in np.unravel_index(flat, tuple(got_a.shape))) if got_a.ndim else ()

    if _one_pass(xp, g_flat, e_flat):  # large host arrays: one compiled pass, no temporaries
        from .kernels.cpu.compare import compare

        e_arr = e_flat if e_flat is not None else np.empty(0)
        special, nbad, wi, max_abs, max_rel, scale = compare(
            g_flat, e_arr, 0.0 if e_scalar is None else e_scalar, e_flat is not None, float(rtol), float(atol)
        )

        def pair(i):
            return float(g_flat[i]), float(e_flat[i]) if e_flat is not None else e_scalar

        if special >= 0:
            gv, ev = pair(special)
            raise _non_finite(what, index(special), gv, ev)
        if nbad:
            gv, ev = pair(wi)
            worst = (None, wi, gv, ev, abs(gv - ev))
        chunks = range(0)
    else:
        chunks = range(0, max(int(g_flat.size), 1), CHUNK)
    for lo in chunks:
        g = g_flat[lo : lo + CHUNK].astype(xp.float64)
        if g.size == 0:
            break
        e = xp.full(g.shape, e_scalar, dtype=xp.float64) if e_flat is None else e_flat[lo : lo + CHUNK]
        e_b = e.astype(xp.float64)
        # special values must match exactly: NaN where NaN is expected, an infinity of the right
        # sign where one is expected, and nothing non-finite where a finite value is expected
        special = ~xp.isfinite(g) | ~xp.isfinite(e_b)
        bad_special = special & ~((xp.isnan(g) & xp.isnan(e_b)) | (g == e_b))
        if bool(bad_special.any()):
            i = int(xp.argmax(bad_special))
            raise _non_finite(what, index(lo + i), float(g[i]), float(e_b[i]))
        with np.errstate(invalid="ignore"):  # inf - inf where both are inf: masked out
            err = xp.where(special, 0.0, xp.abs(g - e_b))  # the special values matched exactly above
        abs_e = xp.where(special, 0.0, xp.abs(e_b))
        excess = err - (atol + rtol * abs_e)
        nb = int(xp.count_nonzero(excess > 0))
        max_abs = max(max_abs, float(err.max()))
        max_rel = max(max_rel, float((err / xp.maximum(abs_e, 1e-300)).max()))
        scale = max(scale, float(abs_e.max()))
        if nb:
            nbad += nb
            i = int(xp.argmax(excess))
            if worst is None or float(excess[i]) > worst[0]:
                worst = (float(excess[i]), lo + i, float(g[i]), float(e_b[i]), float(err[i]))
    report = {
        "max_abs_err": max_abs,
        "max_rel_err": max_rel,
        "max_err_over_max_ref": max_abs / scale if scale else max_abs,
        "rtol": rtol,
        "atol": atol,
        "tolerance": kind,
        "elements": int(g_flat.size),
    }
    if nbad:
        _, flat, gv, ev, err = worst
        raise VerificationError(
            f"{what}: {nbad} of {int(g_flat.size)} elements outside rtol={rtol:g} atol={atol:g}; worst at index "
            f"{index(flat)}: got {gv!r}, expected {ev!r} (abs err {err:.3g}, |ref| max {scale:.3g})"
        )
    return report


def check_device(got, expected, dtype, what: str, rtol=None, atol=None) -> dict:
    """``check`` with positional dtype: the call shape of the GPU family tests."""
    return check(got, expected, dtype=dtype, what=what, rtol=rtol, atol=atol)
