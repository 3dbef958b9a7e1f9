"""The CUDA GEMM ladder on this GPU: GFLOP/s of every variant at one square size (default 4096) and
its percentage of cuBLAS in the same dtype, all measured in one process through the one driver's
interleaved mode (rooflab.driver.Driver.interleaved: round r times every variant once; % of cuBLAS
is the median of the per-round ratios), each variant verified against the float64 reference at
that size before it is timed.

FP32: the SIMT rungs 01-07 against cuBLAS SGEMM (00-cublas); FP16, and BF16 where cupy has it
(ml_dtypes): the tensor-core rungs 08-09 against cuBLAS in the same type. The last lines compare
the best rungs with the issue's goals (best FP32 SIMT >= 70 % of SGEMM, best tensor-core >= 50 % of
FP16 cuBLAS): the percentages are measured here, only the goals are written down.

With --sweep it also times the other knob sets of rungs 07-09 that rooflab.families.gemm.cuda
.CANDIDATES lists (each verified first, all in the same interleaved rounds): to adopt a winner,
change that rung's knobs in RUNGS there.

usage: python scripts/gemm_ladder_cuda.py [--size 4096] [--rounds 5] [--target-ms 20] [--sweep] [--json FILE]
exit status 0 when every variant verified (or there is no GPU: it says why), 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

GOALS = {"float32": ("SIMT", 0.70, "cuBLAS SGEMM"), "float16": ("tensor-core", 0.50, "cuBLAS FP16")}


def _plan(rooflab, compiler, loader, sweep=False):
    """[(variant, dtype, knobs)] in ladder order per dtype, variant 0 first (knobs: None = the rung's own)."""
    from rooflab.families.gemm.cuda import CANDIDATES

    try:
        import ml_dtypes  # noqa: F401

        dtypes = ("float32", "float16", "bfloat16")
    except ImportError:
        dtypes = ("float32", "float16")
    arch = loader.device_arch()
    out = []
    for dt in dtypes:
        for v in rooflab.list_variants(family="gemm", device="cuda"):
            if dt not in v.dtypes:
                continue
            if v.name.endswith("09-wgmma") and not compiler.runs_on("gemm09_wgmma.cu", arch):
                print(f"  {v.name}: skipped, wgmma needs sm_90 and this GPU is {arch}")
                continue
            out.append((v, dt, None))
            if sweep and dt in ("float32", "float16"):
                out.extend((v, dt, knobs) for knobs in CANDIDATES.get(v.number, ()))
    return out


def _label(e) -> str:
    return e["variant"] + ("" if not e["knobs"] else " " + ",".join(f"{k}={v}" for k, v in e["knobs"].items()))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=4096, help="M = N = K (default 4096)")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds, the median is reported (default 5)")
    ap.add_argument("--target-ms", type=float, default=20.0, help="device time per sample (default 20 ms)")
    ap.add_argument("--sweep", action="store_true", help="also time the other knob sets of rungs 07-09")
    ap.add_argument("--json", help="also write the records to this file")
    a = ap.parse_args(argv)

    import rooflab
    from rooflab.cuda import backend

    ok, why = backend.probe()
    if not ok:
        print(f"gemm ladder: no CUDA run: {why}")
        return 0
    from rooflab.cuda import compiler, loader
    from rooflab.driver import Driver, Entry, Settings

    n = a.size
    shape = {"M": n, "N": n, "K": n}
    print(f"gemm ladder: M = N = K = {n} on {backend.describe(0)['name']} ({loader.device_arch()})")
    if os.environ.get("CUPY_TF32") == "1":
        print("  note: CUPY_TF32=1, so cuBLAS FP32 runs on TF32 tensor cores")
    # the one driver, interleaved: every variant verified at this size, calibrated, then timed once
    # per round; "% of cuBLAS" is the median over rounds of the per-round ratio
    inputs, entries = {}, []
    for v, dt, knobs in _plan(rooflab, compiler, loader, a.sweep):
        if dt not in inputs:
            inputs[dt] = rooflab.get_variant("cuda.gemm.00-cublas").inputs(shape, dt, seed=0)
        label = v.name + ("" if not knobs else " " + ",".join(f"{k}={x}" for k, x in knobs.items()))
        entries.append(
            Entry(
                v,
                inputs[dt],
                params={"knobs": knobs} if knobs else {},
                label=label,
                group=dt,
                threads=0,
                meta={"knobs": knobs or {}, "dtype": dt},
            )
        )
    driver = Driver(backend.driver_backend(), Settings(target_s=a.target_ms / 1e3, probe_clock=False))
    records, failed = driver.interleaved(entries, rounds=a.rounds), []
    entries = []
    for r in records:
        e = {"variant": r.variant, "number": r.number, "dtype": r.meta["dtype"], "knobs": r.meta["knobs"]}
        if r.status != "ok":
            failed.append(r.label)
            print(f"  {r.label} {e['dtype']}: FAILED: {r.error}")
            continue
        e.update(
            reps=r.reps,
            seconds=[t / r.reps for t in r.samples_s],
            median_s=r.time_s["median"] / r.reps,
            gflops=r.gflops["median"],
            ratio=r.meta.get("ratio"),
            verification=r.verification,
        )
        entries.append(e)
    print(f"{'variant':46s} {'dtype':9s} {'GFLOP/s':>10s} {'% of cuBLAS':>12s} {'ms':>9s}")
    summary = []
    for dt in dict.fromkeys(e["dtype"] for e in entries):
        rows = [e for e in entries if e["dtype"] == dt]
        lib = next((e for e in rows if e["number"] == 0), None)
        for e in rows:
            e["fraction_of_cublas"] = e["ratio"] if lib else None  # median of the per-round ratios
            pct = f"{100 * e['fraction_of_cublas']:11.1f}%" if lib else f"{'-':>12s}"
            print(f"{_label(e):46s} {dt:9s} {e['gflops']:10.1f} {pct} {1e3 * e['median_s']:9.3f}")
        own = [e for e in rows if e["number"] > 0 and not e["knobs"]]  # the rungs as registered
        if dt in GOALS and lib and own:
            kind, goal, peer = GOALS[dt]
            best = max(own, key=lambda e: e["gflops"])
            met = "met" if best["fraction_of_cublas"] >= goal else "NOT met"
            summary.append(
                f"best {kind} rung: {_label(best)} {dt} {best['gflops']:.0f} GFLOP/s = "
                f"{100 * best['fraction_of_cublas']:.1f}% of {peer} (goal >= {100 * goal:.0f}%: {met})"
            )
    for line in summary:
        print(line)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"size": n, "rounds": a.rounds, "records": entries, "failed": failed}, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
