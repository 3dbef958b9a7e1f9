"""Who a fleet node is: an id unique in the fleet, and the SKU it is compared within.

The machine id of a single-machine result (``amd-epyc-9654-96c``) names a model, so identical nodes
share it. A fleet node id is the host name plus the engine's own id of the node (Ray's node id,
Slurm's node name): unique even where several Ray nodes share one host (the tests' clusters).

The SKU key groups nodes that should measure alike: CPU model, physical cores, memory size (whole
GiB: identical nodes differ by a few MiB the firmware keeps), GPU model and count. GPUs are read
with ``nvidia-smi`` (no CUDA context, ~50 ms); a node without it has no GPU in its key.
"""

from __future__ import annotations

import re
import shutil
import socket
import subprocess

GIB = 1 << 30


def _slug(text: str) -> str:
    from ..machine import slug

    return slug(text)


def gpus() -> list[dict]:
    """[{name, memory_mib}] per NVIDIA GPU of this node ([] without nvidia-smi or a GPU)."""
    exe = shutil.which("nvidia-smi")
    if not exe:
        return []
    try:
        out = subprocess.run(
            [exe, "--query-gpu=name,memory.total", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.SubprocessError):
        return []
    if out.returncode != 0:
        return []
    found = []
    for line in out.stdout.splitlines():
        name, _, mem = line.partition(",")
        if name.strip():
            found.append({"name": name.strip(), "memory_mib": int(mem) if mem.strip().isdigit() else None})
    return found


def sku(cpu_model: str, physical_cores: int, memory_bytes: int | None, gpu_list: list[dict]) -> dict:
    names = sorted({g["name"] for g in gpu_list})
    return {
        "cpu_model": cpu_model,
        "physical_cores": int(physical_cores),
        "memory_gib": round((memory_bytes or 0) / GIB),
        "gpu_model": " + ".join(names) if names else None,
        "gpu_count": len(gpu_list),
    }


def sku_key(s: dict) -> str:
    """``amd-epyc-9654-96c-768g`` (+ ``-8x-nvidia-h100-80gb-hbm3``)."""
    key = f"{_slug(s['cpu_model'])}-{s['physical_cores']}c-{s['memory_gib']}g"
    if s.get("gpu_count"):
        key += f"-{s['gpu_count']}x-{_slug(s['gpu_model'] or 'gpu')}"
    return key


def this_sku() -> dict:
    """The SKU of the machine this runs on."""
    from ..cpu.machine import describe_cpu, memory_bytes

    cpu = describe_cpu()
    return sku(cpu["model"], cpu["physical_cores"], memory_bytes(), gpus())


def sku_of_result(doc: dict) -> tuple[str, dict]:
    """(key, sku) of a result document: its fleet block, else derived from its machine block."""
    fleet = doc.get("fleet") or {}
    if fleet.get("sku_key") and fleet.get("sku"):
        return fleet["sku_key"], fleet["sku"]
    m = doc.get("machine") or {}
    cpu = m.get("cpu") or {}
    gpu = m.get("gpu")
    s = sku(cpu.get("model", "unknown"), cpu.get("physical_cores", 0), m.get("memory_bytes"), [gpu] if gpu else [])
    return sku_key(s), s


def node_id(hostname: str, engine_node: str) -> str:
    """``<host>-<first 12 characters of the engine's node id>``, safe as a file name."""
    host = re.sub(r"[^A-Za-z0-9.-]+", "-", hostname).strip("-.") or "host"
    tail = re.sub(r"[^A-Za-z0-9.-]+", "-", engine_node)[:12].strip("-.") or "node"
    return f"{host}-{tail}"


def identity(engine: str, engine_node: str) -> dict:
    """Everything the fleet needs to know about the node this runs on."""
    host = socket.gethostname()
    s = this_sku()
    return {
        "node_id": node_id(host, engine_node),
        "hostname": host,
        "engine": engine,
        "engine_node_id": engine_node,
        "sku": s,
        "sku_key": sku_key(s),
    }
