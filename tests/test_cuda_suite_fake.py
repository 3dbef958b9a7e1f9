"""The GPU ceilings suite end to end on a numpy stand-in for cupy (tests/fake_gpu.py): the kernels
really compile with NVRTC, the harness, records, ceilings, plots and report are the real ones; only
the kernels' execution and the event timings are emulated, so nothing here looks at a figure."""

import itertools
import json
from types import SimpleNamespace

import pytest

from rooflab import cli
from rooflab import suite_cuda as suite
from tests import fake_gpu
from tests.cuda_tools import nvrtc_or_skip

pytestmark = pytest.mark.slow  # each test runs a whole suite on the stand-in GPU

pytest.importorskip("cupy")


@pytest.fixture(scope="module")
def cubin_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("cubins")  # both runs share the compiled kernels


@pytest.fixture
def env(tmp_path, monkeypatch, cubin_cache):
    nvrtc_or_skip()
    monkeypatch.setenv("ROOFLAB_CACHE_DIR", str(cubin_cache))
    monkeypatch.setenv("ROOFLAB_MACHINE", "fake-gpu")
    return tmp_path


def _result(out):
    (f,) = out.glob("*/rooflab-ceilings-cuda-*.json")
    return f, json.loads(f.read_text())


@pytest.fixture(scope="module")
def quick_cuda(tmp_path_factory, cubin_cache):
    """One quick GPU ceilings run on the stand-in (~18 s here), read by the tests that need a whole
    run's result: the stand-in and the environment are undone as soon as it has finished."""
    nvrtc_or_skip()
    out = tmp_path_factory.mktemp("cuda-quick")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ROOFLAB_CACHE_DIR", str(cubin_cache))
        mp.setenv("ROOFLAB_MACHINE", "fake-gpu")
        fake = fake_gpu.FakeGPU(mp)
        fake.install()
        rc = cli.main(["run", "--device", "cuda", "--quick", "--budget", "0.002", "--out", str(out)])
        launched = set(fake.launched)
    assert rc == 0
    f, d = _result(out)
    return SimpleNamespace(file=f, data=d, launched=launched)


def test_the_whole_suite_runs_and_records_every_ceiling(env, quick_cuda):
    f, d = quick_cuda.file, quick_cuda.data
    assert d["status"] == "complete" and d["errors"] == []
    assert all(r["verified"] for r in d["records"])
    names = {c["name"] for c in d["ceilings"]}
    for level in ("HBM", "L2", "shared", "host"):
        assert any(n.startswith(level) for n in names), level
    assert {
        "float32 FMA peak",
        "float64 FMA peak",
        "float16 tensor-core peak (mma.sync)",
        "bfloat16 tensor-core peak (mma.sync)",
        "float16 tensor-core peak (wgmma)",
    } <= names
    assert {"launch: enqueue", "launch: roundtrip", "launch: graph"} <= names
    # memory latency per level from the chase family's walk (ns per hop timed by the kernel itself),
    # and the latency of a 4 KiB pinned copy each way
    mem = {c["level"]: c for c in d["ceilings"] if c["name"].startswith("memory latency")}
    assert set(mem) == {"L1", "L2", "HBM"}
    assert all(c["kind"] == "latency" and c["unit"] == "ns" and c["cycles"] and c["threads"] == 0 for c in mem.values())
    assert mem["L1"]["value"] < mem["L2"]["value"] < mem["HBM"]["value"]  # the stand-in's staircase, read back
    chases = [r for r in d["records"] if r["family"] == "chase"]
    assert chases and all(r["verified"] and r["chase_latency"]["hops"] > 0 for r in chases)
    assert not any(c["kind"] == "bandwidth" and c.get("kernel") is None for c in d["ceilings"])
    assert {"transfer: H2D pinned 4 KiB", "transfer: D2H pinned 4 KiB"} <= names
    fma = next(c for c in d["ceilings"] if c["name"] == "float32 FMA peak")
    assert fma["theoretical_clock"] == "measured" and fma["theoretical_clock_ghz"] == pytest.approx(1.9)
    from rooflab.roofline import ceiling_notes  # the remark the CLI table and the report show

    assert any(n.endswith("of theoretical at the measured 1.900 GHz") for n in ceiling_notes(fma))
    assert {r["what"].split(" (")[0] for r in d["peer_ratios"]} >= {"HBM copy vs cupy copy"}
    assert len(d["sweeps"]["intensity"]) == len(suite.Plan.INTENSITIES)
    built = {b["source"]: b for b in d["cuda_builds"]}
    assert set(built) == {
        "launch.cu",
        "chase.cu",
        "stream.cu",
        "smem.cu",
        "fma.cu",
        "tensor.cu",
        "intensity.cu",
        "wgmma.cu",
    }
    assert built["wgmma.cu"]["arch"] == "sm_90a" and built["fma.cu"]["arch"] == "sm_90"
    # the stand-in's kernel list follows the suite's declaration: every kernel the declared variants
    # compiled has an emulation, and the launch paths are the launch family's variants
    compiled = {k for b in built.values() for k in b["resources"]}
    assert compiled and all(fake_gpu.emulation_for(k) for k in compiled)
    assert {fake_gpu.emulation_for(k)[0] for k in compiled} >= quick_cuda.launched
    launches = {r["label"]: r for r in d["records"] if r["family"] == "launch"}
    assert {r["variant"] for r in launches.values()} == {
        "cuda.launch.01-enqueue",
        "cuda.launch.02-roundtrip",
        "cuda.launch.03-graph-node",
    }
    assert all(r["verified"] and r["ns_per_launch"]["median"] > 0 for r in launches.values())
    peer = next(r for r in d["records"] if r.get("kernel") == "cublas")
    assert peer["variant"] == "cuda.gemm.00-cublas" and peer["verified"] and peer["dtype"] == "float16"
    assert all(r["spill_store_bytes"] == 0 for b in built.values() for r in b["resources"].values())
    assert f.with_suffix(".roofline.png").exists() and f.with_suffix(".bandwidth.png").exists()
    assert f.with_suffix(".latency.png").exists() and f.with_suffix(".latency.svg").exists()
    assert cli.main(["report", str(f), "-o", str(env / "r.html")]) == 0
    assert "Fake GPU" in (env / "r.html").read_text()


def test_launch_errors_and_wrong_results_are_recorded_and_the_run_goes_on(env, monkeypatch, capsys):
    # wrong: one value 1 % off, in kernels whose emulation is the reference's own closed form too
    wrong = {"smem_read", "fma_peak*", "intensity_f64"}
    fake_gpu.FakeGPU(monkeypatch, failing={"stream_triad", "mma_bf16", "chase_ca"}, wrong=wrong).install()
    out = env / "results"
    assert cli.main(["run", "--device", "cuda", "--quick", "--budget", "0.002", "--no-plot", "--out", str(out)]) == 1
    f, d = _result(out)
    assert d["status"] == "complete-with-errors"
    printed = capsys.readouterr().out
    assert "launch failed: cudaErrorIllegalAddress" in " ".join(printed.split())
    errors = {e.get("variant") or e["label"]: e["error"] for e in d["errors"]}
    assert set(errors) == {
        "cuda.stream.triad",
        "cuda.mma.bf16",
        "cuda.smem.read",
        "cuda.fma.f32",
        "cuda.fma.f64",
        "cuda.intensity.f64",
        "cuda.chase.01-random-ld-ca",
    }
    assert not [p for p in d["sweeps"]["intensity"] if p.get("gflops")]  # no figure from a wrong kernel
    assert "launch failed: cudaErrorIllegalAddress" in errors["cuda.stream.triad"]
    assert "launch failed: cudaErrorIllegalAddress" in errors["cuda.mma.bf16"]
    assert "outside" in errors["cuda.smem.read"] and "got" in errors["cuda.smem.read"]  # wrong: no figure
    names = {c["name"] for c in d["ceilings"]}
    assert "HBM triad bandwidth" not in names and "bfloat16 tensor-core peak (mma.sync)" not in names
    assert "float32 FMA peak" not in names and "float64 FMA peak" not in names
    assert not any(n.startswith("shared") for n in names)
    assert not any(n.startswith("memory latency") for n in names)  # a failed chase: no latency figure
    assert "HBM copy bandwidth" in names and "float16 tensor-core peak (wgmma)" in names  # later ones ran


def test_info_lists_the_gpu_with_its_peaks(env, monkeypatch, capsys):
    fake_gpu.FakeGPU(monkeypatch).install()
    assert cli.main(["info"]) == 0
    out = capsys.readouterr().out
    assert "GPU 0: Fake GPU (numpy) (sm_90, 4 SMs" in out and "1.980 GHz" in out
    assert "theoretical float32: 4 SMs x 128 FP32 FMA/clk x 2 FLOP x 1.980 GHz" in out


def test_model_ops_are_placed_on_the_gpu_ceilings(env, monkeypatch, quick_cuda):
    fake_gpu.FakeGPU(monkeypatch).install()
    out = env / "results"
    rc = cli.main(
        [
            "run",
            "--device",
            "cuda",
            "--suite",
            "models",
            "--model",
            "gpt2-decode",
            "--quick",
            "--budget",
            "0.002",
            "--no-plot",
            "--ceilings",
            str(quick_cuda.file),
            "--out",
            str(out),
        ]
    )
    (f,) = out.glob("*/rooflab-models-cuda-*.json")
    d = json.loads(f.read_text())
    assert d["ceilings_source"].endswith(".json") and "rooflab-ceilings-cuda-" in d["ceilings_source"]
    placed = d["ops_placed"]
    assert placed and all(o["device"] == "cuda" and o["verification"] and o["class"] for o in placed)
    assert any("cuBLAS" in o["impl"] for o in placed)
    # the 50257 x 768 lm_head does not fit in the stand-in's 128 MiB: refused by name, the rest placed
    assert rc == 1 and [e["label"] for e in d["errors"]] == ["gpt2-decode: lm_head (tied to wte)"]
    assert "GPU has 128 MiB free" in d["errors"][0]["error"]


def test_the_asv_gpu_benchmarks_set_up_verify_and_return_numbers(env, monkeypatch):
    """benchmarks/bench_gpu.py against the stand-in: every parameter's setup compiles and verifies,
    and every benchmark body runs and returns what asv expects (a number for track_*)."""
    fake_gpu.FakeGPU(monkeypatch).install()
    from benchmarks import _common, bench_gpu

    monkeypatch.setattr(_common, "_PREPARED", {})
    for cls in (bench_gpu.StreamGPU, bench_gpu.ComputeGPU, bench_gpu.LaunchGPU):
        grid = getattr(cls, "params", ())
        # every value of the first parameter, the smallest of the others (sizes): enough to run each body
        for args in itertools.product(*[values if i == 0 else sorted(values)[:1] for i, values in enumerate(grid)]):
            bench = cls()
            bench.setup(*args)
            for name in dir(cls):
                if name.startswith(("time_", "track_")):
                    out = getattr(bench, name)(*args)
                    if name.startswith("track_"):
                        assert isinstance(out, float) and out > 0, (cls.__name__, name, args)
