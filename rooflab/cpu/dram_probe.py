"""Where DRAM starts for a run: a short read-bandwidth probe, capped by STREAM's rule.

Why: STREAM's rule (arrays of at least 4x the last-level cache) applied to the LLC the OS reports
sizes a cloud VM that reports a 480 MiB L3 (a slice of a server part, whose cache that really
answers ends near 32 MiB) at 1.9 GiB arrays: the sweep, the chase and the intensity sweep then take
minutes each. So the run first measures where the read bandwidth of one core leaves the cache
plateau and settles on the DRAM one, and its DRAM points start there, never above 4x the OS LLC
(the old rule, the cap) nor above the run's largest working set.

The probe: sizes double from 2x the level below the LLC (1 MiB without one) up to the cap; at each
the best of several read calls (kernels/cpu/stream.read_sum on one thread: one core sees the whole shared LLC, and no fork/join
waits on a busy neighbour's core; a small array re-read
inside one call up to 64 MiB so fork/join does not count; the sum is checked against the array's
own, so a pass that skipped data raises). DRAM's plateau is reached at the
first size ``s`` whose bandwidth and the next size's are below DROP x the cache's (the best point
so far) and within FLAT of each other; the DRAM points start at 2 s (half of a gradual step may still hit the cache at
s). No plateau below the cap: the cap, as before.

Napkin math: on this 2-core Zen 3 VM (32 MiB L3) 1 MiB .. 128 MiB is 8 sizes; a 128 MiB read pass
at ~20 GB/s is ~7 ms and its first touch ~40 ms: the probe costs well under a second. On the
480 MiB VM it stops near 128 MiB instead of reaching 1.9 GiB.

    from rooflab.cpu.dram_probe import plan_dram
    plan = plan_dram(caches, cap_bytes=4 * llc)   # {"dram_from_bytes": ..., "probe": [...]}
"""

from __future__ import annotations

import time

import numpy as np

from ..errors import VerificationError

DROP = 0.8  # below this share of the cache plateau's bandwidth: out of the cache
# two consecutive sizes within 8 %: a plateau. (15 % was fooled here: a neighbour thrashing the shared
# L3 read 32 MiB at 24.4 and 64 MiB at 22.3 GB/s, 9 % apart, so DRAM began at 64 MiB; quiet, the same
# VM reads 44, 32 and 26 GB/s at 32, 64 and 128 MiB, so the run's fastest samples at 64 MiB hit the
# L3 and its DRAM roof read 25 % above the next run's, which began at 128 MiB)
FLAT = 0.08
MIN_START = 1 << 20
PASS_S = 0.02  # each size: passes until ~20 ms, at least MIN_PASSES
MIN_PASSES = 3
CALL_BYTES = 64 << 20  # one call re-reads a small array until it has read this much (fork/join ~us-ms)


def probe_sizes(caches: list[dict], cap: int) -> list[int]:
    """Doubling sizes from 2x the level below the LLC (at least 1 MiB) to the cap (included)."""
    below = caches[-2]["size_bytes"] if len(caches) >= 2 else 0
    s = max(MIN_START, 2 * below)
    if cap < 4 * s:  # too few sizes above the level below to see a plateau: nothing to probe
        return []
    out = []
    while s < cap:
        out.append(s)
        s *= 2
    out.append(int(cap) // 4096 * 4096)
    return out


def read_gbps(nbytes: int, threads: int) -> float:
    """Best read bandwidth of a fresh ``nbytes`` array over ~PASS_S (verified sum)."""
    from ..kernels.cpu import stream
    from ..memory import aligned_empty
    from ..threads import use_threads

    n = max(int(nbytes) // 8 // 64 * 64, 64)
    with use_threads(threads):
        a = aligned_empty(n, np.float64)
        stream.fill_pattern(a, threads, 7)
        reps = max(1, CALL_BYTES // (n * 8))
        expected = float(np.sum(a)) * reps
        best, spent, passes = float("inf"), 0.0, 0
        while passes < MIN_PASSES or spent < PASS_S:
            t0 = time.perf_counter()
            got = stream.read_sum(a, reps, threads)
            dt = time.perf_counter() - t0
            if not abs(got - expected) <= 1e-9 * abs(expected) + 1e-6:
                raise VerificationError(f"DRAM probe: read sum {got} != {expected} over {n} elements")
            best, spent, passes = min(best, dt), spent + dt, passes + 1
            if passes >= 50:
                break
    return n * 8 * reps / best / 1e9


def find_plateau(points: list[tuple[int, float]]) -> int | None:
    """The first size whose bandwidth, and the next size's, are below DROP x the best so far (the
    cache) and within FLAT of each other (the DRAM plateau), else None."""
    top = 0.0
    for (s, bw), (_, nxt) in zip(points, points[1:]):
        top = max(top, bw)
        if bw < DROP * top and nxt < DROP * top and abs(nxt - bw) <= FLAT * max(bw, nxt):
            return s
    return None


def plan_dram(caches: list[dict], cap_bytes: int, threads: int = 1, measure=None) -> dict:
    """Probe and decide where this run's DRAM points start. ``measure(nbytes, threads) -> GB/s``
    (injectable: the planner's unit tests feed it a fake machine). Returns the record kept in the
    result file: how the sizes were chosen, the probe's points, dram_from_bytes (None: the cap is
    below where DRAM was found or the cap is not beyond the cache plateau)."""
    measure = measure or read_gbps
    os_llc = caches[-1]["size_bytes"] if caches else None
    t0 = time.perf_counter()
    points: list[tuple[int, float]] = []
    found = None
    for s in probe_sizes(caches, cap_bytes):
        points.append((s, measure(s, threads)))
        found = find_plateau(points)
        if found:
            break
    out = {
        "method": (
            f"read-bandwidth probe ({threads} thread(s)) from {points[0][0] if points else cap_bytes} B doubling: DRAM points start at 2x the "
            f"first size below {DROP:.0%} of the cache's bandwidth, as is the next size, within {FLAT:.0%} of it, capped "
            "at 4x the OS LLC and at the run's largest working set"
        ),
        "os_llc_bytes": os_llc,
        "cap_bytes": int(cap_bytes),
        "probe": [{"bytes": s, "gbps": round(g, 3)} for s, g in points],
        "plateau_from_bytes": found,
        "probe_s": round(time.perf_counter() - t0, 3),
    }
    if found:
        out["dram_from_bytes"] = min(2 * found, int(cap_bytes))
        out["source"] = "measured"
    elif os_llc and cap_bytes >= 4 * os_llc:
        out["dram_from_bytes"] = 4 * os_llc
        out["source"] = "4x the OS LLC (no DRAM plateau found below it)"
    else:
        out["dram_from_bytes"] = None
        out["source"] = "none: the largest working set ends before DRAM's plateau"
    return out
