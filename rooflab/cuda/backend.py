"""Probe cupy and the GPU once; describe devices; compute their theoretical peaks.

Theoretical peaks (formula shown in results): FP32 = SMs x 128 FP32 lanes x 2 x SM clock (sm_80
has 64 FP32 lanes/SM, sm_86+ and sm_90 128); FP64 = SMs x FP64 lanes x 2 x clock (sm_80/90: 32
lanes/SM, i.e. half of FP32 on GH100, a quarter on GA100's 64); dense FP16 tensor = SMs x dense
FP16 FLOP/clk/SM x clock (sm_80: 1024, sm_90: 2048 with wgmma; mma.sync reaches about 2/3 of that
on Hopper). HBM bandwidth = 2 x memory clock x bus width / 8.
"""
from __future__ import annotations

import functools

from ..errors import DeviceUnavailable

# per-SM throughput facts by compute capability (major, minor) -> per clock per SM
SM_FACTS = {
    (8, 0): {"fp32": 64, "fp64": 32, "fp16_tensor_dense": 1024, "source": "NVIDIA A100 whitepaper"},
    (8, 6): {"fp32": 128, "fp64": 2, "fp16_tensor_dense": 512, "source": "NVIDIA Ampere GA10x whitepaper"},
    (8, 9): {"fp32": 128, "fp64": 2, "fp16_tensor_dense": 512, "source": "NVIDIA Ada whitepaper"},
    (9, 0): {"fp32": 128, "fp64": 64, "fp16_tensor_dense": 2048, "source": "NVIDIA H100 whitepaper"},
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
        return False, f"no usable CUDA device ({_short(e)})"
    if n < 1:
        return False, "no CUDA device"
    return True, f"{n} CUDA device(s)"


def _short(e: Exception) -> str:
    text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return text[:160]


def available() -> bool:
    return probe()[0]


def require(index: int = 0) -> None:
    ok, reason = probe()
    if not ok:
        raise DeviceUnavailable(f"--device cuda: {reason}",
                                "run on a machine with an NVIDIA GPU and `pip install rooflab[cuda]`, or use --device cpu")
    import cupy

    n = cupy.cuda.runtime.getDeviceCount()
    if not 0 <= index < n:
        raise DeviceUnavailable(f"CUDA device {index} does not exist (this machine has {n})",
                                f"use a device index from 0 to {n - 1}")


def describe(index: int = 0) -> dict:
    """Properties of one device plus theoretical peaks and, where NVML answers, clocks/temperature."""
    require(index)
    import cupy

    rt = cupy.cuda.runtime
    p = rt.getDeviceProperties(index)
    name = p["name"].decode() if isinstance(p["name"], bytes) else str(p["name"])
    cc = (int(p["major"]), int(p["minor"]))
    clock_ghz = p.get("clockRate", 0) / 1e6  # kHz -> GHz (deprecated field in CUDA 13; may be 0)
    mem_clock_ghz = p.get("memoryClockRate", 0) / 1e6
    bus = int(p.get("memoryBusWidth", 0))
    dev = {
        "index": index, "name": name, "compute_capability": f"{cc[0]}{cc[1]}",
        "sm_count": int(p["multiProcessorCount"]), "clock_ghz": clock_ghz or None,
        "memory_bytes": int(p["totalGlobalMem"]), "memory_clock_ghz": mem_clock_ghz or None,
        "memory_bus_bits": bus or None, "l2_bytes": int(p.get("l2CacheSize", 0)),
        "shared_per_sm_bytes": int(p.get("sharedMemPerMultiprocessor", 0)),
        "driver_version": rt.driverGetVersion(), "runtime_version": rt.runtimeGetVersion(),
    }
    dev.update(_nvml(index))
    if dev.get("nvml_max_sm_clock_mhz") and not dev["clock_ghz"]:
        dev["clock_ghz"] = dev["nvml_max_sm_clock_mhz"] / 1000
    dev["theoretical"] = theoretical(dev)
    return dev


def theoretical(dev: dict, clock_ghz: float | None = None) -> dict:
    cc = dev["compute_capability"]
    facts = SM_FACTS.get((int(cc[:-1]), int(cc[-1])))
    ghz = clock_ghz or dev.get("clock_ghz")
    out = {"clock_ghz": ghz, "peaks": [], "source": facts["source"] if facts else "unknown architecture"}
    if facts and ghz:
        sms = dev["sm_count"]
        for dtype, key, unit in (("float32", "fp32", "FP32 lanes"), ("float64", "fp64", "FP64 lanes"),
                                 ("float16", "fp16_tensor_dense", "FP16 tensor FLOP/clk")):
            per = facts[key] * (2 if key != "fp16_tensor_dense" else 1)
            value = sms * per * ghz
            out["peaks"].append({"dtype": dtype, "threads": 0, "unit": "GFLOP/s", "gflops": value,
                                 "formula": f"{sms} SMs x {facts[key]} {unit}{' x 2' if key != 'fp16_tensor_dense' else ''}"
                                            f" x {ghz:.3f} GHz = {value:.0f} GFLOP/s"})
    if dev.get("memory_clock_ghz") and dev.get("memory_bus_bits"):
        bw = 2 * dev["memory_clock_ghz"] * dev["memory_bus_bits"] / 8
        out["memory_gbps"] = bw
        out["memory_formula"] = f"2 x {dev['memory_clock_ghz']:.3f} GHz x {dev['memory_bus_bits']} bit / 8 = {bw:.0f} GB/s"
    return out


def _nvml(index: int) -> dict:
    try:
        from cupy_backends.cuda.libs import nvml  # type: ignore
    except Exception:
        try:
            import pynvml as nvml  # type: ignore
        except Exception:
            return {}
    try:
        nvml.nvmlInit()
        h = nvml.nvmlDeviceGetHandleByIndex(index)
        out = {"nvml_sm_clock_mhz": nvml.nvmlDeviceGetClockInfo(h, 1),
               "nvml_max_sm_clock_mhz": nvml.nvmlDeviceGetMaxClockInfo(h, 1),
               "nvml_temperature_c": nvml.nvmlDeviceGetTemperature(h, 0)}
        return out
    except Exception:
        return {}


def describe_all() -> dict:
    ok, reason = probe()
    if not ok:
        return {"devices": [], "reason": reason}
    import cupy

    return {"devices": [describe(i) for i in range(cupy.cuda.runtime.getDeviceCount())], "reason": reason}
