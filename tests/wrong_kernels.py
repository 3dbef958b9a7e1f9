"""Deliberately wrong kernels (gpu-mode's solutions/wrong/): the checker must reject each one.

Each is a registered variant's twin with one classic bug; tests assert that the runner refuses
to time them and that the message names the element that is wrong.
"""

import dataclasses

import numpy as np
from numba import njit

from rooflab import get_variant


@njit(cache=True)
def _triad_off_by_one(a, b, c, s):
    for i in range(a.size - 1):  # forgets the last element
        a[i] = b[i] + s * c[i]


@njit(cache=True)
def _sum_skips_tail(a):
    s = 0.0
    for i in range(a.size // 4 * 4 - 4):  # drops the last block of 4
        s += a[i]
    return s


def triad_off_by_one():
    base = get_variant("cpu.stream.triad")

    def kernel(a, b, c, s=3.0, reps=1, threads=None):
        for _ in range(reps):
            _triad_off_by_one(a, b, c, a.dtype.type(s))
        return a

    return dataclasses.replace(base, name="wrong.triad_off_by_one", kernel=kernel)


def sum_skips_tail():
    base = get_variant("cpu.stream.read")
    return dataclasses.replace(
        base, name="wrong.sum_skips_tail", kernel=lambda a, reps=1, threads=None: reps * _sum_skips_tail(a)
    )


def fma_one_short():
    """Does K-1 FMAs per pass instead of K."""
    base = get_variant("cpu.ert.fma")

    def kernel(a, K=32, S=4, block=None, reps=1, threads=None, alpha=None, beta=None):
        from rooflab.kernels.cpu import ert

        if alpha is None:
            alpha, beta = ert.alpha_beta(K * reps, a.dtype)
        x = a.astype(np.float64)
        for _ in range((K - 1) * reps):
            x = x * float(alpha) + float(beta)
        a[:] = x
        return a

    return dataclasses.replace(base, name="wrong.fma_one_short", kernel=kernel)


def copy_in_float32():
    """Silently goes through float32 (the 'silent promotion/demotion' bug)."""
    base = get_variant("cpu.stream.copy")

    def kernel(dst, src, reps=1, threads=None):
        dst[:] = src.astype(np.float32)
        return dst

    return dataclasses.replace(base, name="wrong.copy_in_float32", kernel=kernel)


ALL = [triad_off_by_one, sum_skips_tail, fma_one_short, copy_in_float32]
