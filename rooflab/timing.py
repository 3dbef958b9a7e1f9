"""Timers and sample statistics.

One timer per device: here the CPU one (``time.perf_counter_ns`` around each call; the GPU one with
CUDA events lives in rooflab.cuda). The rules (STREAM, triton's do_bench): build and verify outside,
warm up, then take samples until both a time budget and a minimum sample count are met; keep every
sample; report the median with p20/p80, min and the coefficient of variation.

A sample should last well above the timer's resolution (perf_counter_ns ticks in ~20-50 ns here):
``calibrate`` picks a repetition count so one sample takes ``target_s``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np


@dataclass
class Samples:
    """Per-call times in seconds, all of them, in the order taken."""

    seconds: list[float] = field(default_factory=list)
    warmup: int = 0

    def stats(self) -> dict:
        return summarize(self.seconds)


def summarize(values) -> dict:
    """median, p20, p80, min, max, mean, std, cv (std/mean) and n of ``values``."""
    v = np.asarray(list(values), dtype=np.float64)
    if v.size == 0:
        raise ValueError("no samples to summarize")
    mean = float(v.mean())
    std = float(v.std(ddof=1)) if v.size > 1 else 0.0
    return {
        "median": float(np.median(v)),
        "p20": float(np.quantile(v, 0.2)),
        "p80": float(np.quantile(v, 0.8)),
        "min": float(v.min()),
        "max": float(v.max()),
        "mean": mean,
        "std": std,
        "cv": std / mean if mean else math.inf,
        "n": int(v.size),
    }


def invert_stats(time_stats: dict, amount: float) -> dict:
    """Throughput statistics (``amount`` per second) from time statistics.

    The median maps to the median; p20 of throughput is ``amount / p80`` of time, and so on.
    """
    t = time_stats
    return {
        "median": amount / t["median"],
        "p20": amount / t["p80"],
        "p80": amount / t["p20"],
        "min": amount / t["max"],
        "max": amount / t["min"],
        "cv": t["cv"],
        "n": t["n"],
    }


def time_cpu(
    fn: Callable[[], object], *, budget_s: float = 0.5, min_samples: int = 5, max_samples: int = 10_000, warmup: int = 1
) -> Samples:
    """Call ``fn`` ``warmup`` times untimed, then time single calls until ``budget_s`` has
    passed and at least ``min_samples`` were taken."""
    clock = time.perf_counter_ns
    for _ in range(warmup):
        fn()
    out = Samples(warmup=warmup)
    start = clock()
    deadline = start + int(budget_s * 1e9)
    while len(out.seconds) < max_samples:
        t0 = clock()
        fn()
        t1 = clock()
        out.seconds.append((t1 - t0) * 1e-9)
        if len(out.seconds) >= min_samples and t1 >= deadline:
            break
    return out


def calibrate(make_call: Callable[[int], Callable[[], object]], target_s: float, max_reps: int = 1 << 40) -> int:
    """Smallest power-of-two-ish repetition count whose call takes about ``target_s``."""
    reps = 1
    while True:
        call = make_call(reps)
        t0 = time.perf_counter()
        call()
        dt = time.perf_counter() - t0
        if dt >= target_s or reps >= max_reps:
            return reps
        if dt < target_s / 64:
            reps *= 16
        else:
            reps = max(reps + 1, int(math.ceil(reps * target_s / max(dt, 1e-9))))
        reps = min(reps, max_reps)


def time_per_call(
    fn: Callable[[], object], calls: int, *, budget_s: float, min_samples: int = 5, warmup: int = 1
) -> Samples:
    """For calls far shorter than the timer's resolution (dispatch latency): each sample times a
    Python loop of ``calls`` calls and records the mean per call."""

    def batch():
        for _ in range(calls):
            fn()

    raw = time_cpu(batch, budget_s=budget_s, min_samples=min_samples, warmup=warmup)
    return Samples([s / calls for s in raw.seconds], warmup=warmup)
