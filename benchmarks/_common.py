"""Shared helpers for the asv suite: parameters from rooflab's registry, one-time preparation.

asv_runner >= 0.3 runs ``setup`` before every sample, so anything expensive (allocating, first-
touching, compiling, verifying) is done once per process and cached here; the timed bodies only
launch kernels. A kernel that fails verification raises in setup, so asv reports the benchmark
as failed instead of a number. Nothing here touches CUDA at import time.
"""

from __future__ import annotations

import os

QUICK = os.environ.get("ROOFLAB_ASV_QUICK") == "1"
_PREPARED: dict = {}


def bench_params(key, default=None):
    try:
        from rooflab.asv_params import BENCH_PARAMS
    except ImportError:  # an older rooflab without the table
        return default
    return BENCH_PARAMS.get(key, default)


def thread_counts():
    from rooflab.threads import max_threads

    return sorted({1, max_threads()})


def prepared(key, build, slot="default"):
    """build() once per process and parameter combination, keeping ONE combination per ``slot``:
    asv_runner walks a benchmark's parameters in order, and keeping every combination's arrays
    held 9 GB in one process (eight 1.9 GiB intensity arrays on a VM reporting a 480 MiB L3). The
    previous entry is dropped before the next is built, so its memory is free again."""
    held = _PREPARED.get(slot)
    if held is None or held[0] != key:
        _PREPARED.pop(slot, None)
        held = _PREPARED[slot] = (key, build())
    return held[1]


def dram_bytes(floor=256 << 20):
    """An array size that streams from DRAM: where the ceilings run's probe finds DRAM's plateau
    (rooflab.cpu.dram_probe, capped by 4x the OS LLC), at least ``floor``; once per process."""
    from rooflab.cpu import dram_probe
    from rooflab.cpu import machine as cpu_machine

    def probe():
        caches = cpu_machine.read_caches()
        if not caches:
            return max(floor, 1 << 30)
        return max(floor, dram_probe.plan_dram(caches, 4 * caches[-1]["size_bytes"])["dram_from_bytes"])

    return prepared("dram", probe, slot="dram")


def require_gpu():
    """Skip (asv shows n/a) unless cupy sees a CUDA device."""
    try:
        from rooflab.cuda import backend
    except ImportError:
        raise NotImplementedError("this rooflab has no CUDA backend") from None
    ok, why = backend.probe()
    if not ok:
        raise NotImplementedError(why)


def median_seconds(fn, budget=0.2, min_samples=5):
    from rooflab.cpu.timing import time_cpu
    from rooflab.timing import summarize

    return summarize(time_cpu(fn, budget_s=budget, min_samples=min_samples).seconds)["median"]
