"""Interleaved comparison of the CPU conv variants on the issue's shapes (ratios in one process).

What it measures, per shape: every applicable cpu.conv variant (+ "today", the model-op path of
rooflab/models/execute.py as it was: im2col into (N, P, Q, C, R, S) + one GEMM, transposed view out),
all through the one driver's interleaved rounds (rooflab.driver.Driver.interleaved): each verified
against the float64 reference first (max|y - ref| / max|ref| reported; a wrong variant gets an
error and no figure, and the script then exits 1), then timed once per round for ``--runs``
rounds, so drift and neighbours hit all variants alike. Per variant: median ms (p20-p80), nominal
GFLOP/s, real (algorithm) GFLOP/s, the median of per-round ratios to 00-im2col-blas. In the same
rounds, each in its own group: the FP32 FMA peak (the fma family's ERT kernel, the ceilings suite's
peak cases at --threads) so "% of peak" uses a ceiling measured under the same load, and for
depthwise the stream copy over the same bytes (its roof). How contended the machine was: CPU steal,
load average, the driver's clock probe before every round. At 1 thread every figure is also taken on
the thread's CPU time (time slices other processes got are left out).

Sets ``OMP_WAIT_POLICY=PASSIVE OPENBLAS_THREAD_TIMEOUT=4`` before numba/BLAS load (research
numba-gemm-conv.md 3.1) unless the environment already sets them.

Run:
  python scripts/conv_compare.py resnet --runs 7          # ResNet-50 3x3 layers at batch 8 (targets)
  python scripts/conv_compare.py depthwise --runs 9       # MobileNetV2 depthwise, batch 1, vs roof
  python scripts/conv_compare.py sweep --runs 7           # C=K=32 64x64 R=3..15: FFT crossovers
  add --json out.json to keep every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

import numpy as np  # noqa: E402

import rooflab  # noqa: E402
from rooflab.families import conv as F  # noqa: E402

TARGET_S = 0.02  # one sample lasts at least this (kernels repeat inside the call)


def cpu_times():
    with open("/proc/stat") as f:
        vals = [int(v) for v in f.readline().split()[1:]]
    return vals  # user nice system idle iowait irq softirq steal ...


def steal_fraction(a, b):
    d = [y - x for x, y in zip(a, b)]
    total = sum(d[:8])
    return d[7] / total if total else 0.0, (d[0] + d[1] + d[2]) / total if total else 0.0


def today_path(x, w, s):
    """rooflab/models/execute.py _conv as it was (groups == 1): buffers allocated once."""
    N, C, H, W, K, R, S, P, Q = (s[k] for k in ("N", "C", "H", "W", "K", "R", "S", "P", "Q"))
    sh, sw, ph, pw = s["stride_h"], s["stride_w"], s["pad_h"], s["pad_w"]
    wm = w.reshape(K, C * R * S)
    xpad = np.zeros((N, C, H + 2 * ph, W + 2 * pw), dtype=x.dtype)
    cols = np.empty((N, P, Q, C, R, S), dtype=x.dtype)
    y = np.empty((N, P * Q, K), dtype=x.dtype)

    def run(reps=1):
        for _ in range(reps):
            xpad[:, :, ph : ph + H, pw : pw + W] = x
            np.copyto(cols, F.windows(xpad, R, S, sh, sw, P, Q).transpose(0, 2, 3, 1, 4, 5))
            np.matmul(cols.reshape(N, P * Q, C * R * S), wm.T, out=y)
        return y.transpose(0, 2, 1).reshape(N, K, P, Q)

    return run


def today_variant(x, w, s, reference):
    """The path above as a variant of this shape's operands, so the driver verifies and times it."""
    from rooflab.registry import Variant

    run = today_path(x, w, s)
    return Variant(
        name="cpu.conv.today-execute",
        family=F.FAMILY,
        device="cpu",
        description="rooflab/models/execute.py's conv as it was: im2col copy + one GEMM, transposed view",
        kernel=lambda x, w, reps=1, threads=None, **_: run(reps),
        reference=reference,
        work=F.work_for("im2col"),
        inputs=F.make_inputs,
        result_dtype=lambda x, w, **_: F.result_key(x.dtype),
    )


def shared_reference():
    """One float64 reference per operands and parameters, shared by every variant of a shape (the
    driver asks each entry's variant for it; a ResNet layer's costs ~1 s)."""
    memo = {}

    def reference(x, w, **params):
        key = (id(x), id(w), repr(sorted(params.items())))
        if key not in memo:
            memo.clear()
            memo[key] = F.reference(x, w, **params)
        return memo[key]

    return reference


def peak_entries(threads):
    """The ceilings suite's FP32 FMA peak cases (ERT on an L1-resident block per thread, each
    (K, S) it tries) as driver entries of the group "peak"."""
    from rooflab.cpu.machine import read_caches
    from rooflab.driver import Driver, Entry
    from rooflab.suite_ceilings import PEAK_CONFIGS, peak_case

    l1 = next((c["size_bytes"] for c in read_caches() if c.get("level") == 1 and c.get("type") != "Instruction"), 32768)
    cases = [peak_case("float32", threads, l1, K, S) for K, S in PEAK_CONFIGS]
    return [Entry(c.variant, Driver.inputs(c), c.params, c.verify_params, c.label, "peak", threads) for c in cases]


def copy_entry(nbytes, threads):
    """cpu.stream.copy over a working set of nbytes (src + dst), timed in the same rounds as the
    conv variants: the bandwidth roof of the level that working set lives in, under the same load."""
    from rooflab.driver import Entry

    v = rooflab.get_variant("cpu.stream.copy")
    return Entry(v, v.inputs(max(1024, nbytes // 8), np.float32), label="stream-copy (roof)", group="roof",
                 threads=threads)  # fmt: skip


def per_call(rec, key):
    """Seconds per kernel call of each round (a sample repeats the kernel ``reps`` times)."""
    xs = rec.samples_s if key == "wall" else rec.meta.get("cpu_samples_s")
    return np.asarray(xs) / rec.reps if xs else None


def rate(rec, amount):
    """``amount`` per second on the record's CPU time where the driver took it, else wall time."""
    t = per_call(rec, "cpu")
    return amount / float(np.median(t if t is not None else per_call(rec, "wall")))


def shapes_for(which, batch):
    if which == "resnet":
        return F.resnet50_3x3_targets(batch)
    if which == "resnet-all":
        return F.resnet50_layers(batch)
    if which == "depthwise":
        return F.mobilenet_v2_depthwise(batch)
    if which == "sweep":
        return F.kernel_sweep()
    raise SystemExit(f"unknown set {which!r}")


def shape_entries(s, variants, threads, today, layout, depthwise):
    """The driver entries of one shape: the applicable conv variants (+ today) on shared operands
    in the group "conv", the FMA peak, and for depthwise the copy roof over the same bytes."""
    from dataclasses import replace

    from rooflab.driver import Entry

    params = F.params_for(s)
    x, w = F.make_inputs(s, np.float32)
    ref = shared_reference()
    conv = [replace(v, reference=ref) for v in variants if not v.kernel.supports(s)]
    if today and s["groups"] == 1 and layout == "NCHW":
        conv.append(today_variant(x, w, s, ref))
    entries = [Entry(v, (x, w), params, label=v.name.split(".")[-1], group="conv", threads=threads) for v in conv]
    entries += peak_entries(threads)
    if depthwise:
        rd, wr = F.min_bytes(s, 4)
        entries.append(copy_entry(int(rd + wr), threads))
    works = {e.label: e.variant.work(x, w, **params) for e in entries[: len(conv)]}
    return entries, works, lambda: float(np.abs(ref(x, w, **params)).max())


def report_shape(s, recs, works, scale, depthwise, say):
    """One shape's rows (printed and returned): every conv record's figures, or its error."""
    rd, wr = F.min_bytes(s, 4)
    peaks = [rate(r, r.work["flops"] / r.reps) for r in recs if r.meta["group"] == "peak" and r.status == "ok"]
    peak = max(peaks, default=float("nan"))  # every peak entry failed: no "% of peak"
    row = {"shape": s.get("name"), "params": F.params_for(s), "nominal_gflop": F.nominal_flops(s) / 1e9}
    row.update(peak_gflops=peak / 1e9, variants=[])
    say(
        f"\n{s.get('name')}  ({row['nominal_gflop']:.3f} GFLOP nominal, {(rd + wr) / 1e6:.2f} MB compulsory; "
        f"FP32 FMA peak in the same rounds {row['peak_gflops']:.1f} GFLOP/s)"
    )
    roof = next((r for r in recs if r.meta["group"] == "roof"), None)
    if roof is not None and roof.status == "ok":
        row["copy_gbps"] = rate(roof, roof.work["bytes"] / roof.reps) / 1e9
        say(f"  roof: stream copy over the same {(rd + wr) / 1e6:.2f} MB, interleaved: {row['copy_gbps']:.1f} GB/s")
    for r in recs:
        if r.meta["group"] != "conv" or r.status != "ok":
            if r.status != "ok":
                row["variants"].append({"variant": r.label, "error": r.error})
                say(f"  {r.label:22s} FAILED: {r.error}")
            continue
        work, t, cpu_t = works[r.label], per_call(r, "wall"), per_call(r, "cpu")
        med = float(np.median(t))
        d = {
            "variant": r.label,
            "ms": med * 1e3,
            "p20_ms": float(np.percentile(t, 20)) * 1e3,
            "p80_ms": float(np.percentile(t, 80)) * 1e3,
            "gflops_nominal": work.flops / med / 1e9,
            "gflops_real": getattr(work, "algorithm_flops", work.flops) / med / 1e9,
            "gbps": work.bytes / med / 1e9,
            "rel_err": r.verification["max_abs_err"] / scale,
            "vs_im2col_blas": r.meta.get("ratio"),  # median of per-round ratios to variant 0
            "round_ratios": r.meta.get("round_ratios"),
            "reps": r.reps,
            "samples": len(t),
            "noisy": r.noisy,
        }
        line = f"x{(d['vs_im2col_blas'] or float('nan')):5.2f}"
        cpu = float(np.median(cpu_t)) if cpu_t is not None else None
        if cpu:
            d.update(
                cpu_ms=cpu * 1e3, core_share=float(np.median(cpu_t / t)), vs_im2col_blas_cpu=r.meta.get("cpu_ratio")
            )
            d["gflops_nominal_cpu"] = work.flops / cpu / 1e9
            line += (
                f" | cpu {d['cpu_ms']:8.3f} ms x{(d['vs_im2col_blas_cpu'] or float('nan')):5.2f} "
                f"{d['gflops_nominal_cpu']:6.1f} GF/s ({d['gflops_nominal_cpu'] / row['peak_gflops']:4.0%} pk) "
                f"real {getattr(work, 'algorithm_flops', 0) / cpu / 1e9:5.1f} | core {d['core_share']:4.0%}"
            )
        else:
            line += f" {d['gflops_nominal']:6.1f} GF/s ({d['gflops_nominal'] / row['peak_gflops']:4.0%} pk)"
        extra = f"  {d['gbps']:6.1f} GB/s" if depthwise else ""
        if depthwise and row.get("copy_gbps") and work.flops:
            # attainable on the roofline: the slower of the FMA peak and the copy roof
            t_run = cpu or med
            t_att = max(work.flops / peak, work.bytes / (row["copy_gbps"] * 1e9))
            d["gbps_cpu"] = work.bytes / t_run / 1e9
            d["x_of_attainable"] = t_run / t_att
            extra = (
                f"  {d['gbps_cpu']:6.1f} GB/s ({d['gbps_cpu'] / row['copy_gbps']:.0%} of copy), "
                f"{d['x_of_attainable']:.1f}x the attainable {t_att * 1e6:.1f} us"
            )
        row["variants"].append(d)
        say(
            f"  {r.label:22s} wall {d['ms']:8.3f} ms [{d['p20_ms']:.3f}-{d['p80_ms']:.3f}] {line} "
            f"| err {d['rel_err']:.1e}{' noisy' if r.noisy else ''}{extra}"
        )
    return row


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("set", choices=["resnet", "resnet-all", "depthwise", "sweep"])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--batch", type=int, default=None)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--variants", default="", help="comma-separated rung numbers (default: all applicable)")
    ap.add_argument("--no-today", action="store_true")
    ap.add_argument("--layout", default="NCHW", choices=["NCHW", "NHWC"])
    ap.add_argument("--json", default=None)
    ap.add_argument("--target", type=float, default=TARGET_S, help=f"seconds per sample (default {TARGET_S})")
    args = ap.parse_args(argv)
    batch = args.batch or (8 if args.set.startswith("resnet") else 1)

    import numba
    from threadpoolctl import threadpool_limits

    from rooflab.cpu.backend import cpu_backend
    from rooflab.driver import Driver, Settings

    numba.set_num_threads(args.threads)
    limits = threadpool_limits(limits=args.threads, user_api="blas")
    driver = Driver(cpu_backend(), Settings(target_s=args.target))
    stat0, load0, t_start = cpu_times(), os.getloadavg(), time.time()

    want = {int(v) for v in args.variants.split(",") if v.strip()}
    variants = [
        v for v in rooflab.list_variants(family="conv", device="cpu") if not want or v.number in want or v.number == 0
    ]
    results = {"set": args.set, "batch": batch, "threads": args.threads, "runs": args.runs, "shapes": []}
    clocks, failed = [], 0
    for s in shapes_for(args.set, batch):
        s = dict(s, layout=args.layout)
        depthwise = args.set == "depthwise"
        entries, works, scale = shape_entries(s, variants, args.threads, not args.no_today, args.layout, depthwise)
        recs = driver.interleaved(entries, rounds=args.runs, cpu_time=args.threads == 1)
        clocks += [g for r in recs for p in r.meta.get("round_clock_ghz", []) if p for g in p]
        failed += sum(r.status != "ok" for r in recs)
        results["shapes"].append(report_shape(s, recs, works, scale(), depthwise, lambda t: print(t, flush=True)))
    results["peak_gflops"] = float(np.median([row["peak_gflops"] for row in results["shapes"]]))
    stat1, load1 = cpu_times(), os.getloadavg()
    steal, busy = steal_fraction(stat0, stat1)
    results["contention"] = {
        "steal_fraction": steal,
        "busy_fraction_all_cpus": busy,
        "loadavg_start": load0,
        "loadavg_end": load1,
        "clock_ghz_min": min(clocks) if clocks else None,
        "clock_ghz_max": max(clocks) if clocks else None,
        "seconds": time.time() - t_start,
        "ncpus": os.cpu_count(),
    }
    c = results["contention"]
    print(
        f"\ncontention: steal {steal:.1%}, all-CPU busy {busy:.0%} of {c['ncpus']} CPUs over {c['seconds']:.0f} s, "
        f"load {load0[0]:.2f} -> {load1[0]:.2f}, clock probes (before every round) "
        f"{c['clock_ghz_min'] or 0:.2f}-{c['clock_ghz_max'] or 0:.2f} GHz"
    )
    print(
        f"env: OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')} OPENBLAS_THREAD_TIMEOUT="
        f"{os.environ.get('OPENBLAS_THREAD_TIMEOUT')}, threads {args.threads}, numba {numba.__version__}, "
        f"numpy {np.__version__}"
    )
    limits.restore_original_limits()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1, default=float)
    if failed:
        print(f"conv_compare: {failed} entries failed verification or timing (no figure for them)", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
