"""Memory latency per level: a dependent pointer chase, one cache line per hop.

The working set is ``L`` cache lines (64 B); line i holds, in its first 8 bytes, the element index
of the next line of a random single cycle through all L lines (rooflab/families/chase builds it:
a shuffled visiting order, i.e. a uniformly random cyclic permutation, the distribution of
Sattolo's algorithm). Each load's address is the previous load's value, so loads cannot overlap
and random order defeats the prefetchers: time / hops = the load-to-use latency of the level that
holds the working set (lmbench's lat_mem_rd, Intel MLC's idle latency, done in numba).

Napkin math: Zen 4 at ~3.5 GHz: L1 4-5 cycles ~1.3 ns, L2 ~14 cycles ~4 ns, L3 ~50 cycles
~15 ns, DRAM 80-120 ns (+ a page walk per hop with 4 KiB pages once the set outgrows the TLB's
reach: use 2 MiB pages to measure the memory and not the page table).

Code-generation notes: the chain is uint64, so numba needs no negative-index fix-up on the loaded
index (a signed index adds a compare and a conditional add to every hop's dependency chain); the
loop is unrolled 8x so the counter's compare-and-branch is amortized (it is off the critical
path anyway: only the loads depend on each other).
"""

from __future__ import annotations

import numpy as np
from numba import njit

import rooflab._numba_env  # noqa: F401

LINE = 64
SLOTS = LINE // 8  # uint64 slots per line: line i starts at element i * SLOTS


@njit(cache=True)
def chase(chain, hops):
    """Follow ``hops`` links from element 0; returns the element index reached."""
    p = np.uint64(0)
    for _ in range(hops >> 3):
        p = chain[p]
        p = chain[p]
        p = chain[p]
        p = chain[p]
        p = chain[p]
        p = chain[p]
        p = chain[p]
        p = chain[p]
    for _ in range(hops & 7):
        p = chain[p]
    return p


@njit(cache=True)
def cycle_lines(chain, limit):
    """Walk from line 0 until it comes back (or ``limit`` hops): (distinct lines visited, hops
    taken, back at 0?). A single cycle through all L lines gives (L, L, True)."""
    lines = chain.size // SLOTS
    seen = np.zeros(lines, dtype=np.bool_)
    p = np.uint64(0)
    distinct = 0
    hops = 0
    while hops < limit:
        line = p // SLOTS
        if line >= lines:
            return distinct, hops, False
        if not seen[line]:
            seen[line] = True
            distinct += 1
        p = chain[p]
        hops += 1
        if p == 0:
            return distinct, hops, True
    return distinct, hops, False
