"""Before a timed run: wait until this process's other threads are idle, so a thread pool that an
earlier call left spinning does not take the cores the timed kernel needs.

Why: thread pools keep their workers busy-waiting after a call, so the next call starts at once.
OpenBLAS spins ~2^28 cycles (~0.1 s at 3 GHz), onnxruntime's and OpenMP's pools spin too. The
driver verifies a kernel against a reference (numpy, so OpenBLAS on every thread asked for) just
before timing it; a quick, cold time of a rotation then falls entirely inside the spin. On the
2-vCPU Zen 3 VM at 2 threads, onnxruntime's MatMul over 40 copies of a 1536 x 576 weight took
658 us a node right after a numpy matmul, 512-649 us with 20-50 ms between them, 225-237 us after
100-300 ms: the grid's 2-thread decode predictions had read +21 to +48 % against onnxruntime.

How: the CPU time the kernel gave each other thread of this process (/proc/self/task/*/schedstat,
ns) over a window, again until no thread ran more than a quarter of the window (a worker asleep
runs nothing), at most ``cap_s``. schedstat of a thread running on another core advances only at
the scheduler tick (4 ms here: a spinning OpenBLAS worker read 4 or 8 ms per 5 ms, then 0 from
~115 ms after the call), so a window spans at least one tick at HZ >= 100: 11 ms. Napkin: an idle
process pays one window (~11 ms plus ~0.1 ms of /proc reads for ~30 threads) per multi-thread
measurement. Where schedstat is missing (no CONFIG_SCHED_INFO, not Linux) it does nothing and
says so in the wait's result (None).
"""

from __future__ import annotations

import os
import threading
import time

WINDOW_S = 0.011  # one look at the other threads: at least one scheduler tick at HZ >= 100
BUSY_SHARE = 0.25  # a thread that ran more than this share of the window is still busy
CAP_S = 0.3  # never wait longer than this (a thread the run keeps busy on purpose)
TASKS = "/proc/self/task"


def other_threads_ns() -> dict[int, int] | None:
    """{thread id: ns it has run} of every thread of this process but the caller's; None where the
    kernel does not keep schedstat."""
    me = threading.get_native_id()
    try:
        tids = os.listdir(TASKS)
    except OSError:
        return None
    if not os.path.exists(f"{TASKS}/{me}/schedstat"):
        return None
    out = {}
    for t in tids:
        if int(t) == me:
            continue
        try:
            with open(f"{TASKS}/{t}/schedstat") as f:
                out[int(t)] = int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # a thread that ended between the listing and the read
    return out


def wait_until_idle(window_s: float = WINDOW_S, cap_s: float = CAP_S) -> float | None:
    """Seconds waited until no other thread of this process ran more than BUSY_SHARE of a window
    (at least one window), or ``cap_s`` if they never went idle; None where it cannot be seen."""
    t0 = time.perf_counter()
    before = other_threads_ns()
    if before is None:
        return None
    while True:
        time.sleep(window_s)
        now = other_threads_ns() or {}
        busiest = max((ns - before.get(t, ns) for t, ns in now.items()), default=0)
        waited = time.perf_counter() - t0
        if busiest <= BUSY_SHARE * window_s * 1e9 or waited >= cap_s:
            return waited
        before = now
