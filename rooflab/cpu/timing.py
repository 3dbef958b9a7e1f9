"""The CPU timer: ``time.perf_counter_ns`` around each call, warm-up, a time budget and a minimum
sample count, every sample kept; ``calibrate`` picks a repetition count so one sample lasts
``target_s`` (perf_counter_ns ticks in ~20-50 ns here: a sample should be milliseconds).
An optional ``flush`` runs before each sample, outside the timed region (cold-cache timings); an
optional ``after`` runs right after each sample, also untimed, and what it returns is kept per sample
(``Samples.after``: the clock a peak kernel's unit ran at, probed right after each burst).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from ..timing import Samples


def time_cpu(
    fn: Callable[[], object],
    *,
    budget_s: float = 0.5,
    min_samples: int = 5,
    max_samples: int = 10_000,
    warmup: int = 1,
    flush: Callable[[], object] | None = None,
    after: Callable[[], object] | None = None,
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
        if flush is not None:
            flush()
        t0 = clock()
        fn()
        t1 = clock()
        out.seconds.append((t1 - t0) * 1e-9)
        if after is not None:
            out.after.append(after())
        if len(out.seconds) >= min_samples and t1 >= deadline:
            break
    return out


CONFIRM = 16  # a call this far over the target is its own length (a 256 MiB chase), never confirmed


def calibrate(make_call: Callable[[int], Callable[[], object]], target_s: float, max_reps: int = 1 << 40) -> int:
    """Smallest power-of-two-ish repetition count whose call takes about ``target_s``: always the
    count of the call it ran last (so that call warmed what the timer then runs). A call that
    reaches the target but not CONFIRM x over it is run once more and the faster taken: a first
    call (a thread pool starting, pages faulting) or one a neighbour preempted (a scheduler slice,
    ms) must not fix the count at 1, which times the dispatch instead of the kernel (a 2-thread INT8
    peak read 0.14 GOPS beside a busy core, its calls 6 us of fork/join)."""
    reps = 1
    while True:
        call = make_call(reps)
        t0 = time.perf_counter()
        call()
        dt = time.perf_counter() - t0
        if target_s <= dt < CONFIRM * target_s and reps < max_reps:
            t0 = time.perf_counter()
            call()
            dt = min(dt, time.perf_counter() - t0)
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
