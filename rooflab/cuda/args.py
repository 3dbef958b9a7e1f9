"""Argument checks and launch-size helpers shared by the CUDA variants of the kernel families
(rooflab/families/*/cuda.py). Importing this imports no cupy.

Every check raises RooflabError naming the variant and the constraint, before anything is launched:
a wrong dtype, rank, shape or layout never reaches a kernel (which would read past an array).
"""

from __future__ import annotations

import numpy as np

from ..errors import RooflabError


def cupy():
    import cupy as cp

    return cp


def array_module(a):
    """numpy for host arrays (and the test stand-ins, which are numpy arrays), cupy otherwise."""
    return np if isinstance(a, np.ndarray) else cupy()


def is_device_array(a) -> bool:
    try:
        return isinstance(a, cupy().ndarray)
    except ImportError:
        return False


def require(variant: str, a, what: str, *, dtype=None, ndim=None, shape=None, device=True):
    """``a`` is a C-contiguous (device) array of the given dtype, rank and shape."""
    if device and not is_device_array(a):
        raise RooflabError(
            f"{variant}: {what} must be a cupy array on the GPU, got {type(a).__name__}",
            "pass cupy arrays (cupy.asarray(x)) or build them with the variant's inputs()",
        )
    if dtype is not None:
        allowed = tuple(np.dtype(d) for d in (dtype if isinstance(dtype, (tuple, list)) else (dtype,)))
        if a.dtype not in allowed:
            raise RooflabError(
                f"{variant}: {what} has dtype {a.dtype}, this kernel takes {' or '.join(d.name for d in allowed)}",
                f"convert with .astype({allowed[0].name!r}) or use the library variant (00)",
            )
    if ndim is not None and a.ndim != ndim:
        raise RooflabError(f"{variant}: {what} must be {ndim}-D, got shape {tuple(a.shape)}")
    if shape is not None and tuple(a.shape) != tuple(shape):
        raise RooflabError(f"{variant}: {what} has shape {tuple(a.shape)}, expected {tuple(shape)}")
    if not a.flags.c_contiguous:
        raise RooflabError(f"{variant}: {what} is not C-contiguous", "pass a contiguous array (ascontiguousarray)")
    return a


def positive_int(variant: str, name: str, v) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or int(v) <= 0:
        raise RooflabError(f"{variant}: {name}={v!r} must be a positive integer")
    return int(v)


def cdiv(a: int, b: int) -> int:
    return -(-int(a) // int(b))


def grid_for(n: int, block: int, cap: int = 1 << 20) -> int:
    """Blocks of ``block`` threads covering ``n`` items once, at most ``cap`` (grid-stride kernels
    go round again), at least 1."""
    return max(1, min(cdiv(n, block), cap))


def free_device_bytes() -> int:
    return int(cupy().cuda.runtime.memGetInfo()[0])
