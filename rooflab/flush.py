"""The last level a cold sample must miss, and the callable that evicts it before each cold sample.

One rule for every device: a CPU's last-level cache is what it really holds (rooflab/cpu/caches.py's
CacheMap.llc_effective: the OS size, never past where the run's DRAM probe found DRAM's plateau;
one fallback where the OS reports none); a GPU's is its L2 (GPU_L2_FALLBACK where the driver
reports none: an H100's 50 MiB). A CPU flush reads a buffer of 2x that (64 MiB to 1 GiB); a GPU
flush rewrites 2x its L2 (rooflab/cuda/timing.py).

Napkin: the Xeon VM whose OS reports a 480 MiB L3 found DRAM's plateau from 256 MiB
(tests/machines/intel-emr-vm-2c.json): its flush reads 256 MiB (~18 ms at 14 GB/s), not the 960 MiB
the OS size asked for (~70 ms before every cold sample), and a streamed rotation's copies total
4x 128 MiB, not 4x 480 MiB.
"""

from __future__ import annotations

import numpy as np

GPU_L2_FALLBACK = 50 << 20


def gpu_l2_bytes(gpu: dict | None) -> int:
    """A GPU's L2 from its description (GPU_L2_FALLBACK where the driver gave none)."""
    return (gpu or {}).get("l2_bytes") or GPU_L2_FALLBACK


def llc_bytes(machine: dict, device: str) -> int:
    """The last level a cold sample must miss on ``device``: the GPU's L2, or what the CPU's LLC
    holds as measured (the OS size where no run measured it)."""
    if device == "cuda":
        return gpu_l2_bytes(machine.get("gpu"))
    from .cpu.caches import CacheMap

    return int(CacheMap.of(machine).llc_effective())


def flusher(device: str, machine: dict):
    """A callable that evicts the caches (reads 2x the LLC; a GPU: rewrites its L2), run before cold
    samples."""
    if device == "cuda":
        from .cuda import timing as gtime

        return gtime.flusher(llc_bytes(machine, device))
    from .memory import aligned_empty

    llc = llc_bytes(machine, device)
    buf = aligned_empty(min(max(2 * llc, 64 << 20), 1 << 30) // 8, np.float64)
    buf[:] = 1.0  # written once: its pages are real

    def flush():
        # read, not written: a written buffer leaves the caches full of dirty lines whose write-backs
        # share the DRAM with the op's own reads (measured: a W4A8 GEMV at 19.6 vs 21.2 GB/s)
        buf.sum()

    return flush
