"""What machine a result came from, and what its datasheet peak would be.

Everything is read from the system: CPU model and flags (py-cpuinfo), caches per level from sysfs
(never guessed from bandwidth plateaus), cores from the topology, memory from /proc/meminfo,
versions of the software in the loop, and the project's git commit.

The theoretical peak is cores x clock x FMA pipes x vector lanes x 2 FLOP. Two of those factors
are microarchitecture facts the OS does not expose (how many FMA pipes, how wide): they come from
``fma_units`` below, with the source of the fact recorded. The clock is the *measured* running
clock (kernels/cpu/clock.py), not the nominal one: on turbo-capable cores the nominal clock
understates the peak and makes good kernels look like 110-120% of "peak".
"""

from __future__ import annotations

import functools
import os
import platform
import re
import socket
import subprocess
import sys
from pathlib import Path

SYSFS_CPU = Path("/sys/devices/system/cpu")


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def parse_cpu_list(text: str) -> list[int]:
    """'0-3,8,10-11' -> [0, 1, 2, 3, 8, 10, 11]"""
    cpus: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            a, b = part.split("-")
            cpus.extend(range(int(a), int(b) + 1))
        else:
            cpus.append(int(part))
    return cpus


def parse_size_kib(text: str) -> int:
    """sysfs cache size ('48K', '2048K', '480M') -> bytes."""
    m = re.fullmatch(r"(\d+)\s*([KMG]?)", text.strip().upper())
    if not m:
        raise ValueError(f"unreadable cache size {text!r}")
    return int(m.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2)]


def usable_cpus() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return list(range(os.cpu_count() or 1))


def read_caches(root: Path = SYSFS_CPU, cpus: list[int] | None = None) -> list[dict]:
    """Data/unified caches per level from sysfs: size per instance, how many instances serve the
    usable CPUs, and which CPUs share one. Empty list where sysfs has no cache directory."""
    cpus = cpus if cpus is not None else usable_cpus()
    levels: dict[int, dict] = {}
    for cpu in cpus:
        base = root / f"cpu{cpu}" / "cache"
        if not base.is_dir():
            continue
        for idx in sorted(base.glob("index*")):
            ctype = _read(idx / "type")
            if ctype not in ("Data", "Unified"):
                continue
            level = int(_read(idx / "level") or 0)
            size = parse_size_kib(_read(idx / "size") or "0")
            shared = _read(idx / "shared_cpu_list") or str(cpu)
            entry = levels.setdefault(
                level,
                {"level": level, "type": ctype, "size_bytes": size, "instances": set(), "shared_cpu_lists": set()},
            )
            entry["instances"].add(shared)
            entry["shared_cpu_lists"].add(shared)
    out = []
    for level in sorted(levels):
        e = levels[level]
        shared_by = max(len(parse_cpu_list(s)) for s in e["shared_cpu_lists"])
        out.append(
            {
                "level": level,
                "name": f"L{level}",
                "type": e["type"],
                "size_bytes": e["size_bytes"],
                "instances": len(e["instances"]),
                "shared_by_cpus": shared_by,
                "private": shared_by == 1,
                "source": "sysfs",
            }
        )
    return out


def physical_cores(root: Path = SYSFS_CPU, cpus: list[int] | None = None) -> int:
    cpus = cpus if cpus is not None else usable_cpus()
    seen = set()
    for cpu in cpus:
        topo = root / f"cpu{cpu}" / "topology"
        pkg = _read(topo / "physical_package_id")
        core = _read(topo / "core_id")
        seen.add((pkg, core) if core is not None else ("cpu", cpu))
    return len(seen) or len(cpus)


def fma_units(vendor: str, family: int | None, model: int | None, flags: set[str]) -> dict:
    """FMA pipes per core and their width in bits, from published microarchitecture facts.

    Returns {"pipes", "width_bits", "source", "assumed"}; pipes is None when unknown."""
    has512 = "avx512f" in flags
    has256 = "avx2" in flags and "fma" in flags
    v = (vendor or "").lower()
    if "amd" in v:
        if family == 0x1A:
            return {
                "pipes": 2,
                "width_bits": 512 if has512 else 256,
                "assumed": False,
                "source": "AMD Zen 5: 2 FMA pipes, 512-bit datapath (Software Optimization Guide)",
            }
        if family == 0x19:
            return {
                "pipes": 2,
                "width_bits": 256,
                "assumed": False,
                "source": "AMD Zen 3/4: 2 FMA pipes of 256 bits (Zen 4 runs AVX-512 on them)",
            }
        if family == 0x17:
            if model is not None and model >= 0x30:
                return {"pipes": 2, "width_bits": 256, "assumed": False, "source": "AMD Zen 2: 2 x 256-bit FMA"}
            return {"pipes": 2, "width_bits": 128, "assumed": False, "source": "AMD Zen/Zen+: 2 x 128-bit FMA"}
    if "intel" in v:
        if has512:
            return {
                "pipes": 2,
                "width_bits": 512,
                "assumed": True,
                "source": "Intel AVX-512 server core: 2 x 512-bit FMA (ports 0+1 fused and port 5); "
                "some Xeon Silver/Bronze and client parts have 1",
            }
        if has256:
            return {
                "pipes": 2,
                "width_bits": 256,
                "assumed": False,
                "source": "Intel Haswell and later: 2 x 256-bit FMA (ports 0 and 1)",
            }
    if "aarch64" in platform.machine().lower() or "arm" in v:
        return {
            "pipes": None,
            "width_bits": None,
            "assumed": True,
            "source": "Arm core: FMA pipe count not known to rooflab",
        }
    if has256:
        return {"pipes": 2, "width_bits": 256, "assumed": True, "source": "AVX2+FMA x86 core, assumed 2 pipes"}
    return {"pipes": None, "width_bits": None, "assumed": True, "source": "unknown microarchitecture"}


def theoretical_peak(cores: int, ghz: float, units: dict, itemsize: int) -> dict | None:
    """cores x GHz x pipes x lanes x 2, with the formula spelled out."""
    if not units.get("pipes") or not units.get("width_bits") or not ghz:
        return None
    lanes = units["width_bits"] // (8 * itemsize)
    per_cycle = units["pipes"] * lanes * 2
    value = cores * ghz * per_cycle
    return {
        "gflops": value,
        "flop_per_cycle_per_core": per_cycle,
        "formula": f"{cores} cores x {ghz:.3f} GHz x {units['pipes']} FMA pipes x {lanes} lanes x 2 "
        f"= {value:.1f} GFLOP/s",
        "assumed_units": units.get("assumed", True),
    }


@functools.lru_cache(maxsize=1)
def _cpuinfo() -> dict:
    try:
        import cpuinfo

        return cpuinfo.get_cpu_info()
    except Exception:  # pragma: no cover - py-cpuinfo fails on exotic systems
        return {}


def _nominal_ghz(info: dict) -> tuple[float | None, str]:
    base = _read(SYSFS_CPU / "cpu0" / "cpufreq" / "base_frequency")
    if base:
        return int(base) / 1e6, "sysfs cpufreq base_frequency"
    adv = info.get("hz_advertised")
    if adv and adv[0]:
        return adv[0] / 1e9, "CPU brand string / cpuid"
    act = info.get("hz_actual")
    if act and act[0]:
        return act[0] / 1e9, "/proc/cpuinfo cpu MHz (TSC on VMs)"
    return None, "unknown"


def memory_bytes() -> int | None:
    from .memory import meminfo

    return meminfo("MemTotal")


def git_commit() -> dict:
    """Commit of the source tree rooflab runs from (None outside a git checkout)."""
    env = os.environ.get("ROOFLAB_COMMIT")
    if env:
        return {"commit": env, "dirty": None, "source": "ROOFLAB_COMMIT"}
    here = Path(__file__).resolve().parent.parent
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5)
        if commit.returncode != 0:
            return {"commit": None, "dirty": None, "source": "not a git checkout"}
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=here,
            capture_output=True,
            text=True,
            timeout=5,
        )
        return {"commit": commit.stdout.strip(), "dirty": bool(dirty.stdout.strip()), "source": "git"}
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None, "source": "git not available"}


def software_versions() -> dict:
    import numpy

    out = {
        "python": platform.python_version(),
        "python_impl": platform.python_implementation(),
        "numpy": numpy.__version__,
    }
    try:
        import llvmlite
        import numba

        out["numba"] = numba.__version__
        out["llvmlite"] = llvmlite.__version__
        out["numba_threading_layer"] = os.environ.get("NUMBA_THREADING_LAYER", "default")
    except ImportError:  # pragma: no cover
        pass
    try:
        from threadpoolctl import threadpool_info

        out["blas"] = [
            {k: d.get(k) for k in ("internal_api", "version", "architecture", "threading_layer", "num_threads")}
            for d in threadpool_info()
            if d.get("user_api") == "blas"
        ]
    except Exception:  # pragma: no cover
        out["blas"] = []
    from . import _numba_env

    out["vector_policy"] = _numba_env.VECTOR_NOTE
    out["env"] = {
        k: os.environ.get(k)
        for k in ("OMP_WAIT_POLICY", "OPENBLAS_THREAD_TIMEOUT", "OPENBLAS_CORETYPE", "OMP_NUM_THREADS")
        if os.environ.get(k) is not None
    }
    return out


def slug(text: str) -> str:
    s = re.sub(r"\((r|tm)\)", "", text.lower())
    s = re.sub(r"\b(processor|cpu|with|radeon graphics)\b", " ", s)
    s = re.sub(r"[^a-z0-9]+", "-", s).strip("-")
    return re.sub(r"-+", "-", s) or "machine"


def describe_cpu() -> dict:
    """The CPU side of the machine description (no measurement)."""
    info = _cpuinfo()
    cpus = usable_cpus()
    flags = set(info.get("flags", []))
    vendor = info.get("vendor_id_raw", "") or ""
    family = info.get("family")
    model = info.get("model")
    units = fma_units(vendor, family, model, flags)
    nominal, nominal_src = _nominal_ghz(info)
    cores = physical_cores(cpus=cpus)
    simd = sorted(
        f for f in flags if f in ("sse4_2", "avx", "avx2", "fma") or f.startswith("avx512") or f.startswith("amx")
    )
    brand = info.get("brand_raw") or platform.processor() or platform.machine()
    return {
        "model": brand,
        "vendor": vendor,
        "family": family,
        "model_number": model,
        "arch": platform.machine(),
        "usable_cpus": cpus,
        "logical_cpus": len(cpus),
        "physical_cores": cores,
        "simd": simd,
        "caches": read_caches(cpus=cpus),
        "fma_units": units,
        "nominal_ghz": nominal,
        "nominal_ghz_source": nominal_src,
        "hypervisor": "hypervisor" in flags,
    }


def describe(measured_ghz: float | None = None) -> dict:
    """Whole machine description, as stored in every result file."""
    cpu = describe_cpu()
    host = socket.gethostname()
    out = {
        "id": os.environ.get("ROOFLAB_MACHINE") or f"{slug(cpu['model'])}-{cpu['physical_cores']}c",
        "hostname": host,
        "os": f"{platform.system()} {platform.release()}",
        "platform": platform.platform(),
        "memory_bytes": memory_bytes(),
        "cpu": cpu,
        "software": software_versions(),
        "git": git_commit(),
        "command": " ".join([Path(sys.argv[0]).name] + sys.argv[1:]),
    }
    if measured_ghz:
        out["cpu"]["measured_ghz"] = measured_ghz
    out["cpu"]["theoretical"] = peaks_for(cpu, measured_ghz)
    return out


def peaks_for(cpu: dict, measured_ghz: float | None) -> dict:
    """Theoretical FP64/FP32 peaks at 1 core and all cores, at the measured clock when known."""
    ghz = measured_ghz or cpu.get("nominal_ghz")
    clock_src = "measured running clock" if measured_ghz else f"nominal clock ({cpu.get('nominal_ghz_source')})"
    out = {"clock_ghz": ghz, "clock_source": clock_src, "peaks": []}
    for dtype, itemsize in (("float64", 8), ("float32", 4)):
        for threads in sorted({1, cpu["physical_cores"]}):
            p = theoretical_peak(threads, ghz, cpu["fma_units"], itemsize)
            if p:
                out["peaks"].append({"dtype": dtype, "threads": threads, **p})
    return out
