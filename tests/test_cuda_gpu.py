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
    """The SM clock read on the chip (clock64 / globaltimer) during the FP32 FMA kernel: never above
    the device's maximum, not below half of it under load, and consistent with the kernel's own rate
    (a clock read too low would put the measured FMA rate above the peak at that clock)."""
    from rooflab.driver import Driver

    v = rooflab.get_variant("cuda.fma.f32")
    rec = Driver(backend.driver_backend()).measure(v, v.inputs(), threads=0, budget_s=0.2, max_attempts=1)
    assert rec.status == "ok" and rec.verified, rec.error
    dev = backend.describe(0)
    clock, top = rec.meta["sm_clock"]["ghz"], dev["clock_ghz"]
    assert 0.5 * top < clock <= 1.02 * top, (clock, top)
    peak = {p["dtype"]: p for p in backend.theoretical(dev, clock, "test")["peaks"]}["float32"]["gflops"]
    assert rec.gflops["median"] <= 1.05 * peak, (rec.gflops, peak, clock)


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

    assert cli.main(["run", "--device", "cuda", "--quick", "--out", str(tmp_path)]) == 0
    (f,) = tmp_path.glob("*/rooflab-ceilings-cuda-*.json")
    d = load(f)
    assert d["status"] == "complete" and d["errors"] == [], d["errors"]
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
