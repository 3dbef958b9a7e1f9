"""GPU timer: CUDA events around every sample, warm-up, a time budget, all samples kept.

- ``time_gpu(fn)``: event pair per sample on the current stream, synchronised after each;
  an optional ``flush`` callable runs between samples, outside the events (rewriting a buffer larger
  than L2 evicts the kernel's data, for cold-L2 timings).
- ``repeats_for(make_call, target_s)``: how many repetitions fill one sample of ``target_s``.
Event resolution is ~0.5 us and a launch costs ~5-10 us before the kernel starts: kernels shorter
than ~1 ms repeat (enqueued launches, or a loop inside one launch) until a sample lasts ``target_s``.
Launch and graph latency are measured by the launch family (rooflab/families/launch/cuda.py).
"""

from __future__ import annotations

import time
from statistics import median

from ..timing import Samples


def time_gpu(
    fn, *, budget_s: float = 0.3, min_samples: int = 5, max_samples: int = 2000, warmup: int = 2, flush=None
) -> Samples:
    import cupy

    stream = cupy.cuda.get_current_stream()
    for _ in range(warmup):
        fn()
    stream.synchronize()
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    out = Samples(warmup=warmup)
    deadline = time.perf_counter() + budget_s
    while len(out.seconds) < max_samples:
        if flush is not None:
            flush()
        start.record(stream)
        fn()
        stop.record(stream)
        stop.synchronize()
        out.seconds.append(cupy.cuda.get_elapsed_time(start, stop) * 1e-3)
        if len(out.seconds) >= min_samples and time.perf_counter() >= deadline:
            break
    return out


MAX_REPS = 1 << 30  # kernels take reps as a 32-bit int


def repeats_for(make_call, target_s: float, max_reps: int = MAX_REPS) -> int:
    """Repetitions that fill ``target_s`` of device time per sample: ``make_call(reps)`` is timed
    with growing ``reps`` until one sample lasts at least a quarter of the target, then scaled.

    One timed call of reps=1 is not enough: its event pair also holds the launch (~5-10 us), so a
    kernel that loops ``reps`` times inside one launch (FMA, tensor cores: ~0.1 us per rep) would
    be given ~target/10 us reps and samples 100x shorter than the target (issue 25). At a quarter
    of the target the launch is < 1 % of the sample, and the linear scale-up is accurate."""
    reps, first = 1, None
    while True:
        s = time_gpu(make_call(reps), budget_s=0, min_samples=3, warmup=1).seconds
        t = max(median(s), 1e-9)
        first = first or t
        if t >= target_s / 4 or reps >= max_reps:
            break
        if reps >= 1 << 14 and t < 2 * first:  # 16k reps cost nothing: time does not follow reps (stand-ins)
            return reps
        reps = min(max_reps, reps * max(2, min(1024, int(target_s / 2 / t))))
    return int(max(1, min(max_reps, round(reps * target_s / t))))


def flusher(l2_bytes: int):
    """A callable that rewrites 2x L2 worth of device memory (evicting everything else from L2)."""
    import cupy

    buf = cupy.empty(max(2 * l2_bytes, 64 << 20) // 4, dtype=cupy.float32)
    return lambda: buf.fill(1.0)
