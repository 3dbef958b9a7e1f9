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


def prepared(key, build):
    """build() once per process and parameter combination."""
    if key not in _PREPARED:
        _PREPARED[key] = build()
    return _PREPARED[key]


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
