"""Interleaved comparison of the CPU conv variants on the issue's shapes (ratios in one process).

What it measures, per shape: every applicable cpu.conv variant (+ "today", the model-op path of
rooflab/models/execute.py as it was: im2col into (N, P, Q, C, R, S) + one GEMM, transposed view out),
each verified against the float64 reference first (max|y - ref| / max|ref| reported), then timed
interleaved: ``--runs`` rounds, each calling every variant once in a rotated order, so drift and
neighbours hit all variants alike. Per variant: median ms (p20-p80), nominal GFLOP/s, real
(algorithm) GFLOP/s, ratio to 00-im2col-blas. Also in the same process: the FP32 FMA peak (ERT
kernel, 1 thread) so "% of peak" uses a measured ceiling, the stream copy bandwidth at each depthwise
working set (its roof), and how contended the machine was (CPU steal, load average, clock probes).

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
from rooflab.verify import check  # noqa: E402

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


def fma_peak(runs=7):
    """FP32 FMA peak of one core: the ERT kernel on an L1-resident block, thread CPU time (a
    neighbour taking the core away does not count), best of the suite's (K, S) settings."""
    from rooflab.kernels.cpu import ert

    from rooflab.cpu.machine import read_caches
    from rooflab.suite_ceilings import PEAK_CONFIGS

    l1 = next((c["size_bytes"] for c in read_caches() if c.get("level") == 1 and c.get("type") != "Instruction"), 32768)
    v = rooflab.get_variant("cpu.ert.fma")
    best = 0.0
    for K, S in PEAK_CONFIGS:
        block = ert.block_elements(l1, 4, S)
        (a,) = v.inputs(block, np.float32, seed=1)
        params = {"K": K, "S": S, "block": block}
        v(a, reps=2, threads=1, **params)
        passes = max(1, int(0.02 * 112e9 / (2 * K * block)))
        for _ in range(runs):
            c0 = time.thread_time()
            v(a, reps=passes, threads=1, **params)
            best = max(best, 2.0 * K * passes * block / (time.thread_time() - c0) / 1e9)
    return best


def copy_entry(nbytes):
    """cpu.stream.copy over a working set of nbytes (src + dst), timed in the same rotation as the
    conv variants: the bandwidth roof of the level that working set lives in, under the same load."""
    from rooflab.work import Work

    v = rooflab.get_variant("cpu.stream.copy")
    dst, src = v.inputs(max(1024, nbytes // 8), np.float32)
    return {
        "name": "stream-copy (roof)",
        "call": lambda r: v(dst, src, reps=r),
        "err": 0.0,
        "work": Work(0.0, float(src.nbytes), float(dst.nbytes)),
    }


def _bind(v, x, w, params):
    return lambda r: v(x, w, reps=r, **params)


def _once(f):
    t0 = time.perf_counter()
    f()
    return time.perf_counter() - t0


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
    args = ap.parse_args(argv)
    batch = args.batch or (8 if args.set.startswith("resnet") else 1)

    import numba
    from threadpoolctl import threadpool_limits

    from rooflab.cpu.backend import cpu_backend
    from rooflab.driver import Driver

    numba.set_num_threads(args.threads)
    limits = threadpool_limits(limits=args.threads, user_api="blas")
    runner = Driver(cpu_backend())
    stat0, load0, t_start = cpu_times(), os.getloadavg(), time.time()
    peak = fma_peak()
    print(f"FP32 FMA peak (ERT, 1 core, thread CPU time): {peak:.1f} GFLOP/s; 60 % = {0.6 * peak:.1f}", flush=True)

    want = {int(v) for v in args.variants.split(",") if v.strip()}
    variants = [
        v for v in rooflab.list_variants(family="conv", device="cpu") if not want or v.number in want or v.number == 0
    ]
    results = {"set": args.set, "batch": batch, "threads": args.threads, "runs": args.runs, "peak_gflops": peak}
    results["shapes"] = []
    clocks = []
    for s in shapes_for(args.set, batch):
        s = dict(s, layout=args.layout)
        params = F.params_for(s)
        x, w = F.make_inputs(s, np.float32)
        ref = F.reference(x, w, **params)
        scale = float(np.abs(ref).max())
        entries = []
        for v in variants:
            if v.kernel.supports(s):
                continue
            try:
                y = v(x, w, **params)
                rep = check(y, ref, dtype=v.result_dtype(x, w, **params), what=v.name)
            except rooflab.RooflabError as e:
                print(f"  {v.name}: skipped ({e})", flush=True)
                continue
            work = v.work(x, w, **params)
            call = _bind(v, x, w, params)
            entries.append(
                {"name": v.name.split(".")[-1], "call": call, "err": rep["max_abs_err"] / scale, "work": work}
            )
        if not args.no_today and s["groups"] == 1 and args.layout == "NCHW":
            run = today_path(x, w, s)
            y = run()
            rep = check(y, ref, dtype=F.result_key(x.dtype), what="today")
            entries.append(
                {
                    "name": "today-execute",
                    "call": run,
                    "err": rep["max_abs_err"] / scale,
                    "work": F.work_for("im2col")(x, w, **params),
                }
            )
        rd, wr = F.min_bytes(s, 4)
        if args.set == "depthwise":
            entries.append(copy_entry(int(rd + wr)))
        for e in entries:  # warm (compile, workspaces), then reps so a sample lasts TARGET_S
            e["call"](1)
            e["reps"] = max(1, int(TARGET_S / max(1e-6, _once(lambda e=e: e["call"](1)))))
            e["t"], e["cpu"] = [], []
        c_before = runner.probe_clock(args.threads)
        for r in range(args.runs):
            order = entries[r % len(entries) :] + entries[: r % len(entries)]
            for e in order:
                t0, c0 = time.perf_counter(), time.thread_time()
                e["call"](e["reps"])
                e["cpu"].append((time.thread_time() - c0) / e["reps"])
                e["t"].append((time.perf_counter() - t0) / e["reps"])
        c_after = runner.probe_clock(args.threads)
        clocks += [c_before[0], c_after[0]] if c_before else []
        base = next((e for e in entries if e["name"] == "00-im2col-blas"), None)
        tb = float(np.median(base["t"])) if base else None
        cb = float(np.median(base["cpu"])) if base else None
        row = {"shape": s.get("name"), "params": params, "nominal_gflop": F.nominal_flops(s) / 1e9, "variants": []}
        print(f"\n{s.get('name')}  ({row['nominal_gflop']:.3f} GFLOP nominal, {(rd + wr) / 1e6:.2f} MB compulsory)")
        if args.set == "depthwise":
            roof = next(e for e in entries if e["name"].startswith("stream-copy"))
            row["copy_gbps"] = roof["work"].bytes / float(np.median(roof["cpu"])) / 1e9
            print(
                f"  roof: stream copy over the same {(rd + wr) / 1e6:.2f} MB, interleaved: {row['copy_gbps']:.1f} GB/s"
            )
        for e in entries:
            t = np.asarray(e["t"])
            med = float(np.median(t))
            cpu = float(np.median(e["cpu"]))
            d = {
                "cpu_ms": cpu * 1e3,
                "core_share": float(np.median(np.asarray(e["cpu"]) / t)),
                "vs_im2col_blas_cpu": (cb / cpu) if cb else None,
                "gflops_nominal_cpu": e["work"].flops / cpu / 1e9,
                "variant": e["name"],
                "ms": med * 1e3,
                "p20_ms": float(np.percentile(t, 20)) * 1e3,
                "p80_ms": float(np.percentile(t, 80)) * 1e3,
                "gflops_nominal": e["work"].flops / med / 1e9,
                "gflops_real": getattr(e["work"], "algorithm_flops", e["work"].flops) / med / 1e9,
                "gbps": e["work"].bytes / med / 1e9,
                "rel_err": e["err"],
                "vs_im2col_blas": (tb / med) if tb else None,
                "reps": e["reps"],
                "samples": len(t),
            }
            row["variants"].append(d)
            extra = f"  {d['gbps']:6.1f} GB/s" if args.set == "depthwise" else ""
            if args.set == "depthwise" and row.get("copy_gbps") and e["work"].flops:
                # attainable on the roofline: the slower of the FMA peak and the copy roof
                t_att = max(e["work"].flops / (peak * 1e9), e["work"].bytes / (row["copy_gbps"] * 1e9))
                d["gbps_cpu"] = e["work"].bytes / cpu / 1e9
                d["x_of_attainable"] = cpu / t_att
                extra = (
                    f"  {d['gbps_cpu']:6.1f} GB/s ({d['gbps_cpu'] / row['copy_gbps']:.0%} of copy), "
                    f"{d['x_of_attainable']:.1f}x the attainable {t_att * 1e6:.1f} us"
                )
            print(
                f"  {e['name']:22s} wall {d['ms']:8.3f} ms [{d['p20_ms']:.3f}-{d['p80_ms']:.3f}] "
                f"x{(d['vs_im2col_blas'] or float('nan')):5.2f} | cpu {d['cpu_ms']:8.3f} ms "
                f"x{(d['vs_im2col_blas_cpu'] or float('nan')):5.2f} {d['gflops_nominal_cpu']:6.1f} GF/s "
                f"({d['gflops_nominal_cpu'] / peak:4.0%} pk) real {getattr(e['work'], 'algorithm_flops', 0) / cpu / 1e9:5.1f} "
                f"| core {d['core_share']:4.0%} | err {d['rel_err']:.1e}{extra}",
                flush=True,
            )
        results["shapes"].append(row)
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
        f"load {load0[0]:.2f} -> {load1[0]:.2f}, clock probes {c['clock_ghz_min'] or 0:.2f}-{c['clock_ghz_max'] or 0:.2f} GHz"
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
