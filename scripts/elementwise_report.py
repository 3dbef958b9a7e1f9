#!/usr/bin/env python3
"""Measure the `elementwise` and `chase` suites interleaved, and print the ratios issue 14 asks for.

    OMP_WAIT_POLICY=PASSIVE python scripts/elementwise_report.py [--quick] [--rounds 5]
        [--threads 1,2] [--only ops,chains,layouts,tiny,chase] [--out results/]

Cases come from rooflab.families.elementwise.cases / chase.cases. They are measured in comparison
sets whose members alternate ``--rounds`` times in this one process (a shared VM's neighbours
come and go: only ratios within a round are trusted; the figure is the median over rounds):

  ops      per op and thread count: STREAM kernel with the same mix, numpy (00), numba (01)
           -> op GB/s / STREAM GB/s (target >= 85 %), numba / numpy speed-up (>= 1.0x)
  chains   STREAM triad, numpy unfused, numba unfused, numba fused
           -> fused speed-up beside the bytes ratio 7/3 (target >= 70 % of it)
  layouts  batch norm NCHW vs NHWC at ResNet-50 shapes (batch 32)
  tiny     N tiny ops op by op vs fused, N = 1..16, with the latency family's dispatch variants
  chase    pointer chase 8 KiB .. 4x LLC -> ns and cycles per load, latency ceilings per level

Each set goes through the one driver's interleaved rounds (rooflab.driver.Driver.interleaved):
every member verified first (a wrong one gets an error, never a figure), then timed once per round
with the same repetition count (one sample of ``--budget`` seconds), the clock probed before each
round; 1-thread members also on the thread's CPU time. The clock probes and /proc/loadavg say how
contended the machine was. Writes results/<machine-id>/elementwise-report-<UTC time>.json; exits 1
when a member failed.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import defaultdict
from pathlib import Path
from statistics import median

import numpy as np

from rooflab import machine
from rooflab.cpu import machine as cpu_machine
from rooflab.cpu.backend import cpu_backend
from rooflab.driver import Driver, Entry, Settings
from rooflab.families import chase as CH
from rooflab.families import elementwise as EW
from rooflab.memory import fmt_bytes
from rooflab.results import atomic_write_json, utc_now
from rooflab.threads import max_threads


def loadavg() -> float | None:
    try:
        return float(Path("/proc/loadavg").read_text().split()[0])
    except OSError:
        return None


def comparison_sets(quick: bool, threads: list[int], only: set[str], dtypes: set[str] | None = None) -> dict:
    cases = [c for c in EW.cases(quick, threads) if not dtypes or c.dtype in dtypes or "layout" in c.meta]
    roofs = {(c.meta["group"], c.meta["stream_kernel"]): c for c in cases if c.meta.get("role") == "roof"}
    sets: dict = defaultdict(list)
    for c in cases:
        m = c.meta
        if m.get("role") == "op" and "ops" in only:
            key = ("ops", m["group"], m["key"])
            if not sets[key]:
                sets[key].append(roofs[(m["group"], m["stream_kernel"])])
            sets[key].append(c)
        elif m.get("chain") and "chains" in only:
            key = ("chains", m["group"], m["chain"])
            if not sets[key]:
                sets[key].append(roofs[(m["group"], m["stream_kernel"])])
            sets[key].append(c)
        elif str(m.get("group", "")).startswith("layout/") and "layouts" in only:
            sets[("layouts", m["group"])].append(c)
        elif m.get("group") == "tiny_chain" and "tiny" in only:
            sets[("tiny",)].append(c)
    if "tiny" in only:
        from rooflab.registry import Case

        nt = max(threads)
        sets[("tiny",)] += [
            Case("cpu.latency.empty", None, "float64", 1, meta={"group": "dispatch"}),
            Case("cpu.latency.ufunc", 8, "float64", 1, meta={"group": "dispatch"}),
            Case("cpu.latency.fork_join", None, "float64", nt, meta={"group": "dispatch"}),
        ]
    if "chase" in only:
        sets[("chase",)] = CH.cases(quick)
    return sets


def run_set(driver: Driver, members, rounds: int, budget: float, log) -> list[dict]:
    """One comparison set through the driver's interleaved rounds: every member verified, then timed
    once per round (one sample of ``budget`` seconds); returns one record per member with every
    round's sample (``samples_s``; ``cpu_samples_s`` at 1 thread) and the clock before it."""
    entries = [
        Entry(c.variant, Driver.inputs(c), c.params, c.verify_params, c.label, threads=c.threads, meta=c.meta)
        for c in members
    ]
    recs = [r.as_dict() for r in driver.interleaved(entries, rounds=rounds, target_s=budget, cpu_time=True)]
    for rec in recs:
        if rec["status"] != "ok":
            log(f"  FAILED {rec['label']}: {rec['error']}")
        else:
            rec["round_cv"] = float(np.std(rec["samples_s"]) / np.mean(rec["samples_s"]))
    return recs


def per_round(recs: list[dict], i: int, key: str = "samples_s") -> list[dict]:
    """The records as if round ``i`` were the only one (time, GB/s and clock of that round)."""
    out = []
    for r in recs:
        if not r.get(key) or i >= len(r[key]):
            continue
        t = r[key][i]
        q = dict(r, time_s={**r["time_s"], "median": t})
        if r.get("round_clock_ghz"):
            q["clock_ghz"] = {"before": r["round_clock_ghz"][i], "after": []}
        if r.get("gbps"):
            q["gbps"] = {**r["gbps"], "median": r["work"]["bytes"] / t / 1e9}
        out.append(q)
    return out


def med_spread(values):
    v = sorted(values)
    return median(v), v[0], v[-1]


def report_ew(recs, rounds, say, key="samples_s"):
    sums = [EW.summarize(per_round(recs, i, key)) for i in range(rounds)]
    say("\n== elementwise at DRAM size: GB/s over the STREAM kernel with the same mix (target >= 85 %) ==")
    rows = defaultdict(list)
    for s in sums:
        for x in s["vs_stream"]:
            rows[x["label"]].append(x)
    for label, xs in rows.items():
        f, lo, hi = med_spread([x["fraction"] for x in xs])
        g = median(x["gbps"] for x in xs)
        sg = median(x["stream_gbps"] for x in xs)
        say(
            f"  {label:62s} {g:6.1f} GB/s  {xs[0]['stream_kernel']:5s} {sg:6.1f}  {100 * f:5.1f} % ({100 * lo:.0f}-{100 * hi:.0f})"
        )
    say("\n== numba (01) over numpy (00), same op, same run (target >= 1.0x) ==")
    rows = defaultdict(list)
    for s in sums:
        for x in s["vs_numpy"]:
            rows[x["label"]].append(x["speedup_vs_numpy"])
    for label, xs in rows.items():
        m, lo, hi = med_spread(xs)
        say(f"  {label:62s} {m:5.2f}x ({lo:.2f}-{hi:.2f})")
    say("\n== fusion: speed-up of the fused chain beside the bytes ratio (target >= 70 % of it) ==")
    rows = defaultdict(list)
    for s in sums:
        for x in s["fusion"]:
            rows[(x["group"], x["unfused"])].append(x)
    for (group, unfused), xs in rows.items():
        m, lo, hi = med_spread([x["speedup"] for x in xs])
        frac = median(x["fraction_of_prediction"] for x in xs)
        say(
            f"  {group:16s} {unfused:48s} -> fused {m:5.2f}x ({lo:.2f}-{hi:.2f}); bytes ratio {xs[0]['bytes_ratio']:.2f}; "
            f"{100 * frac:.0f} % of the prediction"
        )
    say("\n== batch norm NCHW vs NHWC (ResNet-50 shapes, N=32) ==")
    rows = defaultdict(list)
    for s in sums:
        for x in s["layouts"]:
            rows[(x["group"], x["variant"])].append(x)
    for (group, variant), xs in rows.items():
        say(
            f"  {group:24s} {variant:38s} NCHW {median(x['nchw_gbps'] for x in xs):6.1f} GB/s  NHWC "
            f"{median(x['nhwc_gbps'] for x in xs):6.1f} GB/s  NHWC/NCHW speed {median(x['nhwc_over_nchw'] for x in xs):.2f}x"
        )
    say("\n== latency floor: one chain of N tiny ops (8 float64), op by op (numpy) vs fused (one @njit call) ==")
    rows = defaultdict(list)
    for s in sums:
        for x in s["tiny_chain"]:
            rows[(x["fused"], x["n_ops"])].append(x["ns_per_chain"])
    for (fused, n), xs in sorted(rows.items()):
        m, lo, hi = med_spread(xs)
        say(f"  {'fused  ' if fused else 'numpy  '} N={n:2d}  {m:8.0f} ns per chain ({lo:.0f}-{hi:.0f})")
    for r in recs:
        if r.get("group") == "dispatch" and r.get(key):
            launches = r["work"]["launches"] / max(r["reps"], 1)
            ns = [t / r["reps"] / launches * 1e9 for t in r[key]]
            m, lo, hi = med_spread(ns)
            say(f"  {r['variant']:34s} {m:8.0f} ns per call ({lo:.0f}-{hi:.0f})")
    return sums


def report_chase(recs, rounds, caches, say, key="samples_s"):
    say("\n== memory latency (pointer chase, 1 thread): ns and cycles per load ==")
    by = defaultdict(list)
    for i in range(rounds):
        for p in CH.staircase(per_round(recs, i, key)):
            by[(p["variant"], p["bytes"])].append(p)
    for (variant, nbytes), ps in sorted(by.items()):
        m, lo, hi = med_spread([p["ns"] for p in ps])
        cyc = [p["cycles"] for p in ps if p["cycles"]]
        say(
            f"  {variant.split('.')[-1]:24s} {fmt_bytes(nbytes):>9s}  {m:7.2f} ns ({lo:.2f}-{hi:.2f})"
            + (f"  {median(cyc):6.1f} cycles" if cyc else "")
        )
    ceilings = []
    for name in sorted({r["variant"] for r in recs if r.get("status") == "ok"}):
        per = [CH.latency_ceilings(per_round(recs, i, key), caches, variant=name) for i in range(rounds)]
        for level in ("L1", "L2", "L3", "DRAM"):
            xs = [c for cs in per for c in cs if c["level"] == level]
            if not xs:
                continue
            m, lo, hi = med_spread([c["value"] for c in xs])
            cyc = [c["cycles"] for c in xs if c["cycles"]]
            clk = [c["clock_ghz"] for c in xs if c["clock_ghz"]]
            say(
                f"  ceiling {name.split('.')[-1]:24s} {level:4s} {m:7.2f} ns ({lo:.2f}-{hi:.2f} over rounds)"
                + (f" = {median(cyc):.1f} cycles at {median(clk):.2f} GHz" if cyc else "")
                + (f"; plateau ends {fmt_bytes(xs[0]['plateau_end_bytes'])}" if xs[0].get("plateau_end_bytes") else "")
            )
            ceilings.append({**xs[0], "value": m, "rounds": [c["value"] for c in xs]})
    return ceilings


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", default=None, help="comma-separated thread counts (default 1 and all cores)")
    ap.add_argument("--only", default="ops,chains,layouts,tiny,chase")
    ap.add_argument("--dtypes", default=None, help="comma-separated: float32,float64 (default: the suite's)")
    ap.add_argument("--budget", type=float, default=0.25, help="seconds of one sample per member per round")
    ap.add_argument("--out", default="results")
    args = ap.parse_args(argv)
    threads = [int(t) for t in args.threads.split(",")] if args.threads else sorted({1, max_threads()})
    only = set(args.only.split(","))
    desc = machine.describe()
    caches = desc["cpu"]["caches"]
    driver = Driver(cpu_backend(), Settings(target_s=args.budget))
    lines: list[str] = []

    def say(text=""):
        print(text, flush=True)
        lines.append(text)

    say(
        f"rooflab elementwise/chase report on {desc['cpu']['model']} ({len(cpu_machine.usable_cpus())} CPUs), {utc_now()}"
    )
    say(f"command: {' '.join([Path(sys.argv[0]).name] + (argv if argv is not None else sys.argv[1:]))}")
    say(f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')} threads={threads} rounds={args.rounds}")
    load0, t0 = loadavg(), time.time()
    all_recs: dict = {}
    for key, members in comparison_sets(
        args.quick, threads, only, set(args.dtypes.split(",")) if args.dtypes else None
    ).items():
        say(f"set {' '.join(map(str, key))}: {len(members)} members, load {loadavg()}")
        all_recs[key] = run_set(driver, members, args.rounds, args.budget, say)
    ew = [r for k, rs in all_recs.items() if k[0] != "chase" for r in rs]
    ch = [r for k, rs in all_recs.items() if k[0] == "chase" for r in rs]
    say("\n######## wall-clock time (what a user waits) ########")
    sums = report_ew(ew, args.rounds, say) if ew else []
    ceilings = report_chase(ch, args.rounds, caches, say) if ch else []
    if any(r.get("cpu_samples_s") for r in ew + ch):
        say("\n######## 1-thread cases on thread CPU time (without the time slices of other processes) ########")
        if ew:
            report_ew([r for r in ew if r.get("cpu_samples_s")], args.rounds, say, key="cpu_samples_s")
        if ch:
            report_chase(ch, args.rounds, caches, say, key="cpu_samples_s")
    probes = [{r["threads"]: r["round_clock_ghz"] for r in rs if r.get("round_clock_ghz")} for rs in all_recs.values()]
    clocks = [g for per_set in probes for rounds in per_set.values() for gs in rounds if gs for g in gs]
    say("\n== contention ==")
    if clocks:
        best = max(clocks)
        say(
            f"  clock probe before each round: median {median(clocks):.2f} GHz, min {min(clocks):.2f}, best {best:.2f}; "
            f"{sum(c < 0.85 * best for c in clocks)} of {len(clocks)} probes below 85 % of the best"
        )
    say(f"  load average {load0} at the start, {loadavg()} at the end, {time.time() - t0:.0f} s in all")
    out = Path(args.out) / desc["id"]
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"elementwise-report-{utc_now().replace(':', '')}.json"
    atomic_write_json(
        path,
        {
            "machine": desc,
            "args": vars(args),
            "records": [r for rs in all_recs.values() for r in rs],
            "summaries_per_round": sums,
            "latency_ceilings": ceilings,
            "text": lines,
        },
    )
    print(f"written: {path}")
    failed = [r["label"] for rs in all_recs.values() for r in rs if r["status"] != "ok"]
    if failed:
        print(f"elementwise_report: {len(failed)} member(s) failed (no figure): {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
