"""The CPU stand-in for cupy (tests/fake_gpu.py) refuses what cupy refuses, and the GPU-path faults
that the first reading of the CUDA side found (issue 25) stay fixed:

- stand-in arrays never convert to numpy implicitly (cupy raises TypeError); ``.get()`` and
  ``cupy.asnumpy`` are the way to the host; a host array mixed into a device expression is refused;
- its random generator has only the methods cupy's Generator has (no ``permutation``), so
  ``knobs.patterned`` (every HBM, L2 and copy input) must draw its permutation on the host;
- ``verify.check`` of a host result against a device reference (device-to-host transfers);
- GPU calibration: samples fill the target even when the launch dominates one repetition.
No kernel is compiled here (no NVRTC needed); tests/test_cuda_api.py checks the calls against the
real cupy."""

import numpy as np
import pytest

from rooflab.errors import VerificationError
from tests import fake_gpu

pytest.importorskip("cupy")


@pytest.fixture
def cp(monkeypatch):
    return fake_gpu.FakeGPU(monkeypatch, compile=False).install()


def test_standin_arrays_refuse_implicit_conversion(cp):
    a = cp.zeros(4)
    for convert in (np.asarray, np.array, lambda x: np.zeros(4) + x, lambda x: x + np.ones(4)):
        with pytest.raises(TypeError):
            convert(a)
    with pytest.raises(TypeError, match="Unsupported type"):
        cp.matmul(np.ones((2, 2)), cp.ones((2, 2)))
    assert isinstance(a.get(), np.ndarray) and isinstance(cp.asnumpy(a + 1), np.ndarray)
    assert float((a + 2).sum()) == 8.0 and isinstance(a.max(), cp.ndarray)  # reductions stay on the device
    with pytest.raises(AttributeError):
        a.ctypes  # noqa: B018  (cupy arrays have no .ctypes)


def test_standin_generator_has_only_cupys_methods(cp):
    rng = cp.random.default_rng(0)
    assert rng.random(3).shape == (3,) and rng.standard_normal((2, 2), dtype=np.float32).dtype == np.float32
    with pytest.raises(AttributeError):
        rng.permutation(10)
    with pytest.raises(AttributeError):
        rng.choice(10)


def test_patterned_inputs_build_on_the_device(cp):
    """Every GPU stream, L2 and copy input; before issue 25 it called Generator.permutation."""
    from rooflab.cuda import knobs

    a = knobs.patterned(3000, seed=1)
    host = a.get()
    assert isinstance(a, cp.ndarray) and a.shape == (3000,)
    k = np.round((host[:1024] - 1.0) * 1024).astype(int)
    assert sorted(k) == list(range(1024)) and np.array_equal(host[1024:2048], host[:1024])


def test_check_of_a_host_result_against_a_device_reference(cp):
    """A device-to-host transfer: the result is numpy, the reference a device array."""
    from rooflab.verify import check

    ref = cp.asarray(np.linspace(1, 2, 64))
    assert check(ref.get(), ref)["elements"] == 64
    assert check(ref, ref.get())["elements"] == 64  # and a device result against a host reference
    wrong = ref.get()
    wrong[5] += 0.5
    with pytest.raises(VerificationError, match=r"\(5,\)"):
        check(wrong, ref)
    with pytest.raises(VerificationError, match="non-finite mismatch"):
        check(cp.zeros(3), np.nan)  # a scalar closed form on the device


def test_gpu_calibration_fills_the_target_when_the_launch_dominates(monkeypatch):
    """A kernel looping ``reps`` times inside one launch: 20 us of launch + 0.1 us per rep. Timing
    reps=1 once gave 0.01 / 20.1e-6 = 497 reps: samples of 70 us for a 10 ms target."""
    from rooflab.cuda import backend
    from rooflab.cuda import timing as gtime
    from rooflab.timing import Samples

    def fake_time_gpu(fn, **_):
        return Samples(seconds=[20e-6 + fn.reps * 1e-7] * 3)

    class Call:
        def __init__(self, reps):
            self.reps = reps

    monkeypatch.setattr(gtime, "time_gpu", fake_time_gpu)
    target = 0.01
    reps = backend.driver_backend().calibrate(Call, target)
    assert 0.9 * target <= 20e-6 + reps * 1e-7 <= 1.1 * target


def test_what_a_kernel_measured_on_the_chip_comes_from_its_variant():
    """The GPU backend no longer switches on family names (nor imports a family): the SM clock and
    the pointer chase's hops come from each variant's ``after_run`` hook."""
    import inspect

    import rooflab
    from rooflab.cuda import backend

    assert backend.driver_backend().after_verify is None
    src = inspect.getsource(backend)
    assert "families" not in src and "variant.family" not in src
    clk = np.array([1_900_000, 1_000_000] * 2, dtype=np.uint64)
    for name in ("cuda.fma.f32", "cuda.fma.f64", "cuda.mma.f16", "cuda.wgmma.bf16"):
        assert rooflab.get_variant(name).after_run(None, clk)["sm_clock"]["ghz"] == pytest.approx(1.9)
    out = np.array([5, 2000, 1000, 100], dtype=np.uint64)
    chain = np.zeros(16, dtype=np.uint64)
    got = rooflab.get_variant("cuda.chase.01-random-ld-ca").after_run(chain, out, None)
    assert got["chase_latency"]["ns_per_hop"] == 10.0 and got["chase_bytes"] == 128


def test_a_cached_cubin_the_driver_refuses_is_rebuilt(monkeypatch, tmp_path):
    """Cubins prebuilt here (scripts/build_cubins.sh, NVRTC 13.y) are keyed by NVRTC's major version;
    one the device's driver will not load is rebuilt there instead of failing its variant."""
    from rooflab.cuda import compiler, loader

    try:
        compiler._nvrtc()
    except Exception as e:
        pytest.skip(str(e))
    monkeypatch.setenv("ROOFLAB_CACHE_DIR", str(tmp_path))
    cp = fake_gpu.FakeGPU(monkeypatch).install()
    first = compiler.build("launch.cu", "sm_90")
    assert not first.cached and compiler.build("launch.cu", "sm_90").cached
    assert json_meta(first.cubin_path)["nvrtc_version"] == first.nvrtc_version
    calls, real = [], cp.RawModule

    def raw(path):
        calls.append(path)
        if len(calls) == 1:
            raise RuntimeError(
                "CUDA_ERROR_UNSUPPORTED_PTX_VERSION: the provided PTX was compiled with an unsupported toolchain"
            )
        return real(path)

    monkeypatch.setattr(cp, "RawModule", raw)
    m = loader.module("launch.cu")
    assert len(calls) == 2 and not m.build.cached


def json_meta(cubin_path):
    import json
    from pathlib import Path

    return json.loads(Path(cubin_path).with_suffix(".json").read_text())
