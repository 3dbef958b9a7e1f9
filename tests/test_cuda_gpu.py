"""GPU tests: run only where cupy sees a CUDA device (skipped with the reason elsewhere)."""

import numpy as np
import pytest

import rooflab
from rooflab.cuda import backend

ok, why = backend.probe()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not ok, reason=why)]


def test_describe_has_the_facts_peaks_need():
    d = backend.describe(0)
    for k in ("name", "compute_capability", "sm_count", "memory_bytes", "l2_bytes", "driver_version"):
        assert d[k], k
    assert d["theoretical"]["peaks"]


def test_fma_probes_a_plausible_sm_clock():
    from rooflab.cuda import knobs as cv

    v = rooflab.get_variant("cuda.fma.f32")
    out, clk = v.inputs()
    v.kernel(out, clk, reps=2000)
    c = cv.measured_clock(clk)
    top = backend.describe(0)["clock_ghz"]
    assert c is not None and c["blocks"] == clk.size // 2
    assert 0.2 * top < c["ghz"] < 1.1 * top, (c, top)


def test_a_bad_launch_is_named_and_the_next_one_works():
    from rooflab.cuda import loader

    v = rooflab.get_variant("cuda.launch.empty")
    (flag,) = v.inputs()
    fn = loader.kernel("launch.cu", "empty_kernel")
    with pytest.raises(rooflab.RooflabError, match="launch failed: .*(nvalid|INVALID)"):
        loader.launch(fn, 1, 4096, (flag,), "empty_kernel", sync=True)  # 4096 threads per block: invalid
    loader.launch(fn, 1, 32, (flag,), "empty_kernel", sync=True)
    assert int(flag.get()[0]) == 0


def test_wrong_expectation_is_rejected():
    from rooflab.verify import check

    v = rooflab.get_variant("cuda.stream.triad")
    a, b, c = v.inputs(1 << 16)
    v.kernel(a, b, c, s=3.0)
    with pytest.raises(rooflab.VerificationError, match="outside"):
        check(a, 99.0, dtype=np.float64, what="triad")


def test_bad_device_index():
    with pytest.raises(rooflab.DeviceUnavailable, match="does not exist"):
        backend.require(999)


def test_run_cuda_quick(tmp_path):
    from rooflab import cli
    from rooflab.results import load

    assert cli.main(["run", "--device", "cuda", "--quick", "--out", str(tmp_path)]) in (0, 1)
    (f,) = tmp_path.glob("*/rooflab-ceilings-cuda-*.json")
    d = load(f)
    kinds = {c["kind"] for c in d["ceilings"]}
    assert {"bandwidth", "compute", "latency"} <= kinds
    assert d["cuda_builds"] and all(b["resources"] for b in d["cuda_builds"])
    assert {c["level"] for c in d["ceilings"] if c["kind"] == "bandwidth"} >= {"HBM", "L2", "shared", "host"}


# last: the registry lists wgmma last, and a kernel fault would poison the CUDA context for later tests.
# The ceilings' variants; the kernel families (gemm, conv, elementwise, chase, launch, transfer) take
# op shapes and have their own GPU tests (test_cuda_gemm_gpu.py, test_cuda_families_gpu.py).
CEILING_MODULES = (
    "rooflab.families.stream",
    "rooflab.families.fma",
    "rooflab.families.intensity",
    "rooflab.families.latency",
)
CEILINGS = [v.name for v in rooflab.list_variants(device="cuda") if v.kernel.__module__ in CEILING_MODULES]


@pytest.mark.parametrize("name", CEILINGS)
def test_every_cuda_variant_verifies(name):
    from rooflab.cuda import compiler, loader
    from rooflab.verify import check

    if name.startswith("cuda.wgmma") and not compiler.runs_on("wgmma.cu", loader.device_arch()):
        pytest.skip(f"wgmma needs Hopper (sm_90); this GPU is {loader.device_arch()}")
    v = rooflab.get_variant(name)
    inputs = v.inputs(1 << 20) if name.startswith(("cuda.stream", "cuda.intensity", "cuda.l2")) else v.inputs()
    params = v.params()
    dtype = v.result_dtype(*inputs, **params) if v.result_dtype else inputs[0].dtype
    expected = v.reference(*inputs, reps=2, **params)
    got = v.kernel(*inputs, reps=2, **params)
    check(got, expected, dtype=dtype, what=name, kind=v.tolerance)
