"""The `ceilings` suite on the CPU: clock, dispatch latency, FMA peaks, the bandwidth staircase,
memory latency per level (pointer chase) and the intensity sweep, measured with the kernels of
kernels/cpu and turned into ceilings.

Time budget (a 2-core VM, warm numba cache): --quick ~70 s, full ~9 min. The large sizes dominate: a 2 GiB
pass at ~20 GB/s is 0.1 s, and a DRAM-sized intensity point at 256 FLOP/B would take seconds per
pass, so the intensity sweep processes one slice per call and moves to the next slice each call:
every call streams data that has not been touched for ~4x LLC bytes, i.e. from DRAM.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import roofline
from .driver import Driver
from .errors import interrupted
from .kernels.cpu import ert, stream
from .memory import fmt_bytes, require_fits
from .registry import Case

KERNELS = ("read", "copy", "triad", "update")
INTENSITIES_FP64 = [
    (1, 1),
    (2, 1),
    (4, 1),
    (8, 1),
    (16, 1),
    (32, 1),
    (32, 2),
    (32, 4),
    (32, 8),
    (32, 16),
    (32, 32),
    (32, 64),
]  # (K, passes): I = K * passes / 8 FLOP/B
INTENSITIES_QUICK = [(1, 1), (4, 1), (16, 1), (32, 2), (32, 8), (32, 32), (32, 64)]  # 1/8 .. 256 FLOP/B
# working-set sweep below DRAM: factor 4 in --quick; 2^(2/3) (3 points per 2 octaves) in a full run, which
# keeps >= 2 points in every level's window (L1's (0, C1/2] included) and took its bandwidth phase
# 24 sizes from 8 KiB to 256 MiB instead of 31 (factor sqrt 2: a 459 s phase here); DRAM's own points
# (d, sqrt2 d, 2d in a full run) keep factor sqrt 2 so the largest array stays at 2x where DRAM starts
QUICK_SWEEP_FACTOR = 4.0
FULL_SWEEP_FACTOR = 2 ** (2 / 3)
DRAM_SWEEP_FACTOR = 2**0.5
PEAK_CONFIGS = [(64, 8), (32, 8)]  # (K, S) tried for the FMA peak; the best median is the ceiling


@dataclass
class Plan:
    threads_all: int
    quick: bool
    min_ws: int = 8 << 10
    max_ws: int | None = None
    sweep_factor: float = 2.0
    dram_factor: float = DRAM_SWEEP_FACTOR  # between DRAM's own points
    intensity_ws: int | None = None
    skip: set = field(default_factory=set)
    passes: int | None = None  # default: 2 with --quick, 3 in a full run
    # DRAM-sized bandwidth cases again, inside and after the intensity sweep; default: 2 with --quick
    # (one DRAM size, 2 passes), 1 in a full run (3 sizes x 3 passes already; 2 more cost it 33 s)
    dram_extra_passes: int | None = None

    def pass_count(self) -> int:
        return self.passes or (2 if self.quick else 3)

    def extra_dram_count(self) -> int:
        return self.dram_extra_passes if self.dram_extra_passes is not None else (2 if self.quick else 1)

    def thread_counts(self) -> list[int]:
        return sorted({1, self.threads_all})


def sweep_sizes(lo: int, hi: int, factor: float) -> list[int]:
    """Geometric sizes from lo to at least hi, each a multiple of 4 KiB (3 arrays x 64 B lines)."""
    sizes, s = [], float(lo)
    while True:
        v = int(round(s / 4096)) * 4096 or 4096
        if not sizes or v > sizes[-1]:
            sizes.append(v)
        if v >= hi:
            return sizes
        s *= factor


def default_max_ws(caches: list[dict], quick: bool = False) -> int:
    """4x the LLC (STREAM's rule) in --quick, 8x in a full run so DRAM gets several sweep points;
    capped by free memory (the sweep needs ~2.2x its working set with verification)."""
    from .memory import available_bytes

    llc = caches[-1]["size_bytes"] if caches else (1 << 30) // 4  # unknown caches: reach the 1 GiB DRAM window
    want = max((4 if quick else 8) * llc, 64 << 20)
    avail = available_bytes()
    if avail:
        want = min(want, int(0.8 * avail / 2.2))
    return want


def intensity_points(plan: Plan) -> list[tuple[int, int]]:
    return INTENSITIES_QUICK if plan.quick else INTENSITIES_FP64


def latency_cases(threads_all: int, quick: bool = False) -> list[Case]:
    """The CPU dispatch paths (the latency family's declaration)."""
    from .families.latency import dispatch_cases

    return dispatch_cases(threads_all, quick)


def runtime_cases(threads_all: int) -> list[Case]:
    """The installed runtimes' call floors (torch's aten call, onnxruntime's node and run), once."""
    from .families.latency import runtime_cases as cases

    return cases(threads_all)


def chase_cases(plan: Plan, caches: list[dict], max_ws: int, dram_from: int | None = None) -> list[Case]:
    """Memory latency per level: the chase family's suite (1 thread, 8 KiB to where DRAM starts:
    ``dram_from``, else 4x the LLC; at most the run's largest working set), run once per pass.
    Beyond the LLC one hop is ~100 ns and a call walks the whole cycle (2M hops at 128 MiB:
    ~0.2-0.3 s), so those sizes take 3 samples and, in --quick, one attempt."""
    from dataclasses import replace

    from .families import chase

    llc = caches[-1]["size_bytes"] if caches else None
    if dram_from:  # the chase's sizes end at the first of its sizes >= dram_from
        llc = -(-dram_from // 4)
        max_ws = max(max_ws, chase.sizes(llc, plan.quick)[-1])
    out = []
    for c in chase.cases(plan.quick, [1], llc=llc, max_bytes=max_ws):
        if llc and c.size > min(llc, (caches[-1]["size_bytes"] if caches else llc)):
            c = replace(c, timing={**c.timing, "min_samples": 3, **({"max_attempts": 1} if plan.quick else {})})
        out.append(c)
    return out


def peak_case(dtype: str, threads: int, l1_bytes: int, K: int, S: int) -> Case:
    """The ERT FMA chain (K dependent FMAs x S streams) on an L1-resident block per thread."""
    block = ert.block_elements(l1_bytes, np.dtype(dtype).itemsize, S)
    return Case(
        "cpu.ert.fma",
        size=block * threads,
        dtype=dtype,
        threads=threads,
        params={"K": K, "S": S, "block": block},
        verify_params={"reps": 2},
        label=f"FMA peak {dtype} K={K} {threads}T",
        meta={"kernel": "fma", "block_bytes": block * np.dtype(dtype).itemsize},
        timing={"unit_clock": True},  # the clock while the FMA unit runs: its theoretical rate's clock
    )


def peak_cases(plan: Plan, l1_bytes: int) -> list[Case]:
    out = []
    for dtype in ("float64", "float32"):
        for threads in plan.thread_counts():
            for K, S in PEAK_CONFIGS:
                out.append(peak_case(dtype, threads, l1_bytes, K, S))
    return out


def lowprec_cases(plan: Plan) -> tuple[list[Case], list[str]]:
    """The low-precision dot peaks (rooflab/families/lowprec.py: INT8 on AVX2 and VNNI, BF16) on
    every unit this CPU runs, each thread count, with the unit's clock probed like the FMA peaks';
    and one line per unit it cannot run."""
    from .cpu.machine import LOWPREC_INSTRUCTION
    from .families import lowprec
    from .families.unit_peak import peak_case as unit_peak_case

    cases, skipped = [], []
    for unit, why in lowprec.available().items():
        if why:
            skipped.append(f"{unit} peak ({LOWPREC_INSTRUCTION[unit]}) skipped: {why}")
            continue
        cases += [unit_peak_case(unit, threads) for threads in plan.thread_counts()]
    return cases, skipped


def bandwidth_cases(plan: Plan, sizes: list[int]) -> list[Case]:
    """Every working-set size x kernel x thread count; a kernel's arrays share the working set."""
    out = []
    for ws in sizes:
        for kernel in KERNELS:
            # rounded up to whole cache lines: the point meant for a window's lower edge (4x the LLC
            # for DRAM) must not fall a few bytes below it
            n = -(-(ws // 8) // stream.ARRAYS[kernel] // stream.ALIGN_ELEMS) * stream.ALIGN_ELEMS
            for threads in plan.thread_counts():
                out.append(
                    Case(
                        f"cpu.stream.{kernel}",
                        size=n,
                        threads=threads,
                        verify_params={"s": 2.0} if kernel == "update" else None,
                        label=f"{kernel} {fmt_bytes(ws)} {threads}T",
                        meta={"kernel": kernel},
                        timing={"cv_limit": 0.10, "max_attempts": 2 if plan.quick else 3},
                        sweep="bandwidth",
                    )
                )
    return out


def cases(plan: Plan, sizes: list[int], l1_bytes: int) -> list[Case]:
    """The suite as data (the intensity sweep is added by ``run``: it rotates through one array)."""
    out = []
    if "latency" not in plan.skip:
        out += latency_cases(plan.threads_all, plan.quick)
    if "compute" not in plan.skip:
        out += peak_cases(plan, l1_bytes)
    if "bandwidth" not in plan.skip:
        out += bandwidth_cases(plan, sizes)
    return out


def intensity_configs(l1_bytes: int, l2_bytes: int) -> list[tuple[int, int]]:
    """(S streams, block elements) tried at every sweep point; the point keeps the faster (as the
    FMA peak keeps its best (K, S)). Measured on Zen 4: one stream over L1 blocks streams DRAM at the
    update kernel's rate but has too few FMA chains; 8 streams hide the FMA latency but their short
    runs in L1-sized blocks cost ~60 % of DRAM bandwidth, which L2-sized blocks (1/4 of L2) win back."""
    return [(1, ert.block_elements(l1_bytes, 8, 1)), (8, ert.block_elements(l2_bytes, 8, 8))]


def intensity_cases(plan: Plan, l1_bytes: int, array_bytes: int, l2_bytes: int | None = None) -> list[Case]:
    """The intensity sweep, all threads then 1 thread: the ERT kernel on one slice of an
    ``array_bytes`` array per call, so every call streams from DRAM (cpu.intensity.ert-rotating),
    in each of ``intensity_configs``. ``reps`` is the number of passes per block."""
    target = 0.05 if plan.quick else 0.15
    configs = intensity_configs(l1_bytes, l2_bytes or 8 * l1_bytes)
    out = []
    for threads in sorted(plan.thread_counts(), reverse=True):
        for K, passes in intensity_points(plan):
            intensity = K * passes / 8
            for S, block in configs:
                out.append(
                    Case(
                        "cpu.intensity.ert-rotating",
                        size=array_bytes,
                        dtype="float64",
                        threads=threads,
                        params={"K": K, "S": S, "block": block, "target_s": target},
                        label=f"intensity {intensity:g} FLOP/B {threads}T S={S}",
                        meta={"kernel": "ert", "intensity": intensity, "array_bytes": array_bytes},
                        timing={"reps": passes, "cv_limit": 0.10, "max_attempts": 2},
                        sweep="intensity",
                    )
                )
    return out


def best_sweep_points(points: list[dict]) -> list[dict]:
    """One point per (threads, intensity): the configuration with the highest median GFLOP/s (the
    others stay in the records)."""
    best: dict = {}
    for p in points:
        key = (p.get("threads"), p.get("intensity"))
        rate = (p.get("gflops") or {}).get("median", -1.0) if p.get("status", "ok") == "ok" else -1.0
        if key not in best or rate > best[key][0]:
            best[key] = (rate, p)
    return [p for _, p in best.values()]


def set_theoretical(cpu: dict, best_clock: dict) -> None:
    """Theoretical peaks per thread count at that count's best clock of the whole run (the probes
    before and after every measurement: a neighbour makes a probe read low, never high, so the
    best one is the clock the cores really ran at)."""
    from .cpu.machine import peaks_at_clocks

    if not best_clock:
        return
    cpu["measured_ghz"] = best_clock.get(1) or min(best_clock.values())
    cpu["measured_ghz_all_threads"] = {str(t): g for t, g in sorted(best_clock.items())}
    cpu["theoretical"] = peaks_at_clocks(cpu, best_clock, "best running clock probed in the run, per thread count")


def best_unit_clock(records: list[dict]) -> float | None:
    """The clock these records' unit ran at. Where each sample was paired with a chain right after it
    (``unit_per_sample``, the slowest thread's): the median over the samples of the record with the
    best rate, the one its ceiling reports, so a clock that wandered between seconds is the one
    those samples ran at. Older results (one probe after the attempt): the best record's slowest
    thread, the best over records (a neighbour only slows a probe)."""
    probed = [r for r in records if (r.get("clock_ghz") or {}).get("unit")]
    if not probed:
        return None
    paired = [r for r in probed if r["clock_ghz"].get("unit_per_sample") and r.get("gflops")]
    if paired:
        best = max(paired, key=lambda r: r["gflops"]["median"])
        return float(np.median(best["clock_ghz"]["unit_per_sample"]))
    return max(min(r["clock_ghz"]["unit"]) for r in probed)


def pass_agreement(cands: list[dict], best: dict) -> dict:
    """How far a compute peak's passes lay apart, in FLOP/s and in FLOP per cycle of the clock each
    pass's unit ran at (the median of its ``unit_per_sample``). The clock of these VMs wanders by
    4-5 % between passes a minute apart (a Zen 5 quick run: FP64 FMA 115.5 then 121.7 GFLOP/s at
    3.93 then 4.07 GHz, 29.4 and 29.9 FLOP/cycle), and a peak is an upper bound at the clock it ran
    at: passes that agree per cycle were not disturbed, the clock moved. A neighbour stealing time
    inside a sample slows the FLOP/s and not the chain probed right after it, so it still shows per
    cycle. ``spread`` (FLOP/s) stays the run's spread for the interval: the next run's FLOP/s moves
    with its clock."""
    rates = [r["gflops"]["median"] for r in cands]
    out = {"spread": 1 - min(rates) / best["gflops"]["median"], "per_cycle_spread": None}
    clocks = [float(np.median((r.get("clock_ghz") or {}).get("unit_per_sample") or [0])) for r in cands]
    if len(cands) >= 2 and all(clocks):
        per_cycle = [v / g for v, g in zip(rates, clocks)]
        out["per_cycle_spread"] = 1 - min(per_cycle) / max(per_cycle)
        if out["spread"] > roofline.PASS_SPREAD >= out["per_cycle_spread"]:
            out["clock_moved"] = (
                f"the clock moved {min(clocks):.2f}-{max(clocks):.2f} GHz between passes; "
                f"per cycle they agree within {out['per_cycle_spread']:.1%}"
            )
    return out


def pass_fields(best: dict, agree: dict) -> dict:
    """A compute ceiling's noise verdict from its best pass and its passes' agreement (per cycle
    where every pass's unit clock was probed)."""
    judged = agree["spread"] if agree["per_cycle_spread"] is None else agree["per_cycle_spread"]
    out = {
        "noisy": bool(best["noisy"] or judged > roofline.PASS_SPREAD),
        "pass_spread": agree["spread"],
        "per_cycle_spread": agree["per_cycle_spread"],
    }
    if agree.get("clock_moved"):
        out["clock_moved"] = agree["clock_moved"]
    return out


def set_unit_clocks(cpu: dict, records: list[dict]) -> None:
    """Each FMA peak's theoretical rate at the clock its unit ran at (best_unit_clock over the run's
    FMA records of that dtype and thread count: the clock probed right after each sample of the best
    one, rooflab.cpu.clock.chain_clock). A Xeon's cores ran zmm FMAs at 3.4-3.5 GHz against a
    3.9-4.0 GHz scalar clock: judged at the scalar clock every quiet peak read 83-90 %. Peaks
    whose unit clock was not probed keep the scalar clock and say so."""
    from .cpu.clock import UNIT_METHOD
    from .cpu.machine import theoretical_peak

    theo = cpu.get("theoretical") or {}
    for p in theo.get("peaks", []):
        ghz = best_unit_clock(
            [
                r
                for r in records
                if r.get("family") == "ert"
                and r.get("kernel") == "fma"
                and r.get("status") == "ok"
                and r["dtype"] == p["dtype"]
                and r["threads"] == p["threads"]
            ]
        )
        p.setdefault("scalar_clock_ghz", p["clock_ghz"])
        if not ghz:
            p["clock_source"] = "scalar clock (dependent adds): this unit's own clock was not probed"
            continue
        cores = min(p["threads"], cpu.get("physical_cores") or p["threads"])
        at = theoretical_peak(cores, ghz, cpu["fma_units"], 8 if p["dtype"] == "float64" else 4)
        if at:
            p.update(at, clock_ghz=ghz, clock_source=f"FMA unit clock: {UNIT_METHOD}")


def peak_notes(ceilings: list[dict], cpu: dict) -> list[str]:
    """A compute ceiling above 105 % of its theoretical peak: say which clock its own FMA rate
    implies, so a contended probe and a counting bug can be told apart."""
    from .cpu.machine import implied_clock_ghz

    notes = []
    for c in ceilings:
        if not c.get("above_105pct_of_theoretical"):
            continue
        implied = implied_clock_ghz(c["value"], cpu, c["threads"], c["dtype"])
        best = (cpu.get("measured_ghz_all_threads") or {}).get(str(c["threads"]))
        notes.append(
            f"{c['name']} is {c['fraction_of_theoretical']:.0%} of its theoretical peak at {best or 0:.2f} GHz; its "
            f"FMA rate implies {implied or 0:.2f} GHz: "
            + (
                "every probe of the run was slowed (contended)"
                if c.get("noisy")
                else "the FMA table or the work count is wrong"
            )
        )
    return notes


_LOWPREC_LABEL = {"int8": "INT8", "bfloat16": "BF16", "float16": "FP16", "w4": "W4 dequantize-and-FMA"}


def lowprec_ceilings(recs: list[dict], cpu: dict) -> list[dict]:
    """One compute ceiling per low-precision unit and thread count: the best pass's median, its
    theoretical rate at the clock its unit ran at (best_unit_clock; the scalar clock where none was
    probed), labelled with the instruction it ran; GOPS for INT8."""
    from .cpu.clock import UNIT_METHOD
    from .cpu.machine import LOWPREC_DTYPE, LOWPREC_UNIT, lowprec_peak

    out = []
    mine = [r for r in recs if r["family"] == "lowprec"]
    for unit in sorted({r["unit"] for r in mine}):
        for threads in sorted({r["threads"] for r in mine if r["unit"] == unit}):
            cands = [r for r in mine if r["unit"] == unit and r["threads"] == threads]
            best = max(cands, key=lambda r: r["gflops"]["median"])
            dtype = LOWPREC_DTYPE[unit]
            c = {
                "name": f"{_LOWPREC_LABEL[dtype]} peak ({best['instruction']}), {threads} thread{'s' if threads > 1 else ''}",
                "kind": "compute",
                "level": None,
                "dtype": dtype,
                "threads": threads,
                "value": best["gflops"]["median"],
                "unit": LOWPREC_UNIT[unit],
                "stats": best["gflops"],
                "kernel": best["instruction"],
                "passes": len(cands),
                **pass_fields(best, pass_agreement(cands, best)),
            }
            unit_ghz = best_unit_clock(cands)
            ghz = unit_ghz or (cpu.get("measured_ghz_all_threads") or {}).get(str(threads))
            t = lowprec_peak(unit, min(threads, cpu.get("physical_cores") or threads), ghz, cpu["fma_units"])
            if t:
                c.update(
                    theoretical=t["value"],
                    theoretical_formula=t["formula"],
                    theoretical_clock_ghz=ghz,
                    theoretical_clock_source=(f"{unit} unit clock: {UNIT_METHOD}" if unit_ghz else "scalar clock"),
                    fraction_of_theoretical=c["value"] / t["value"],
                    above_105pct_of_theoretical=c["value"] > 1.05 * t["value"],
                )
            else:
                c["theoretical_unknown"] = f"{unit}: rate per cycle of this core not known to rooflab"
            out.append(c)
    return out


def derive_ceilings(data: dict) -> list[dict]:
    """All ceilings of a CPU result document, from its records (also used to re-derive)."""
    machine = data["machine"]
    caches = machine["cpu"]["caches"]
    theo = {(p["dtype"], p["threads"]): p for p in machine["cpu"].get("theoretical", {}).get("peaks", [])}
    theo_src = machine["cpu"].get("theoretical", {}).get("clock_source")
    out: list[dict] = []
    recs = [r for r in data["records"] if r.get("status") == "ok"]
    # compute peaks: best median over the (K, S) configurations
    for dtype in ("float64", "float32"):
        for threads in sorted({r["threads"] for r in recs if r["family"] == "ert"}):
            cands = [
                r
                for r in recs
                if r["family"] == "ert" and r.get("kernel") == "fma" and r["dtype"] == dtype and r["threads"] == threads
            ]
            if not cands:
                continue
            # the best configuration and pass (a peak is an upper bound); the spread between passes
            # of that configuration says whether a neighbour disturbed it
            best = max(cands, key=lambda r: r["gflops"]["median"])
            same = [r for r in cands if r["params"] == best["params"]]
            c = {
                "name": f"{'FP64' if dtype == 'float64' else 'FP32'} FMA peak, {threads} thread"
                f"{'s' if threads > 1 else ''}",
                "kind": "compute",
                "level": None,
                "dtype": dtype,
                "threads": threads,
                "value": best["gflops"]["median"],
                "unit": roofline.COMPUTE_UNIT,
                "stats": best["gflops"],
                "kernel": f"ert K={best['params']['K']} S={best['params']['S']}",
                "passes": len(same),
                **pass_fields(best, pass_agreement(same, best)),
                "clock_ghz": best.get("clock_ghz"),
            }
            t = theo.get((dtype, threads))
            if t:
                c["theoretical"] = t["gflops"]
                c["theoretical_clock_ghz"] = t.get("clock_ghz")
                c["theoretical_clock_source"] = t.get("clock_source") or theo_src
                c["fraction_of_theoretical"] = c["value"] / t["gflops"]
                c["above_105pct_of_theoretical"] = c["value"] > 1.05 * t["gflops"]
            out.append(c)
    out += lowprec_ceilings(recs, machine["cpu"])
    # bandwidth per level
    pts = data["sweeps"]["bandwidth"]
    for threads in sorted({p["threads"] for p in pts}):
        for kernel in KERNELS:
            out.extend(roofline.bandwidth_ceilings(pts, caches, threads, kernel))
    # latency: per dispatch path the fastest pass (a floor is a lower bound of what a call costs);
    # memory latency per level from the pointer chase (1 thread, ns and cycles per load)
    from .families import chase
    from .families.latency import dispatch_ceilings

    out += dispatch_ceilings(recs)
    out += chase.latency_ceilings(
        [r for r in recs if r["family"] == "chase"], caches, best_ghz=machine["cpu"].get("measured_ghz")
    )
    return out


def remeasure_implausible(driver: Driver, writer, suite: list[Case], progress) -> list[Case]:
    """Ceilings that cannot be true (roofline.implausible: far below theoretical, a faster level
    below a slower one, an all-thread figure below the 1-thread one) are measured once more: every
    case of their kernel at their thread count (a neighbour's burst may have passed; each size keeps
    its fastest pass). Those still so keep the flag (mark_implausible). Returns the cases re-run."""
    bad = roofline.implausible(writer.data["ceilings"])
    if not bad:
        return []
    want = set()
    for c in writer.data["ceilings"]:
        if roofline.cid(c) in bad and c["kind"] == "compute":
            want.add(("cpu.ert.fma", c["threads"], c["dtype"]))
        elif roofline.cid(c) in bad and c["kind"] == "bandwidth":
            want.add((f"cpu.stream.{c['kernel']}", c["threads"], None))
    again = [k for k in suite if (k.variant, k.threads, k.dtype if k.variant == "cpu.ert.fma" else None) in want]
    if not again:
        return []
    writer.data["notes"].append(
        f"re-measured {len(again)} case(s) behind ceilings that could not be true: {', '.join(n for n, _ in sorted(bad))}"
    )
    if hasattr(progress, "extend"):
        progress.extend(len(again))
    driver.run(again, writer, progress)
    writer.data["ceilings"] = derive_ceilings(writer.data)
    return again


def intensity_parts(plan: Plan, sweep: list[Case], dram_cases: list[Case]) -> list[list[Case]]:
    """The intensity sweep cut into as many parts as the run has later DRAM passes (one part when
    it has none); ``run`` measures the DRAM-sized bandwidth cases again after each part.

    Why: DRAM is the roof a neighbour moves most (the host's other tenants share its memory
    controller and the L3). Two --quick runs 1 minute apart read DRAM update at 2 threads 46, 80,
    55 and 43 GB/s when each DRAM case was sampled in 2 bursts of ~0.1 s, both in the first 50 s.
    The fastest sample counts (roofline.best_of_passes), so bursts spread over the whole run
    (--quick: half-way through the intensity sweep and after it) find the quiet moments of both
    runs. Napkin math: 8 DRAM cases x ~0.15 s = ~1.2 s per pass at 128 MiB (--quick); a full run's
    24 DRAM cases at up to 256 MiB take ~16 s per pass."""
    n = max(1, plan.extra_dram_count()) if dram_cases else 1
    cut = [round(i * len(sweep) / n) for i in range(n + 1)]
    return [sweep[a:b] for a, b in zip(cut, cut[1:])]


def dram_plan(plan: Plan, caches: list[dict], probe=None) -> dict:
    """Where this run's DRAM points start and how big its arrays get (the result file keeps it).

    Caches known: a read-bandwidth probe (rooflab/cpu/dram_probe.py) finds where the DRAM plateau
    really begins, capped by 4x the OS LLC (STREAM's rule, the old size) and by the largest working
    set the run may use (--max-working-set, else what free memory allows). The sweep then ends at
    that size in --quick (one DRAM point) and at 2x it in a full run (three points, factor sqrt 2);
    the chase and the intensity sweep stop there too. No caches: the old fixed window (DRAM from
    1 GiB). ``probe``: dram_probe.plan_dram's signature (tests pass a fake machine)."""
    from .cpu import dram_probe

    limit = plan.max_ws or default_max_ws(caches, plan.quick)
    if not caches:
        return {
            "source": "the OS gives no cache sizes: DRAM counted from 1 GiB (no probe)",
            "dram_from_bytes": roofline.UNKNOWN_CACHES_DRAM_FROM
            if limit >= roofline.UNKNOWN_CACHES_DRAM_FROM
            else None,
            "top_bytes": limit,
            "cap_bytes": limit,
        }
    llc = caches[-1]["size_bytes"]
    cap = min(4 * llc, limit)
    if "bandwidth" in plan.skip and "intensity" in plan.skip and "chase" in plan.skip:
        return {
            "source": "nothing DRAM-sized in this run",
            "dram_from_bytes": None,
            "top_bytes": limit,
            "cap_bytes": cap,
        }
    out = (probe or dram_probe.plan_dram)(caches, cap)
    d = out.get("dram_from_bytes")
    top = limit if plan.max_ws else (d * (1 if plan.quick else 2) if d else cap)
    out["top_bytes"] = max(min(top, limit), d or 0)
    return out


def sizes_for(plan: Plan, dram: dict) -> list[int]:
    """Sweep sizes: geometric from plan.min_ws below DRAM's start, then DRAM's points from it."""
    d, top = dram.get("dram_from_bytes"), dram["top_bytes"]
    if not d:
        return sweep_sizes(plan.min_ws, top, plan.sweep_factor)
    below = [s for s in sweep_sizes(plan.min_ws, d, plan.sweep_factor) if s < d]
    return below + sweep_sizes(d, max(top, d), plan.dram_factor)


def _say(writer, note: str) -> None:
    """A note of the result that the user must see now: one line on stderr too."""
    import sys

    writer.data["notes"].append(note)
    print(f"rooflab: {note}", file=sys.stderr, flush=True)


def skip_what_cannot_run(plan: Plan, cpu: dict, writer) -> Plan:
    """Each problem of the machine description in one line (rooflab.cpu.machine.describe_cpu left
    the absurd part out); the phases this CPU cannot run are skipped and the result says so: no
    FMA instructions (an x86 before Haswell/Piledriver), no FMA peaks and no intensity sweep (its
    kernels are FMA chains: LLVM would turn each into a libm call)."""
    from dataclasses import replace

    from .cpu.machine import has_fma

    for p in cpu.get("problems") or []:
        _say(writer, f"machine description: {p}")
    if has_fma(cpu) or {"compute", "intensity"} <= plan.skip:
        return plan
    _say(writer, "skipped: the FMA peaks and the intensity sweep (this CPU has no FMA instructions)")
    writer.data.setdefault("skipped", []).extend(["FMA peaks", "intensity sweep"])
    return replace(plan, skip=plan.skip | {"compute", "intensity"})


def run(driver: Driver, writer, plan: Plan, progress, probe=None) -> None:
    """Measure everything in ``plan`` and store ceilings; the writer saves after every step and
    ``writer.data["phases"]`` says where the time went."""
    from .phases import Phases

    machine = writer.data["machine"]
    caches = machine["cpu"]["caches"]
    l1 = caches[0]["size_bytes"] if caches else 32 << 10
    ph = Phases(writer.data, writer.save)
    plan = skip_what_cannot_run(plan, machine["cpu"], writer)
    if not caches:
        _say(
            writer,
            "the OS gives no cache sizes (sysfs): no L1/L2/L3 ceilings; only working sets of 1 GiB and more "
            "count as DRAM",
        )
    with ph("clock probe"):  # (the progress bar starts once the plan is known: ~1-2 s later)
        for t in plan.thread_counts():
            driver.probe_clock(t)
    with ph("DRAM sizing probe"):
        dram = dram_plan(plan, caches, probe)
    d = dram.get("dram_from_bytes")
    if caches and d and d < 4 * caches[-1]["size_bytes"]:
        caches[-1]["dram_from_bytes"] = d  # the DRAM window starts here (roofline.level_windows)
    max_ws = dram["top_bytes"]
    writer.data["config"]["dram_sizing"] = dram
    if not d:
        _say(
            writer,
            f"no DRAM roof in this run: the largest working set ({fmt_bytes(max_ws)}) ends before DRAM's plateau "
            + (f"(4x the {fmt_bytes(caches[-1]['size_bytes'])} LLC) " if caches else "(1 GiB without cache sizes) ")
            + "- pass a larger --max-working-set if memory allows; no level stands in for it",
        )
    sizes = sizes_for(plan, dram)
    intensity_ws = plan.intensity_ws or (max(d, min(max_ws, 512 << 20)) if (d and plan.quick) else max_ws)
    require_fits(int(max(sizes[-1], intensity_ws) * 2.2), f"a working set of {fmt_bytes(max(sizes[-1], intensity_ws))}")
    writer.data["config"].update(sweep_bytes=sizes, intensity_array_bytes=intensity_ws)
    if d and intensity_ws < d:
        writer.data["notes"].append(
            f"intensity sweep array {fmt_bytes(intensity_ws)} is below where DRAM starts ({fmt_bytes(d)}); "
            "its low-intensity points may see cache bandwidth"
        )
    latency = [] if "latency" in plan.skip else latency_cases(plan.threads_all, plan.quick)
    runtimes = [] if "latency" in plan.skip else runtime_cases(plan.threads_all)
    peaks = [] if "compute" in plan.skip else peak_cases(plan, l1)
    lowprec, lowprec_skipped = ([], []) if "compute" in plan.skip else lowprec_cases(plan)
    writer.data["notes"] += lowprec_skipped
    bandwidth = [] if "bandwidth" in plan.skip else bandwidth_cases(plan, sizes)
    l2 = next((c["size_bytes"] for c in caches if c["level"] == 2), None)
    sweep = [] if "intensity" in plan.skip else intensity_cases(plan, l1, intensity_ws, l2)
    chases = [] if "chase" in plan.skip else chase_cases(plan, caches, max_ws, dram_from=d)
    dram_cases = [] if "bandwidth" in plan.skip or not d else bandwidth_cases(plan, [s for s in sizes if s >= d])
    if not plan.extra_dram_count():
        dram_cases = []
    parts = intensity_parts(plan, sweep, dram_cases)
    passes = plan.pass_count()
    from . import compile_ahead

    if compile_ahead.pending(peaks + lowprec + sweep):  # a phase only on a cold cache
        with ph("compile ahead"):  # its slow kernels, on every core, before anything is timed
            writer.data["config"]["compile_ahead"] = compile_ahead.compile_ahead(
                peaks + lowprec + sweep, plan.threads_all
            )
    task = progress.start(
        passes * (len(latency) + len(peaks) + len(lowprec) + len(bandwidth) + len(chases))
        + len(sweep)
        + len(parts) * len(dram_cases)
        + len(runtimes)
    )
    writer.save()
    try:
        _measure_phases(ph, driver, writer, progress, passes, latency, peaks, lowprec, bandwidth, chases, parts,
                        dram_cases, runtimes)  # fmt: skip
    except (KeyboardInterrupt, SystemError) as e:  # the phases that finished give their ceilings
        if not interrupted(e):
            raise
        try:
            _derive(writer, driver, machine)
            writer.data["notes"].append(
                "interrupted: the ceilings are those of the phases that finished (a phase cut short gives what "
                "its finished passes measured); never a default for placement (name it with --ceilings to use it)"
            )
            writer.data["notes"] += roofline.mark_implausible(writer.data["ceilings"])
        except Exception as d:  # partial records that do not derive: the records are kept, said so
            writer.data["notes"].append(f"interrupted: no ceilings derived from the phases that finished ({d!r})")
        raise KeyboardInterrupt from None  # the caller marks the file interrupted
    with ph("ceilings"):
        _derive(writer, driver, machine)
    if roofline.implausible(writer.data["ceilings"]):  # a phase only when there is something to re-measure
        with ph("re-measure of ceilings that cannot be true"):
            remeasure_implausible(driver, writer, latency + peaks + bandwidth, progress)
    with ph("ceilings"):
        writer.data["notes"] += roofline.order_violations(writer.data["ceilings"])
        writer.data["notes"] += roofline.flat_main_memory(writer.data["ceilings"])
        writer.data["notes"] += roofline.sweep_above_roof(writer.data["ceilings"], writer.data["sweeps"]["intensity"])
        writer.data["notes"] += peak_notes(writer.data["ceilings"], machine["cpu"])
        writer.data["notes"] += roofline.mark_implausible(writer.data["ceilings"])
        roofline.say_why_noisy(writer.data["ceilings"])
    ph.finish()
    writer.save()
    progress.done(task)


def _derive(writer, driver: Driver, machine: dict) -> None:
    """The run's ceilings from its records: best sweep points, theoretical peaks at the clocks seen."""
    writer.data["sweeps"]["intensity"] = best_sweep_points(writer.data["sweeps"]["intensity"])
    set_theoretical(machine["cpu"], driver.best_clock)
    set_unit_clocks(machine["cpu"], writer.data["records"])
    writer.data["ceilings"] = derive_ceilings(writer.data)


def _measure_phases(ph, driver, writer, progress, passes, latency, peaks, lowprec, bandwidth, chases, parts,
                    dram_cases, runtimes) -> None:  # fmt: skip
    """Every phase in its order: the passes of the short ones, then the intensity sweep's parts with
    DRAM's later passes between them, then the runtimes' call floors."""
    for _ in range(passes):  # each ceiling in several passes spread over the run (see derive_ceilings)
        with ph("dispatch latency"):
            driver.run(latency, writer, progress)
        with ph("FMA peaks"):
            driver.run(peaks, writer, progress)
        if lowprec:
            with ph("low-precision peaks"):
                driver.run(lowprec, writer, progress)
        with ph("bandwidth sweep"):
            driver.run(bandwidth, writer, progress)
        with ph("memory latency (chase)"):
            driver.run(chases, writer, progress)  # latency per level too: its fastest pass per size
    for part in parts:  # each part of the sweep, then the DRAM cases once more
        if part:
            with ph("intensity sweep"):
                driver.run(part, writer, progress)
        if dram_cases:
            with ph("DRAM bandwidth, later passes"):
                driver.run(dram_cases, writer, progress)
    if runtimes:  # once, last: importing torch loads its OpenMP and MKL, which nothing timed meets
        with ph("runtime call floors"):
            driver.run(runtimes, writer, progress)
