"""CUDA launch knobs and helpers shared by the CUDA variants of every family.

Every knob a kernel's work depends on (chains, unroll, block size, shared-memory size) is set here
and passed to the compiler with -D, so the FLOPs and bytes declared by the family modules always
describe what was compiled. ``SM_THREADS`` is the resident-threads-per-SM each fixed-grid kernel is
launched with (one wave); the compile tests check it against ptxas's register and shared-memory
report. Nothing here imports cupy at import time.
"""

from __future__ import annotations

import numpy as np

from . import loader

BLOCK = 256
STREAM = {"BLOCK": BLOCK, "ILP": 4, "TRIAD_SM_THREADS": 1024, "L2_ROTATE": 97}
FMA_KNOBS = {"BLOCK": BLOCK, "CHAINS": 8, "UNROLL": 16}
MMA_KNOBS = {"CHAINS": 4, "UNROLL": 8}
MMA_BLOCK = 128
SMEM_KNOBS = {"BLOCK": BLOCK, "SMEM_FLOAT4": 2048}  # 32 KiB of shared memory per block
INTENSITY_KNOBS = {"BLOCK": BLOCK, "ELEMS": 4}
MMA_BITS = {"float16": (0x2C002C00, 0x3C003C00), "bfloat16": (0x3D803D80, 0x3F803F80)}  # 1/16 and 1.0 pairs
MMA_FLOP = 2 * 16 * 8 * 16  # one m16n8k16 per warp
MMA_SM_THREADS = 1024
WGMMA_KNOBS = {"UNROLL": 4}
WGMMA_PER_SM = 2  # warpgroups (blocks of 128 threads) per SM: 154 registers each, two fit with room
WGMMA_FILL = {"float16": 0x34003400, "bfloat16": 0x3E803E80}  # 0.25 in every half of every word
WGMMA_FLOP = 2 * 64 * 256 * 16  # one m64n256k16 per warpgroup

# Resident threads per SM each kernel is launched with: one wave, every block resident at once, so
# a grid-stride loop gives every block the same share and no block waits for a second round. The
# compile tests check each against ptxas's report (registers x threads <= 64K registers per SM).
SM_THREADS = {
    "stream_read": 2048,
    "l2_read": 2048,
    "stream_copy": 2048,
    "stream_triad": STREAM["TRIAD_SM_THREADS"],
    "smem_read": 4 * BLOCK,
    "fma_peak": 2048,
    "mma_f16": MMA_SM_THREADS,
    "mma_bf16": MMA_SM_THREADS,
    "intensity_f64": 2048,
    "wgmma_f16": 128 * WGMMA_PER_SM,
    "wgmma_bf16": 128 * WGMMA_PER_SM,
    "empty_kernel": 32,
    "launch_tick": 32,  # launch.cu's countable empty kernel (rooflab/families/launch/cuda.py)
}


def cp():
    import cupy

    return cupy


def grid(kernel: str, block: int = BLOCK) -> int:
    """Blocks of ``block`` threads for one wave of ``kernel`` (SM_THREADS) on this GPU."""
    return loader.one_wave(block, SM_THREADS[kernel])


def filled(n, value):
    xp = cp()
    a = xp.empty(n + (n & 1), dtype=xp.float64)
    a.fill(value)
    return a


def patterned(n, seed=0):
    """n (rounded up to even) float64 values, every one different and exactly representable
    (1 + k/1024 for a random permutation k of 0..1023, repeated): a sum over them depends on
    which addresses were read, so a kernel that re-reads one cached line gets a wrong partial.
    The permutation is drawn on the host (numpy) and uploaded: cupy's Generator has no permutation."""
    xp = cp()
    n += n & 1
    k = xp.asarray(np.random.default_rng(seed).permutation(1024).astype(np.float64))
    reps = -(-n // 1024)
    return (1.0 + xp.tile(k, reps)[:n] / 1024.0).copy()


# ---- the SM clock probe ------------------------------------------------------------------------


def clock_buffer(blocks):
    return cp().zeros(2 * blocks, dtype=cp().uint64)


def measured_clock(clk) -> dict | None:
    """SM clock (GHz) during the last launch that filled ``clk``: total cycles / total ns over the
    blocks, with the per-block spread. None when the probe did not run or is implausible."""
    v = np.asarray(clk.get() if hasattr(clk, "get") else clk, dtype=np.float64).reshape(-1, 2)
    v = v[(v[:, 0] > 0) & (v[:, 1] > 0)]
    if v.size == 0:
        return None
    per_block = v[:, 0] / v[:, 1]
    ghz = float(v[:, 0].sum() / v[:, 1].sum())
    return {
        "ghz": ghz,
        "median_block_ghz": float(np.median(per_block)),
        "min_block_ghz": float(per_block.min()),
        "max_block_ghz": float(per_block.max()),
        "blocks": int(len(per_block)),
        "mean_block_ns": float(v[:, 1].mean()),
        "method": "clock64 / %globaltimer per block",
    }
