"""Bandwidth kernels: read (sum), copy and triad, each over ``nchunks`` threads.

Napkin math (STREAM byte convention, write-allocate not counted):
  read   s += a[i]           8 B/element   (1 add)
  copy   c[i] = a[i]        16 B/element
  triad  a[i] = b[i] + s*c[i] 24 B/element (1 FMA = 2 FLOP)
  update a[i] = s*a[i]       16 B/element (1 FLOP; likwid's "update": a read-modify-write stream
                             needs no write-allocate, so it is the fastest way to move DRAM bytes)
A 64 B/cycle L1 at 3 GHz is ~190 GB/s per core for loads; DRAM on a VM slice is 10-30 GB/s, so a
2 GiB triad pass takes ~0.1 s and a 16 KiB one ~0.1 us: ``reps`` repeats the pass inside the
compiled function (no Python or fork/join cost per pass) until a sample lasts milliseconds.

Arrays must start on a cache line (rooflab.memory.aligned_empty): numpy's default 16 B alignment
makes every 512-bit load a cache-line split and halves L1 bandwidth (measured: bimodal 180 vs
300 GB/s between runs). Each thread owns one contiguous chunk (first-touched by the same chunking, see ``fill_pattern``), so pages
live where they are used and the parallel region is entered once per call.

Code-generation notes (checked by tests through the assembly):
- read splits its chunk into 4 interleaved streams, so LLVM keeps 4 x (its unroll) vector
  accumulators and the loop is bound by loads, not by the latency of one add chain;
- copy adds a runtime ``zero`` without fastmath: x + 0.0 is not x for -0.0, so LLVM cannot turn
  the loop into memcpy (glibc's memcpy switches to non-temporal stores and measures another path).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

import rooflab._numba_env  # noqa: F401

ALIGN_ELEMS = 16  # chunk and stream starts are multiples of 16 elements = 64 B (a cache line)


@njit(inline="always")
def _chunk(n, t, nchunks):
    """[lo, hi) of chunk t: boundaries on cache lines, the last chunk takes the remainder."""
    lo = (n * t // nchunks) // ALIGN_ELEMS * ALIGN_ELEMS
    hi = n if t == nchunks - 1 else (n * (t + 1) // nchunks) // ALIGN_ELEMS * ALIGN_ELEMS
    return lo, hi


@njit(fastmath=True, inline="always")
def _sum4(x, reps):
    # Stream starts on cache lines: a 64 B vector load that straddles two lines costs two loads.
    h = (x.size // 4) // ALIGN_ELEMS * ALIGN_ELEMS
    a0 = x[0:h]
    a1 = x[h : 2 * h]
    a2 = x[2 * h : 3 * h]
    a3 = x[3 * h : 4 * h]
    tail = x[4 * h :]
    s0 = x.dtype.type(0)
    s1 = x.dtype.type(0)
    s2 = x.dtype.type(0)
    s3 = x.dtype.type(0)
    for _ in range(reps):
        for i in range(h):
            s0 += a0[i]
            s1 += a1[i]
            s2 += a2[i]
            s3 += a3[i]
        for i in range(tail.size):
            s0 += tail[i]
    return (s0 + s1) + (s2 + s3)


@njit(parallel=True, fastmath=True, cache=True)
def read_sum(a, reps, nchunks):
    """Sum of ``a`` taken ``reps`` times (returns reps * sum(a))."""
    out = np.zeros(nchunks, dtype=np.float64)
    n = a.size
    for t in prange(nchunks):
        lo, hi = _chunk(n, t, nchunks)
        out[t] = _sum4(a[lo:hi], reps)
    return out.sum()


@njit(inline="always")
def _copy(dst, src, reps, zero):
    for _ in range(reps):
        for i in range(dst.size):
            dst[i] = src[i] + zero


@njit(parallel=True, cache=True)
def copy(dst, src, reps, nchunks, zero):
    """dst[:] = src, ``reps`` times."""
    n = dst.size
    for t in prange(nchunks):
        lo, hi = _chunk(n, t, nchunks)
        _copy(dst[lo:hi], src[lo:hi], reps, zero)


@njit(fastmath={"contract"}, inline="always")
def _triad(a, b, c, s, reps):
    for _ in range(reps):
        for i in range(a.size):
            a[i] = b[i] + s * c[i]


@njit(parallel=True, fastmath={"contract"}, cache=True)
def triad(a, b, c, s, reps, nchunks):
    """a[:] = b + s*c, ``reps`` times."""
    n = a.size
    for t in prange(nchunks):
        lo, hi = _chunk(n, t, nchunks)
        _triad(a[lo:hi], b[lo:hi], c[lo:hi], s, reps)


@njit(fastmath={"contract"}, inline="always")
def _update(a, s, reps):
    for _ in range(reps):
        for i in range(a.size):
            a[i] = s * a[i]


@njit(parallel=True, fastmath={"contract"}, cache=True)
def update(a, s, reps, nchunks):
    """a[:] = s*a, ``reps`` times."""
    n = a.size
    for t in prange(nchunks):
        lo, hi = _chunk(n, t, nchunks)
        _update(a[lo:hi], s, reps)


ARRAYS = {"read": 1, "copy": 2, "triad": 3, "update": 1}


@njit(parallel=True, cache=True)
def fill_pattern(a, nchunks, salt=0):
    """First touch with a cheap pseudo-random pattern in [0.5, 1.5) (Knuth's multiplicative hash),
    so verification sees distinct values everywhere without a 2 GB random-number pass."""
    n = a.size
    for t in prange(nchunks):
        lo, hi = _chunk(n, t, nchunks)
        for i in range(lo, hi):
            a[i] = 0.5 + (((i + salt * 7919) * 2654435761) % 4093) / 4093.0
