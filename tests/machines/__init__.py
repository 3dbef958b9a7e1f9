"""Machine descriptions the planning rules are run against, whichever CPU the tests run on.

Each ``*.json`` here is one machine: py-cpuinfo's fields and flags, its sysfs cache and topology
tree (``cpus``, as scripts/record_machine.py records a host; or ``layout``, a compact form for a
machine written from a public layout: sockets, cores, SMT siblings, caches per core / socket / N
cores), NUMA nodes, memory, and ``behaviour``: where its DRAM plateau starts and its 1-thread read
bandwidth in the LLC and in DRAM (the fake DRAM probe's model). ``materialize`` writes the tree
under a temporary folder, so rooflab reads it exactly as it reads /sys.

    from tests import machines
    m = machines.load("intel-spr-vm-2c")
    cpu = machines.describe(m, tmp_path)          # rooflab.cpu.machine.describe_cpu on it
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent


def names() -> list[str]:
    return sorted(p.stem for p in HERE.glob("*.json"))


def load(name: str) -> dict:
    return json.loads((HERE / f"{name}.json").read_text())


def _expand(layout: dict) -> tuple[dict, dict]:
    """(cpus, numa_nodes) of a compact layout: Linux numbers every core of every socket first, then
    the SMT siblings in the same order."""
    sockets, cores, smt = layout["sockets"], layout["cores_per_socket"], layout["threads_per_core"]
    total_cores = sockets * cores
    cpus, numa = {}, {}
    for t in range(smt):
        for s in range(sockets):
            for c in range(cores):
                cpu = t * total_cores + s * cores + c
                siblings = [k * total_cores + s * cores + c for k in range(smt)]
                caches = []
                for level, ctype, size, per in layout["caches"]:
                    if per == "core":
                        shared = siblings
                    elif per == "socket":
                        shared = [k * total_cores + s * cores + j for k in range(smt) for j in range(cores)]
                    else:  # N cores per instance (an L3 slice per CCX)
                        first = c // per * per
                        shared = [
                            k * total_cores + s * cores + j for k in range(smt) for j in range(first, first + per)
                        ]
                    caches.append(
                        {
                            "level": level,
                            "type": ctype,
                            "size": size,
                            "shared_cpu_list": ",".join(map(str, sorted(shared))),
                        }
                    )
                cpus[str(cpu)] = {"core_id": c, "physical_package_id": s, "caches": caches}
                if layout.get("numa") == "socket":
                    numa.setdefault(str(s), []).append(cpu)
    return cpus, {k: ",".join(map(str, sorted(v))) for k, v in numa.items()}


def cpus_of(m: dict) -> dict:
    return m["cpus"] if "cpus" in m else _expand(m["layout"])[0]


def materialize(m: dict, root: Path) -> Path:
    """Write the machine's sysfs tree under ``root``; returns its ``cpu`` folder (SYSFS_CPU's place)."""
    cpus = cpus_of(m)
    numa = m.get("numa_nodes") or ({} if "cpus" in m else _expand(m["layout"])[1])
    base = root / "cpu"
    for cpu, d in cpus.items():
        topo = base / f"cpu{cpu}" / "topology"
        topo.mkdir(parents=True, exist_ok=True)
        (topo / "core_id").write_text(f"{d['core_id']}\n")
        (topo / "physical_package_id").write_text(f"{d['physical_package_id']}\n")
        for i, c in enumerate(d["caches"]):
            idx = base / f"cpu{cpu}" / "cache" / f"index{i}"
            idx.mkdir(parents=True, exist_ok=True)
            for key in ("level", "type", "size", "shared_cpu_list"):
                (idx / key).write_text(f"{c[key]}\n")
    for node, cpulist in numa.items():
        (root / "node" / f"node{node}").mkdir(parents=True, exist_ok=True)
        (root / "node" / f"node{node}" / "cpulist").write_text(cpulist + "\n")
    return base


def info(m: dict) -> dict:
    """py-cpuinfo's dict for the machine."""
    return {**m["cpuinfo"], "flags": m["cpuinfo"]["flags"].split()}


def describe(m: dict, tmp: Path) -> dict:
    from rooflab.cpu.machine import describe_cpu

    root = materialize(m, tmp / m["name"])
    return describe_cpu(info(m), root, sorted(int(c) for c in cpus_of(m)))


def read_bandwidth(m: dict):
    """The DRAM probe's ``measure(nbytes, threads)`` on this machine: the LLC's bandwidth up to half
    of where DRAM starts, DRAM's from there, geometric in between (a gradual step, as measured)."""
    b = m["behaviour"]
    hi, lo, d = b["cache_gbps"], b["dram_gbps"], b["dram_from_bytes"]

    def measure(nbytes: int, threads: int) -> float:
        if nbytes <= d // 4:
            return hi
        if nbytes >= d // 2:
            return lo
        return hi * (lo / hi) ** ((nbytes - d // 4) / (d // 4))

    return measure
