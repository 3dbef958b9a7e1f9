"""Record this machine's description for the tests: tests/machines/<name>.json.

What it keeps: py-cpuinfo's vendor, family, model, brand and flags; every usable CPU's sysfs cache
tree (level, type, size, shared_cpu_list per index), core and package ids; the NUMA nodes' CPU
lists; MemTotal and MemAvailable. Those are the inputs of every planning rule (array sizes, the
DRAM probe's caps, thread plans, memory caps, which kernels and units exist, the ISA build), so the
fast loop runs the rules against this machine wherever a developer is (tests/test_machine_profiles.py).

Add ``--dram-from BYTES``: where this machine's measured DRAM plateau starts (``dram_sizing`` of a
ceilings run), the one behaviour the rules' fake probe needs; ``--cache-gbps``/``--dram-gbps``: the
1-thread read bandwidth in the LLC and in DRAM.

    python scripts/record_machine.py zen4-vm-2c --dram-from 134217728 --cache-gbps 99 --dram-gbps 35
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rooflab.cpu import machine as m

OUT = Path(__file__).resolve().parent.parent / "tests" / "machines"


def record(name: str, dram_from: int, cache_gbps: float, dram_gbps: float, how: str) -> dict:
    info = m._cpuinfo()
    cpus = {}
    for cpu in m.usable_cpus():
        base = m.SYSFS_CPU / f"cpu{cpu}"
        caches = []
        for idx in sorted((base / "cache").glob("index*")):
            caches.append(
                {
                    "level": int(m._read(idx / "level") or 0),
                    "type": m._read(idx / "type"),
                    "size": m._read(idx / "size"),
                    "shared_cpu_list": m._read(idx / "shared_cpu_list"),
                }
            )
        cpus[str(cpu)] = {
            "core_id": int(m._read(base / "topology" / "core_id") or cpu),
            "physical_package_id": int(m._read(base / "topology" / "physical_package_id") or 0),
            "caches": caches,
        }
    return {
        "name": name,
        "how": how,
        "cpuinfo": {k: info.get(k) for k in ("vendor_id_raw", "family", "model", "brand_raw", "arch_string_raw")}
        | {"flags": " ".join(sorted(info.get("flags", [])))},
        "cpus": cpus,
        "numa_nodes": {k: ",".join(map(str, v)) for k, v in m.read_numa().items()},
        "meminfo": {
            "MemTotal": m.memory_bytes(),
            "MemAvailable": __import__("rooflab.memory").memory.available_bytes(),
        },
        "behaviour": {"dram_from_bytes": dram_from, "cache_gbps": cache_gbps, "dram_gbps": dram_gbps},
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("name")
    ap.add_argument("--dram-from", type=int, required=True)
    ap.add_argument("--cache-gbps", type=float, required=True)
    ap.add_argument("--dram-gbps", type=float, required=True)
    ap.add_argument("--how", default="recorded with scripts/record_machine.py")
    a = ap.parse_args(argv)
    path = OUT / f"{a.name}.json"
    try:
        path.write_text(json.dumps(record(a.name, a.dram_from, a.cache_gbps, a.dram_gbps, a.how), indent=1) + "\n")
    except OSError as e:
        print(f"record_machine: error: cannot write {path}: {e.strerror}", file=sys.stderr)
        return 2
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
