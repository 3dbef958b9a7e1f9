"""Probe cupy and the GPU once; describe devices; compute their theoretical peaks.

Theoretical peak = SMs x per-SM rate per clock x SM clock, printed with its formula. Per-SM rates
are published facts (SM_FACTS per compute capability, GPU_MODELS per product where one capability
covers parts with different rates): FP32 FMA lanes 64 (sm_80) or 128 (sm_86, sm_89, sm_90); FP64
FMA lanes 32 (A100), 64 (H100/H200), 2 (consumer parts, and the export-limited H800/H20); dense
FP16/BF16 tensor FLOP per clock with FP32 accumulate 2048 (A100: 108 SMs x 1.41 GHz x 2048 = 312
TFLOP/s), 4096 (H100/H200: 132 x 1.83 GHz x 4096 = 989 TFLOP/s, reached only by wgmma; mma.sync,
which rooflab also uses, runs well below it), 1024 (H20: 148 TFLOP/s on 78 SMs; A40, L40S), 512
on GeForce sm_86/89. A name not in GPU_MODELS gets its capability's rates marked "assumed".
Device-memory bandwidth = 2 x memory clock x bus width / 8.

The clock is the device's maximum SM clock (cudaDevAttrClockRate; CUDA 13 removed clockRate from
cudaDeviceProp) unless a measured one is given: the suite measures the SM clock during its compute
runs on the chip itself and reports every fraction against the peak at that clock.

NVML numbers devices its own way (PCI bus order), CUDA by speed unless CUDA_DEVICE_ORDER=PCI_BUS_ID,
and CUDA_VISIBLE_DEVICES renumbers CUDA's: NVML state is read from the device whose UUID (or PCI
bus id) CUDA reports for ``index``, never from NVML's device of the same index.
"""

from __future__ import annotations

import functools
import os
import re

from ..errors import DeviceUnavailable, first_line

# per-SM throughput per clock, by compute capability (major, minor): the rates of the part a
# capability is best known for; GPU_MODELS refines them by product name
SM_FACTS = {
    (8, 0): {"fp32": 64, "fp64": 32, "tensor_fp16": 2048, "source": "NVIDIA A100 whitepaper"},
    (8, 6): {"fp32": 128, "fp64": 2, "tensor_fp16": 512, "source": "NVIDIA Ampere GA10x whitepaper (GeForce)"},
    (8, 9): {"fp32": 128, "fp64": 2, "tensor_fp16": 512, "source": "NVIDIA Ada whitepaper (GeForce)"},
    (9, 0): {"fp32": 128, "fp64": 64, "tensor_fp16": 4096, "source": "NVIDIA H100 whitepaper"},
}

# (product, name pattern, capability, rates, source, assumed-or-None); first match wins. Rates are
# per SM per clock; each source's figure = SMs x rate x (2 for FMA lanes) x the datasheet clock.
GPU_MODELS = [
    (
        "A100/A800/A30",
        r"\b(A100|A800|A30)\b",
        (8, 0),
        {"fp32": 64, "fp64": 32, "tensor_fp16": 2048},
        "NVIDIA A100 whitepaper: 108 SMs x 1.41 GHz = 19.5 TFLOP/s FP32, 9.7 FP64, 312 FP16 tensor; "
        "A30 datasheet: 56 SMs x 1.44 GHz = 10.3 / 5.2 / 165",
        None,
    ),
    (
        "GeForce RTX 30",
        r"GeForce",
        (8, 6),
        {"fp32": 128, "fp64": 2, "tensor_fp16": 512},
        "NVIDIA GA102 whitepaper: RTX 3090 82 SMs x 1.695 GHz = 35.6 TFLOP/s FP32, 71 FP16 tensor (FP32 accumulate)",
        None,
    ),
    (
        "Ampere pro (A40, A10, RTX A6000)",
        r"\b(A40|A10|A16|A2|RTX A\d+)\b",
        (8, 6),
        {"fp32": 128, "fp64": 2, "tensor_fp16": 1024},
        "NVIDIA A40 datasheet: 84 SMs x 1.74 GHz = 37.4 TFLOP/s FP32, 149.7 FP16 tensor (dense)",
        None,
    ),
    (
        "GeForce RTX 40",
        r"GeForce",
        (8, 9),
        {"fp32": 128, "fp64": 2, "tensor_fp16": 512},
        "NVIDIA Ada whitepaper: RTX 4090 128 SMs x 2.52 GHz = 82.6 TFLOP/s FP32, 165.2 FP16 tensor (FP32 accumulate)",
        None,
    ),
    (
        "L40S",
        r"\bL40S\b",
        (8, 9),
        {"fp32": 128, "fp64": 2, "tensor_fp16": 1024},
        "NVIDIA L40S datasheet: 142 SMs x 2.52 GHz = 91.6 TFLOP/s FP32, 362 FP16 tensor (dense)",
        None,
    ),
    (
        "L40",
        r"\bL40\b",
        (8, 9),
        {"fp32": 128, "fp64": 2, "tensor_fp16": 512},
        "NVIDIA L40 datasheet: 142 SMs x 2.49 GHz = 90.5 TFLOP/s FP32, 181 FP16 tensor with FP32 accumulate",
        None,
    ),
    (
        "H800",
        r"\bH800\b",
        (9, 0),
        {"fp32": 128, "fp64": 2, "tensor_fp16": 4096},
        "NVIDIA H800 datasheet: FP64 1 TFLOP/s (SXM, 132 SMs) and 0.8 (PCIe, 114 SMs), FP32 and tensor as H100",
        None,
    ),
    (
        "H20",
        r"\bH20\b",
        (9, 0),
        {"fp32": 128, "fp64": 2, "tensor_fp16": 1024},
        "NVIDIA H20 (third-party copies of the datasheet): 78 SMs, 148 TFLOP/s FP16/BF16 tensor dense "
        "(= 78 x 1024 x ~1.85 GHz, consistent with its 74 TF32 and 296 INT8), 44 FP32, 1 FP64",
        "per-SM FP32/FP64 rates: the datasheet's 44 TFLOP/s FP32 and 1 FP64 are not reproducible from 78 "
        "GH100 SMs at 1.98 GHz (128 FP32 lanes give 39.5); the GH100 SM's 128 FP32 lanes and the H800's 2 "
        "FP64 lanes are used",
    ),
    (
        "H100/H200/GH200",
        r"\b(H100|H200|GH200)\b",
        (9, 0),
        {"fp32": 128, "fp64": 64, "tensor_fp16": 4096},
        "NVIDIA H100 whitepaper: SXM5 132 SMs = 66.9 TFLOP/s FP32 and 33.5 FP64 at 1.98 GHz, 989.4 FP16/BF16 "
        "tensor dense at 1.83 GHz; PCIe 114 SMs x 1.755 GHz = 51.2 FP32; H200 and GH200 are the same SM",
        None,
    ),
]


def sm_rates(name: str, cc: str) -> dict | None:
    """Per-SM rates for a device: {"fp32", "fp64", "tensor_fp16", "model", "source", "assumed"?}."""
    key = (int(cc[:-1]), int(cc[-1]))
    for product, pattern, cap, rates, source, assumed in GPU_MODELS:
        if cap == key and re.search(pattern, name or ""):
            out = {**rates, "model": product, "source": source}
            if assumed:
                out["assumed"] = assumed
            return out
    facts = SM_FACTS.get(key)
    if facts is None:
        return None
    return {
        **facts,
        "model": f"sm_{cc}",
        "assumed": f"{name!r} is not in rooflab's table of sm_{cc} parts: the rates of the capability's "
        f"reference part are used ({facts['source']})",
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
        if "InsufficientDriver" in f"{type(e).__name__} {e}":
            return False, _old_driver(cupy)
        return False, f"no usable CUDA device ({first_line(e, 160)})"
    if n < 1:
        return False, "no CUDA device"
    return True, f"{n} CUDA device(s)"


def _old_driver(cupy) -> str:
    """The driver is older than the CUDA runtime cupy was built for: both versions, when readable."""

    def version(fn):
        try:
            v = int(fn())
            return f"{v // 1000}.{v % 1000 // 10}"
        except Exception:
            return "?"

    rt = cupy.cuda.runtime
    return (
        f"the NVIDIA driver (CUDA {version(rt.driverGetVersion)}) is older than the CUDA runtime cupy "
        f"{cupy.__version__} was built for (CUDA {version(rt.runtimeGetVersion)}): update the driver or "
        "install the cupy wheel of the driver's CUDA major version"
    )


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
    uuid, bus = _uuid_string(p.get("uuid")), _pci_bus_id(p)
    if uuid:
        dev["uuid"] = uuid
    if bus:
        dev["pci_bus_id"] = bus
    dev.update(nvml_state(index))  # reads the properties again: tests/fake_gpu.py stubs nvml_state(index)
    if dev.get("nvml_max_sm_clock_mhz") and not dev["clock_ghz"]:
        dev["clock_ghz"] = dev["nvml_max_sm_clock_mhz"] / 1000
        dev["clock_source"] = "NVML maximum SM clock"
    dev["theoretical"] = theoretical(dev)
    return dev


def theoretical(dev: dict, clock_ghz: float | None = None, clock_source: str | None = None) -> dict:
    """Peaks per dtype with their formula, at ``clock_ghz`` (default: the device's maximum clock)."""
    cc = dev["compute_capability"]
    facts = sm_rates(dev.get("name", ""), cc)
    ghz = clock_ghz or dev.get("clock_ghz")
    out = {
        "clock_ghz": ghz,
        "clock_source": clock_source or dev.get("clock_source"),
        "peaks": [],
        "model": facts["model"] if facts else None,
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


def _uuid_string(raw) -> str | None:
    """cudaDeviceProp.uuid (16 raw bytes in cupy) -> NVML's 'GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx'."""
    if raw is None:
        return None
    if isinstance(raw, str):
        return raw if raw.startswith(("GPU-", "MIG-")) else None
    b = bytes(raw)
    if len(b) != 16 or not any(b):
        return None
    h = b.hex()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _pci_bus_id(props: dict) -> str | None:
    """cudaDeviceProp PCI domain/bus/device -> NVML's bus id form '00000000:3B:00.0'."""
    bus = props.get("pciBusID")
    if bus is None:
        return None
    return f"{int(props.get('pciDomainID') or 0):08X}:{int(bus):02X}:{int(props.get('pciDeviceID') or 0):02X}.0"


def _nvml_module():
    try:
        import pynvml as nvml  # nvidia-ml-py

        return nvml
    except Exception:
        try:
            from cupy_backends.cuda.libs import nvml  # type: ignore  # older cupy

            return nvml
        except Exception:
            return None


def nvml_handle(nvml, props: dict) -> tuple[object | None, str]:
    """NVML's handle for the CUDA device with ``props``, matched by UUID, else PCI bus id.

    Returns (handle, how): how is "uuid", "pci_bus_id", or why nothing matched. NVML's own index is
    used only when nothing renumbers CUDA's devices (no CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER
    PCI_BUS_ID, which is NVML's order)."""
    uuid = _uuid_string(props.get("uuid"))
    if uuid:
        try:
            return nvml.nvmlDeviceGetHandleByUUID(uuid), "uuid"
        except Exception:
            pass
    bus = _pci_bus_id(props)
    if bus:
        try:
            return nvml.nvmlDeviceGetHandleByPciBusId(bus), "pci_bus_id"
        except Exception:
            pass
    index = props.get("_cuda_index")
    if (
        index is not None
        and os.environ.get("CUDA_VISIBLE_DEVICES") is None
        and os.environ.get("CUDA_DEVICE_ORDER") == "PCI_BUS_ID"
    ):
        try:
            return nvml.nvmlDeviceGetHandleByIndex(index), "index (CUDA_DEVICE_ORDER=PCI_BUS_ID)"
        except Exception:
            pass
    return None, f"no NVML device with CUDA's UUID {uuid or '?'} or PCI bus id {bus or '?'}"


def nvml_state(index: int, props: dict | None = None) -> dict:
    """SM and memory clocks (current and maximum, MHz) and temperature from NVML, read from the same
    physical GPU as CUDA device ``index`` (matched by UUID or PCI bus id); {} without NVML, and only
    {"nvml_match": why} when no NVML device can be matched (never another GPU's figures)."""
    nvml = _nvml_module()
    if nvml is None:
        return {}
    try:
        if props is None:
            import cupy

            props = cupy.cuda.runtime.getDeviceProperties(index)
        nvml.nvmlInit()
    except Exception:
        return {}
    handle, how = nvml_handle(nvml, {**props, "_cuda_index": index})
    if handle is None:
        return {"nvml_match": how}
    try:
        return {
            "nvml_match": how,
            "nvml_sm_clock_mhz": nvml.nvmlDeviceGetClockInfo(handle, 1),
            "nvml_max_sm_clock_mhz": nvml.nvmlDeviceGetMaxClockInfo(handle, 1),
            "nvml_memory_clock_mhz": nvml.nvmlDeviceGetClockInfo(handle, 2),
            "nvml_temperature_c": nvml.nvmlDeviceGetTemperature(handle, 0),
        }
    except Exception:
        return {"nvml_match": how}


def describe_all() -> dict:
    ok, reason = probe()
    if not ok:
        return {"devices": [], "reason": reason}
    import cupy

    return {"devices": [describe(i) for i in range(cupy.cuda.runtime.getDeviceCount())], "reason": reason}


def driver_backend():
    """The GPU backend of the one driver: CUDA events per sample, repetitions calibrated so that one
    sample lasts ``target_s`` (rooflab.cuda.timing.repeats_for). What a kernel measured on the chip
    itself (the SM clock, the pointer chase's ns per hop) comes from the variant's own ``after_run``
    hook, never from a switch on family names here."""
    from ..backend import Backend
    from . import timing as gtime

    def timer(call, budget_s, min_samples, flush=None):
        return gtime.time_gpu(call, budget_s=budget_s, min_samples=min_samples, flush=flush).seconds

    def calibrate(make_call, target_s):
        return gtime.repeats_for(make_call, target_s)

    return Backend(device="cuda", timer=timer, calibrate=calibrate)
