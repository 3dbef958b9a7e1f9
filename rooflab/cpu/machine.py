"""The CPU's description and its datasheet peak: what a result's ``machine.cpu`` holds.

Everything is read from the system: CPU model and flags (py-cpuinfo), caches per level from sysfs
(never guessed from bandwidth plateaus), cores from the topology, memory from /proc/meminfo.

The theoretical peak is cores x clock x FMA pipes x vector lanes x 2 FLOP. Two of those factors
are microarchitecture facts the OS does not expose (how many FMA pipes, how wide): they come from
``fma_units`` below (table UARCH: Zen 4 16 FP64 FLOP/cycle, Zen 5 desktop 32, Strix Point 16,
Skylake-SP Gold 6 32, Silver 16, Gracemont 8, ...), with the source and whether it is assumed
recorded. The clock is the *measured* running clock (rooflab/cpu/clock.py), not the nominal one:
on turbo-capable cores the nominal clock understates the peak and makes good kernels look like
110-120% of "peak". Each thread count gets its peak at its own clock (``peaks_at_clocks``): all
cores busy run slower than one. The GPU's counterpart is rooflab/cuda/backend.py (describe,
theoretical).
"""

from __future__ import annotations

import functools
import os
import platform
import re
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


# ---- FMA units per core, by microarchitecture ----------------------------------------------------
#
# FLOP/cycle/core = pipes x (width / element bits) x 2. ``datapath`` is the native width of one FMA
# pipe; wider instructions are split (Zen 4 and Strix Point run a 512-bit FMA as two 256-bit halves,
# Gracemont a 256-bit one as two 128-bit halves), so the FLOP per cycle stays that of the datapath.
# Intel cores from Skylake-SP on fuse ports 0+1 into one 512-bit FMA and may add a second one on
# port 5: ``pipes512`` says how many 512-bit FMAs a core issues per cycle (1 or 2, by SKU on
# Skylake-SP/Cascade Lake). ``assumed`` entries are not certain for every part they cover; the
# reason is kept in the record. Figures checked in tests/test_machine.py against published ones.
UARCH = {
    # AMD
    "zen": {
        "pipes": 2,
        "datapath": 128,
        "source": "AMD Zen/Zen+: 2 x 128-bit FMA (WikiChip 'flops': 8 FP64 FLOP/cycle)",
    },
    "zen2": {
        "pipes": 2,
        "datapath": 256,
        "source": "AMD Zen 2: 2 x 256-bit FMA (WikiChip 'flops': 16 FP64 FLOP/cycle)",
    },
    "zen3": {
        "pipes": 2,
        "datapath": 256,
        "source": "AMD Zen 3: 2 x 256-bit FMA (WikiChip 'flops': 16 FP64 FLOP/cycle)",
    },
    "zen4": {
        "pipes": 2,
        "datapath": 256,
        "source": "AMD Zen 4: 2 x 256-bit FMA pipes; AVX-512 runs double-pumped on them, so 512-bit code "
        "gets the same 16 FP64 FLOP/cycle as AVX2 (AMD Zen 4 disclosure; Chips and Cheese)",
    },
    "zen5": {
        "pipes": 2,
        "datapath": 512,
        "source": "AMD Zen 5 (desktop/server: Granite Ridge, Turin, Strix Halo): 2 x 512-bit FMA, full-width "
        "AVX-512 datapath, 32 FP64 FLOP/cycle (AMD Zen 5 tech day; Chips and Cheese)",
    },
    "zen5-mobile": {
        "pipes": 2,
        "datapath": 256,
        "source": "AMD Zen 5 mobile (Strix Point, Krackan Point): 256-bit FMA datapath, AVX-512 double-pumped, "
        "16 FP64 FLOP/cycle (Chips and Cheese, 'AMD's Strix Point: Zen 5 Hits Mobile')",
    },
    # Intel big cores
    "sandybridge": {
        "pipes": 1,
        "datapath": 256,
        "fma": False,
        "source": "Intel Sandy/Ivy Bridge: 1 x 256-bit multiply + 1 x 256-bit add, no FMA: 8 FP64 FLOP/cycle, "
        "counted here as one FMA pipe (WikiChip 'flops')",
    },
    "haswell": {
        "pipes": 2,
        "datapath": 256,
        "source": "Intel Haswell to Comet Lake: 2 x 256-bit FMA on ports 0 and 1, 16 FP64 FLOP/cycle (WikiChip 'flops')",
    },
    "skylake-server": {
        "pipes": 2,
        "datapath": 256,
        "pipes512": 2,
        "source": "Intel Skylake-SP/Cascade Lake: 512-bit FMA on ports 0+1 fused plus one on port 5 on Platinum, "
        "Gold 6xxx, Gold 5122/5222; Gold 5xxx, Silver and Bronze have only the first (Intel ARK '# of AVX-512 FMA "
        "Units'; WikiChip 'flops': 32 FP64 FLOP/cycle with 2)",
    },
    "icelake-server": {
        "pipes": 2,
        "datapath": 256,
        "pipes512": 2,
        "source": "Intel Ice Lake-SP: 2 x 512-bit FMA on every SKU of the family, 32 FP64 FLOP/cycle "
        "(ServeTheHome, Ice Lake Xeon launch)",
    },
    "goldencove-server": {
        "pipes": 2,
        "datapath": 256,
        "pipes512": 2,
        "source": "Intel Golden Cove server core (Sapphire/Emerald/Granite Rapids): 2 x 512-bit FMA "
        "(ports 0+1 fused and port 5), 32 FP64 FLOP/cycle",
    },
    "client-avx512": {
        "pipes": 2,
        "datapath": 256,
        "pipes512": 1,
        "source": "Intel client core with AVX-512 (Cannon/Ice/Tiger/Rocket Lake): 2 x 256-bit FMA, fused into "
        "one 512-bit FMA for AVX-512 (no port-5 FMA), 16 FP64 FLOP/cycle either way (Intel optimization manual)",
    },
    "knl": {
        "pipes": 2,
        "datapath": 512,
        "source": "Intel Knights Landing/Mill: 2 x 512-bit FMA per core, 32 FP64 FLOP/cycle (WikiChip 'flops')",
    },
    "hybrid-p": {
        "pipes": 2,
        "datapath": 256,
        "pipes512": 1,
        "source": "Intel hybrid part (Alder/Raptor/Meteor/Arrow/Lunar Lake): P-cores 2 x 256-bit FMA (16 FP64 "
        "FLOP/cycle); Gracemont/Crestmont E-cores have 2 x 128-bit (8), so a peak over all cores counted as "
        "P-cores is too high",
    },
    # Intel E-cores (Atom line)
    "gracemont": {
        "pipes": 2,
        "datapath": 128,
        "source": "Intel Gracemont E-core (Alder Lake-N: N100, N200, i3-N305): 2 x 128-bit FMA, 256-bit AVX2 "
        "split in two, 8 FP64 FLOP/cycle (Chips and Cheese, Gracemont)",
    },
    "crestmont": {
        "pipes": 2,
        "datapath": 128,
        "source": "Intel Crestmont E-core (Sierra Forest, Grand Ridge): 2 x 128-bit FMA, 8 FP64 FLOP/cycle",
    },
    "skymont": {
        "pipes": 4,
        "datapath": 128,
        "source": "Intel Skymont/Darkmont E-core (Clearwater Forest): 4 x 128-bit FMA, twice Crestmont's vector "
        "throughput (Intel Lunar Lake disclosure), 16 FP64 FLOP/cycle",
    },
}

_INTEL_MODELS = {
    "sandybridge": (0x2A, 0x2D, 0x3A, 0x3E),
    "haswell": (0x3C, 0x3F, 0x45, 0x46, 0x3D, 0x47, 0x4F, 0x56, 0x4E, 0x5E, 0x8E, 0x9E, 0xA5, 0xA6),
    "skylake-server": (0x55,),
    "icelake-server": (0x6A, 0x6C),
    "goldencove-server": (0x8F, 0xCF, 0xAD, 0xAE),
    "client-avx512": (0x66, 0x7D, 0x7E, 0x8C, 0x8D, 0xA7),
    "knl": (0x57, 0x85),
    "hybrid-p": (0x97, 0x9A, 0xB7, 0xBA, 0xBF, 0xAA, 0xAC, 0xC5, 0xC6, 0xBD, 0xCC),
    "gracemont": (0xBE,),
    "crestmont": (0xAF, 0xB6),
    "skymont": (0xDD,),
}
_INTEL_BY_MODEL = {m: k for k, models in _INTEL_MODELS.items() for m in models}


def _skylake_server_sku(brand: str) -> tuple[int, str | None]:
    """(512-bit FMA units, why assumed or None) from a Skylake-SP/Cascade Lake brand string."""
    b = brand or ""
    m = re.search(r"\b(Platinum|Gold|Silver|Bronze)\s+(\d{4})([A-Z]*)", b)
    if m:
        tier, number, suffix = m.group(1), m.group(2), m.group(3)
        if tier == "Platinum" or (tier == "Gold" and number[0] == "6") or number in ("5122", "5222"):
            return 2, None
        if tier == "Gold" and ("R" in suffix or "H" in suffix):
            return 1, f"Gold {number}{suffix}: refresh/Cooper Lake SKUs differ from the 5100/5200 rule"
        return 1, None
    return (
        2,
        f"SKU not in the brand string ({b or 'none'}): Skylake-SP/Cascade Lake parts have 1 or 2 AVX-512 FMA units",
    )


def _classify(vendor: str, family: int | None, model: int | None, flags: set[str], brand: str):
    """(UARCH key, reason it is assumed or None, 512-bit FMA pipes override or None); key None if unknown."""
    v = (vendor or "").lower()
    brand = brand or ""
    if "amd" in v or "hygon" in v:
        if family in (0x17, 0x18):
            if family == 0x17 and model is not None and model >= 0x30:
                return "zen2", None, None
            return "zen", (None if model is not None else "model number unknown"), None
        if family == 0x19:
            zen4 = model is not None and (0x10 <= model <= 0x1F or 0x60 <= model <= 0x7F or 0xA0 <= model <= 0xAF)
            if zen4 or "avx512f" in flags:
                return "zen4", None, None
            return "zen3", None, None
        if family == 0x1A:
            if model is not None and (0x20 <= model <= 0x2F):
                return "zen5-mobile", None, None
            if model is not None and (0x60 <= model <= 0x6F):
                return "zen5-mobile", "Krackan Point taken to have Strix Point's 256-bit datapath", None
            if model is not None and (model <= 0x1F or 0x40 <= model <= 0x4F or 0x70 <= model <= 0x7F):
                return "zen5", None, None
            return "zen5", f"Zen 5 model {model!r} not in the table: full 512-bit datapath assumed", None
        return None, None, None
    if "intel" in v and family == 6:
        key = _INTEL_BY_MODEL.get(model)
        if "amx_tile" in flags and key != "goldencove-server":
            # AMX exists only on Xeon server cores; a hypervisor may report another model number
            return (
                "goldencove-server",
                f"cpuid model {model!r} is not a server core but AMX is present (a hypervisor's cpuid?): "
                "taken as a Sapphire Rapids class core",
                None,
            )
        if key == "skylake-server":
            units, why = _skylake_server_sku(brand)
            return key, why, units
        if key == "goldencove-server":
            sku = re.search(r"\b(Platinum|Gold|Max)\b", brand)
            return key, None if sku else "SKU not named in the brand string (every SKU checked has 2)", None
        if key == "hybrid-p":
            return key, "hybrid part: P-core and E-core FMA throughput differ", None
        if key == "skymont":
            return key, "Skymont-class FMA count from Intel's disclosure, not measured", None
        if key == "client-avx512" and "avx512f" in flags:
            return key, "one 512-bit FMA per core as Intel documents client cores (WikiChip's table lists two)", None
        if key:
            return key, None, None
    return None, None, None


def fma_units(
    vendor: str, family: int | None, model: int | None, flags: set[str], brand: str = "", arch: str | None = None
) -> dict:
    """FMA pipes per core and their effective width in bits, from the table above.

    Returns {"pipes", "width_bits", "uarch", "isa_bits", "source", "assumed", "assumed_why"}; pipes is
    None when unknown. The width is the narrower of the widest vector ISA the OS exposes (a VM may
    hide AVX-512) and the pipe's datapath."""
    flags = set(flags or ())
    isa = (
        512 if "avx512f" in flags else 256 if ("avx2" in flags or "avx" in flags) else 128 if "sse2" in flags else None
    )
    key, why, pipes512 = _classify(vendor, family, model, flags, brand)
    if key is not None and isa is not None:
        u = UARCH[key]
        if isa == 512 and "pipes512" in u:
            pipes, width = pipes512 or u["pipes512"], 512
        else:
            pipes, width = u["pipes"], min(isa, u["datapath"])
        if u.get("fma", True) and "fma" not in flags and isa >= 256:
            why = (why + "; " if why else "") + "the OS does not expose FMA: the FMA peak is out of reach"
        return {
            "pipes": pipes,
            "width_bits": width,
            "uarch": key,
            "isa_bits": isa,
            "assumed": why is not None,
            "assumed_why": why,
            "source": u["source"],
        }
    generic = {"uarch": None, "isa_bits": isa, "assumed": True}
    arch = (arch or platform.machine()).lower()
    if "aarch64" in arch or "arm" in arch or "arm" in (vendor or "").lower():
        why = "Arm core: FMA pipe count not known to rooflab"
        return {"pipes": None, "width_bits": None, **generic, "assumed_why": why, "source": why}
    if isa and "fma" in flags:
        why = f"microarchitecture not in rooflab's table ({vendor} family {family!r} model {model!r}): 2 FMA pipes assumed"
        return {"pipes": 2, "width_bits": isa, **generic, "assumed_why": why, "source": why}
    why = "unknown microarchitecture"
    return {"pipes": None, "width_bits": None, **generic, "assumed_why": why, "source": why}


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
        "formula": f"{cores} core{'s' if cores != 1 else ''} x {ghz:.3f} GHz x {units['pipes']} FMA pipes x "
        f"{lanes} lanes x 2 = {value:.1f} GFLOP/s",
        "assumed_units": units.get("assumed", True),
    }


def flop_per_cycle(units: dict, itemsize: int) -> int | None:
    """FLOP per cycle per core for elements of ``itemsize`` bytes (None if the units are unknown)."""
    if not units.get("pipes") or not units.get("width_bits"):
        return None
    return units["pipes"] * (units["width_bits"] // (8 * itemsize)) * 2


def implied_clock_ghz(gflops: float, cpu: dict, threads: int, dtype: str = "float64") -> float | None:
    """The clock an FMA kernel must run at to reach ``gflops`` on ``threads`` cores at the table's
    FLOP/cycle: a probe reading well below it was a contended probe, not a counting bug."""
    per = flop_per_cycle(cpu["fma_units"], 8 if dtype == "float64" else 4)
    cores = min(threads, cpu.get("physical_cores") or threads)
    return gflops / (cores * per) if per and cores else None


@functools.lru_cache(maxsize=1)
def _cpuinfo() -> dict:
    try:
        import cpuinfo

        return cpuinfo.get_cpu_info()
    except Exception:  # pragma: no cover - py-cpuinfo fails on exotic systems
        return {}


def _nominal_ghz(info: dict, root: Path = SYSFS_CPU) -> tuple[float | None, str]:
    base = _read(root / "cpu0" / "cpufreq" / "base_frequency")
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
    from ..memory import meminfo

    return meminfo("MemTotal")


def read_numa(root: Path = SYSFS_CPU, cpus: list[int] | None = None) -> dict[str, list[int]]:
    """NUMA node -> its usable CPUs, from sysfs (``root``/../node/nodeN/cpulist); {} where the OS
    shows no nodes (the run then treats the machine as one node)."""
    cpus = set(cpus if cpus is not None else usable_cpus())
    out = {}
    for d in sorted((root.parent / "node").glob("node[0-9]*"), key=lambda d: int(d.name[4:])):
        listed = [c for c in parse_cpu_list(_read(d / "cpulist") or "") if c in cpus]
        if listed:
            out[d.name[4:]] = listed
    return out


def check_caches(caches: list[dict]) -> tuple[list[dict], list[str]]:
    """The cache levels a run can plan with, and one line per level left out: a size of 0, or a
    level not larger than the one below it (an L3 reported smaller than the L2 is a broken
    description, not a cache the sweep can find). The levels below a bad one are kept."""
    kept: list[dict] = []
    problems: list[str] = []
    for c in caches:
        below = kept[-1] if kept else None
        if c["size_bytes"] <= 0:
            problems.append(f"the OS reports {c['name']} with size 0: {c['name']} and the levels above it left out")
            break
        if below and c["size_bytes"] <= below["size_bytes"]:
            problems.append(
                f"the OS reports {c['name']} ({c['size_bytes'] >> 10} KiB) no larger than {below['name']} "
                f"({below['size_bytes'] >> 10} KiB): {c['name']} and the levels above it left out"
            )
            break
        kept.append(c)
    return kept, problems


def describe_cpu(info: dict | None = None, root: Path = SYSFS_CPU, cpus: list[int] | None = None) -> dict:
    """The CPU side of the machine description (no measurement). ``info`` (py-cpuinfo's dict),
    ``root`` (the sysfs cpu tree) and ``cpus`` default to this host's; tests pass recorded or
    written machines (tests/machines). ``problems``: one line per part of the description that was
    absurd and left out (the run says each and goes on with the rest)."""
    info = _cpuinfo() if info is None else info
    cpus = usable_cpus() if cpus is None else cpus
    flags = set(info.get("flags", []))
    vendor = info.get("vendor_id_raw", "") or ""
    family = info.get("family")
    model = info.get("model")
    brand = info.get("brand_raw") or platform.processor() or platform.machine()
    arch = info.get("arch_string_raw") or platform.machine()
    units = fma_units(vendor, family, model, flags, brand, arch)
    nominal, nominal_src = _nominal_ghz(info, root)
    caches, problems = check_caches(read_caches(root, cpus))
    cores = physical_cores(root, cpus) if cpus else 0
    if cores < 1:
        problems.append("the OS reports 0 usable cores: 1 assumed")
        cores = 1
    if "x86" in arch.lower() or "amd64" in arch.lower():
        if "fma" not in flags:
            problems.append("this CPU has no FMA instructions: the FMA peaks are skipped")
    simd = sorted(
        f for f in flags if f in ("sse4_2", "avx", "avx2", "fma") or f.startswith("avx512") or f.startswith("amx")
    )
    return {
        "model": brand,
        "vendor": vendor,
        "family": family,
        "model_number": model,
        "arch": arch,
        "usable_cpus": list(cpus),
        "logical_cpus": len(cpus),
        "physical_cores": cores,
        "numa_nodes": read_numa(root, cpus),
        "simd": simd,
        "caches": caches,
        "fma_units": units,
        "nominal_ghz": nominal,
        "nominal_ghz_source": nominal_src,
        "hypervisor": "hypervisor" in flags,
        "problems": problems,
    }


def has_fma(cpu: dict) -> bool:
    """Whether the FMA peak kernels can run: x86 needs the ``fma`` flag (an Arm core always has
    fused multiply-add in its vector unit)."""
    arch = (cpu.get("arch") or "").lower()
    return not ("x86" in arch or "amd64" in arch) or "fma" in cpu.get("simd", [])


def peaks_at_clocks(cpu: dict, clocks: dict, clock_source: str = "measured running clock") -> dict:
    """Theoretical FP64/FP32 peaks for every thread count at that thread count's OWN clock.

    ``clocks`` maps threads (int, or str as JSON keys come back) to GHz: one number, or a list of
    per-thread clocks measured while all of that count's threads ran (rooflab.cpu.clock.probe_clock's
    ``per_thread_ghz``). Each core's FMAs run at its own clock, so a list counts as its mean
    (cores x mean = the sum of the cores' clocks). Threads beyond the physical cores add no FMA
    pipes (SMT siblings share them). Thread counts without a clock are skipped."""
    by_threads: dict[int, float] = {}
    for t, g in clocks.items():
        vals = [float(x) for x in (g if isinstance(g, (list, tuple)) else [g]) if x]
        if vals:
            by_threads[int(t)] = sum(vals) / len(vals)
    out = {
        "clock_ghz": by_threads[min(by_threads)] if by_threads else None,
        "clock_ghz_by_threads": {str(t): by_threads[t] for t in sorted(by_threads)},
        "clock_source": clock_source,
        "peaks": [],
    }
    cores_max = cpu.get("physical_cores") or max(by_threads, default=1)
    for dtype, itemsize in (("float64", 8), ("float32", 4)):
        for threads in sorted(by_threads):
            p = theoretical_peak(min(threads, cores_max), by_threads[threads], cpu["fma_units"], itemsize)
            if p:
                out["peaks"].append({"dtype": dtype, "threads": threads, "clock_ghz": by_threads[threads], **p})
    return out


def peaks_for(cpu: dict, measured_ghz: float | None, thread_counts=None) -> dict:
    """Theoretical FP64/FP32 peaks at one clock for 1 core and all cores (or ``thread_counts``), at
    the measured clock when known, else the nominal one. Kept for callers with one clock; a suite
    that measured each thread count's clock calls ``peaks_at_clocks``."""
    ghz = measured_ghz or cpu.get("nominal_ghz")
    clock_src = "measured running clock" if measured_ghz else f"nominal clock ({cpu.get('nominal_ghz_source')})"
    counts = sorted(set(thread_counts or ()) or {1, cpu["physical_cores"]})
    return peaks_at_clocks(cpu, {t: ghz for t in counts}, clock_src)


# ---- low-precision dot-product units (INT8 u8 x s8 -> s32, BF16 pairs -> fp32) ----------------------
#
# per cycle per core = products per cycle x 2 (a multiply and an add, as FLOPs count an FMA).
# ``int8-avx2``: the vpmaddubsw + vpmaddwd + vpaddd sequence, 32 MACs per ymm step and 2
# vector-multiply uops, so 2 multiply pipes run one step per cycle (Intel Haswell on: ports 0 and 1;
# Zen 2-5: 2 multiply pipes, LLVM's znver scheduling models after AMD's guide); a 128-bit datapath
# (Zen 1) takes two. ``int8-vnni``: vpdpbusd zmm, 64 MACs per instruction: 2 per cycle on Intel
# server cores (ports 0+1 fused and 5), 1 on Zen 4 (double-pumped) and Intel client cores with one
# 512-bit unit. ``bf16-avx512``: vdpbf16ps zmm, 32 products per instruction: 1 per cycle on Zen 4
# (cpufp's published Zen 4 figure: twice the FP32 FMA rate), 1 per 2 cycles on Sapphire Rapids class
# cores (both FMA ports; measured 32 per cycle on the Xeon VM, ../shared/research/lowprec.md, and
# cpufp's half-of-FP32 on a Xeon Gold 6455B); other cores: not known to rooflab (no theoretical).
# Measured with kernels/cpu/int8.py and bf16.py on the Zen 4 VM (2026-12-05): int8-avx2 63.8,
# int8-vnni 127.7 ops/cycle.
LOWPREC_PER_CYCLE = {
    "int8-avx2": {"zen": 32, "*": 64},
    "int8-vnni": {"goldencove-server": 256, "icelake-server": 256, "skylake-server": 256, "zen5": 256, "*": 128},
    "bf16-avx512": {"zen4": 64, "zen5-mobile": 64, "zen5": 128, "goldencove-server": 32},
    # 2 FMA ports x 32 fp16 lanes x 2 (Sapphire Rapids and later: the only cores with AVX-512 FP16)
    "fp16-avx512": {"goldencove-server": 128, "*": 128},
    # Intel's figures: one 16x16x32 (bf16) or 16x16x64 (int8) tile product per 16 cycles per core
    "amx-bf16": {"*": 1024},
    "amx-int8": {"*": 2048},
}
LOWPREC_INSTRUCTION = {
    "int8-avx2": "vpmaddubsw+vpmaddwd ymm",
    "int8-vnni": "vpdpbusd zmm",
    "bf16-avx512": "vdpbf16ps zmm",
    "fp16-avx512": "vfmadd231ph zmm",
    "amx-bf16": "tdpbf16ps AMX tiles",
    "amx-int8": "tdpbssd AMX tiles",
    "w4-dequant-fma": "4-bit codes widened (zext, cvt) + fp32 FMA",
}
LOWPREC_UNIT = {
    "int8-avx2": "GOPS", "int8-vnni": "GOPS", "bf16-avx512": "GFLOP/s", "fp16-avx512": "GFLOP/s",
    "amx-bf16": "GFLOP/s", "amx-int8": "GOPS", "w4-dequant-fma": "GFLOP/s",
}  # fmt: skip
# the roofline dtype each low-precision ceiling is filed under (Roofline.peak(dtype))
LOWPREC_DTYPE = {
    "int8-avx2": "int8", "int8-vnni": "int8", "bf16-avx512": "bfloat16", "fp16-avx512": "float16",
    "amx-bf16": "bfloat16", "amx-int8": "int8", "w4-dequant-fma": "w4",
}  # fmt: skip


def lowprec_per_cycle(unit: str, units: dict) -> tuple[int | None, bool]:
    """(ops or FLOPs per cycle per core of the unit on this core, assumed?) from LOWPREC_PER_CYCLE."""
    table = LOWPREC_PER_CYCLE.get(unit) or {}
    key = units.get("uarch")
    if key in table:
        return table[key], bool(units.get("assumed"))
    return table.get("*"), True


def lowprec_peak(unit: str, cores: int, ghz: float | None, units: dict) -> dict | None:
    """cores x GHz x per cycle, the formula spelled out (None where the clock or the rate is unknown)."""
    per, assumed = lowprec_per_cycle(unit, units)
    if not per or not ghz:
        return None
    value = cores * ghz * per
    what = (
        "int8 ops"
        if LOWPREC_DTYPE[unit] == "int8"
        else f"{LOWPREC_DTYPE[unit].replace('bfloat', 'bf').replace('float', 'fp')} FLOP"
    )
    return {
        "value": value,
        "per_cycle_per_core": per,
        "unit": LOWPREC_UNIT[unit],
        "formula": f"{cores} core{'s' if cores != 1 else ''} x {ghz:.3f} GHz x {per} {what}/cycle "
        f"({LOWPREC_INSTRUCTION[unit]}: products x 2) = {value:.1f} {LOWPREC_UNIT[unit]}",
        "assumed_units": assumed,
    }
