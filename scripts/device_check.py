"""The stages of scripts/device_check.sh, one per call: ``python scripts/device_check.py STAGE OUTDIR
[--rehearse]``. Each stage writes OUTDIR/STAGE.json when it ends (what finished is kept if a later
stage is cut short) and exits 0 when everything it ran verified, 1 when something failed (named
in its output and its file), 2 on bad input. ``--rehearse`` runs the same code on the CPU stand-in
for cupy (tests/fake_gpu.py: real NVRTC builds, numpy emulation) at tiny sizes, so the plumbing is
tested on every commit; its figures mean nothing.

Stages, in order of value (the shell script gives each its own time limit; budget on an H200):
  facts     device, driver, CUDA runtime, SMs, clocks, memory; cupy and torch versions        ~5 s
  smoke     one verified (and briefly timed) case of every GPU variant; failures named       ~40 s
  run       `rooflab run --device cuda --quick` (HBM, L2, shared, FMA, tensor cores, launch,
            graph, host<->device), its result file as run.json                                ~120 s
  peers     torch device-to-device copy, torch.matmul FP32/FP16/BF16 at 8192, cupy/cuBLAS
            FP32/FP16 at 8192, an empty torch kernel's launch; each checked on a corner       ~40 s
  ladder    the GEMM ladder at 4096 as % of cuBLAS (scripts/gemm_ladder_cuda.py)              ~60 s
  families  conv per algorithm on three ResNet-50 layers as % of variant 0; elementwise ops
            as % of the HBM copy roof measured by `run`                                      ~40 s
  summary   one table of the stages and the issue's ratios (all measured in this run)
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STAGES = ("facts", "smoke", "run", "peers", "ladder", "families", "summary")
HOPPER_LAST = ("cuda.wgmma.", "cuda.gemm.09-")  # a fault would poison the CUDA context: last


NO_EMULATION = "has no emulation of"  # the stand-in's word for a kernel it cannot run


def install_standin():
    """The CPU stand-in for cupy, for --rehearse (kept installed for the life of the process).
    ROOFLAB_REHEARSE_WRONG=kernel,...: those kernels' emulations are 1 % off (a check must fail)."""
    import os

    sys.path.insert(0, str(ROOT))
    from _pytest.monkeypatch import MonkeyPatch

    from tests import fake_gpu

    wrong = {k for k in os.environ.get("ROOFLAB_REHEARSE_WRONG", "").split(",") if k}
    return fake_gpu.FakeGPU(MonkeyPatch(), free_bytes=40 << 20, wrong=wrong).install()


def _status(status, error, rehearse):
    """A kernel the stand-in cannot emulate is skipped in a rehearsal (the family kernels run on the
    CPU in tests/test_cuda_families_emu.py instead); anything else that failed, failed."""
    if rehearse and status == "failed" and NO_EMULATION in (error or ""):
        return "skipped"
    return status


def write(out: Path, stage: str, data: dict) -> None:
    tmp = out / f".{stage}.json.tmp"
    tmp.write_text(json.dumps(data, indent=1, default=str))
    tmp.replace(out / f"{stage}.json")


def read(out: Path, stage: str) -> dict:
    try:
        return json.loads((out / f"{stage}.json").read_text())
    except (OSError, ValueError):
        return {}


def _driver(**settings):
    from rooflab.cuda.backend import driver_backend
    from rooflab.driver import Driver, Settings

    base = {"budget_s": 0.02, "target_s": 0.001, "min_samples": 3, "cv_limit": 1.0, "max_attempts": 1}
    return Driver(driver_backend(), Settings(**{**base, **settings, "probe_clock": False}))


def _torch():
    try:
        import torch

        return torch if torch.cuda.is_available() else None
    except Exception:
        return None


# ---- stages ---------------------------------------------------------------------------------------


def facts(out, rehearse):
    import cupy

    from rooflab.cuda import backend

    dev = backend.describe(0)
    torch = _torch()
    d = {"gpu": dev, "cupy": cupy.__version__, "torch": getattr(torch, "__version__", None)}
    if torch is not None:
        d["torch_cuda"] = torch.version.cuda
        d["cudnn"] = torch.backends.cudnn.version()
    write(out, "facts", d)
    print(f"{dev['name']} sm_{dev['compute_capability']}, {dev['sm_count']} SMs, max clock {dev['clock_ghz']} GHz")
    print(f"driver {dev['driver_version']}, runtime {dev['runtime_version']}, cupy {d['cupy']}, torch {d['torch']}")
    return 0


SMOKE_SHAPES = [  # tried in order for a variant without its own default (model-op families)
    {"numel": 4096},
    {"batch": 2, "M": 16, "N": 16, "K": 16},
    {"tokens": 16, "dim": 8, "vocab": 64},
    {"N": 1, "C": 4, "H": 8, "W": 8, "kernel": 3, "stride": 2},
]


def _smoke_inputs(v, rehearse):
    """(inputs, params) of one small case of ``v``; None when no small shape builds its inputs."""
    n = 1 << 14 if rehearse else 1 << 22
    if v.family in ("stream", "intensity") or v.name == "cuda.l2.read":
        return v.inputs(n), {"nfma": 8} if v.family == "intensity" else {}
    if v.family == "gemm":
        return v.inputs({"M": 96, "N": 80, "K": 64}, v.dtypes[0], seed=1), {}
    if v.family == "conv":
        from rooflab.families.conv import cuda as conv

        shape = conv.SMALL_DEPTHWISE if "depthwise" in v.name else conv.SMALL
        return v.inputs(shape), conv.conv_params(shape)
    for size in (None, *SMOKE_SHAPES):
        try:
            return v.inputs(size), {}
        except Exception:  # this shape is not the variant's kind: the next one
            continue
    return None


def smoke(out, rehearse):
    import rooflab
    from rooflab.cuda import compiler, loader
    from rooflab.errors import RooflabError

    arch = loader.device_arch()
    variants = rooflab.list_variants(device="cuda")
    variants.sort(key=lambda v: v.name.startswith(HOPPER_LAST))
    driver, rows = _driver(), []
    for v in variants:
        row = {"variant": v.name}
        if v.name.startswith(HOPPER_LAST) and not compiler.runs_on("wgmma.cu", arch):
            row.update(status="skipped", error=f"wgmma needs sm_90; this GPU is {arch}")
        else:
            try:
                built = _smoke_inputs(v, rehearse)
                if built is None:
                    row.update(status="untested", error="no small input shape of this script fits it")
                else:
                    r = driver.measure(v, built[0], threads=0, params=built[1], verify_params={"reps": 1})
                    row.update(status=_status(r.status, r.error, rehearse), error=r.error, verified=r.verified)
            except RooflabError as e:
                row.update(status="failed", error=str(e))
            except Exception as e:  # a CUDA error: named, and the next variant runs
                row.update(status="failed", error=loader.cuda_error(e))
        rows.append(row)
        if row["status"] == "failed":
            print(f"FAILED {v.name}: {row['error'][:300]}")
    write(out, "smoke", {"variants": rows, "builds": loader.builds()})
    failed = [r for r in rows if r["status"] == "failed"]
    counts = {k: sum(r["status"] == k for r in rows) for k in ("ok", "skipped", "untested", "failed")}
    print(f"{len(rows)} GPU variants: " + ", ".join(f"{n} {k}" for k, n in counts.items()))
    for r in rows:
        if r["status"] == "untested":
            print(f"untested {r['variant']}: {r['error']}")
    return 1 if failed else 0


def run(out, rehearse):
    import tempfile

    from rooflab import cli

    with tempfile.TemporaryDirectory() as tmp:
        args = ["run", "--device", "cuda", "--quick", "--no-plot", "--out", tmp]
        rc = cli.main(args + (["--budget", "0.002"] if rehearse else []))
        files = sorted(Path(tmp).glob("*/rooflab-ceilings-cuda-*.json"))
        if files:
            write(out, "run", json.loads(files[-1].read_text()))
    return rc


def _timed(fn, target_s):
    from rooflab.cuda import timing as gtime

    reps = gtime.repeats_for(lambda r: lambda: [fn() for _ in range(r)], target_s)
    s = gtime.time_gpu(lambda: [fn() for _ in range(reps)], budget_s=0.2, min_samples=5).seconds
    return sorted(s)[len(s) // 2] / reps


def peers(out, rehearse):
    """Library figures measured in this run, each verified on a corner against float64."""
    import cupy as cp
    import numpy as np

    n = 256 if rehearse else 8192
    copy_bytes = (8 << 20) if rehearse else (2 << 30)
    rows, failed = [], []

    def corner_ok(C, A, B, what, rtol):
        a = A[:32].astype(cp.float64)
        b = B[:, :32].astype(cp.float64)
        want = (a @ b).get()
        got = C[:32, :32].astype(cp.float64).get()
        err = float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))
        if not err <= rtol:
            failed.append(f"{what}: corner error {err:.2e} > {rtol:g}")
        return err

    rng = cp.random.default_rng(0)
    for dt, rtol in (("float32", 1e-4), ("float16", 2e-2)):
        A = rng.standard_normal((n, n), dtype=cp.float32).astype(dt)
        B = rng.standard_normal((n, n), dtype=cp.float32).astype(dt)
        C = cp.matmul(A, B)
        err = corner_ok(C, A, B, f"cupy.matmul {dt}", rtol)
        t = _timed(lambda A=A, B=B, C=C: cp.matmul(A, B, out=C), 0.01)
        rows.append({"what": f"cupy/cuBLAS matmul {dt} {n}", "gflops": 2 * n**3 / t / 1e9, "corner_err": err})
    torch = _torch()
    if torch is None:
        rows.append({"what": "torch", "skipped": "torch with CUDA is not importable here"})
    else:
        x = torch.empty(copy_bytes // 4, dtype=torch.float32, device="cuda").normal_()
        y = torch.empty_like(x)
        y.copy_(x)
        if not bool(torch.equal(x, y)):
            failed.append("torch copy_ did not copy")
        t = _timed(lambda: y.copy_(x), 0.01)
        rows.append({"what": f"torch d2d copy {copy_bytes >> 20} MiB", "gbps": 2 * copy_bytes / t / 1e9})
        del x, y
        for dt, rtol in ((torch.float32, 1e-4), (torch.float16, 2e-2), (torch.bfloat16, 6e-2)):
            A = torch.randn(n, n, device="cuda").to(dt)
            B = torch.randn(n, n, device="cuda").to(dt)
            C = torch.matmul(A, B)
            err = corner_ok(cp.asarray(C.float()), cp.asarray(A.float()), cp.asarray(B.float()), f"torch {dt}", rtol)
            t = _timed(lambda A=A, B=B, C=C: torch.matmul(A, B, out=C), 0.01)
            rows.append({"what": f"torch.matmul {str(dt).split('.')[-1]} {n}", "gflops": 2 * n**3 / t / 1e9})
        z = torch.zeros(1, device="cuda")
        t = _timed(lambda: z.add_(1), 0.005)  # enqueued back to back: the launch rate of an empty kernel
        rows.append({"what": "torch empty kernel launch", "ns": t * 1e9})
    write(out, "peers", {"peers": rows, "failed": failed})
    for r in rows:
        print(r)
    for f in failed:
        print(f"FAILED {f}")
    return 1 if failed else 0


def ladder(out, rehearse):
    import importlib.util

    spec = importlib.util.spec_from_file_location("gemm_ladder_cuda", ROOT / "scripts" / "gemm_ladder_cuda.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    size = ["--size", "64", "--rounds", "2", "--target-ms", "0.01"] if rehearse else ["--size", "4096", "--rounds", "3"]
    tmp = out / ".ladder.tmp.json"
    rc = mod.main([*size, "--json", str(tmp)])
    if tmp.exists():
        tmp.replace(out / "ladder.json")
    return rc


RESNET_LAYERS = [  # (label, N, C, H, K, R, stride): ResNet-50's most expensive 3x3, a 1x1 and a strided 3x3
    ("3x3 64@56", 8, 64, 56, 64, 3, 1),
    ("1x1 256->64@56", 8, 256, 56, 64, 1, 1),
    ("3x3 s2 128@56", 8, 128, 56, 128, 3, 2),
]


def families(out, rehearse):
    """Conv per algorithm as % of variant 0 per layer, elementwise as % of the HBM copy roof, both
    through the driver's interleaved rounds."""
    import rooflab
    from rooflab.driver import Entry
    from rooflab.errors import RooflabError
    from rooflab.families.conv import cuda as conv
    from rooflab.families.elementwise import cuda as ew

    driver = _driver(target_s=0.0005 if rehearse else 0.005)
    entries = []
    for label, N, C, H, K, R, stride in RESNET_LAYERS:
        if rehearse:
            N, C, H, K = 1, 4, 10, 4
        shape = conv._shape(N, C, H, K, R, stride=stride)
        shared = None
        for v in rooflab.list_variants(family="conv", device="cuda"):
            try:
                conv.check_applies(v.name, conv.spec_from_shape(v.name, shape))
            except RooflabError:
                continue
            shared = shared or v.inputs(shape, "float32", seed=0)
            lib = conv.library_path() if v.library else v.name.split(".")[-1]
            entries.append(
                Entry(
                    v,
                    shared,
                    params=conv.conv_params(shape),
                    label=f"conv {label} {lib}",
                    group=f"conv {label}",
                    threads=0,
                )
            )
    numel = 1 << 12 if rehearse else 1 << 25
    for (op, kind), name in ew.VARIANTS.items():
        if op in ("add", "scale", "relu", "gelu") and kind in ("cupy", "kernel"):
            v = rooflab.get_variant(name)
            entries.append(
                Entry(
                    v, v.inputs({"numel": numel}), label=f"{op} {kind} {numel >> 20}M", group="elementwise", threads=0
                )
            )
    records = driver.interleaved(entries, rounds=3)
    hbm = next((c["value"] for c in read(out, "run").get("ceilings", []) if c["name"] == "HBM copy bandwidth"), None)
    rows = []
    for r in records:
        row = {"label": r.label, "group": r.meta.get("group"), "status": _status(r.status, r.error, rehearse)}
        row["error"] = r.error
        if r.status == "ok":
            row.update(gflops=(r.gflops or {}).get("median"), gbps=(r.gbps or {}).get("median"))
            if row["group"].startswith("conv"):
                row["pct_of_variant0"] = 100 * r.meta["ratio"]
            elif hbm and row["gbps"]:
                row["pct_of_hbm_copy"] = 100 * row["gbps"] / hbm
        rows.append(row)
    write(out, "families", {"records": rows, "hbm_copy_gbps": hbm})
    failed = [r for r in rows if r["status"] == "failed"]
    for r in rows:
        fig = r.get("pct_of_variant0") or r.get("pct_of_hbm_copy")
        print(f"{r['label']:44s} {r['status']:7s} {'' if fig is None else f'{fig:6.1f} %'} {r['error'] or ''}"[:200])
    return 1 if failed else 0


def summary(out, rehearse):
    """One table: each stage's state and the issue's ratios, from the files the stages wrote."""
    import os

    # the shell passes every stage's exit status: ROOFLAB_CHECK_RCS="facts=0 smoke=1 ..."
    rcs = dict(kv.split("=", 1) for kv in os.environ.get("ROOFLAB_CHECK_RCS", "").split() if "=" in kv)
    rcs = {k: int(v) for k, v in rcs.items()}
    lines = ["stage      status", "---------- ------"]
    for stage in STAGES[:-1]:
        present = (out / f"{stage}.json").exists()
        rc = rcs.get(stage)
        state = "ok" if rc == 0 else f"FAILED (exit {rc})" if rc is not None else "no file" if not present else "?"
        lines.append(f"{stage:10s} {state}")
    ceil = {c["name"]: c for c in read(out, "run").get("ceilings", [])}
    peers_ = {p["what"].rsplit(" ", 1)[0]: p for p in read(out, "peers").get("peers", []) if "skipped" not in p}
    lines.append("")
    lines.append("ratio (same run)                                   value   target")

    def ratio(what, a, b, target):
        v = a / b if a and b else None
        lines.append(f"{what:50s} {'-' if v is None else f'{v:6.3f}':>6s}   {target}")

    torch_copy = next((p.get("gbps") for k, p in peers_.items() if k.startswith("torch d2d copy")), None)
    for k in ("copy", "triad"):
        ratio(f"HBM {k} / torch d2d copy", (ceil.get(f"HBM {k} bandwidth") or {}).get("value"), torch_copy, ">= 0.95")
    for dt in ("float32", "float64"):
        lines.append(
            f"{dt + ' FMA peak / theoretical at measured clock':50s} "
            f"{(ceil.get(f'{dt} FMA peak') or {}).get('fraction_of_theoretical') or '-'!s:>6.6s}   >= 0.90"
        )
    bf16 = (ceil.get("bfloat16 tensor-core peak (wgmma)") or {}).get("value")
    ratio(
        "BF16 wgmma peak / torch.matmul bf16 8192",
        bf16,
        (peers_.get("torch.matmul bfloat16") or {}).get("gflops"),
        ">= 0.90",
    )
    launch = (ceil.get("launch: enqueue") or {}).get("value")
    ratio("launch latency / torch empty kernel", launch, (peers_.get("torch empty kernel") or {}).get("ns"), "<= 1.2")
    lad = read(out, "ladder")
    for dt, goal in (("float32", ">= 0.70"), ("float16", ">= 0.50")):
        own = [r for r in lad.get("records", []) if r["dtype"] == dt and r["number"] and not r["knobs"]]
        best = max((r.get("fraction_of_cublas") or 0 for r in own), default=None)
        lines.append(
            f"{'best ' + dt + ' GEMM rung / cuBLAS at 4096':50s} {'-' if best is None else f'{best:6.3f}':>6s}   {goal}"
        )
    text = "\n".join(lines)
    (out / "summary.txt").write_text(text + "\n")
    print(text)
    return 0


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    rehearse = "--rehearse" in argv
    argv = [a for a in argv if a != "--rehearse"]
    if len(argv) != 2 or argv[0] not in STAGES:
        print(f"usage: device_check.py {{{','.join(STAGES)}}} OUTDIR [--rehearse]", file=sys.stderr)
        return 2
    stage, out = argv[0], Path(argv[1])
    out.mkdir(parents=True, exist_ok=True)
    if stage != "summary":
        if rehearse:
            install_standin()
        from rooflab.cuda import backend

        ok, why = backend.probe()
        if not ok:
            print(f"device_check: error: {why}", file=sys.stderr)
            return 2
    t0 = time.perf_counter()
    try:
        rc = globals()[stage](out, rehearse)
    except Exception:
        traceback.print_exc()
        rc = 1
    print(f"== {stage}: exit {rc} in {time.perf_counter() - t0:.1f} s")
    return rc


if __name__ == "__main__":
    sys.exit(main())
