"""What the one driver needs from a device: a leaf module, imported by the driver and by each backend.

A backend is data (its timer, calibration, thread control, clock probe, post-run hook, and how it
isolates a measurement that is fixed per process), so the driver never imports a device module and
no device module imports the driver: rooflab/cpu/backend.py and rooflab/cuda/backend.py build one,
rooflab/driver.py takes one (``Driver(cpu_backend())``).

Napkin: the driver calls ``timer`` once per attempt (>= 5 samples of ~10 ms), ``clock`` twice per
attempt (~5 ms each on the CPU), ``isolate`` once per case whose ``timing`` asks for ``processes: N``
(~0.7 s of interpreter start per process on the CPU, rooflab/processes.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class Backend:
    """What the driver needs from a device."""

    device: str
    timer: Callable  # timer(call, budget_s=, min_samples=, flush=[, after=]) -> seconds per call[, after's]
    calibrate: Callable  # calibrate(make_call(reps) -> call, target_s) -> reps
    threads: Callable = lambda n: contextlib.nullcontext(n)  # context manager limiting the pools
    clock: Callable | None = None  # clock(threads) -> per-thread GHz list, or None
    # sample_clock(threads) -> per-thread GHz of one ~0.2 ms chain, or None; the timer then takes
    # ``after=`` and runs it right after every sample of a case with ``timing: {"unit_clock": True}``:
    # the clock a peak kernel's unit (its AVX-512 or AMX licence) ran at, sample by sample
    sample_clock: Callable | None = None
    # the calibration's last call is the call then timed (same inputs, same reps): the timer takes
    # ``warmup=0`` for a calibrated case's first attempt (a 256 MiB pointer chase: 0.5 s a call)
    calibrated_is_warm: bool = False
    after_verify: Callable | None = None  # extra fields from the inputs after a run (GPU SM clock)
    # isolate(driver, case, processes) -> Record: a case whose figure is drawn once per process
    # (``timing: {"processes": N}``), measured in N fresh interpreters; None: measured in this one
    isolate: Callable | None = None
