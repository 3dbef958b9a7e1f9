"""GPU ceilings: device memory, L2, shared memory, host<->device, FP32/FP64 FMA, FP16/BF16 tensor
cores, an intensity sweep, and launch latency, each verified (closed forms) before it is timed,
each next to its peer in the same run (cupy's device-to-device copy, cuBLAS through cupy.matmul).

Sizes: device-memory working sets from 8x L2 upwards (STREAM's 4x rule with margin); L2 working
sets of 1/8 to 1/2 of L2; tensor-core and FMA launches of ~10 ms. A launch that fails is recorded
with its CUDA error and the suite goes on with the next measurement.
"""
from __future__ import annotations

import time
from statistics import median

import numpy as np

from ..errors import RooflabError, VerificationError
from ..registry import get_variant
from ..timing import Samples, invert_stats, summarize
from ..verify import tolerance
from . import timing as gtime
from . import variants as cv


def check_device(got, expected, dtype, what: str) -> dict:
    """Compare a cupy array (or scalar) with a scalar or array expectation, on the device."""
    import cupy as cp

    tol = tolerance(dtype)
    g = cp.asarray(got, dtype=cp.float64)
    e = cp.asarray(expected, dtype=cp.float64)
    err = cp.abs(g - e)
    bad = err > tol["atol"] + tol["rtol"] * cp.abs(e)
    nbad = int(cp.count_nonzero(bad | ~cp.isfinite(g)))
    if nbad:
        i = int(cp.argmax(bad | ~cp.isfinite(g)))
        gv = float(g.ravel()[i]) if g.ndim else float(g)
        ev = float(e.ravel()[i] if e.ndim else e)
        raise VerificationError(f"{what}: {nbad} of {g.size} values outside rtol={tol['rtol']:g}; first at "
                                f"index {i}: got {gv!r}, expected {ev!r}")
    return {"max_abs_err": float(err.max()), "elements": int(g.size), **tol}


def _measure(v, inputs, *, params=None, reps=None, target_s=0.01, budget_s=0.3, label=None,
             verify_reps=1, flush=None, meta=None) -> dict:
    params = v.params(**(params or {}))
    dtype = v.result_dtype(*inputs, **params) if v.result_dtype else inputs[0].dtype
    rec = {"variant": v.name, "family": v.family, "device": "cuda", "label": label or v.name, "threads": 0,
           "dtype": str(np.dtype(dtype)), "working_set_bytes": int(sum(getattr(x, "nbytes", 0) for x in inputs)),
           "params": {k: (x.item() if hasattr(x, "item") else x) for k, x in params.items()}, **(meta or {})}
    try:
        expected = v.reference(*inputs, reps=verify_reps, **params)
        got = v.kernel(*inputs, reps=verify_reps, **params)
        rec["verification"] = check_device(got, expected, dtype, v.name)
        rec["verified"] = True
        if reps is None:  # calibrate: one launch's time -> reps for target_s
            t0 = time.perf_counter()
            v.kernel(*inputs, reps=1, **params)
            import cupy

            cupy.cuda.get_current_stream().synchronize()
            dt = time.perf_counter() - t0
            reps = max(1, int(target_s / max(dt, 1e-6)))
        s = gtime.time_gpu(lambda: v.kernel(*inputs, reps=reps, **params), budget_s=budget_s, flush=flush)
    except (RooflabError, VerificationError) as e:
        rec.update(status="failed", verified=rec.get("verified", False), error=str(e))
        return rec
    work = v.work(*inputs, reps=reps, **params)
    t = s.stats()
    rec.update(status="ok", reps=int(reps), work=work.as_dict(), time_s=t, samples_s=s.seconds,
               gflops=invert_stats(t, work.flops / 1e9) if work.flops else None,
               gbps=invert_stats(t, work.bytes / 1e9) if work.bytes else None, noisy=t["cv"] > 0.1,
               noise_reasons=[f"CV {t['cv']:.1%}"] if t["cv"] > 0.1 else [])
    return rec


def _peer(label, fn, flops=0.0, nbytes=0.0, budget_s=0.3) -> dict:
    s = gtime.time_gpu(fn, budget_s=budget_s)
    t = s.stats()
    return {"variant": f"peer.{label}", "family": "peer", "device": "cuda", "label": label, "threads": 0,
            "status": "ok", "verified": True, "time_s": t, "samples_s": s.seconds,
            "gflops": invert_stats(t, flops / 1e9) if flops else None,
            "gbps": invert_stats(t, nbytes / 1e9) if nbytes else None, "noisy": t["cv"] > 0.1}


def _steps(quick):
    return 30 if quick else 45


def run(writer, *, quick: bool, progress) -> None:
    import cupy as cp

    dev = writer.data["machine"]["gpu"]
    l2 = dev["l2_bytes"] or (50 << 20)
    free = cp.cuda.runtime.memGetInfo()[0]
    progress.start(_steps(quick))
    step = progress.step
    add = writer.add_record
    budget = 0.1 if quick else 0.3

    def guarded(label, fn):
        try:
            return fn()
        except RooflabError as e:
            writer.add_error(label, str(e))
        except Exception as e:  # a CUDA error not caught at launch (e.g. out of memory)
            writer.add_error(label, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
        finally:
            cp.get_default_memory_pool().free_all_blocks()

    # launch latency --------------------------------------------------------------------------
    def launch_latency():
        v = get_variant("cuda.launch.empty")
        (flag,) = v.inputs()
        v.kernel(flag)
        cp.cuda.get_current_stream().synchronize()
        rep = check_device(flag, 0, np.int32, "empty kernel ran")
        fn = cv.loader.kernel("launch.cu", "empty_kernel")
        null = np.intp(0)
        for mode in ("enqueue", "roundtrip", "graph"):
            step(f"launch latency ({mode})")
            if mode == "graph":
                s = gtime.time_graph(lambda: fn((1,), (32,), (null,)), 200, budget_s=budget)
            else:
                n = 1000 if mode == "enqueue" else 200
                vals = []
                deadline = time.perf_counter() + budget
                stream = cp.cuda.get_current_stream()
                while len(vals) < 5 or time.perf_counter() < deadline:
                    t0 = time.perf_counter()
                    for _ in range(n):
                        fn((1,), (32,), (null,))
                        if mode == "roundtrip":
                            stream.synchronize()
                    vals.append((time.perf_counter() - t0) / n)
                    stream.synchronize()
                s = Samples(vals)
            t = s.stats()
            add({"variant": "cuda.launch.empty", "family": "launch", "device": "cuda", "label": f"launch {mode}",
                 "threads": 0, "kernel": mode, "status": "ok", "verified": True, "verification": rep,
                 "time_s": t, "samples_s": s.seconds, "ns_per_launch": {k: t[k] * 1e9 for k in ("median", "p20", "p80", "min", "max")}
                 | {"cv": t["cv"], "n": t["n"]}, "noisy": t["cv"] > 0.2})

    guarded("launch latency", launch_latency)

    # device memory -----------------------------------------------------------------------------
    top = min(8 << 30 if not quick else 2 << 30, int(free * 0.6))
    sizes = [s for s in (8 * l2 * 2 ** i for i in range(8)) if s <= top] or [int(top)]
    if quick:
        sizes = sizes[:1] + sizes[-1:] if len(sizes) > 1 else sizes
    for ws in sizes:
        for kernel in ("read", "copy", "triad"):
            step(f"HBM {kernel} {ws >> 20} MiB")
            v = get_variant(f"cuda.stream.{kernel}")
            k = {"read": 1, "copy": 2, "triad": 3}[kernel]

            def one(v=v, k=k, kernel=kernel, ws=ws):
                inputs = v.inputs(ws // 8 // k)
                rec = _measure(v, inputs, reps=1, budget_s=budget, label=f"{kernel} {ws >> 20} MiB",
                               meta={"kernel": kernel, "level": "HBM"})
                add(rec, sweep="bandwidth")
                if kernel == "copy":
                    c, a = inputs
                    peer = _peer(f"cupy copy {ws >> 20} MiB", lambda: cp.copyto(c, a), nbytes=2 * a.nbytes, budget_s=budget)
                    peer.update(kernel="cupy-copy", level="HBM", working_set_bytes=2 * a.nbytes)
                    add(peer)
            guarded(f"HBM {kernel} {ws >> 20} MiB", one)

    # L2 --------------------------------------------------------------------------------------
    for frac in (8, 4, 2):
        step(f"L2 read {l2 // frac >> 20} MiB")

        def l2read(frac=frac):
            v = get_variant("cuda.stream.read")
            (a,) = v.inputs(l2 // frac // 8)
            reps = max(1, int(4e9 / a.nbytes))  # ~4 GB of L2 traffic per launch
            add(_measure_l2(v, a, reps, budget), sweep="bandwidth")
        guarded(f"L2 read 1/{frac}", l2read)

    # shared memory -----------------------------------------------------------------------------
    step("shared memory")
    guarded("shared memory", lambda: add(_measure(get_variant("cuda.smem.read"), get_variant("cuda.smem.read").inputs(),
                                                   budget_s=budget, verify_reps=4, meta={"kernel": "read", "level": "shared"})))

    # host <-> device ----------------------------------------------------------------------------
    step("host<->device")
    guarded("host<->device", lambda: _host_device(add, 256 << 20, budget))

    # compute -----------------------------------------------------------------------------------
    for name in ("cuda.fma.f32", "cuda.fma.f64", "cuda.mma.f16", "cuda.mma.bf16"):
        step(name)
        v = get_variant(name)
        guarded(name, lambda v=v: add(_measure(v, v.inputs(), budget_s=budget, verify_reps=4,
                                                 meta={"kernel": v.name.split(".", 1)[1]})))
    step("cuBLAS fp16 8192")

    def cublas():
        # sanity check of the peer on a small random problem against float32 on the host
        rng = cp.random.default_rng(0)
        sa = rng.standard_normal((256, 256), dtype=cp.float32).astype(cp.float16)
        sb = rng.standard_normal((256, 256), dtype=cp.float32).astype(cp.float16)
        ref = sa.get().astype(np.float32) @ sb.get().astype(np.float32)
        got = cp.matmul(sa, sb).get().astype(np.float32)
        if np.abs(got - ref).max() > 1e-2 * np.abs(ref).max():
            raise VerificationError("cupy.matmul fp16 disagrees with float32 by more than 1% of max |ref|")
        n = 4096 if quick else 8192
        a = rng.standard_normal((n, n), dtype=cp.float32).astype(cp.float16)
        b = rng.standard_normal((n, n), dtype=cp.float32).astype(cp.float16)
        c = cp.empty((n, n), dtype=cp.float16)
        peer = _peer(f"cuBLAS fp16 matmul {n}", lambda: cp.matmul(a, b, out=c), flops=2.0 * n ** 3, budget_s=budget)
        peer.update(kernel="cublas", dtype="float16")
        add(peer)
    guarded("cuBLAS fp16", cublas)

    # intensity sweep ---------------------------------------------------------------------------
    n = min(max(8 * l2, 1 << 30), int(free * 0.4)) // 8
    v = get_variant("cuda.intensity.f64")

    def sweep():
        (a,) = v.inputs(n)
        for nfma in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048):
            step(f"intensity {nfma / 8:g}")
            alpha = 0.5 ** (1.0 / nfma)
            rec = _measure(v, (a,), params={"nfma": nfma, "alpha": alpha, "beta": 1 - alpha}, reps=1, budget_s=budget,
                           label=f"intensity {nfma / 8:g}", meta={"kernel": "ert", "intensity": nfma / 8})
            add(rec, sweep="intensity")
    guarded("intensity sweep", sweep)

    writer.data["ceilings"] = derive(writer.data)
    writer.save()
    progress.done(None)


def _measure_l2(v, a, reps, budget):
    return _measure(v, (a,), reps=reps, budget_s=budget, label=f"L2 read {a.nbytes >> 20} MiB",
                    meta={"kernel": "read", "level": "L2"}, verify_reps=3)


def _host_device(add, nbytes, budget):
    import cupy as cp
    import cupyx

    h = cupyx.empty_pinned((nbytes // 8,), dtype=np.float64)
    h[:] = np.arange(h.size, dtype=np.float64)
    d = cp.empty(h.shape, dtype=cp.float64)
    d.set(h)
    back = cupyx.empty_pinned(h.shape, dtype=np.float64)
    d.get(out=back)
    if not np.array_equal(back, h):
        raise VerificationError("host->device->host round trip changed the data")
    for label, fn in (("H2D", lambda: d.set(h)), ("D2H", lambda: d.get(out=back))):
        peer = _peer(f"{label} pinned {nbytes >> 20} MiB", fn, nbytes=nbytes, budget_s=budget)
        peer.update(variant=f"cuda.memcpy.{label}", family="memcpy", kernel=label, level="host",
                    working_set_bytes=nbytes)
        add(peer)


def derive(data: dict) -> list[dict]:
    """GPU ceilings from the records (threads = 0: the whole device)."""
    recs = [r for r in data["records"] if r.get("status") == "ok"]
    out = []

    def stat_ceiling(name, kind, level, dtype, kernel, values, unit, extra=None):
        values = [x for x in values if x]
        if not values:
            return
        med = median(values)
        out.append({"name": name, "kind": kind, "level": level, "dtype": dtype, "threads": 0, "kernel": kernel,
                    "value": med, "unit": unit, "stats": {"median": med, "p20": float(np.quantile(values, 0.2)),
                                                          "p80": float(np.quantile(values, 0.8)), "min": min(values),
                                                          "max": max(values), "n_points": len(values)},
                    "noisy": False, **(extra or {})})

    for level in ("HBM", "L2", "shared", "host"):
        for kernel in sorted({r.get("kernel") for r in recs if r.get("level") == level}):
            pts = [r["gbps"]["median"] for r in recs if r.get("level") == level and r.get("kernel") == kernel and r.get("gbps")]
            stat_ceiling(f"{level} {kernel} bandwidth", "bandwidth", level, "float64", kernel, pts, "GB/s")
    theo = {p["dtype"]: p for p in data["machine"]["gpu"].get("theoretical", {}).get("peaks", [])}
    for r in recs:
        if r["family"] in ("fma", "tensor"):
            dt = {"cuda.fma.f32": "float32", "cuda.fma.f64": "float64", "cuda.mma.f16": "float16",
                  "cuda.mma.bf16": "bfloat16"}[r["variant"]]
            extra = {}
            t = theo.get(dt if dt != "bfloat16" else "float16")
            if t:
                extra = {"theoretical": t["gflops"], "fraction_of_theoretical": r["gflops"]["median"] / t["gflops"],
                         "above_105pct_of_theoretical": r["gflops"]["median"] > 1.05 * t["gflops"]}
            out.append({"name": f"{dt} {'tensor-core' if r['family'] == 'tensor' else 'FMA'} peak", "kind": "compute",
                        "level": None, "dtype": dt, "threads": 0, "kernel": r["variant"],
                        "value": r["gflops"]["median"], "unit": "GFLOP/s", "stats": r["gflops"],
                        "noisy": r.get("noisy", False), **extra})
        if r["family"] == "launch":
            out.append({"name": f"launch: {r['kernel']}", "kind": "latency", "level": None, "dtype": None,
                        "threads": 0, "kernel": r["variant"], "value": r["ns_per_launch"]["median"], "unit": "ns",
                        "stats": r["ns_per_launch"], "noisy": r.get("noisy", False)})
    # peers, as ratios next to the ceilings they check
    copy_ours = {r["working_set_bytes"]: r for r in recs if r.get("kernel") == "copy" and r.get("level") == "HBM"}
    data.setdefault("peer_ratios", [])
    for r in recs:
        if r.get("kernel") == "cupy-copy":
            ours = copy_ours.get(r["working_set_bytes"])
            if ours:
                data["peer_ratios"].append({"what": f"HBM copy vs cupy copy ({r['working_set_bytes'] >> 20} MiB)",
                                            "ratio": ours["gbps"]["median"] / r["gbps"]["median"]})
        if r.get("kernel") == "cublas":
            mma = [c for c in out if c["dtype"] == "float16" and c["kind"] == "compute"]
            if mma:
                data["peer_ratios"].append({"what": f"mma.sync fp16 vs {r['label']}",
                                            "ratio": mma[0]["value"] / r["gflops"]["median"]})
    return out
