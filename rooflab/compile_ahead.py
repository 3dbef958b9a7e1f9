"""Compile a run's slowest kernels ahead, on every core, before anything is timed.

On a cold numba cache a quick ceilings run spends ~35 s compiling, one kernel after another, in
its timed phases (measured on a 2-core Xeon VM: the ERT FMA kernels ~23 s, the low-precision dot
peaks ~4 s). The ERT kernels are one generated function per (K, S) (kernels/cpu/ert.py), each
2-18 s to compile per dtype, and numba compiles on one core. So before the first timed phase the
kernels whose cache is empty are compiled in ``cores`` fresh worker processes at once, each call on
a tiny input of the same types as the run's (numba's cache is keyed on the types, not the sizes),
and the run then loads them from the cache. With every kernel cached nothing starts (a check of
numba's cache index, ~1 ms per kernel): a warm run pays nothing.

A job is plain data: ("ert", K, S, dtype) or ("lowprec", unit); ``_warm`` runs one in a worker.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import time

import numpy as np


def jobs_for(cases) -> list[tuple]:
    """The compile jobs of a list of cases (rooflab.registry.Case): one per distinct ERT kernel and
    dtype, one per low-precision unit. Other kernels compile in a second or two where they run."""
    out: list[tuple] = []
    for c in cases:
        if c.variant in ("cpu.ert.fma", "cpu.intensity.ert-rotating"):
            job = ("ert", int(c.params["K"]), int(c.params["S"]), str(c.dtype or "float64"))
        elif c.variant.startswith("cpu.lowprec."):
            job = ("lowprec", c.variant.split(".")[-1])
        else:
            continue
        if job not in out:
            out.append(job)
    return out


def _dispatchers(job: tuple) -> list:
    if job[0] == "ert":
        from .kernels.cpu import ert

        return [ert.ert_kernel(job[1], job[2])]
    from .families import lowprec

    return [lowprec.KERNELS[job[1]]]


def cached(job: tuple) -> bool:
    """Whether numba's on-disk cache already holds a compiled version of the job's kernel (its
    cache index is not empty). Unknown: False (the worker's call then only loads it)."""
    try:
        index = _dispatchers(job)[0]._cache._cache_file._load_index()  # {(signature, target): ...}
        if job[0] == "ert":  # one function, compiled once per dtype
            return any(job[3] in str(key[0]) for key in index)
        return bool(index)
    except Exception:  # numba's private cache API moved: compile ahead anyway, it is only a load
        return False


def _warm(job: tuple) -> float:
    """Compile one job's kernel by calling it on a tiny input of the run's types; seconds taken."""
    t0 = time.perf_counter()
    if job[0] == "ert":
        from .families.fma import _ert

        _, K, S, dtype = job
        a = np.full(64 * S, 0.5, dtype=dtype)
        _ert(a, K=K, S=S, block=a.size, reps=1, threads=1)
    else:
        from .registry import get_variant

        v = get_variant(f"cpu.lowprec.{job[1]}")
        v.kernel(*v.inputs(1), reps=1, threads=1)
    return time.perf_counter() - t0


def pending(cases) -> list[tuple]:
    """The cases' compile jobs whose kernel numba's cache does not hold yet."""
    return [j for j in jobs_for(cases) if not cached(j)]


def compile_ahead(cases, cores: int) -> dict | None:
    """Compile the cases' uncached slow kernels in ``cores`` worker processes at once (spawned: no
    numba thread pool is forked). Returns {"jobs", "compiled", "seconds", "workers"} or None when
    every kernel was cached; a worker that fails leaves its kernel to compile where it runs."""
    todo = pending(cases)
    if not todo:
        return None
    t0 = time.perf_counter()
    workers = max(1, min(int(cores), len(todo)))
    ctx = multiprocessing.get_context("spawn")
    try:
        with cf.ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
            done = list(pool.map(_safe_warm, todo))
    except cf.process.BrokenProcessPool:  # a worker killed by a signal: the run compiles what is left
        done = [None if not cached(j) else 0.0 for j in todo]
    return {
        "jobs": [list(j) for j in todo],
        "compiled": sum(1 for d in done if d is not None),
        "seconds": round(time.perf_counter() - t0, 2),
        "workers": workers,
    }


def _safe_warm(job: tuple) -> float | None:
    try:
        return _warm(job)
    except Exception:  # the run compiles it itself and reports any error where it measures
        return None
