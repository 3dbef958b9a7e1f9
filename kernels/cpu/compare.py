"""One pass over a result and its reference: what rooflab.verify.check needs, without temporaries.

verify.check compares in float64 chunks with ~15 numpy passes per chunk (casts, isfinite, where,
abs, max ...): ~0.3-0.5 s for a 128 MiB float64 result, paid before every timed DRAM-sized case
(28 intensity points and 8 DRAM stream cases in a quick run: ~10 s of its ~85). This kernel reads
each element once and keeps the figures the check reports.

Napkin: 16 M float64 pairs = 256 MB read at ~20 GB/s, ~15 ms (one thread) instead of ~0.4 s.

Returns (first_bad_special, nbad, worst, max_abs, max_rel, scale), with the same rules as the
numpy path of rooflab.verify.check (tests/test_verify.py runs both on the same inputs):
  special     a non-finite got or expected: must match exactly (NaN with NaN, an infinity of the
              right sign); the first index that does not is returned (-1: none)
  err         |got - expected| (0 where special), abs_e = |expected| (0 where special)
  bad         err > atol + rtol * abs_e; worst = the first index of the largest excess (-1: none)
  max_rel     max err / max(abs_e, 1e-300); scale = max abs_e
"""

from __future__ import annotations

import math

from numba import njit

import rooflab._numba_env  # noqa: F401


@njit(cache=True, boundscheck=False)
def compare(g, e, e_scalar, has_array, rtol, atol):
    n = g.size
    nbad = 0
    worst = -1
    worst_excess = 0.0
    max_abs = 0.0
    max_rel = 0.0
    scale = 0.0
    for i in range(n):
        x = float(g[i])
        y = float(e[i]) if has_array else e_scalar
        if not (math.isfinite(x) and math.isfinite(y)):
            if not ((math.isnan(x) and math.isnan(y)) or x == y):
                return i, nbad, worst, max_abs, max_rel, scale
            continue  # err = abs_e = 0: nothing else to count
        err = abs(x - y)
        ae = abs(y)
        excess = err - (atol + rtol * ae)
        if excess > 0.0:
            nbad += 1
            if worst < 0 or excess > worst_excess:
                worst, worst_excess = i, excess
        if err > max_abs:
            max_abs = err
        rel = err / max(ae, 1e-300)
        if rel > max_rel:
            max_rel = rel
        if ae > scale:
            scale = ae
    return -1, nbad, worst, max_abs, max_rel, scale
