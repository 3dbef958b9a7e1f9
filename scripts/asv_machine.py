#!/usr/bin/env python3
"""Register this machine with asv under rooflab's machine id, with the CPU (and GPU) named.

    python scripts/asv_machine.py          # writes the entry into ~/.asv-machine.json, prints the id

asv's own `asv machine` has no GPU field; extra keys in ~/.asv-machine.json are kept and shown as
selectable parameters by `asv publish`, so the GPU name, driver and memory go there.
"""

import json
import platform
import subprocess
import sys
from pathlib import Path

from rooflab import machine
from rooflab.memory import fmt_bytes


def main() -> int:
    d = machine.describe()
    cpu = d["cpu"]
    mid = d["id"]
    caches = ", ".join(f"{c['name']} {fmt_bytes(c['size_bytes'])}" for c in cpu["caches"])
    subprocess.run(
        [
            sys.executable,
            "-m",
            "asv",
            "machine",
            "--yes",
            "--machine",
            mid,
            "--os",
            d["os"],
            "--arch",
            platform.machine(),
            "--cpu",
            f"{cpu['model']} ({cpu['physical_cores']} cores; {caches})",
            "--num_cpu",
            str(cpu["physical_cores"]),
            "--ram",
            str(d["memory_bytes"] or 0),
        ],
        check=True,
    )
    path = Path.home() / ".asv-machine.json"
    conf = json.loads(path.read_text())
    entry = conf[mid]
    gpu = "none"
    try:
        from rooflab.cuda import backend

        devs = backend.describe_all()["devices"]
        if devs:
            g = devs[0]
            gpu = f"{g['name']} (sm_{g['compute_capability']}, {fmt_bytes(g['memory_bytes'])}, driver {g['driver_version']})"
    except Exception:
        pass
    entry["gpu"] = gpu
    entry["simd"] = " ".join(s for s in cpu["simd"] if s in ("avx2", "fma", "avx512f", "amx_tile"))
    path.write_text(json.dumps(conf, indent=4))
    print(mid)
    return 0


if __name__ == "__main__":
    sys.exit(main())
