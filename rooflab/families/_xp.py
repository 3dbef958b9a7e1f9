"""Helpers shared by families whose variant 0 is the same array code on numpy and on cupy."""

from __future__ import annotations

import numpy as np

XP_NAME = {"cpu": "numpy", "cuda": "cupy"}


def xp_for(device: str):
    if device == "cuda":
        import cupy

        return cupy
    return np


def rand(xp, rng, shape, dtype, scale=1.0):
    """Standard-normal values (times ``scale``) of ``dtype``: float32 draws, cast."""
    return (rng.standard_normal(shape, dtype=np.float32) * scale).astype(dtype, copy=False)


def repeat(fn):
    """A kernel that repeats ``fn`` ``reps`` times and returns the last result (the driver's
    calling convention for library calls, which have no repetition of their own)."""

    def kernel(*arrays, reps=1, threads=None, **params):
        out = None
        for _ in range(int(reps)):
            out = fn(*arrays, **params)
        return out

    return kernel
