"""The CPU backend of the driver: perf_counter_ns timer, the add-chain clock probe, thread pools.

Clock probe: a chain of dependent register adds (kernels/cpu/clock.py, 1 per cycle) run on every
thread at once; cycles / wall time is each thread's running clock. A neighbour stealing the core
makes a probe read low, never high, so the probe runs several short times and keeps each thread's
best (one undisturbed probe is enough): 5 probes of ~1 ms cost ~5 ms per measurement.
"""

from __future__ import annotations

import time

import numpy as np

from ..driver import Backend
from ..errors import VerificationError
from ..threads import use_threads
from .timing import calibrate, time_cpu

PROBES = 5
PROBE_S = 0.001


def probe_clock(threads: int, probes: int = PROBES, probe_s: float = PROBE_S) -> list[float] | None:
    """Per-thread running clock in GHz: the best of ``probes`` short add-chain probes per thread."""
    from ..kernels.cpu import clock

    if not clock.SUPPORTED:
        return None
    with use_threads(threads):
        clock.add_chain_threads(100, threads)  # compile and wake the pool
        blocks = max(100, int(probe_s * 3.5e9 / clock.ADDS_PER_BLOCK))
        best = np.zeros(threads)
        for _ in range(probes):
            t0 = time.perf_counter_ns()
            out = clock.add_chain_threads(blocks, threads)
            dt = (time.perf_counter_ns() - t0) * 1e-9
            expected = np.arange(threads, dtype=np.int64) + clock.ADDS_PER_BLOCK * blocks
            if not np.array_equal(out, expected):
                raise VerificationError(f"clock probe returned {out}, expected {expected}")
            best = np.maximum(best, clock.ADDS_PER_BLOCK * blocks / dt / 1e9)
    return [float(x) for x in best]


def cpu_backend(probe: bool = True) -> Backend:
    def timer(call, budget_s, min_samples, flush=None):
        return time_cpu(call, budget_s=budget_s, min_samples=min_samples, flush=flush).seconds

    return Backend(
        device="cpu", timer=timer, calibrate=calibrate, threads=use_threads, clock=probe_clock if probe else None
    )
