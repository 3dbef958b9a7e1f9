"""What machine a result came from: the device descriptions (rooflab/cpu/machine.py,
rooflab/cuda/backend.py) plus what is common to every result: host, OS, versions of the software in
the loop, the project's git commit and the command line.
"""

from __future__ import annotations

import os
import platform
import re
import socket
import subprocess
import sys
from pathlib import Path

from .cpu.machine import describe_cpu, memory_bytes, peaks_for


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
        for k in (
            "OMP_WAIT_POLICY",
            "GOMP_SPINCOUNT",
            "OPENBLAS_THREAD_TIMEOUT",
            "OPENBLAS_CORETYPE",
            "OMP_NUM_THREADS",
        )
        if os.environ.get(k) is not None
    }
    return out


def slug(text: str) -> str:
    s = re.sub(r"\((r|tm)\)", "", text.lower())
    s = re.sub(r"\b(processor|cpu|with|radeon graphics)\b", " ", s)
    s = re.sub(r"[^a-z0-9]+", "-", s).strip("-")
    return re.sub(r"-+", "-", s) or "machine"


def cpu_signature(machine: dict) -> tuple:
    """What makes two result files' CPUs the same kind of machine beyond their id (an id is the brand
    string and core count, and a hypervisor's brand hides the part: a Zen 3 and a Zen 4 VM both read
    "AMD EPYC", two Xeon generations "Intel Xeon Processor"): vendor, cpuid family and model, the
    vector units, the cores and the OS cache sizes. Fields a file lacks compare as None."""
    cpu = (machine or {}).get("cpu") or {}
    caches = tuple((c.get("level"), c.get("type"), c.get("size_bytes")) for c in cpu.get("caches") or [])
    return (
        cpu.get("vendor"),
        cpu.get("family"),
        cpu.get("model_number"),
        tuple(sorted(cpu.get("simd") or [])),
        cpu.get("physical_cores"),
        caches,
    )


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
