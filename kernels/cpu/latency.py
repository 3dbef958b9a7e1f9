"""Dispatch latency: the fixed cost of asking for work, with (almost) no work done.

  empty     an @njit call with no arguments: Python -> numba dispatcher -> native and back
            (~0.1 us on a non-PGO CPython);
  ufunc     np.add on 8-element arrays with out=: numpy's dispatch, type resolution and
            iterator set-up (~0.5 us);
  fork_join a numba parallel region over the thread pool that writes one value per thread:
            wake-up and barrier cost of the OpenMP/TBB pool (2-20 us depending on wait policy).
An op whose time is within 2x of these is latency-bound: making it faster means calling less.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

import rooflab._numba_env  # noqa: F401


@njit(cache=True)
def empty():
    """No work, no arguments (each argument costs numba ~150 ns of typing per call here); returns 1,
    so a caller summing the results counts the calls that really ran."""
    return 1


def ufunc_add(a, b, out):
    return np.add(a, b, out=out)


@njit(parallel=True, cache=True)
def fork_join(out):
    for t in prange(out.size):
        out[t] = t + 1.0
