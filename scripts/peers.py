#!/usr/bin/env python3
"""Measure rooflab's CPU ceilings side by side with likwid-bench, in one run, interleaved.

    python scripts/peers.py [--rounds 3] [--out results/]

For each target it alternates likwid-bench and the matching rooflab kernel (same threads, same
working set per thread) ``--rounds`` times and reports medians and the ratio rooflab / likwid:

  FP64 / FP32 peak    likwid peakflops[_sp]_avx512_fma (or _avx_fma)  vs  cpu.ert.fma
  DRAM triad, 2 GB    likwid triad_avx512_fma (A=B*C+D, 32 B/elem)    vs  cpu.stream.triad (24 B/elem)
  DRAM update, 2 GB   likwid update_avx512 (A=s*A, 16 B/elem)         vs  cpu.stream.update
  L1 / L2 read        likwid load_avx and load_avx512                 vs  cpu.stream.read

likwid-bench comes from Debian's `likwid` package (apt-get install likwid); its code is not vendored.
Writes results/runs/<machine-id>/peers-<timestamp>.json (the default --out of every run).
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path
from statistics import median

import numpy as np
from rooflab.kernels.cpu import ert, stream

import rooflab
from rooflab import machine
from rooflab.cpu import machine as cpu_machine
from rooflab.cpu.backend import cpu_backend
from rooflab.driver import Driver, Settings
from rooflab.memory import aligned_empty
from rooflab.results import RUNS_DIR, atomic_write_json, utc_now


def likwid(test: str, size: str, threads: int) -> float:
    """MFLOP/s or MByte/s reported by likwid-bench, as GFLOP/s or GB/s."""
    out = subprocess.run(
        ["likwid-bench", "-t", test, "-W", f"N:{size}:{threads}", "-s", "1"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    key = "MFlops/s" if test.startswith("peakflops") else "MByte/s"
    m = re.search(rf"^{re.escape(key)}:\s+([\d.]+)", out.stdout, re.M)
    if not m:
        raise RuntimeError(f"likwid-bench {test} printed no {key}: {out.stdout[-400:]} {out.stderr[-400:]}")
    return float(m.group(1)) / 1000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=RUNS_DIR)
    ap.add_argument("--dram-bytes", default="2GB", help="likwid -W size for the DRAM triad (default 2GB)")
    ap.add_argument("--only", default=None, metavar="REGEX", help="run only the targets whose name matches")
    args = ap.parse_args()
    if not shutil.which("likwid-bench"):
        print("peers: likwid-bench not found (fix: apt-get install likwid)", file=sys.stderr)
        return 2
    desc = machine.describe()
    cpu = desc["cpu"]
    T = cpu["physical_cores"]
    l1, l2 = cpu["caches"][0]["size_bytes"], cpu["caches"][1]["size_bytes"]
    w = "avx512" if "avx512f" in cpu["simd"] else "avx"
    # the suite's own contention handling: clock probes around each measurement, up to 3 attempts
    driver = Driver(cpu_backend(), Settings(budget_s=0.5, target_s=0.02, max_attempts=3))

    def ert_peak(dtype, threads):
        block = ert.block_elements(l1, np.dtype(dtype).itemsize, 8)
        (a,) = rooflab.get_variant("cpu.ert.fma").inputs(block * threads, dtype)
        r = driver.measure(
            "cpu.ert.fma", (a,), threads=threads, params={"K": 64, "S": 8, "block": block}, verify_params={"reps": 2}
        )
        return r.gflops["median"]

    def read_bw(total_bytes, threads):
        a = aligned_empty(total_bytes // 8)
        stream.fill_pattern(a, threads)
        return driver.measure("cpu.stream.read", (a,), threads=threads).gbps["median"]

    dram_total = 2 * 10**9 if args.dram_bytes.upper() == "2GB" else int(args.dram_bytes)
    tri_buf = aligned_empty(dram_total // 8)
    stream.fill_pattern(tri_buf, T)
    part = tri_buf.size // 3 // 16 * 16
    tri = (tri_buf[:part], tri_buf[part : 2 * part], tri_buf[2 * part : 3 * part])

    def triad_bw(threads):
        return driver.measure("cpu.stream.triad", tri, threads=threads).gbps["median"]

    def update_bw(threads):
        return driver.measure("cpu.stream.update", (tri_buf,), threads=threads, verify_params={"s": 2.0}).gbps["median"]

    kb = lambda b: f"{b // 1024}kB"  # noqa: E731  likwid sizes are totals over the threads
    targets = []
    for threads in sorted({1, T}):
        targets += [
            (
                f"FP64 peak {threads}T",
                lambda t=threads: likwid(f"peakflops_{w}_fma", kb(l1 // 2 * t), t),
                lambda t=threads: ert_peak(np.float64, t),
                "GFLOP/s",
                0.90,
            ),
            (
                f"FP32 peak {threads}T",
                lambda t=threads: likwid(f"peakflops_sp_{w}_fma", kb(l1 // 2 * t), t),
                lambda t=threads: ert_peak(np.float32, t),
                "GFLOP/s",
                0.90,
            ),
            (
                f"L1 read {threads}T vs load_avx",
                lambda t=threads: likwid("load_avx", kb(l1 // 2 * t), t),
                lambda t=threads: read_bw(l1 // 2 * t, t),
                "GB/s",
                0.80,
            ),
            (
                f"L1 read {threads}T vs load_{w}",
                lambda t=threads: likwid(f"load_{w}", kb(l1 // 2 * t), t),
                lambda t=threads: read_bw(l1 // 2 * t, t),
                "GB/s",
                None,
            ),
            (
                f"L2 read {threads}T vs load_avx",
                lambda t=threads: likwid("load_avx", kb(l2 // 2 * t), t),
                lambda t=threads: read_bw(l2 // 2 * t, t),
                "GB/s",
                0.80,
            ),
            (
                f"L2 read {threads}T vs load_{w}",
                lambda t=threads: likwid(f"load_{w}", kb(l2 // 2 * t), t),
                lambda t=threads: read_bw(l2 // 2 * t, t),
                "GB/s",
                None,
            ),
        ]
    for t in sorted({1, T}):  # DRAM at 1 thread and all threads (a core alone cannot fill the channels)
        targets.append(
            (
                f"DRAM triad {t}T (2 GB)",
                lambda t=t: likwid(f"triad_{w}_fma", args.dram_bytes, t),
                lambda t=t: triad_bw(t),
                "GB/s",
                0.90,
            )
        )
        targets.append(
            (
                f"DRAM update {t}T (2 GB)",
                lambda t=t: likwid(f"update_{w}", args.dram_bytes, t),
                lambda t=t: update_bw(t),
                "GB/s",
                None,
            )
        )
    if args.only:
        targets = [t for t in targets if re.search(args.only, t[0])]
    rows = []
    for name, peer, ours, unit, goal in targets:
        p, o = [], []
        for _ in range(args.rounds):
            p.append(peer())
            o.append(ours())
        ratio = median(o) / median(p)
        rows.append(
            {
                "target": name,
                "unit": unit,
                "likwid": p,
                "rooflab": o,
                "likwid_median": median(p),
                "rooflab_median": median(o),
                "ratio": ratio,
                "goal": goal,
                "meets_goal": None if goal is None else ratio >= goal,
            }
        )
        flag = "" if goal is None else ("  ok" if ratio >= goal else f"  BELOW {goal:.0%}")
        print(
            f"{name:34s} likwid {median(p):8.1f}  rooflab {median(o):8.1f} {unit:8s} ratio {ratio:5.2f}{flag}",
            flush=True,
        )
    theo = {
        (q["dtype"], q["threads"]): q["gflops"]
        for q in cpu_machine.peaks_for(cpu, Driver(cpu_backend()).probe_clock(1)[0])["peaks"]
    }
    out = Path(args.out) / desc["id"] / f"peers-{utc_now().replace(':', '').replace('-', '')}.json"
    atomic_write_json(
        out,
        {
            "kind": "rooflab-peers",
            "schema_version": 1,
            "machine": desc,
            "rows": rows,
            "theoretical_at_probed_clock": {f"{k[0]} {k[1]}T": v for k, v in theo.items()},
            "rounds": args.rounds,
            "finished": utc_now(),
        },
    )
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
