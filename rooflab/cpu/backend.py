"""The CPU backend of the driver: perf_counter_ns timer, the add-chain clock probe, thread pools.

Clock probe: a chain of dependent register adds (kernels/cpu/clock.py, 1 per cycle) run on every
thread at once, each thread timed on its own; cycles / wall time is each thread's running clock. A
neighbour stealing the core makes a probe read low, never high, so the probe runs several ~1 ms
times and keeps each thread's best (one undisturbed probe is enough): ~5 ms per measurement.

Isolation: a case fixed per process (``timing: {"processes": N}``) is measured in N fresh
interpreters running this module (``python -m rooflab.cpu.backend``: rooflab/processes.py).
"""

from __future__ import annotations

from ..backend import Backend
from ..processes import measure_in_processes, serve
from ..threads import use_threads
from .timing import calibrate, time_cpu

PROBES = 5


def probe_clock(threads: int, probes: int = PROBES) -> list[float] | None:
    """Per-thread running clock in GHz: each thread's best of ``probes`` ~1 ms add-chain probes,
    all threads at once (rooflab.cpu.clock); None where the probe cannot run (not x86-64 Linux)."""
    from . import clock as clock_probe

    if not clock_probe.supported():
        return None
    return [float(x) for x in clock_probe.probe_clock(threads, probes=probes)["per_thread_ghz"]]


def sample_clock(threads: int) -> list[float] | None:
    """Per-thread clock of one ~0.2 ms chain (rooflab.cpu.clock.chain_clock), None where it cannot run."""
    from . import clock as clock_probe

    return clock_probe.chain_clock(threads) if clock_probe.supported() else None


def cpu_backend(probe: bool = True) -> Backend:
    def timer(call, budget_s, min_samples, flush=None, after=None, warmup=1):
        s = time_cpu(call, budget_s=budget_s, min_samples=min_samples, flush=flush, after=after, warmup=warmup)
        return (s.seconds, s.after) if after is not None else s.seconds

    def isolate(driver, case, processes):
        return measure_in_processes(driver, case, processes, child="rooflab.cpu.backend")

    return Backend(
        device="cpu",
        timer=timer,
        calibrate=calibrate,
        threads=use_threads,
        clock=probe_clock if probe else None,
        sample_clock=sample_clock if probe else None,
        calibrated_is_warm=True,  # rooflab.cpu.timing.calibrate returns the reps of its last call
        isolate=isolate,
    )


def step_driver():
    """A driver on this backend for a runtime's whole steps (``Driver.time_runs``): the runtimes
    time their sessions and models with it, as every kernel is timed by the driver."""
    from ..driver import Driver

    return Driver(cpu_backend())


if __name__ == "__main__":  # a measuring process of rooflab.processes
    import os
    import sys

    rc = serve(cpu_backend)
    sys.stdout.flush()
    sys.stderr.flush()
    # no interpreter teardown (~0.2 s, numba's and llvmlite's): the parent waits for this exit
    # before the next process measures, and nothing is left to write
    os._exit(rc)
