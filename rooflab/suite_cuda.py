"""GPU ceilings: device memory, L2, shared memory, host<->device, FP32/FP64 FMA, FP16/BF16 tensor
cores, an intensity sweep, launch latency, memory latency per level (L1, L2, HBM: pointer chase)
and the latency of a 4 KiB pinned copy, each verified (closed forms) before it is timed,
each next to its peer in the same run (cupy's device-to-device copy, cuBLAS through cupy.matmul).

Sizes (Plan): device-memory working sets from 8x L2 upwards (STREAM's 4x rule with margin) up to
8 GiB (2 GiB quick) or 60% of free memory; L2 working sets of 1/8 to 1/2 of L2 read ~4 GB per
launch; FMA and tensor-core launches calibrated to ~10 ms. Tensor cores: mma.sync everywhere,
wgmma on Hopper, measured last. Compute ceilings are reported against the theoretical peak at the
SM clock measured on the chip during the kernel (variants.measured_clock).

A failure of any kind is recorded with its CUDA error named (``guarded``) and the suite goes on with
the next measurement; a kernel whose check fails gets an error in the result, never a figure.
"""

from __future__ import annotations

from dataclasses import replace
from statistics import median

from .cuda import backend, compiler, loader
from .errors import RooflabError
from .families.chase import cuda as chase_family
from .families.latency import LAUNCH_NAMES  # launch paths as latency ceilings, names as before
from .families.launch import cuda as launch_family
from .flush import gpu_l2_bytes
from .registry import get_variant
from .roofline import point_stats

_DRIVER = None


def _driver():
    global _DRIVER
    if _DRIVER is None:
        from .driver import Driver

        _DRIVER = Driver(backend.driver_backend())
    return _DRIVER


def _measure(v, inputs, *, params=None, reps=None, target_s=0.01, budget_s=0.3, label=None, verify_reps=1, meta=None):
    """One GPU measurement through the one driver: verified on ``inputs`` (with ``verify_reps``
    repetitions), reps calibrated so one sample lasts ``target_s``, timed with CUDA events. A
    verification or launch failure returns a failed record with the error and no figure."""
    rec = _driver().measure(
        v,
        inputs,
        threads=0,
        params=params,
        verify_params={"reps": verify_reps},
        label=label,
        meta=meta,
        reps=reps,
        target_s=target_s,
        budget_s=budget_s,
        cv_limit=0.1,
        max_attempts=1,
    )
    return rec.as_dict()


def guarded(writer, label: str, fn):
    """Run one measurement; a failure of any kind (verification, compile, launch, CUDA error at a
    later synchronisation, out of memory) is recorded under ``label`` with the CUDA error named,
    and the suite goes on with the next measurement. The memory pool is emptied either way."""
    try:
        return fn()
    except RooflabError as e:
        writer.add_error(label, str(e))
    except Exception as e:
        writer.add_error(label, loader.cuda_error(e))
    finally:
        _free_pool()


def _free_pool():
    try:
        import cupy

        cupy.get_default_memory_pool().free_all_blocks()
    except Exception:
        pass


class Plan:
    """What one GPU ceilings run measures, sized from the device (so the step count is exact)."""

    INTENSITIES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048)  # FMAs per element: 1/8 .. 256 FLOP/B

    def __init__(self, dev: dict, free_bytes: int, quick: bool, budget_s: float | None = None):
        self.quick = quick
        self.hopper = compiler.runs_on("wgmma.cu", f"sm_{dev.get('compute_capability')}")
        self.l2 = gpu_l2_bytes(dev)
        top = min((2 << 30) if quick else (8 << 30), int(free_bytes * 0.6))
        sizes = [s for s in (8 * self.l2 * 2**i for i in range(8)) if s <= top] or [int(top)]
        self.hbm_sizes = (sizes[:1] + sizes[-1:] if len(sizes) > 1 else sizes) if quick else sizes
        self.l2_fractions = (8, 4, 2)
        self.budget = budget_s if budget_s is not None else (0.1 if quick else 0.3)
        # one timed sample enqueues launches for at least this long, so the host's launch overhead
        # (~5-10 us before the first kernel starts) stays below 1% of it
        self.target = 0.005 if quick else 0.01
        self.host_bytes = min(256 << 20, free_bytes // 4)
        # the cuBLAS peer: 4096 (8192 full) fills an H100-class part; a small device gets 64 x SMs
        # (still >= (SMs/2)^2 128x128 tiles, enough to fill it), so its float64 check stays short
        self.cublas_n = min(4096 if quick else 8192, 64 * max(1, int(dev.get("sm_count") or 132)))
        self.intensity_elems = min(max(8 * self.l2, 1 << 30), int(free_bytes * 0.4)) // 8


COMPUTE = ("cuda.fma.f32", "cuda.fma.f64", "cuda.mma.f16", "cuda.mma.bf16")
HOPPER = ("cuda.wgmma.f16", "cuda.wgmma.bf16")
TENSOR_DTYPES = {
    "cuda.mma.f16": "float16",
    "cuda.mma.bf16": "bfloat16",
    "cuda.wgmma.f16": "float16",
    "cuda.wgmma.bf16": "bfloat16",
}


def steps(writer, plan: Plan) -> list[tuple[str, object]]:
    """The GPU ceilings suite as data: (label, measurement) in the order they run. The progress
    count is the length of this list; each measurement is guarded on its own (a failure is
    recorded under its label and the next one runs)."""

    dev = writer.data["machine"]["gpu"]
    add = writer.add_record
    budget = plan.budget
    out: list[tuple[str, object]] = []

    # launch latency: the launch family's paths (each verified by counting the launches that ran)
    def launch(case):
        add(
            _driver()
            .run_case(replace(case, timing={**case.timing, "budget_s": budget, "cv_limit": 0.2, "max_attempts": 1}))
            .as_dict()
        )

    for case in launch_family.cases(plan.quick):
        if case.meta["path"] in LAUNCH_NAMES:
            case = replace(case, meta={**case.meta, "kernel": LAUNCH_NAMES[case.meta["path"]]})
            out.append((f"launch latency ({case.meta['kernel']})", lambda c=case: launch(c)))

    # memory latency per level: the chase family's random-order ld.global.ca walk at its L1, L2 and
    # HBM sizes (one thread; the kernel times its hops on the chip, launch and warm pass excluded)
    for case in chase_family.cases(plan.quick):
        if case.variant == chase_family.VARIANTS["random-ld-ca"]:
            out.append((f"memory latency {case.label}", lambda c=case: launch(c)))

    # device memory, with the library's copy beside ours
    def hbm(kernel, ws):
        v = get_variant(f"cuda.stream.{kernel}")
        inputs = v.inputs(ws // 8 // {"read": 1, "copy": 2, "triad": 3}[kernel])
        rec = _measure(
            v,
            inputs,
            target_s=plan.target,
            budget_s=budget,
            label=f"{kernel} {ws >> 20} MiB",
            meta={"kernel": kernel, "level": "HBM"},
        )
        add(rec, sweep="bandwidth")
        if kernel == "copy" and rec["status"] == "ok":  # the library's copy, verified like ours
            add(
                _measure(
                    get_variant("cuda.stream.00-cupy-copy"),
                    inputs,
                    target_s=plan.target,
                    budget_s=budget,
                    label=f"cupy copy {ws >> 20} MiB",
                    meta={"kernel": "cupy-copy", "level": "HBM"},
                )
            )

    for ws in plan.hbm_sizes:
        for kernel in ("read", "copy", "triad"):
            out.append((f"HBM {kernel} {ws >> 20} MiB", lambda k=kernel, w=ws: hbm(k, w)))

    # L2: 1/8 .. 1/2 of it re-read, ~4 GB of L2 traffic per launch
    def l2read(frac):
        v = get_variant("cuda.l2.read")
        inputs = v.inputs(plan.l2 // frac // 8)
        a = inputs[0]
        reps = max(1, int(4e9 / a.nbytes))
        add(
            _measure(
                v,
                inputs,
                reps=reps,
                budget_s=budget,
                label=f"L2 read {a.nbytes >> 20} MiB",
                meta={"kernel": "read", "level": "L2"},
                verify_reps=3,
            ),
            sweep="bandwidth",
        )

    for frac in plan.l2_fractions:
        out.append((f"L2 read {plan.l2 // frac >> 20} MiB", lambda f=frac: l2read(f)))

    def smem():
        v = get_variant("cuda.smem.read")
        add(_measure(v, v.inputs(), budget_s=budget, verify_reps=4, meta={"kernel": "read", "level": "shared"}))

    out.append(("shared memory", smem))
    out.append(("host<->device", lambda: _host_device(add, plan.host_bytes, budget, plan.target)))

    def compute(name):
        v = get_variant(name)
        add(_measure(v, v.inputs(), budget_s=budget, verify_reps=4, meta={"kernel": v.name.split(".", 1)[1]}))

    for name in COMPUTE:
        out.append((name, lambda n=name: compute(n)))

    def after_compute():
        writer.data["machine"]["gpu"]["nvml_after_compute"] = backend.nvml_state(dev["index"])
        add(_cublas_peer(plan.cublas_n, budget, plan.target))

    out.append((f"cuBLAS fp16 {plan.cublas_n}", after_compute))

    # intensity sweep: fresh inputs per point (a point must not start where the last one ended)
    def intensity(nfma):
        v = get_variant("cuda.intensity.f64")
        rec = _measure(
            v,
            v.inputs(plan.intensity_elems, seed=nfma),
            params={"nfma": nfma},
            target_s=plan.target,
            budget_s=budget,
            label=f"intensity {nfma / 8:g}",
            meta={"kernel": "ert", "intensity": nfma / 8},
        )
        add(rec, sweep="intensity")

    for nfma in plan.INTENSITIES:
        out.append((f"intensity {nfma / 8:g}", lambda n=nfma: intensity(n)))

    # tensor cores through wgmma: Hopper only, and last (a fault would poison the context)
    if plan.hopper:
        for name in HOPPER:
            out.append((name, lambda n=name: compute(n)))
    else:
        writer.data["notes"].append(
            f"wgmma tensor-core peak not measured: sm_{dev.get('compute_capability')} is not Hopper (sm_90)"
        )
    return out


def run(writer, *, quick: bool, progress, budget_s: float | None = None) -> None:
    import cupy as cp

    global _DRIVER
    # a driver per run: its verifications (a case's error is remembered for the run) and its best clock
    # are this run's; a second run in one process kept the first one's launch errors
    _DRIVER = None

    plan = Plan(writer.data["machine"]["gpu"], cp.cuda.runtime.memGetInfo()[0], quick, budget_s)
    writer.data["config"]["gpu_plan"] = {
        "hbm_sizes": plan.hbm_sizes,
        "l2_fractions": plan.l2_fractions,
        "budget_s": plan.budget,
        "sample_target_s": plan.target,
        "host_bytes": plan.host_bytes,
        "cublas_n": plan.cublas_n,
        "intensity_elements": plan.intensity_elems,
    }
    todo = steps(writer, plan)
    progress.start(len(todo))
    for label, measure in todo:
        progress.step(label)
        guarded(writer, label, measure)
    writer.data["cuda_builds"] = loader.builds()
    writer.data["ceilings"] = derive(writer.data)
    writer.save()
    progress.done(None)


def _cublas_peer(n, budget, target_s):
    """cuBLAS FP16 GEMM (the gemm family's variant 0, cupy.matmul), the tensor-core peer: verified
    on the device against the float64 product at the size it is timed at, like every variant."""
    v = get_variant("cuda.gemm.00-cublas")
    shape = {"M": n, "N": n, "K": n}
    return _measure(
        v,
        v.inputs(shape, "float16"),
        target_s=target_s,
        budget_s=budget,
        label=f"cuBLAS fp16 matmul {n}",
        meta={"kernel": "cublas", "peer": True},
    )


SMALL_TRANSFER = 4096  # a pinned copy this small is the interconnect's latency, not its bandwidth


def _host_device(add, nbytes, budget, target_s):
    """Pinned host<->device copies through the transfer family's variants (each checked: the data
    arrives unchanged): ``nbytes`` kept as the host level's bandwidth, 4 KiB as its latency."""
    for name, kernel in (("cuda.transfer.01-h2d-pinned", "H2D"), ("cuda.transfer.01-d2h-pinned", "D2H")):
        v = get_variant(name)
        add(
            _measure(
                v,
                v.inputs(nbytes),
                target_s=target_s,
                budget_s=budget,
                label=f"{kernel} pinned {nbytes >> 20} MiB",
                meta={"kernel": kernel, "level": "host"},
            )
        )
        add(
            _measure(
                v,
                v.inputs(SMALL_TRANSFER),
                target_s=target_s,
                budget_s=budget,
                label=f"{kernel} pinned {SMALL_TRANSFER >> 10} KiB",
                meta={"direction": kernel.lower(), "pinned": True, "transfer_bytes": SMALL_TRANSFER},
            )
        )


def derive(data: dict) -> list[dict]:
    """GPU ceilings from the records (threads = 0: the whole device)."""
    recs = [r for r in data["records"] if r.get("status") == "ok"]
    out = []

    def stat_ceiling(name, kind, level, dtype, kernel, values, unit, extra=None):
        values = [x for x in values if x]
        if not values:
            return
        med = median(values)
        out.append(
            {
                "name": name,
                "kind": kind,
                "level": level,
                "dtype": dtype,
                "threads": 0,
                "kernel": kernel,
                "value": med,
                "unit": unit,
                "stats": point_stats(values),
                "noisy": False,
                **(extra or {}),
            }
        )

    # peers and library variants are compared (peer_ratios), not roofs
    own = [r for r in recs if r["family"] not in ("peer", "chase") and not r.get("library")]
    for level in ("HBM", "L2", "shared", "host"):
        for kernel in sorted({r.get("kernel") for r in own if r.get("level") == level}):
            pts = [
                r["gbps"]["median"]
                for r in own
                if r.get("level") == level and r.get("kernel") == kernel and r.get("gbps")
            ]
            stat_ceiling(f"{level} {kernel} bandwidth", "bandwidth", level, "float64", kernel, pts, "GB/s")
    gpu = data["machine"]["gpu"]
    nominal = {p["dtype"]: p for p in gpu.get("theoretical", {}).get("peaks", [])}
    for r in recs:
        if r["family"] in ("fma", "tensor"):
            dt = r["dtype"] if r["family"] == "fma" else TENSOR_DTYPES[r["variant"]]
            extra = {}
            clock = (r.get("sm_clock") or {}).get("ghz")
            if clock and gpu.get("clock_ghz") and not 0.2 < clock / gpu["clock_ghz"] < 1.2:
                extra["sm_clock_rejected"] = (
                    f"measured {clock:.3f} GHz is implausible next to the maximum {gpu['clock_ghz']:.3f} GHz"
                )
                clock = None
            theo = (
                {
                    p["dtype"]: p
                    for p in backend.theoretical(gpu, clock, "measured on the chip during this kernel")["peaks"]
                }
                if clock
                else nominal
            )
            t = theo.get(dt)
            if t:
                value = r["gflops"]["median"]
                extra.update(
                    theoretical=t["gflops"],
                    theoretical_formula=t["formula"],
                    theoretical_clock_ghz=clock or gpu.get("clock_ghz"),
                    theoretical_clock="measured" if clock else "maximum",
                    fraction_of_theoretical=value / t["gflops"],
                    above_105pct_of_theoretical=value > 1.05 * t["gflops"],
                )
                if clock and dt in nominal:
                    extra["fraction_of_theoretical_at_max_clock"] = value / nominal[dt]["gflops"]
            what = f"tensor-core peak ({_instruction(r['variant'])})" if r["family"] == "tensor" else "FMA peak"
            out.append(
                {
                    "name": f"{dt} {what}",
                    "kind": "compute",
                    "level": None,
                    "dtype": dt,
                    "threads": 0,
                    "kernel": r["variant"],
                    "value": r["gflops"]["median"],
                    "unit": "GFLOP/s",
                    "stats": r["gflops"],
                    "noisy": r.get("noisy", False),
                    **extra,
                }
            )
        if r["family"] == "launch":
            out.append(
                {
                    "name": f"launch: {r['kernel']}",
                    "kind": "latency",
                    "level": None,
                    "dtype": None,
                    "threads": 0,
                    "kernel": r["variant"],
                    "value": r["ns_per_launch"]["median"],
                    "unit": "ns",
                    "stats": r["ns_per_launch"],
                    "noisy": r.get("noisy", False),
                }
            )
    # memory latency per level (pointer chase) and the latency of a small pinned copy
    from .families import chase
    from .families.latency import transfer_ceilings

    out += chase.ceilings(data)
    out += transfer_ceilings(recs)
    # peers, as ratios next to the ceilings they check
    copy_ours = {r["working_set_bytes"]: r for r in recs if r.get("kernel") == "copy" and r.get("level") == "HBM"}
    data["peer_ratios"] = []
    for r in recs:
        if r.get("kernel") == "cupy-copy":
            ours = copy_ours.get(r["working_set_bytes"])
            if ours:
                data["peer_ratios"].append(
                    {
                        "what": f"HBM copy vs cupy copy ({r['working_set_bytes'] >> 20} MiB)",
                        "ratio": ours["gbps"]["median"] / r["gbps"]["median"],
                    }
                )
        if r.get("kernel") == "cublas":
            for c in out:
                if c["dtype"] == "float16" and c["kind"] == "compute":
                    data["peer_ratios"].append(
                        {
                            "what": f"{_instruction(c['kernel'])} fp16 vs {r['label']}",
                            "ratio": c["value"] / r["gflops"]["median"],
                        }
                    )
    return out


def _instruction(variant: str) -> str:
    return {"mma": "mma.sync", "wgmma": "wgmma"}[variant.split(".")[1]]
