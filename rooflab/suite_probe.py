"""The `probe` suite on the CPU: one point of each ceiling kind per memory level, the smallest run
that still gives a fleet every ceiling it compares (`rooflab run --suite probe`, what `rooflab fleet
run` runs by default).

What it measures, with the kernels and derivations of the `ceilings` suite (suite_ceilings.py):
  FMA peak      FP64 and FP32, K=16 S=8, 1 thread and all threads           4 cases
  bandwidth     triad, one working set inside each level's window, 1 and all
                threads (DRAM: where the ceilings run's DRAM probe finds its
                plateau, capped at 4x the OS LLC, STREAM's rule)             2 x levels
  latency       the three dispatch paths (one process each, not 3-5)        3 cases
                the pointer chase at one size per level (1 thread)          levels
One pass, no intensity sweep. Napkin math on a 32 MiB-LLC server: the DRAM triad is 128 MiB, ~10 ms
a pass at 15 GB/s; the DRAM chase walks 2M lines at ~140 ns, ~0.3 s a call, 3 samples; the rest
is milliseconds per case. The DRAM probe (~0.5 s) keeps a VM that reports a 300-480 MiB L3 from
sizing them at 4x that (a 1.2 GiB triad and a 2 GiB chase: 30 of a probe's 34 s on such a VM). ~25 cases at --quick budgets: a few seconds plus numba's first compile
(cached after the first run on a node). Memory: the triad's 128 MiB x 2.2 with its check.

A ceiling from one point per level has no spread across sizes (p20 = p80); its samples' spread is
in the record. For a machine's characterization run `--suite ceilings`; the probe is for comparing
many identical machines quickly.
"""

from __future__ import annotations

import math
from dataclasses import replace

from . import roofline
from .cpu.caches import FALLBACK_LLC, CacheMap
from .driver import Driver
from .kernels.cpu import stream
from .memory import fmt_bytes, require_fits
from .registry import Case
from .suite_ceilings import Plan, derive_ceilings, latency_cases, set_theoretical
from .suite_ceilings import peak_case as ceilings_peak_case

# (K, S) of the FMA peak: the ERT body is generated source numba cannot cache, compiled per dtype;
# K=16 compiles in 6.7 s where K=64 takes 17.6 s (this 2-core VM, contended). 16 FMAs per load and
# store on 8 streams (16 chains with LLVM's 2x interleave) still cover a 4-cycle FMA on 2 pipes.
PROBE_PEAK = (16, 8)
KERNEL = "triad"


def window_size(w: dict, llc: int | None) -> int:
    """One working set inside a level's window, in whole 4 KiB pages: the geometric middle of
    [lo, hi]; L1 (lo = 0) at 3/4 of its top, leaving room for the arrays' rounding up to whole cache
    lines; DRAM at its lower edge (4x the LLC, STREAM's rule)."""
    if w["hi"] is None:
        size = w["lo"] if w["lo"] else 4 * (llc or FALLBACK_LLC)
        return -(-int(size) // 4096) * 4096
    size = 0.75 * w["hi"] if not w["lo"] else math.sqrt(w["lo"] * w["hi"])
    return max(4096, int(size) // 4096 * 4096)


def bandwidth_cases(threads: list[int], caches: list[dict], llc: int | None) -> list[Case]:
    out = []
    for t in threads:
        for w in roofline.level_windows(caches, t):
            ws = window_size(w, llc)
            if w["hi"] is not None and ws < w["lo"]:
                continue  # a window too narrow for a page-rounded point
            n = -(-(ws // 8) // stream.ARRAYS[KERNEL] // stream.ALIGN_ELEMS) * stream.ALIGN_ELEMS
            out.append(
                Case(
                    f"cpu.stream.{KERNEL}",
                    size=n,
                    threads=t,
                    label=f"{KERNEL} {fmt_bytes(ws)} {t}T ({w['level']})",
                    meta={"kernel": KERNEL},
                    timing={"cv_limit": 0.10, "max_attempts": 2},
                    sweep="bandwidth",
                )
            )
    return out


def chase_cases(caches: list[dict], llc: int | None) -> list[Case]:
    """One pointer-chase size per level: the largest of the chase suite's sizes inside each window
    (DRAM: the first at or beyond 4x the LLC)."""
    from .families import chase

    all_cases = chase.cases(True, [1], llc=llc)
    out = []
    for w in roofline.level_windows(caches, 1):
        inside = [c for c in all_cases if c.size >= w["lo"] and (w["hi"] is None or c.size <= w["hi"])]
        if not inside:
            continue
        c = inside[0] if w["hi"] is None else inside[-1]
        if llc and c.size > llc:
            c = replace(c, timing={**c.timing, "min_samples": 3, "max_attempts": 1})
        out.append(c)
    return out


def peak_case(dtype: str, threads: int, l1_bytes: int) -> Case:
    """The ceilings suite's FMA peak case at the probe's (K, S): a shorter chain, compiled faster."""
    return ceilings_peak_case(dtype, threads, l1_bytes, *PROBE_PEAK)


def cases(threads_all: int, caches: list[dict]) -> list[Case]:
    """The probe's cases; DRAM's sizes start at the LLC's ``dram_from_bytes`` where the run measured
    it (``run``), else at 4x the LLC."""
    llc = -(-CacheMap(caches).dram_from() // 4) if caches else None  # the chase and DRAM sizes end there
    l1 = caches[0]["size_bytes"] if caches else 32 << 10
    plan = Plan(threads_all=threads_all, quick=True, passes=1)
    peaks = [peak_case(dtype, t, l1) for dtype in ("float64", "float32") for t in plan.thread_counts()]
    dispatch = [replace(c, timing={**c.timing, "processes": 1}) for c in latency_cases(threads_all, True)]
    return dispatch + peaks + bandwidth_cases(plan.thread_counts(), caches, llc) + chase_cases(caches, llc)


def run(driver: Driver, writer, threads_all: int, progress) -> None:
    """Measure the probe and store its ceilings; the writer saves after every case."""
    from .suite_ceilings import dram_plan

    machine = writer.data["machine"]
    caches = machine["cpu"]["caches"]
    dram = dram_plan(Plan(threads_all=threads_all, quick=True, passes=1), caches)
    writer.data["config"]["dram_sizing"] = dram
    d = dram.get("dram_from_bytes")
    if caches and d and d < 4 * caches[-1]["size_bytes"]:
        caches[-1]["dram_from_bytes"] = d  # the DRAM window starts where the probe found it
    suite = cases(threads_all, caches)
    largest = max((c.size * 8 * stream.ARRAYS[KERNEL] for c in suite if c.sweep == "bandwidth"), default=0)
    require_fits(int(largest * 2.2), f"the probe's DRAM working set of {fmt_bytes(largest)}")
    if not caches:
        writer.data["notes"].append("the OS gives no cache sizes (sysfs): no L1/L2/L3 ceilings, DRAM from 1 GiB")
    writer.data["config"].update(probe_cases=len(suite))
    task = progress.start(1 + len(suite))
    progress.step("clock probe")
    for t in sorted({1, threads_all}):
        driver.probe_clock(t)
    driver.run(suite, writer, progress)
    set_theoretical(machine["cpu"], driver.best_clock)
    writer.data["ceilings"] = derive_ceilings(writer.data)
    writer.data["notes"] += roofline.order_violations(writer.data["ceilings"])
    writer.data["notes"] += roofline.flat_main_memory(writer.data["ceilings"])
    writer.save()
    progress.done(task)
