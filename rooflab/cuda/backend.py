"""Probe cupy and the GPU once; describe devices; compute their theoretical peaks.

Theoretical peak = SMs x per-SM rate per clock x SM clock, printed with its formula. Per-SM rates
(published facts, SM_FACTS below): FP32 FMA lanes 64 (sm_80) or 128 (sm_86, sm_89, sm_90); FP64
FMA lanes 32 (sm_80), 64 (sm_90), 2 (consumer parts); dense FP16/BF16 tensor FLOP per clock 2048
(A100: 108 SMs x 1.41 GHz x 2048 = 312 TFLOP/s), 4096 (H100/H200 SXM: 132 x 1.83 GHz x 4096 = 989
TFLOP/s, reached only by wgmma; mma.sync, which rooflab uses, runs well below it), 512 on GeForce
sm_86/89 with FP32 accumulate (pro parts of those families have 1024: marked assumed).
Device-memory bandwidth = 2 x memory clock x bus width / 8.

The clock is the device's maximum SM clock (cudaDevAttrClockRate; CUDA 13 removed clockRate from
cudaDeviceProp) unless a measured one is given: the suite measures the SM clock during its compute
runs on the chip itself and reports every fraction against the peak at that clock.
"""

from __future__ import annotations

import functools

from ..errors import DeviceUnavailable, first_line

# per-SM throughput per clock, by compute capability (major, minor)
SM_FACTS = {
    (8, 0): {"fp32": 64, "fp64": 32, "tensor_fp16": 2048, "source": "NVIDIA A100 whitepaper"},
    (8, 6): {
        "fp32": 128,
        "fp64": 2,
        "tensor_fp16": 512,
        "assumed": "tensor rate of GeForce parts",
        "source": "NVIDIA Ampere GA10x whitepaper",
    },
    (8, 9): {
        "fp32": 128,
        "fp64": 2,
        "tensor_fp16": 512,
        "assumed": "tensor rate of GeForce parts",
        "source": "NVIDIA Ada whitepaper",
    },
    (9, 0): {"fp32": 128, "fp64": 64, "tensor_fp16": 4096, "source": "NVIDIA H100 whitepaper"},
}


@functools.lru_cache(maxsize=1)
def probe() -> tuple[bool, str]:
    """(usable, reason). Imports cupy lazily; catches every CUDA runtime error broadly
    (without a driver cupy raises cudaErrorInsufficientDriver, not cudaErrorNoDevice)."""
    try:
        import cupy  # noqa: F401
    except Exception as e:  # ImportError, or a broken CUDA install
        return False, f"cupy is not installed ({type(e).__name__}); install rooflab[cuda]"
    try:
        import cupy

        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:
        if not _driver_present():
            return False, "no NVIDIA driver on this machine (libcuda.so.1 cannot be loaded)"
        return False, f"no usable CUDA device ({first_line(e, 160)})"
    if n < 1:
        return False, "no CUDA device"
    return True, f"{n} CUDA device(s)"


def _driver_present() -> bool:
    import ctypes

    try:
        ctypes.CDLL("libcuda.so.1")
        return True
    except OSError:
        return False


def available() -> bool:
    return probe()[0]


def require(index: int = 0) -> None:
    ok, reason = probe()
    if not ok:
        raise DeviceUnavailable(
            f"--device cuda: {reason}",
            "run on a machine with an NVIDIA GPU and `pip install rooflab[cuda]`, or use --device cpu",
        )
    import cupy

    n = cupy.cuda.runtime.getDeviceCount()
    if not 0 <= index < n:
        raise DeviceUnavailable(
            f"CUDA device {index} does not exist (this machine has {n})", f"use a device index from 0 to {n - 1}"
        )


def describe(index: int = 0) -> dict:
    """Properties of one device plus theoretical peaks and, where NVML answers, clocks/temperature."""
    require(index)
    import cupy

    rt = cupy.cuda.runtime
    p = rt.getDeviceProperties(index)

    def attr(name):
        try:
            return int(rt.deviceGetAttribute(getattr(rt, name), index))
        except Exception:  # an attribute this cupy or driver does not know
            return 0

    name = p["name"].decode() if isinstance(p["name"], bytes) else str(p["name"])
    clock_khz = attr("cudaDevAttrClockRate") or int(p.get("clockRate", 0))
    mem_khz = attr("cudaDevAttrMemoryClockRate") or int(p.get("memoryClockRate", 0))
    dev = {
        "index": index,
        "name": name,
        "compute_capability": f"{p['major']}{p['minor']}",
        "sm_count": int(p["multiProcessorCount"]),
        "clock_ghz": clock_khz / 1e6 or None,
        "clock_source": "cudaDevAttrClockRate (maximum SM clock)",
        "memory_bytes": int(p["totalGlobalMem"]),
        "memory_clock_ghz": mem_khz / 1e6 or None,
        "memory_bus_bits": attr("cudaDevAttrGlobalMemoryBusWidth") or int(p.get("memoryBusWidth", 0)) or None,
        "l2_bytes": attr("cudaDevAttrL2CacheSize") or int(p.get("l2CacheSize", 0)),
        "shared_per_sm_bytes": int(p.get("sharedMemPerMultiprocessor", 0)),
        "shared_per_block_optin_bytes": attr("cudaDevAttrMaxSharedMemoryPerBlockOptin"),
        "driver_version": rt.driverGetVersion(),
        "runtime_version": rt.runtimeGetVersion(),
        "cupy_version": cupy.__version__,
    }
    dev.update(nvml_state(index))
    if dev.get("nvml_max_sm_clock_mhz") and not dev["clock_ghz"]:
        dev["clock_ghz"] = dev["nvml_max_sm_clock_mhz"] / 1000
        dev["clock_source"] = "NVML maximum SM clock"
    dev["theoretical"] = theoretical(dev)
    return dev


def theoretical(dev: dict, clock_ghz: float | None = None, clock_source: str | None = None) -> dict:
    """Peaks per dtype with their formula, at ``clock_ghz`` (default: the device's maximum clock)."""
    cc = dev["compute_capability"]
    facts = SM_FACTS.get((int(cc[:-1]), int(cc[-1])))
    ghz = clock_ghz or dev.get("clock_ghz")
    out = {
        "clock_ghz": ghz,
        "clock_source": clock_source or dev.get("clock_source"),
        "peaks": [],
        "source": facts["source"] if facts else f"no per-SM facts for sm_{cc}: no theoretical compute peak",
    }
    if facts and facts.get("assumed"):
        out["assumed"] = facts["assumed"]
    if facts and ghz:
        sms = dev["sm_count"]
        for dtype, key, what, flop in (
            ("float32", "fp32", "FP32 FMA/clk", 2),
            ("float64", "fp64", "FP64 FMA/clk", 2),
            ("float16", "tensor_fp16", "FP16 tensor FLOP/clk", 1),
            ("bfloat16", "tensor_fp16", "BF16 tensor FLOP/clk", 1),
        ):
            value = sms * facts[key] * flop * ghz
            out["peaks"].append(
                {
                    "dtype": dtype,
                    "threads": 0,
                    "unit": "GFLOP/s",
                    "gflops": value,
                    "formula": f"{sms} SMs x {facts[key]} {what}{' x 2 FLOP' if flop == 2 else ''}"
                    f" x {ghz:.3f} GHz = {value:.0f} GFLOP/s",
                }
            )
    if dev.get("memory_clock_ghz") and dev.get("memory_bus_bits"):
        bw = 2 * dev["memory_clock_ghz"] * dev["memory_bus_bits"] / 8
        out["memory_gbps"] = bw
        out["memory_formula"] = (
            f"2 x {dev['memory_clock_ghz']:.3f} GHz x {dev['memory_bus_bits']} bit / 8 = {bw:.0f} GB/s"
        )
    return out


def nvml_state(index: int) -> dict:
    """SM and memory clocks (current and maximum, MHz) and temperature from NVML; {} without it."""
    try:
        import pynvml as nvml  # nvidia-ml-py
    except Exception:
        try:
            from cupy_backends.cuda.libs import nvml  # type: ignore
        except Exception:
            return {}
    try:
        nvml.nvmlInit()
        h = nvml.nvmlDeviceGetHandleByIndex(index)
        return {
            "nvml_sm_clock_mhz": nvml.nvmlDeviceGetClockInfo(h, 1),
            "nvml_max_sm_clock_mhz": nvml.nvmlDeviceGetMaxClockInfo(h, 1),
            "nvml_memory_clock_mhz": nvml.nvmlDeviceGetClockInfo(h, 2),
            "nvml_temperature_c": nvml.nvmlDeviceGetTemperature(h, 0),
        }
    except Exception:
        return {}


def describe_all() -> dict:
    ok, reason = probe()
    if not ok:
        return {"devices": [], "reason": reason}
    import cupy

    return {"devices": [describe(i) for i in range(cupy.cuda.runtime.getDeviceCount())], "reason": reason}


def driver_backend():
    """The GPU backend of the one driver: CUDA events per sample, launches enqueued for
    ``target_s`` per sample (calibrated from one timed launch), and the SM clock the compute
    kernels measured on the chip during their last launch (``sm_clock``)."""
    from ..driver import Backend
    from . import knobs
    from . import timing as gtime

    def timer(call, budget_s, min_samples, flush=None):
        return gtime.time_gpu(call, budget_s=budget_s, min_samples=min_samples, flush=flush).seconds

    def calibrate(make_call, target_s):
        return gtime.repeats_for(make_call(1), target_s)

    def after(variant, inputs):
        if variant.family in ("fma", "tensor") and len(inputs) > 1:
            return {"sm_clock": knobs.measured_clock(inputs[1])}
        return None

    return Backend(device="cuda", timer=timer, calibrate=calibrate, after_verify=after)
