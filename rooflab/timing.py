"""Timers and sample statistics.

The timers live with their backends (rooflab.cpu.timing: perf_counter_ns around each call;
rooflab.cuda.timing: CUDA events). The rules (STREAM, triton's do_bench): build and verify outside,
warm up, then take samples until both a time budget and a minimum sample count are met; keep every
sample; report the median with p20/p80, min and the coefficient of variation.

A sample should last well above the timer's resolution (perf_counter_ns ticks in ~20-50 ns here):
``calibrate`` picks a repetition count so one sample takes ``target_s``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np


@dataclass
class Samples:
    """Per-call times in seconds, all of them, in the order taken."""

    seconds: list[float] = field(default_factory=list)
    warmup: int = 0
    after: list = field(default_factory=list)  # what the timer's ``after`` hook returned, per sample

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
