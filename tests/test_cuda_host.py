"""The host side of the CUDA backend, without a GPU: how a missing cupy, driver or device is
reported, that launch errors are named and recorded while the suite goes on, the SM clock probe's
arithmetic, and how GPU ceilings and peer ratios are derived from records."""

import sys

import numpy as np
import pytest

from rooflab import cli
from rooflab import suite_cuda as suite
from rooflab.cuda import backend, compiler, loader
from rooflab.cuda import knobs as cv
from rooflab.errors import DeviceUnavailable, RooflabError

HAS_GPU = backend.probe()[0]


@pytest.fixture
def no_cupy(monkeypatch):
    for name in [m for m in sys.modules if m.split(".")[0] in ("cupy", "cupyx", "cupy_backends")] + ["cupy"]:
        monkeypatch.setitem(sys.modules, name, None)  # `import cupy` (and its submodules) raise ImportError
    backend.probe.cache_clear()
    yield
    backend.probe.cache_clear()


def test_without_cupy_every_entry_point_says_so(no_cupy, capsys):
    ok, why = backend.probe()
    assert not ok and "cupy is not installed" in why
    with pytest.raises(DeviceUnavailable, match="cupy is not installed"):
        backend.require(0)
    with pytest.raises(DeviceUnavailable, match="NVRTC"):
        compiler.build("launch.cu", "sm_90")
    assert backend.describe_all() == {"devices": [], "reason": why}
    assert cli.main(["run", "--device", "cuda"]) == 2
    err = capsys.readouterr().err.strip()
    assert "cupy is not installed" in err and "\n" not in err


def test_device_all_runs_the_cpu_first_then_the_gpu(no_cupy):
    """Without cupy the GPU part is one line and exit 2 after the CPU results (issue 25; the run
    itself is tests/test_cuda_bad_input.py::test_device_all_keeps_the_cpu_results)."""
    from rooflab.choices import devices as _devices

    assert _devices("all") == ["cpu", "cuda"]


@pytest.mark.skipif(HAS_GPU, reason="this machine has a GPU")
def test_no_device_is_one_line_with_the_reason(capsys):
    pytest.importorskip("cupy")
    ok, why = backend.probe()
    assert not ok and ("driver" in why or "device" in why)
    assert cli.main(["run", "--device", "cuda", "--quick"]) == 2
    err = capsys.readouterr().err.strip()
    assert why in err and "\n" not in err and "--device cpu" in err


def test_launch_errors_are_named():
    def bad_launch(grid, block, args, shared_mem=0):
        raise _cuda_error(700)

    with pytest.raises(RooflabError, match=r"stream_triad: launch failed: (cudaErrorIllegalAddress|.*700)"):
        loader.launch(bad_launch, 1, 32, (), "stream_triad")

    def not_cuda(*a, **k):
        raise ValueError("bad argument")

    with pytest.raises(RooflabError, match="ValueError: bad argument"):
        loader.launch(not_cuda, 1, 32, (), "k")


class _Writer:
    def __init__(self):
        self.data = {"errors": [], "records": []}

    def add_error(self, where, message):
        self.data["errors"].append({"label": where, "error": message})


def test_a_failure_is_recorded_and_the_suite_goes_on():
    w = _Writer()
    ran = []

    def raises_cuda():
        raise _cuda_error(700)

    def raises_ours():
        raise RooflabError("tensor.cu failed to compile with NVRTC 13.0 for sm_90:\nerror line")

    for label, fn in (("HBM read", raises_cuda), ("compile", raises_ours), ("next", lambda: ran.append(1))):
        suite.guarded(w, label, fn)
    assert ran == [1]
    labels = [e["label"] for e in w.data["errors"]]
    assert labels == ["HBM read", "compile"]
    assert "cudaErrorIllegalAddress" in w.data["errors"][0]["error"] or "700" in w.data["errors"][0]["error"]
    assert "error line" in w.data["errors"][1]["error"]


def _cuda_error(status):
    try:
        from cupy_backends.cuda.api.runtime import CUDARuntimeError

        return CUDARuntimeError(status)
    except Exception:  # no cupy: an exception of the same shape
        return RuntimeError(f"cudaErrorIllegalAddress: an illegal memory access was encountered ({status})")


def test_measured_clock_from_cycles_and_ns():
    clk = np.array([1_980_000, 1_000_000, 2_000_000, 1_000_000, 0, 0], dtype=np.uint64)  # 1.98, 2.0, unused
    c = cv.measured_clock(clk)
    assert c["blocks"] == 2
    assert c["ghz"] == pytest.approx(3_980_000 / 2_000_000)
    assert c["min_block_ghz"] == pytest.approx(1.98) and c["max_block_ghz"] == pytest.approx(2.0)
    assert cv.measured_clock(np.zeros(8, dtype=np.uint64)) is None


H200_LIKE = {
    "index": 0,
    "name": "test GPU",
    "compute_capability": "90",
    "sm_count": 132,
    "clock_ghz": 1.98,
    "clock_source": "cudaDevAttrClockRate",
    "memory_clock_ghz": 2.619,
    "memory_bus_bits": 6144,
}


def _gflops(v):
    return {"median": v, "p20": v * 0.99, "p80": v * 1.01, "min": v * 0.98, "max": v * 1.02}


def test_theoretical_peaks_and_formula():
    t = backend.theoretical(H200_LIKE)
    peaks = {p["dtype"]: p for p in t["peaks"]}
    assert peaks["float32"]["gflops"] == pytest.approx(132 * 128 * 2 * 1.98)
    assert peaks["float64"]["gflops"] == pytest.approx(132 * 64 * 2 * 1.98)
    assert peaks["float16"]["gflops"] == pytest.approx(132 * 4096 * 1.98)
    assert "132 SMs x 128 FP32 FMA/clk x 2 FLOP x 1.980 GHz" in peaks["float32"]["formula"]
    assert t["memory_gbps"] == pytest.approx(2 * 2.619 * 6144 / 8)
    assert backend.theoretical({**H200_LIKE, "compute_capability": "75"})["peaks"] == []


def test_derive_uses_the_measured_clock_and_names_the_peers():
    gpu = {**H200_LIKE, "theoretical": backend.theoretical(H200_LIKE)}
    at_measured = 132 * 128 * 2 * 1.755
    recs = [
        {
            "variant": "cuda.fma.f32",
            "family": "fma",
            "dtype": "float32",
            "status": "ok",
            "gflops": _gflops(0.95 * at_measured),
            "sm_clock": {"ghz": 1.755},
        },
        {
            "variant": "cuda.fma.f64",
            "family": "fma",
            "dtype": "float64",
            "status": "ok",
            "gflops": _gflops(30000.0),
            "sm_clock": {"ghz": 9.0},
        },  # implausible: falls back to the maximum clock
        {
            "variant": "cuda.mma.f16",
            "family": "tensor",
            "dtype": "float32",
            "status": "ok",
            "gflops": _gflops(600e3),
            "sm_clock": None,
        },
        {
            "variant": "cuda.wgmma.f16",
            "family": "tensor",
            "dtype": "float32",
            "status": "ok",
            "gflops": _gflops(900e3),
            "sm_clock": {"ghz": 1.98},
        },
        {
            "variant": "peer.cublas",
            "family": "peer",
            "kernel": "cublas",
            "label": "cuBLAS fp16 matmul 8192",
            "status": "ok",
            "gflops": _gflops(750e3),
        },
        {
            "variant": "cuda.stream.copy",
            "family": "stream",
            "kernel": "copy",
            "level": "HBM",
            "status": "ok",
            "working_set_bytes": 1 << 30,
            "gbps": _gflops(4200.0),
        },
        {
            "variant": "peer.copy",
            "family": "peer",
            "kernel": "cupy-copy",
            "level": "HBM",
            "status": "ok",
            "working_set_bytes": 1 << 30,
            "gbps": _gflops(4000.0),
        },
        {"variant": "cuda.stream.read", "family": "stream", "kernel": "read", "level": "HBM", "status": "failed"},
    ]
    data = {"records": recs, "machine": {"gpu": gpu}}
    ceilings = {c["name"]: c for c in suite.derive(data)}
    f32 = ceilings["float32 FMA peak"]
    assert f32["theoretical_clock"] == "measured" and f32["theoretical_clock_ghz"] == 1.755
    assert f32["fraction_of_theoretical"] == pytest.approx(0.95)
    assert f32["fraction_of_theoretical_at_max_clock"] == pytest.approx(0.95 * 1.755 / 1.98)
    f64 = ceilings["float64 FMA peak"]
    assert f64["theoretical_clock"] == "maximum" and "implausible" in f64["sm_clock_rejected"]
    assert ceilings["float16 tensor-core peak (mma.sync)"]["fraction_of_theoretical"] == pytest.approx(
        600e3 / (132 * 4096 * 1.98)
    )
    assert ceilings["float16 tensor-core peak (wgmma)"]["theoretical_clock"] == "measured"
    assert "HBM read bandwidth" not in ceilings  # a failed record gives no figure
    ratios = {r["what"]: r["ratio"] for r in data["peer_ratios"]}
    assert ratios["HBM copy vs cupy copy (1024 MiB)"] == pytest.approx(4200 / 4000)
    assert ratios["mma.sync fp16 vs cuBLAS fp16 matmul 8192"] == pytest.approx(0.8)
    assert ratios["wgmma fp16 vs cuBLAS fp16 matmul 8192"] == pytest.approx(1.2)
    suite.derive(data)
    assert len(data["peer_ratios"]) == 3  # deriving again does not duplicate


def test_plan_sizes_follow_the_device():
    dev = {"l2_bytes": 60 << 20}
    quick, full = suite.Plan(dev, 140 << 30, True), suite.Plan(dev, 140 << 30, False)
    assert all(s >= 8 * (60 << 20) for s in full.hbm_sizes) and max(full.hbm_sizes) <= 8 << 30
    assert len(quick.hbm_sizes) <= 2 and max(quick.hbm_sizes) <= 2 << 30

    def labels(plan):
        writer = type("W", (), {"data": {"machine": {"gpu": {**dev, "index": 0}}, "notes": []}})()
        writer.add_record = lambda *a, **k: None
        return [label for label, _ in suite.steps(writer, plan)]

    assert len(labels(full)) > len(labels(quick)) > len(suite.Plan.INTENSITIES)
    hopper = suite.Plan({**dev, "compute_capability": "90"}, 140 << 30, True)
    assert hopper.hopper and labels(hopper) == labels(quick) + list(suite.HOPPER)  # wgmma last
    small = suite.Plan(dev, 1 << 30, False)  # a small card: nothing above 60% of free memory
    assert max(small.hbm_sizes) <= 0.6 * (1 << 30)


# Published peaks, TFLOP/s, with the SM count and the clock the publisher used. Each figure must
# come out of SMs x the per-SM rate x that clock within 3 %. (NVIDIA quotes Hopper's tensor peaks
# at a lower clock than its FP32/FP64 ones: 1.83 vs 1.98 GHz on the SXM5 part.)
# fmt: off
PUBLISHED_GPU = [
    # (name, cc, SMs, GHz, dtype, TFLOP/s, source)
    ("NVIDIA A100-SXM4-80GB", "80", 108, 1.41, "float32", 19.5, "A100 whitepaper"),
    ("NVIDIA A100-SXM4-80GB", "80", 108, 1.41, "float64", 9.7, "A100 whitepaper"),
    ("NVIDIA A100-SXM4-80GB", "80", 108, 1.41, "float16", 312, "A100 whitepaper (dense)"),
    ("NVIDIA A30", "80", 56, 1.44, "float16", 165, "A30 datasheet (dense)"),
    ("NVIDIA GeForce RTX 3090", "86", 82, 1.695, "float32", 35.6, "GA102 whitepaper"),
    ("NVIDIA GeForce RTX 3090", "86", 82, 1.695, "float16", 71, "GA102 whitepaper, FP32 accumulate"),
    ("NVIDIA A40", "86", 84, 1.74, "float16", 149.7, "A40 datasheet (dense)"),
    ("NVIDIA GeForce RTX 4090", "89", 128, 2.52, "float16", 165.2, "Ada whitepaper, FP32 accumulate"),
    ("NVIDIA L40S", "89", 142, 2.52, "float16", 362, "L40S datasheet (dense)"),
    ("NVIDIA H100 80GB HBM3", "90", 132, 1.98, "float32", 66.9, "H100 whitepaper (SXM5)"),
    ("NVIDIA H100 80GB HBM3", "90", 132, 1.98, "float64", 33.5, "H100 whitepaper (SXM5)"),
    ("NVIDIA H100 80GB HBM3", "90", 132, 1.83, "float16", 989.4, "H100 whitepaper (SXM5, dense)"),
    ("NVIDIA H100 80GB HBM3", "90", 132, 1.83, "bfloat16", 989.4, "H100 whitepaper (SXM5, dense)"),
    ("NVIDIA H100 PCIe", "90", 114, 1.755, "float32", 51.2, "H100 PCIe datasheet (51 TFLOP/s)"),
    ("NVIDIA H100 PCIe", "90", 114, 1.755, "float64", 25.6, "H100 PCIe datasheet (26 TFLOP/s)"),
    ("NVIDIA H200", "90", 132, 1.83, "float16", 989.4, "H200 datasheet (1,979 sparse)"),
    ("NVIDIA H800", "90", 132, 1.98, "float64", 1.0, "H800 datasheet: FP64 1 TFLOP/s"),
    ("NVIDIA H800", "90", 132, 1.83, "float16", 989.4, "H800 datasheet (1,979 sparse)"),
    ("NVIDIA H800 PCIe", "90", 114, 1.755, "float64", 0.8, "H800 PCIe datasheet: FP64 0.8 TFLOP/s"),
    ("NVIDIA H20", "90", 78, 1.83, "float16", 148, "H20 datasheet: 148 TFLOP/s FP16 dense"),
]
# fmt: on


@pytest.mark.parametrize("name,cc,sms,ghz,dtype,tflops,source", PUBLISHED_GPU)
def test_gpu_rates_match_published_figures(name, cc, sms, ghz, dtype, tflops, source):
    dev = {"name": name, "compute_capability": cc, "sm_count": sms, "clock_ghz": ghz}
    peaks = {p["dtype"]: p["gflops"] for p in backend.theoretical(dev)["peaks"]}
    assert peaks[dtype] / 1e3 == pytest.approx(tflops, rel=0.05 if tflops < 2 else 0.03), source


def test_every_sm90_part_gets_its_own_rates_and_unknown_names_say_assumed():
    def tensor_per_sm(name):
        return backend.sm_rates(name, "90")["tensor_fp16"]

    assert tensor_per_sm("NVIDIA H100 80GB HBM3") == tensor_per_sm("NVIDIA H200") == 4096
    assert tensor_per_sm("NVIDIA H20") == 1024  # far fewer tensor FLOPs than an H100
    assert (
        backend.sm_rates("NVIDIA H800", "90")["fp64"] == 2 and backend.sm_rates("NVIDIA H100 PCIe", "90")["fp64"] == 64
    )
    for name in ("NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe", "NVIDIA H100 NVL", "NVIDIA H200", "NVIDIA GH200 480GB"):
        assert "assumed" not in backend.sm_rates(name, "90"), name
    assert "assumed" in backend.sm_rates("NVIDIA H20", "90")  # its FP32/FP64 datasheet figures do not add up
    t = backend.theoretical(
        {"name": "NVIDIA H-something new", "compute_capability": "90", "sm_count": 132, "clock_ghz": 1.98}
    )
    assert "not in rooflab's table" in t["assumed"] and t["peaks"]
    assert backend.sm_rates("NVIDIA B200", "100") is None


class _FakeNvml:
    """Two GPUs where NVML's index 0 is NOT CUDA's device 0 (CUDA_VISIBLE_DEVICES=1)."""

    GPUS = {
        "GPU-00000000-0000-0000-0000-00000000000a": {"bus": "00000000:3B:00.0", "sm": 1410, "temp": 30},
        "GPU-00000000-0000-0000-0000-00000000000b": {"bus": "00000000:86:00.0", "sm": 1980, "temp": 70},
    }
    ORDER = list(GPUS)

    def __init__(self, uuid_works=True):
        self.uuid_works = uuid_works

    def nvmlInit(self):
        pass

    def nvmlDeviceGetHandleByIndex(self, i):
        return self.ORDER[i]

    def nvmlDeviceGetHandleByUUID(self, uuid):
        if not self.uuid_works or uuid not in self.GPUS:
            raise RuntimeError("NVML_ERROR_NOT_FOUND")
        return uuid

    def nvmlDeviceGetHandleByPciBusId(self, bus):
        for u, g in self.GPUS.items():
            if g["bus"] == bus:
                return u
        raise RuntimeError("NVML_ERROR_NOT_FOUND")

    def nvmlDeviceGetClockInfo(self, h, kind):
        return self.GPUS[h]["sm"] if kind == 1 else 2619

    def nvmlDeviceGetMaxClockInfo(self, h, kind):
        return self.GPUS[h]["sm"]

    def nvmlDeviceGetTemperature(self, h, sensor):
        return self.GPUS[h]["temp"]


# CUDA device 0 under CUDA_VISIBLE_DEVICES=1: the second GPU (as cupy's getDeviceProperties gives it)
CUDA0_PROPS = {"uuid": bytes.fromhex("00" * 15 + "0b"), "pciBusID": 0x86, "pciDomainID": 0, "pciDeviceID": 0}


@pytest.mark.parametrize("uuid_works,how", [(True, "uuid"), (False, "pci_bus_id")])
def test_nvml_reads_the_gpu_cuda_means_not_nvml_s_same_index(monkeypatch, uuid_works, how):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    monkeypatch.setitem(sys.modules, "pynvml", _FakeNvml(uuid_works))
    s = backend.nvml_state(0, CUDA0_PROPS)
    assert s["nvml_match"] == how
    assert s["nvml_max_sm_clock_mhz"] == 1980 and s["nvml_temperature_c"] == 70  # not NVML device 0's 1410 / 30


def test_nvml_unmatched_device_gives_no_figures(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    monkeypatch.setitem(sys.modules, "pynvml", _FakeNvml())
    s = backend.nvml_state(0, {"uuid": bytes(range(1, 17)), "pciBusID": 0x99})
    assert "nvml_sm_clock_mhz" not in s and "no NVML device" in s["nvml_match"]
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")  # then CUDA's and NVML's indices agree
    assert backend.nvml_state(1, {"pciBusID": 0x99})["nvml_max_sm_clock_mhz"] == 1980


def test_uuid_and_bus_id_formats():
    assert (
        backend._uuid_string(bytes.fromhex("3b9d0cd0c7a7f3e1c2d0a1b2c3d4e5f6"))
        == "GPU-3b9d0cd0-c7a7-f3e1-c2d0-a1b2c3d4e5f6"
    )
    assert backend._uuid_string(b"\0" * 16) is None and backend._uuid_string(None) is None
    assert backend._pci_bus_id({"pciBusID": 0x3B, "pciDomainID": 0, "pciDeviceID": 0}) == "00000000:3B:00.0"
