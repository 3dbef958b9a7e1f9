"""GEMM: rooflab's numba rungs against numpy/BLAS, interleaved in one process (the issue's ratios).

What it measures: for each dtype, shape and thread count, every chosen variant is verified against
the float64 reference, then all are timed in interleaved rounds through the one driver (rooflab.driver.Driver.interleaved: variant A, B, C, A, B, C, ...) so
a noisy neighbour hits them alike; per variant the median (p20-p80) of the rounds, GFLOP/s, GB/s
of the minimum bytes, and the ratio of medians to variant 0 (numpy.matmul and its BLAS, named from
threadpoolctl). Threads are matched: numba.set_num_threads plus threadpoolctl's BLAS limit.

Contention: the load average before/after and, per cell, the CPU time the process got over the
wall time x threads (1.00 = it had its cores the whole time) are printed beside the figures.

Environment: OMP_WAIT_POLICY=PASSIVE, GOMP_SPINCOUNT=300000 and OPENBLAS_THREAD_TIMEOUT=4 are set
unless already set: numba-parallel and BLAS thread pools spin-wait against each other otherwise
(research/numba-gemm-conv.md section 3), but a pool that sleeps at once pays a futex wake-up
(~50 us) per parallel call, which is 15 % of a 0.3 ms decode GEMV. The short spin (libgomp's own
default when no policy is given, ~0.1 ms) keeps the numba pool warm between back-to-back calls, as in
a decode loop, and lets it sleep before a long BLAS call. Measured on 2-vCPU Zen 4, 1x768x3072 cold,
2 threads: rung 05 at 84 % of the DRAM read roof with PASSIVE alone, 99-104 % with the short spin. OPENBLAS_CORETYPE, if set, picks OpenBLAS's kernels: the
kernel architecture that ran is printed.

Run:
    python scripts/gemm_vs_blas.py                                  # n=2048 FP32+FP64, 1 and 2 threads
    python scripts/gemm_vs_blas.py --shapes 1x768x3072 --cold --roof    # decode GEMV vs the DRAM roof
    python scripts/gemm_vs_blas.py --shapes 512,1024 --dtypes float32 --threads 1 --runs 9 --json out.json
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("GOMP_SPINCOUNT", "300000")
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

import argparse  # noqa: E402
import json  # noqa: E402
import resource  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402


def parse_shape(text: str) -> dict:
    parts = [int(x) for x in text.lower().split("x")]
    if len(parts) == 1:
        parts *= 3
    if len(parts) != 3:
        raise SystemExit(f"shape {text!r}: give n or MxNxK")
    return {"M": parts[0], "N": parts[1], "K": parts[2]}


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def llc_bytes() -> int:
    from rooflab.cpu import machine as cpu_machine

    caches = cpu_machine.read_caches()
    return int(caches[-1]["size_bytes"]) if caches else 32 << 20


def measure(variants, shape, dtype, threads, runs, sample_s, cold=False, roof=False):
    """Verify every variant, then time them in interleaved rounds through the one driver
    (rooflab.driver.Driver.interleaved). ``cold``: rotate over input copies totalling > 2x the
    last-level cache, so operands come from DRAM; ``roof``: time rooflab's cpu.stream.read on a 4x
    LLC array in the same rounds (the DRAM read roof)."""
    import rooflab
    from rooflab.cpu.backend import cpu_backend
    from rooflab.driver import Driver, Entry, Settings

    v0 = variants[0]
    first = v0.inputs(shape, dtype, seed=1)
    rotate = ()
    if cold:
        copies = max(2, -(-2 * llc_bytes() // max(1, int(v0.work(*first).bytes_read))) + 1)
        rotate = tuple(tuple(x.copy() for x in first) for _ in range(copies - 1))
    entries = [Entry(v, first, label=v.name, group="gemm", threads=threads, rotate=rotate) for v in variants]
    if roof:
        sr = rooflab.get_variant("cpu.stream.read")
        entries.append(Entry(sr, sr.inputs(4 * llc_bytes() // 8, "float64"), label="DRAM read roof (cpu.stream.read)",
                             group="roof", threads=threads))  # fmt: skip
    driver = Driver(cpu_backend(), Settings(target_s=sample_s, probe_clock=False))
    wall0, cpu0 = time.perf_counter(), cpu_seconds()
    records = driver.interleaved(entries, rounds=runs)
    share = (cpu_seconds() - cpu0) / ((time.perf_counter() - wall0) * threads)  # over the whole comparison
    failed = [f"{r.label}: {r.error}" for r in records if r.status != "ok"]
    if failed:
        raise SystemExit("gemm_vs_blas: " + "; ".join(failed))
    roof_gbps = records[-1].gbps["median"] if roof else None
    out = {}
    for r in records:
        t = np.array(r.samples_s) / r.reps  # per call
        med = float(np.median(t))
        out[r.label] = {
            "verification": r.verification,
            "median_s": med,
            "p20_s": float(np.percentile(t, 20)),
            "p80_s": float(np.percentile(t, 80)),
            "gflops": (r.gflops or {}).get("median", 0.0),
            "gbps": (r.gbps or {}).get("median", 0.0),
            "ratio": r.meta["ratio"] if r.meta.get("group") == "gemm" else 1.0,  # median of per-round ratios to 00
            "of_roof": r.gbps["median"] / roof_gbps if roof else None,
            "reps": r.reps,
            "copies": 1 + len(rotate),
            "samples_s": t.tolist(),
        }
    return out, share


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default="2048", help="comma list of n or MxNxK (default 2048)")
    ap.add_argument("--dtypes", default="float32,float64")
    ap.add_argument("--threads", default="1,2", help="comma list of thread counts (default 1,2)")
    ap.add_argument("--variants", default="04,05", help="rung numbers compared with 00 (default 04,05)")
    ap.add_argument("--runs", type=int, default=7, help="interleaved rounds; medians over them (default 7)")
    ap.add_argument("--sample", type=float, default=0.05, help="seconds per timed sample (default 0.05)")
    ap.add_argument("--cold", action="store_true", help="rotate input copies > 2x LLC: operands from DRAM")
    ap.add_argument("--roof", action="store_true", help="also time the DRAM read roof (cpu.stream.read, 4x LLC)")
    ap.add_argument("--json", help="write every figure and sample here")
    args = ap.parse_args(argv)

    import numba
    from rooflab.kernels.cpu import simd
    from threadpoolctl import threadpool_info

    import rooflab
    from rooflab.families.gemm.cpu import blas_info, blas_name
    from rooflab.threads import check_threads

    numbers = [0] + [int(x) for x in args.variants.split(",") if x.strip() and int(x) != 0]
    names = {v.number: v for v in rooflab.list_variants(family="gemm", device="cpu")}
    variants = [names[n] for n in numbers]
    threads = [check_threads(int(t)) for t in args.threads.split(",")]
    env = {
        k: os.environ.get(k)
        for k in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "OPENBLAS_THREAD_TIMEOUT", "OPENBLAS_CORETYPE")
    }
    header = {
        "blas": blas_info(),
        "simd": simd.describe(),
        "numba": numba.__version__,
        "env": env,
        "load_before": os.getloadavg(),
        "command": "python scripts/gemm_vs_blas.py " + " ".join(argv if argv is not None else os.sys.argv[1:]),
    }
    print(f"BLAS: {blas_name()}   numba {numba.__version__}, {simd.describe()}")
    print("env: " + "  ".join(f"{k}={v}" for k, v in env.items()) + f"   load average {os.getloadavg()[0]:.2f}")
    rows = []
    for dtype in args.dtypes.split(","):
        for text in args.shapes.split(","):
            shape = parse_shape(text)
            for t in threads:
                res, share = measure(variants, shape, dtype, t, args.runs, args.sample, args.cold, args.roof)
                label = f"{shape['M']}x{shape['N']}x{shape['K']}" + (" cold" if args.cold else "")
                for name, r in res.items():
                    rows.append(
                        {"dtype": dtype, "shape": shape, "threads": t, "variant": name, "cpu_share": share, **r}
                    )
                    roof = f"  {100 * r['of_roof']:5.1f} % of roof" if r.get("of_roof") else ""
                    print(
                        f"{dtype:8s} {label:>15s} {t}T  {name:33s} {r['gflops']:8.1f} GFLOP/s {r['gbps']:7.1f} GB/s"
                        f"  {100 * r['ratio']:6.1f} % of 00{roof}   p20-p80 {r['p20_s'] / r['median_s']:.2f}-"
                        f"{r['p80_s'] / r['median_s']:.2f}   cpu share {share:.2f}",
                        flush=True,
                    )
    header["load_after"] = os.getloadavg()
    header["blas_after"] = [lib for lib in threadpool_info() if lib.get("user_api") == "blas"]
    print(f"load average after: {header['load_after'][0]:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"header": header, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
