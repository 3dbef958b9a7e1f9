"""From records to ceilings, and from ceilings to an empirical roofline.

Bandwidth per memory level. The OS says how big each cache is (sysfs); the sweep says how fast
each working-set size ran (per size its fastest sample over the run's passes, STREAM's best rate).
A level's ceiling is the median of those sweep points *well inside* its capacity window, with the
p20/p80 of those points as spread:

  L1      (0, C1/2]                 private caches: C = size x threads in use
  Lk      [2 C(k-1), Ck/2]          the last level, shared with other cores (and on a VM with
  LLC     [2 C(k-1), C_llc/4]       other tenants), gets a wider margin
  DRAM    [4 C_llc, inf)            STREAM's rule: arrays at least 4x the last-level cache, or from
                                    where the run's probe found DRAM's plateau when that is lower
                                    (``dram_from_bytes`` on the LLC; the LLC window then ends at 1/4 of it)

Where the plateau really ends is reported next to the OS size: the last size, walking up from
the window, whose bandwidth is still above the geometric mean of this level's and the next
level's ceilings. (On a VM the L3 the OS reports is shared with other tenants and the plateau
can end at half of it.)

Roofline: attainable(I) = min(peak, I x BW_level); ridge point I* = peak / BW_level.
"""

from __future__ import annotations

import math
from statistics import median

import numpy as np

from .cpu.caches import UNKNOWN_CACHES_DRAM_FROM, capacity  # noqa: F401  (one description of the caches)

BANDWIDTH_UNIT = "GB/s"
COMPUTE_UNIT = "GFLOP/s"
LATENCY_UNIT = "ns"


def point_stats(values: list[float]) -> dict:
    """Median, p20-p80, range and count of the sweep points a ceiling is derived from."""
    return {
        "median": float(median(values)),
        "p20": float(np.quantile(values, 0.2)),
        "p80": float(np.quantile(values, 0.8)),
        "min": float(min(values)),
        "max": float(max(values)),
        "n_points": len(values),
    }


def level_windows(caches: list[dict], threads: int) -> list[dict]:
    """[{level, lo, hi, os_bytes}] for every cache level and DRAM (hi None = unbounded)."""
    out = []
    prev = None
    for i, c in enumerate(caches):
        cap = capacity(c, threads)
        last = i == len(caches) - 1
        lo = 0 if prev is None else 2 * prev
        hi = cap / (4 if (last and not c.get("private", False)) else 2)
        out.append({"level": c["name"], "lo": lo, "hi": hi, "os_bytes": cap})
        prev = cap
    # Without cache sizes (no sysfs: some containers) the level split is refused: only sizes far
    # beyond any last-level cache shipped today count as DRAM. py-cpuinfo's cpuid sizes were tried
    # as a fallback and read 1 MiB of L3 on a 32 MiB VM: a wrong window is worse than none.
    dram_lo = 4 * prev if prev else UNKNOWN_CACHES_DRAM_FROM
    measured = caches[-1].get("dram_from_bytes") if caches else None  # the run's probe (cpu/dram_probe.py)
    if measured and measured < dram_lo:
        dram_lo = measured
        out[-1]["hi"] = min(out[-1]["hi"], measured / 4)
    out.append({"level": "DRAM", "lo": dram_lo, "hi": None, "os_bytes": None})
    return out


def _in_window(size: float, w: dict) -> bool:
    """Inside a level's window, with 0.1 % slack: sweep points are rounded up to whole cache lines
    per array, so the point meant for an edge may sit a few bytes past it."""
    return size >= w["lo"] * 0.999 and (w["hi"] is None or size <= w["hi"] * 1.001)


def bandwidth_ceilings(
    points: list[dict], caches: list[dict], threads: int, kernel: str, dtype: str = "float64"
) -> list[dict]:
    """Ceilings of one kernel at one thread count from its sweep points.

    Estimator: a run measures every size in several passes spread over the run (interleaved with
    everything else, so one burst of a neighbour cannot sink them all), each pass many samples of
    milliseconds. Per size the fastest sample of all passes counts (STREAM's best rate:
    interference only ever slows a kernel down, and a roof is an upper bound); per level, the
    median over the sizes inside its window, with the p20/p80 over those sizes as spread, and the
    previous estimator beside it (``best_pass_median``: the median over the sizes of each size's
    best pass median). A size whose pass medians differ by more than 5 % is marked, and a level
    most of whose sizes are marked is flagged noisy. (Two consecutive full runs on a shared 2-vCPU
    VM, recomputed from their samples: 23 of 32 bandwidth ceilings within 5 % with the fastest
    sample, 16 of 32 with the best pass's median; the 2-thread in-cache sizes swung 190-450 GB/s
    between passes.)"""
    pts = best_of_passes(
        p
        for p in points
        if p.get("status", "ok") == "ok" and p.get("gbps") and p.get("threads") == threads and p.get("kernel") == kernel
    )
    windows = level_windows(caches, threads)
    out = []
    for w in windows:
        inside = [p for p in pts if _in_window(p["working_set_bytes"], w)]
        if not inside:
            continue
        values = [p["rate"] for p in inside]
        n_disturbed = sum(disturbed(p, per_cycle=w["level"] in CORE_CLOCKED) for p in inside)
        out.append(
            {
                "name": f"{w['level']} {kernel} bandwidth, {threads} thread{'s' if threads > 1 else ''}",
                "kind": "bandwidth",
                "level": w["level"],
                "dtype": dtype,
                "threads": threads,
                "kernel": kernel,
                "value": float(median(values)),
                "unit": BANDWIDTH_UNIT,
                "stats": point_stats(values),
                "estimator": "fastest sample per size, median over the window's sizes",
                "best_pass_median": float(median(p["best_median"] for p in inside)),
                "window_bytes": [w["lo"], w["hi"]],
                "os_size_bytes": w["os_bytes"],
                "points_bytes": [p["working_set_bytes"] for p in inside],
                "noisy": n_disturbed > len(inside) / 2,
                "disturbed_sizes": [n_disturbed, len(inside)],  # what noise_reasons says
                # how far the passes' best samples lay apart (median over the sizes): the run's own
                # spread over its minutes, one source of the ceiling's interval (rooflab/intervals.py)
                "pass_spread": float(median(p.get("top_spread", 0.0) for p in inside)),
            }
        )
    _plateau_ends(out, pts)
    return out


PASS_SPREAD = 0.05  # passes of one size further apart than this mark the size as disturbed
# levels that run at the core's clock: their passes corroborate each other per cycle (bytes per cycle
# of the clock probed around each pass), so a clock that wandered 4-5 % between passes a minute apart
# (seen on the Zen 5 VM) is not taken for a neighbour. The L3 and DRAM keep their own clocks (the
# uncore, the memory bus) on some CPUs: judged as measured.
CORE_CLOCKED = ("L1", "L2")


def disturbed(p: dict, per_cycle: bool = False) -> bool:
    """A size whose figure cannot be trusted: its best pass was noisy (clock drop, sample CV), or
    its fastest sample, the roof's estimator, stands alone: no second pass came within PASS_SPREAD
    of it. An upper bound two passes reach is corroborated even when other passes were slowed (on
    a shared VM the DRAM bursts of one quick run read 28, 17, 22 and 25 GB/s: the DRAM regime moves
    between minutes; 25 and 28 do not corroborate each other, 17, 16, 17 would). A size measured in
    one pass only: the old rule, its pass medians' spread (none)."""
    if p.get("noisy"):
        return True
    if p.get("passes", 1) >= 2 and "corroborated" in p:
        if per_cycle and p.get("corroborated_per_cycle") is not None:
            return p["corroborated_per_cycle"] < 2
        return p["corroborated"] < 2
    return p.get("pass_spread", 0) > PASS_SPREAD


def fastest_sample(p: dict) -> float:
    """A pass's best rate (its fastest sample); its median where a record keeps no maximum."""
    return float(p["gbps"].get("max", p["gbps"]["median"]))


def best_of_passes(points) -> list[dict]:
    """One point per working-set size: the pass with the fastest sample, whose rate is ``rate``,
    with the best of the passes' medians (``best_median``) and the spread between them."""
    by_size: dict = {}
    for p in points:
        by_size.setdefault(p["working_set_bytes"], []).append(p)
    out = []
    for size in sorted(by_size):
        group = by_size[size]
        best = max(group, key=fastest_sample)
        medians = [p["gbps"]["median"] for p in group]
        tops = [fastest_sample(p) for p in group]
        clocks = [pass_clock(p) for p in group]
        per_cycle = [t / g for t, g in zip(tops, clocks)] if all(clocks) else None
        out.append(
            {
                **best,
                "rate": fastest_sample(best),
                "best_median": max(medians),
                "passes": len(group),
                "pass_spread": 1 - min(medians) / max(medians),
                "top_spread": 1 - min(tops) / max(tops),
                # passes whose fastest sample reached the best within PASS_SPREAD (the best included)
                "corroborated": sum(t >= (1 - PASS_SPREAD) * max(tops) for t in tops),
                # the same per cycle of each pass's clock (None where a pass has no probe around it)
                "corroborated_per_cycle": (
                    sum(x >= (1 - PASS_SPREAD) * max(per_cycle) for x in per_cycle) if per_cycle else None
                ),
            }
        )
    return out


def pass_clock(p: dict) -> float | None:
    """The core clock around one pass: the mean of the probes taken just before and just after it."""
    c = p.get("clock_ghz") or {}
    probes = [*(c.get("before") or []), *(c.get("after") or [])]
    return sum(probes) / len(probes) if probes and all(probes) else None


def order_violations(ceilings: list[dict]) -> list[str]:
    """A slower (farther) level measuring above a faster one is a measurement problem, and
    interference only slows a kernel down: the nearer level is the low one, flagged noisy; the
    farther keeps its figure (one bad L1 used to flag L2, L3 and DRAM too). Every pair counts, not
    only neighbours: with L1 low, L3 above L1 is named even where L2 sits above both."""
    notes = []
    order = {name: i for i, name in enumerate(Roofline.LEVEL_ORDER)}
    groups: dict = {}
    for c in ceilings:
        if c["kind"] == "bandwidth":
            groups.setdefault((c["threads"], c.get("kernel")), []).append(c)
    for cs in groups.values():
        cs = sorted(cs, key=lambda c: order.get(c["level"], 99))
        for i, near in enumerate(cs):
            for far in cs[i + 1 :]:
                if far["level"] == near["level"] or far["value"] <= near["value"] * 1.02:
                    continue
                near["noisy"] = True
                near["order_violation"] = True
                notes.append(
                    f"{far['name']} ({far['value']:.1f} GB/s) measured above {near['name']} ({near['value']:.1f} GB/s): "
                    f"a nearer level cannot be slower than a farther one, and interference only slows: "
                    f"{near['name']} is flagged noisy"
                )
    return notes


SCALES = 1.5  # the caches' all-thread figures over their 1-thread ones: the cores add bandwidth
FLAT = 1.05  # main memory's all-thread figure within this of its 1-thread one: it did not scale


def flat_main_memory(ceilings: list[dict]) -> list[str]:
    """An all-thread DRAM (HBM) figure no better than the 1-thread one, in a run whose cache levels
    scale with the threads, is flagged noisy with a note: the usual cause is a neighbour on one of
    the cores (a quick run read 16.8 GB/s at 1 and at 2 threads where the full run measured 32.5).
    A machine where one core fills the memory bus to within 5 % is flagged too, run after run: a
    later quiet run tells the two apart (the Zen 3 VM's DRAM, 39.8 -> 46.2 GB/s from 1 to 2 threads,
    scales enough not to be)."""
    one = {(c["level"], c.get("kernel")): c for c in ceilings if c["kind"] == "bandwidth" and c["threads"] == 1}
    notes = []
    for c in ceilings:
        base = one.get((c.get("level"), c.get("kernel")))
        if c["kind"] != "bandwidth" or c["threads"] <= 1 or base is None or c["level"] not in ("DRAM", "HBM"):
            continue
        caches = [
            x["value"] / one[(x["level"], x.get("kernel"))]["value"]
            for x in ceilings
            if x["kind"] == "bandwidth" and x["threads"] == c["threads"] and x["level"] in ("L1", "L2")
            and (x["level"], x.get("kernel")) in one
        ]  # fmt: skip
        scale = sorted(caches)[len(caches) // 2] if caches else 0.0  # the caches' median scaling
        if scale >= SCALES and c["value"] <= FLAT * base["value"] and not c.get("noisy"):
            c["noisy"] = True
            c["flat_with_threads"] = True
            notes.append(
                f"{c['name']} ({c['value']:.1f} GB/s) is no better than at 1 thread ({base['value']:.1f}) while the "
                f"caches scale {scale:.1f}x: flagged noisy (a neighbour on a core?); a later run tells"
            )
    return notes


# A ceiling that cannot be true is no roof: kept in the file with its reason, never used to place
# an op or drawn as a roof. Interference only slows a kernel down, so each rule names the figure
# that is wrong: the low one.
IMPLAUSIBLE_OF_THEORETICAL = 0.10  # a compute peak under 10 % of its theoretical rate
LEVEL_INVERSION = 1.5  # a nearer (faster) level measuring under a farther one / 1.5
THREADS_BELOW = 0.9  # an all-thread figure under 0.9x the 1-thread one of the same ceiling
HIERARCHY = ("L1", "L2", "L3", "L4", "DRAM", "HBM")  # nearer (faster) first


def implausible(ceilings: list[dict]) -> dict[tuple, str]:
    """{(ceiling name, threads): why it cannot be true} for compute and bandwidth ceilings (latencies are
    floors, read as such): far below the theoretical peak, a faster level below a slower one, an
    all-thread figure below the 1-thread one. Reads a ``implausible`` reason already stored too,
    so files written before this check are judged the same way when read."""
    out = {cid(c): c["implausible"] for c in ceilings if c.get("implausible")}
    for c in ceilings:
        f = c.get("fraction_of_theoretical")
        if c["kind"] == "compute" and f is not None and f < IMPLAUSIBLE_OF_THEORETICAL:
            out.setdefault(cid(c), f"{f:.0%} of its theoretical peak")
    order = {name: i for i, name in enumerate(HIERARCHY)}  # not shared memory or host links: off the ladder
    groups: dict = {}
    for c in ceilings:
        if c["kind"] == "bandwidth" and c.get("level") in order:
            groups.setdefault((c["threads"], c.get("kernel")), []).append(c)
    for cs in groups.values():
        for near in cs:
            for far in cs:
                if order[far["level"]] > order[near["level"]] and far["value"] > LEVEL_INVERSION * near["value"]:
                    out.setdefault(cid(near), f"below {far['name']} ({far['value']:.3g} {unit_of(far)})")
    one = {_key_but_threads(c): c for c in ceilings if c["kind"] in ("compute", "bandwidth") and c["threads"] == 1}
    for c in ceilings:
        base = one.get(_key_but_threads(c)) if c["kind"] in ("compute", "bandwidth") and c["threads"] > 1 else None
        if base and c["value"] < THREADS_BELOW * base["value"]:
            out.setdefault(cid(c), f"below the 1-thread figure ({base['value']:.3g} {unit_of(base)})")
    return out


def unit_of(c: dict) -> str:
    return c.get("unit") or {"compute": COMPUTE_UNIT, "bandwidth": BANDWIDTH_UNIT}.get(c["kind"], LATENCY_UNIT)


def cid(c: dict) -> tuple:
    """What tells one ceiling from another: its name and thread count."""
    return c["name"], c.get("threads")


def _key_but_threads(c: dict) -> tuple:
    # a low-precision peak's kernel is its instruction (INT8 and BF16 have two paths each: AVX2 or
    # VNNI and AMX, AVX-512 and AMX); an FMA peak's (K, S) may differ between thread counts
    per_kernel = c["kind"] == "bandwidth" or c.get("dtype") in ("int8", "bfloat16", "float16")
    return c["kind"], c.get("level"), c.get("dtype"), c.get("kernel") if per_kernel else None


def mark_implausible(ceilings: list[dict]) -> list[str]:
    """Store each reason on its ceiling (``implausible``; flagged noisy too) and return one note
    per ceiling: kept in the file, never used as a roof."""
    notes = []
    for key, why in implausible(ceilings).items():
        c = next(c for c in ceilings if cid(c) == key)
        c["implausible"], c["noisy"] = why, True
        notes.append(f"{c['name']} ({c['value']:.3g} {unit_of(c)}) cannot be true: {why}; kept, not used as a roof")
    return notes


SWEEP_OVER_ROOF = 1.05  # a DRAM-streaming sweep point this far above the DRAM update roof


def sweep_above_roof(ceilings: list[dict], sweep: list[dict]) -> list[str]:
    """The intensity sweep streams its DRAM-sized array with the update kernel's mix (read and write
    back in place), so its DRAM GB/s (GFLOP/s / intensity) can never beat the DRAM update roof of
    the same thread count. When it does, the roof was measured while the memory bus was busier
    (another tenant of the host: it leaves no trace in CPU steal time): the roof is flagged, with
    the figure that beat it, and so is the point (its time is not the one the roof predicts)."""
    notes = []
    roofs = {
        c["threads"]: c
        for c in ceilings
        if c["kind"] == "bandwidth" and c.get("level") == "DRAM" and c.get("kernel") == "update"
    }
    for p in sweep:
        roof = roofs.get(p.get("threads"))
        rate = (p.get("gflops") or {}).get("median")
        if not roof or not rate or not p.get("intensity") or p.get("status", "ok") != "ok":
            continue
        gbps = rate / p["intensity"]
        if gbps > SWEEP_OVER_ROOF * roof["value"]:
            p["noisy"] = True
            p["above_dram_roof"] = gbps / roof["value"]
            if not roof.get("beaten_by_sweep"):
                notes.append(
                    f"the intensity sweep streamed DRAM at {gbps:.1f} GB/s ({p['intensity']:g} FLOP/B, "
                    f"{p['threads']}T), {gbps / roof['value'] - 1:.0%} above {roof['name']} ({roof['value']:.1f} "
                    "GB/s): the memory bus was busier while the roof was measured; both are flagged noisy"
                )
            roof["noisy"] = True
            roof["beaten_by_sweep"] = max(roof.get("beaten_by_sweep", 0.0), gbps)
    return notes


def _plateau_ends(ceilings: list[dict], pts: list[dict]) -> None:
    for cur, nxt in zip(ceilings, ceilings[1:]):
        threshold = math.sqrt(cur["value"] * nxt["value"])
        end = None
        for p in pts:
            if p["working_set_bytes"] < cur["window_bytes"][0]:
                continue
            if p["rate"] >= threshold:
                end = p["working_set_bytes"]
            else:
                break
        cur["plateau_end_bytes"] = end
        cur["plateau_threshold_gbps"] = threshold
    if ceilings:
        ceilings[-1].setdefault("plateau_end_bytes", None)


LATENCY_PASS_SPREAD = 0.10  # a dispatch floor's passes further apart than this: noisy (families/latency.py
# judges its ceilings by it, why_noisy says it)


def why_noisy(c: dict) -> list[str]:
    """Why a ceiling is flagged noisy, in words, from what its derivation left on it: the flag alone
    told a user nothing (24 of 27 noisy ceilings of one quick run on the Zen 3 VM had no reason)."""
    out = list(c.get("noise_reasons") or [])
    if c.get("order_violation"):
        out.append("a farther level measured faster than this one")
    if c.get("flat_with_threads"):
        out.append("no faster than at 1 thread while the caches scale")
    if c.get("beaten_by_sweep"):
        out.append(f"the intensity sweep streamed DRAM at {c['beaten_by_sweep']:.1f} GB/s, above it")
    k_n = c.get("disturbed_sizes")
    if k_n and k_n[0]:
        out.append(
            f"{k_n[0]} of {k_n[1]} sizes disturbed (a noisy pass, or no second pass within "
            f"{PASS_SPREAD:.0%} of the fastest sample)"
        )
    limit = LATENCY_PASS_SPREAD if c.get("kind") == "latency" else PASS_SPREAD
    if c.get("per_cycle_spread") is not None:
        if c["per_cycle_spread"] > limit:
            out.append(f"its passes differ by {c['per_cycle_spread']:.0%} per cycle of their clocks")
    elif c.get("kind") != "bandwidth" and (c.get("pass_spread") or 0) > limit:
        out.append(f"its passes differ by {c['pass_spread']:.0%}")
    if c.get("value") is not None and c["value"] <= 0:
        out.append("no positive figure")
    if not out:
        out.append("its best pass was flagged while it was timed (its samples' spread or a clock drop)")
    return list(dict.fromkeys(out))  # once each (a file's stored reasons are derived again here)


def say_why_noisy(ceilings: list[dict]) -> None:
    """``noise_reasons`` on every noisy ceiling (kept in the result file, shown in the tables)."""
    for c in ceilings:
        if c.get("noisy") and not c.get("implausible"):
            c["noise_reasons"] = why_noisy(c)


def ceiling_notes(c: dict) -> list[str]:
    """Plain-text remarks on one ceiling, for the CLI summary and the HTML report."""
    from .memory import fmt_bytes

    notes = []
    if c.get("implausible"):
        notes.append(f"cannot be true ({c['implausible']}): not a roof")
    elif c.get("noisy"):
        notes.append("noisy: " + "; ".join(c.get("noise_reasons") or why_noisy(c)))
    if c.get("fraction_of_theoretical"):
        at = (
            f" at the measured {c['theoretical_clock_ghz']:.3f} GHz" if c.get("theoretical_clock") == "measured" else ""
        )
        src = c.get("theoretical_clock_source") or ""
        if c.get("theoretical_clock_ghz") and src:  # a CPU peak: which clock its theoretical rate used
            at = f" at {c['theoretical_clock_ghz']:.2f} GHz ({'unit' if 'unit clock' in src else 'scalar'} clock)"
        notes.append(f"{c['fraction_of_theoretical']:.0%} of theoretical{at}")
    if c.get("above_105pct_of_theoretical"):
        notes.append(">105% of theoretical")
    if c.get("clock_moved"):
        notes.append(c["clock_moved"])
    if c["kind"] == "bandwidth" and c.get("plateau_end_bytes") and c.get("os_size_bytes"):
        notes.append(f"plateau ends {fmt_bytes(c['plateau_end_bytes'])} (OS {fmt_bytes(c['os_size_bytes'])})")
    return notes


def attainable(intensity, peak: float, bandwidth: float):
    """min(peak, I x BW) for scalar or array I (FLOP/byte), in the units of peak."""
    return np.minimum(peak, np.asarray(intensity, dtype=float) * bandwidth)


def ridge_point(peak: float, bandwidth: float) -> float:
    return peak / bandwidth


class Roofline:
    """The measured roofs of one result file, looked up by dtype, threads and memory level."""

    LEVEL_ORDER = ("L1", "L2", "L3", "L4", "DRAM", "HBM", "shared", "host")

    def __init__(self, result: dict):
        self.result = result
        self.all_ceilings = result.get("ceilings", [])
        self.flagged = implausible(self.all_ceilings)  # (name, threads) -> why: kept, never a roof
        self.ceilings = [c for c in self.all_ceilings if cid(c) not in self.flagged]

    def flagged_ceilings(self, threads: int | None = None) -> list[dict]:
        """Ceilings that cannot be true (each with its reason under ``why``) at ``threads``."""
        return [
            dict(c, why=self.flagged[cid(c)])
            for c in self.all_ceilings
            if cid(c) in self.flagged and (threads is None or c["threads"] == threads)
        ]

    def thread_counts(self) -> list[int]:
        return sorted({c["threads"] for c in self.ceilings if c["kind"] in ("compute", "bandwidth")})

    def peak(self, dtype: str, threads: int | None = None) -> dict | None:
        cands = [
            c
            for c in self.ceilings
            if c["kind"] == "compute" and c["dtype"] == dtype and (threads is None or c["threads"] == threads)
        ]
        return max(cands, key=lambda c: c["value"]) if cands else None

    def memory_roofs(self, threads: int | None = None) -> list[dict]:
        """Best kernel per level (a roof is an upper bound: the fastest way to move the bytes)."""
        best: dict = {}
        for c in self.ceilings:
            if c["kind"] != "bandwidth" or (threads is not None and c["threads"] != threads):
                continue
            if c["level"] not in best or c["value"] > best[c["level"]]["value"]:
                best[c["level"]] = c
        order = {name: i for i, name in enumerate(self.LEVEL_ORDER)}
        return sorted(best.values(), key=lambda c: order.get(c["level"], 99))

    def memory_roof(self, level: str, threads: int | None = None) -> dict | None:
        for c in self.memory_roofs(threads):
            if c["level"] == level:
                return c
        return None

    def main_memory_roof(self, threads: int | None = None) -> dict | None:
        """DRAM (or HBM on a GPU), else the slowest level measured."""
        roofs = self.memory_roofs(threads)
        for name in ("DRAM", "HBM"):
            for c in roofs:
                if c["level"] == name:
                    return c
        return min(roofs, key=lambda c: c["value"]) if roofs else None

    def latency(self, name_contains: str | None = None) -> list[dict]:
        return [
            c for c in self.ceilings if c["kind"] == "latency" and (name_contains is None or name_contains in c["name"])
        ]

    def ridge(self, dtype: str, threads: int | None = None, level: str = "DRAM") -> float | None:
        p = self.peak(dtype, threads)
        m = self.memory_roof(level, threads) if level else self.main_memory_roof(threads)
        if m is None:
            m = self.main_memory_roof(threads)
        if not p or not m:
            return None
        return ridge_point(p["value"], m["value"])


def _ceiling_key(c: dict) -> tuple:
    return (
        c["kind"],
        c.get("level"),
        c.get("dtype"),
        c["threads"],
        c.get("kernel") if c["kind"] != "compute" else None,
        c["name"],
    )


def compare_ceilings(results: list[dict]) -> list[dict]:
    """Rows of ceilings present in the first result, with each other result's value and ratio."""
    base = {_ceiling_key(c): c for c in results[0].get("ceilings", [])}
    others = [{_ceiling_key(c): c for c in r.get("ceilings", [])} for r in results[1:]]
    rows = []
    for k, c in base.items():
        vals = [c["value"]] + [o[k]["value"] if k in o else None for o in others]
        ratios = [None if v is None or not c["value"] else v / c["value"] for v in vals[1:]]
        rows.append(
            {
                "name": c["name"],
                "kind": c["kind"],
                "unit": c["unit"],
                "values": vals,
                "ratios": ratios,
                "lower_is_better": c["kind"] == "latency",
            }
        )
    return rows
