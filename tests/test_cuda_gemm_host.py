"""The CUDA GEMM ladder's host side, without a GPU: the registry entries, the launch plans (grid,
block, shared memory), the declared work, the refusals of bad input by name, and the inputs
(through tests/fake_gpu.py's numpy stand-in for cupy): exact in FP32, so the hand-written kernels
can be held to the exact result.
Run: pytest -q tests/test_cuda_gemm_host.py
"""

import subprocess
import sys

import numpy as np
import pytest

import rooflab
from rooflab.errors import RooflabError
from rooflab.families.gemm import cuda as g

NAMES = [
    "cuda.gemm.00-cublas",
    "cuda.gemm.01-naive",
    "cuda.gemm.02-coalesced",
    "cuda.gemm.03-smem-tiling",
    "cuda.gemm.04-1d-blocktiling",
    "cuda.gemm.05-2d-blocktiling",
    "cuda.gemm.06-vectorized",
    "cuda.gemm.07-warptiling",
    "cuda.gemm.08-mma-sync",
    "cuda.gemm.09-wgmma",
]


def test_the_ladder_is_registered_in_order():
    vs = rooflab.list_variants(family="gemm", device="cuda")
    assert [v.name for v in vs] == NAMES
    assert [v.number for v in vs] == list(range(10))
    assert (
        next(v for v in rooflab.registry.list_variants("gemm", "cuda", "gemm") if v.library).name
        == "cuda.gemm.00-cublas"
    )
    assert all(v.description for v in vs)
    # model ops on the GPU: cuBLAS and the top SIMT and tensor-core rungs, never the slow ones
    assert [v.number for v in vs if v.op == "gemm"] == [0, 6, 7, 8, 9]
    assert {v.dtypes for v in vs[1:8]} == {("float32", "float64")}
    assert {v.dtypes for v in vs[8:]} == {("float16", "bfloat16")}


def test_registering_imports_no_cupy():
    code = "import sys, rooflab; rooflab.list_variants(family='gemm'); assert 'cupy' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_launch_plans():
    p = g.plan(7, 1000, 300, 77, "float32")
    assert (p.source, p.function, p.block, p.grid) == ("gemm07_warptile.cu", "gemm07_warptile_f32", 256, 8 * 3)
    assert p.smem == 2 * 8 * (128 + 4 + 128) * 4 + 1024  # double-buffered A (padded rows) and B
    assert g.plan(7, 1, 1, 1, "float64").smem == 2 * 8 * (128 + 2 + 128) * 8 + 1024
    assert g.plan(6, 1, 1, 1, "float32").smem == 0  # static shared memory
    assert g.plan(1, 33, 9, 1, "float64").grid == 2 * 2 and g.plan(1, 33, 9, 1, "float64").function.endswith("_f64")
    assert g.plan(3, 64, 64, 5, "float32").block == 1024
    assert g.plan(4, 64, 64, 5, "float32").block == 512
    p9 = g.plan(9, 129, 257, 64, "bfloat16")
    assert (p9.function, p9.grid, p9.block) == ("gemm09_wgmma_bf16", 2 * 2, 256)
    assert p9.smem == 4 * (128 + 256) * 64 * 2 + 1024 <= 227 << 10  # 4 stages + 1 KiB to align to 1024 B
    p8 = g.plan(8, 1, 1, 1, "float16")
    assert p8.smem == 3 * (128 * 40 + 32 * 136) * 2 + 1024 and p8.grid == 1


def test_work_is_2mnk_and_the_minimum_bytes():
    A, B = np.zeros((30, 10), np.float16), np.zeros((10, 20), np.float16)
    w = g.work(A, B, reps=3)
    assert w.flops == 3 * 2 * 30 * 20 * 10
    assert w.bytes_read == 3 * (300 + 200) * 2 and w.bytes_written == 3 * 600 * 2 and w.launches == 3


@pytest.mark.parametrize(
    "a,b,name,match",
    [
        ((4, 5), (4, 5), "cuda.gemm.05-2d-blocktiling", "inner dimensions differ: A is 4 x 5, B is 4 x 5"),
        ((2, 4, 4), (4, 4), "cuda.gemm.05-2d-blocktiling", "A must be a 2-D matrix, got shape"),
        ((4,), (4, 4), "cuda.gemm.01-naive", "A must be a 2-D matrix"),
    ],
)
def test_bad_shapes_are_refused_by_name(a, b, name, match):
    v = rooflab.get_variant(name)
    with pytest.raises(RooflabError, match=f"{name}: {match}"):
        v(np.zeros(a, np.float32), np.zeros(b, np.float32))


def test_a_tensor_core_rung_asked_for_fp64_says_so():
    for name in ("cuda.gemm.08-mma-sync", "cuda.gemm.09-wgmma"):
        v = rooflab.get_variant(name)
        with pytest.raises(RooflabError, match=f"{name} runs on tensor cores with FP16/BF16 inputs only; float64"):
            v(np.zeros((4, 4)), np.zeros((4, 4)))


def test_other_refusals():
    v = rooflab.get_variant("cuda.gemm.07-warptiling")
    with pytest.raises(RooflabError, match="computes float32 and float64 only, got float16"):
        v(np.zeros((4, 4), np.float16), np.zeros((4, 4), np.float16))
    with pytest.raises(RooflabError, match="A is float32 and B is float64"):
        v(np.zeros((4, 4), np.float32), np.zeros((4, 4)))
    with pytest.raises(RooflabError, match="B must be C-contiguous"):
        v(np.zeros((4, 4), np.float32), np.zeros((4, 8), np.float32)[:, ::2])
    with pytest.raises(RooflabError, match="A is a numpy.ndarray; CUDA variants take cupy arrays"):
        v(np.zeros((4, 4), np.float32), np.zeros((4, 4), np.float32))
    with pytest.raises(RooflabError, match="A is a list, not an array"):
        v([[1.0]], np.zeros((1, 1), np.float32))
    with pytest.raises(RooflabError, match="is not understood"):  # the family's shape rule (n, (M, N, K), a dict)
        g.inputs("4096", "float32")
    with pytest.raises(RooflabError, match="lacks K"):
        g.inputs({"M": 2, "N": 2}, "float32")
    with pytest.raises(RooflabError, match="batch 1"):
        g.inputs({"M": 2, "N": 2, "K": 2, "batch": 4}, "float32")
    with pytest.raises(RooflabError, match="at least 1"):
        g.inputs({"M": 0, "N": 2, "K": 2}, "float32")


@pytest.mark.parametrize("k", [1, 7, 768, 4096, 16384, 100_000, 524_288])
def test_value_range_keeps_sums_exact_and_fp16_finite(k):
    r = g.value_range(k)
    assert 1 <= r <= 8
    assert k * (r / 4) ** 2 <= 32768  # |C| bound: finite in FP16; multiples of 1/16 below 2^15: exact in FP32


@pytest.fixture
def fake(monkeypatch):
    pytest.importorskip("cupy")
    from tests.fake_gpu import FakeGPU

    try:
        return FakeGPU(monkeypatch).install()
    except Exception as e:  # no NVRTC: the stand-in needs it
        pytest.skip(f"fake GPU unavailable: {e}")


def host(x):
    """A device array's host copy: cupy (and the stand-in) refuse np.asarray."""
    return x.get() if hasattr(x, "get") else x


def test_inputs_are_quarter_integers_and_fp32_sums_are_exact(fake):
    A, B = g.inputs({"M": 64, "N": 48, "K": 4096}, "float32", seed=3)
    a, b = host(A), host(B)
    assert a.shape == (64, 4096) and b.shape == (4096, 48) and a.dtype == np.float32
    q = np.concatenate([a.ravel(), b.ravel()]) * 4
    assert np.array_equal(q, np.round(q)) and q.min() == -8 and q.max() == 8 and len(np.unique(q)) == 17
    ref = host(g.reference(A, B))
    assert ref.dtype == np.float64
    assert np.array_equal(np.matmul(a, b).astype(np.float64), ref)  # FP32 arithmetic gets it exactly
    A2, _ = g.inputs({"M": 64, "N": 48, "K": 4096}, "float32", seed=3)
    A3, _ = g.inputs({"M": 64, "N": 48, "K": 4096}, "float32", seed=4)
    assert np.array_equal(host(A2), a) and not np.array_equal(host(A3), a)


def test_fp16_and_bf16_inputs_hold_the_same_values(fake):
    A16, B16 = g.inputs({"M": 8, "N": 8, "K": 8}, "float16", seed=1)
    A32, B32 = g.inputs({"M": 8, "N": 8, "K": 8}, "float32", seed=1)
    assert A16.dtype == np.float16 and np.array_equal(host(A16).astype(np.float32), host(A32))
    pytest.importorskip("ml_dtypes")
    Ab, Bb = g.inputs({"M": 8, "N": 8, "K": 8}, "bfloat16", seed=1)
    assert g._dtype_name(Ab.dtype) == "bfloat16"
    assert np.array_equal(host(g.as_float64(Ab)), host(A32).astype(np.float64))
    assert np.array_equal(host(g.reference(Ab, Bb)), host(g.reference(A32, B32)))


def test_bf16_without_ml_dtypes_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "ml_dtypes", None)  # import ml_dtypes -> ImportError
    with pytest.raises(RooflabError, match="bfloat16 arrays need the ml_dtypes package"):
        g.inputs({"M": 2, "N": 2, "K": 2}, "bfloat16")


# ---- the whole host path on the stand-in device: real NVRTC builds, emulated launches ------------


@pytest.fixture
def fake_cached(fake, tmp_path, monkeypatch):
    monkeypatch.setenv("ROOFLAB_CACHE_DIR", str(tmp_path / "cache"))
    return fake


@pytest.mark.slow
def test_every_variant_runs_through_the_loader(fake_cached):
    """Each launcher validates, plans, compiles its source with NVRTC for the (fake) sm_90, opts in
    to its dynamic shared memory and launches with the ladder's arguments."""
    from rooflab.cuda import loader

    for v in rooflab.list_variants(family="gemm", device="cuda"):
        for dt in v.dtypes:
            if dt == "bfloat16":
                pytest.importorskip("ml_dtypes")
            A, B = v.inputs({"M": 33, "N": 17, "K": 9}, dt, seed=2)
            C = v(A, B, reps=2)
            assert C.shape == (33, 17) and C.dtype == A.dtype
            assert np.array_equal(host(g.as_float64(C)), host(v.reference(A, B)))
    built = {b["source"]: b for b in loader.builds()}
    assert set(built) == {r.source for r in g.RUNGS}
    assert built["gemm09_wgmma.cu"]["arch"] == "sm_90a" and built["gemm08_mma.cu"]["arch"] == "sm_90"
    fn = loader.kernel("gemm09_wgmma.cu", "gemm09_wgmma_f16", g.BY_NUMBER[9].knobs)
    assert fn.max_dynamic_shared_size_bytes == g.BY_NUMBER[9].dynamic_smem()  # opted in above 48 KiB


def test_a_bias_is_added_or_refused_by_name(fake_cached):
    """``C = v(A, B, bias)`` on the CUDA rungs and cuBLAS: the bias row is added (counted as a second
    launch and N more elements read); a bias of the wrong length or dtype is one clear error."""
    for name in ("cuda.gemm.00-cublas", "cuda.gemm.06-vectorized"):
        v = rooflab.get_variant(name)
        A, B, bias = v.inputs({"M": 5, "N": 12, "K": 7, "bias": True}, "float32", seed=3)
        C = v(A, B, bias)
        assert np.array_equal(host(C).astype(np.float64), host(v.reference(A, B, bias)))
        assert not np.array_equal(host(C).astype(np.float64), host(v.reference(A, B)))
        w, w0 = v.work(A, B, bias, reps=2), v.work(A, B, reps=2)
        assert w.launches == 4 and w.bytes_read - w0.bytes_read == 2 * 12 * 4
        with pytest.raises(RooflabError, match=f"{name}: bias must be a float32 vector of N=12"):
            v(A, B, bias[:11])
        with pytest.raises(RooflabError, match="bias must be a float32"):
            v(A, B, bias.astype(np.float64))


@pytest.mark.slow
def test_ladder_script_on_the_fake_gpu(fake_cached, tmp_path, capsys):
    import importlib.util
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "scripts" / "gemm_ladder_cuda.py"
    spec = importlib.util.spec_from_file_location("gemm_ladder_cuda", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = tmp_path / "ladder.json"
    assert mod.main(["--size", "64", "--rounds", "2", "--target-ms", "0.01", "--sweep", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    d = json.loads(out.read_text())
    names = {(r["variant"], r["dtype"]) for r in d["records"]}
    assert ("cuda.gemm.07-warptiling", "float32") in names and ("cuda.gemm.09-wgmma", "float16") in names
    assert all(len(r["seconds"]) == 2 and r["gflops"] > 0 for r in d["records"])
    swept = {(r["variant"], tuple(r["knobs"].items())) for r in d["records"] if r["knobs"]}
    assert len(swept) == sum(len(c) for c in g.CANDIDATES.values())
    assert "cuda.gemm.09-wgmma BN=128,STAGES=3" in text
    assert all(r["fraction_of_cublas"] is not None for r in d["records"]) and d["failed"] == []
    assert "best SIMT rung:" in text and "of cuBLAS SGEMM (goal >= 70%" in text
    assert "best tensor-core rung:" in text and "of cuBLAS FP16 (goal >= 50%" in text
