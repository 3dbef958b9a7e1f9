"""GPU timer: CUDA events around every sample, warm-up, a time budget, all samples kept.

- ``time_gpu(fn)``: event pair per sample on the current stream, synchronised after each;
  an optional ``flush`` callable runs between samples, outside the events (rewriting a buffer larger
  than L2 evicts the kernel's data, for cold-L2 timings).
- ``time_host_launches(fn, n)``: host wall time per launch over ``n`` back-to-back launches,
  either enqueue only (the queue is drained after each sample, outside the timed region) or with a
  synchronize after every launch (the round trip).
- ``time_graph(fn, n)``: captures ``n`` calls of ``fn`` into a CUDA graph and times replays, for
  launch-bound work (the per-call figure is the replay time / n).
Event resolution is ~0.5 us: kernels shorter than ~50 us should repeat inside or use graphs.
"""

from __future__ import annotations

import time

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


def repeats_for(fn, target_s: float) -> int:
    """How many calls of ``fn`` fill ``target_s`` of device time, from one timed call after a warm-up
    (sample-length calibration, as the CPU timer's ``calibrate`` does)."""
    one = time_gpu(fn, budget_s=0, min_samples=1, warmup=1)
    return max(1, int(target_s / max(one.seconds[0], 1e-7)))


def time_host_launches(fn, n: int, *, sync_each: bool, budget_s: float = 0.3, min_samples: int = 5) -> Samples:
    import cupy

    stream = cupy.cuda.get_current_stream()
    fn()
    stream.synchronize()
    out = Samples(warmup=1)
    deadline = time.perf_counter() + budget_s
    while len(out.seconds) < min_samples or time.perf_counter() < deadline:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
            if sync_each:
                stream.synchronize()
        out.seconds.append((time.perf_counter() - t0) / n)
        stream.synchronize()
    return out


def capture_graph(fn, n: int):
    """A CUDA graph of ``n`` back-to-back calls of ``fn`` (captured on a private stream)."""
    import cupy

    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        s.begin_capture()
        for _ in range(n):
            fn()
        graph = s.end_capture()
    return graph, s


def time_graph(fn, n: int, *, budget_s: float = 0.3, min_samples: int = 5) -> Samples:
    import cupy

    graph, s = capture_graph(fn, n)
    graph.launch(s)
    s.synchronize()
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    out = Samples(warmup=1)
    deadline = time.perf_counter() + budget_s
    while True:
        start.record(s)
        graph.launch(s)
        stop.record(s)
        stop.synchronize()
        out.seconds.append(cupy.cuda.get_elapsed_time(start, stop) * 1e-3 / n)
        if len(out.seconds) >= min_samples and time.perf_counter() >= deadline:
            return out


def flusher(l2_bytes: int):
    """A callable that rewrites 2x L2 worth of device memory (evicting everything else from L2)."""
    import cupy

    buf = cupy.empty(max(2 * l2_bytes, 64 << 20) // 4, dtype=cupy.float32)
    return lambda: buf.fill(1.0)
