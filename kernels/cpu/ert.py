"""FMA throughput and intensity sweep: one ERT-style kernel with two knobs.

Each element is loaded, pushed through K dependent FMAs ``x = x*alpha + beta`` and stored back.
S interleaved streams give S independent vector chains per loop iteration, so with LLVM's 2x
interleave there are 2*S chains in flight: enough to cover a 4-cycle FMA latency on 2 FMA pipes
(8 chains). The array is walked in L1-sized blocks and each block gets ``ntrials`` passes:

  FLOPs per call  = 2 * K * ntrials * n
  DRAM bytes/call = 2 * itemsize * n      (read once, written back once)
  intensity       = K * ntrials / itemsize  FLOP/byte
  peak setting    : n = one L1-resident block per thread, ntrials large -> no DRAM traffic at all
  sweep setting   : n = a DRAM-sized array, K*ntrials from 1 (1/8 FLOP/B in fp64) upwards

Napkin: 2 x 512-bit FMA pipes at 3.5 GHz = 112 GFLOP/s per core in fp64, so K=32 chains on a
12 KiB block take ~30 ns per pass; a sample of 10 ms is ~3e5 passes.

The K x S body is generated source (ERT does the same with C macros): loop counts must be
compile-time constants for LLVM to keep every chain in registers.
"""

from __future__ import annotations

from functools import cache

import numpy as np
from numba import njit, prange

import rooflab._numba_env  # noqa: F401

DEFAULT_K = 32
DEFAULT_S = 4


def ert_source(K: int, S: int) -> str:
    """Python source of the (K, S) kernel; kept readable so it can be printed and inspected."""
    ind = " " * 16
    lines = [
        "def ert(a, block, ntrials, alpha, beta, nchunks):",
        "    n = a.size",
        "    for t in prange(nchunks):",
        "        lo = n * t // nchunks",
        "        hi = n * (t + 1) // nchunks",
        "        x = a[lo:hi]",
        "        nblocks = x.size // block",
        f"        h = block // {S}",
        "        for bi in range(nblocks):",
        "            blk = x[bi * block:(bi + 1) * block]",
    ]
    lines += [f"            v{s} = blk[{s} * h:{s + 1} * h]" for s in range(S)]
    lines += ["            for _ in range(ntrials):", "                for i in range(h):"]
    body = [f"{ind}    b{s} = v{s}[i]" for s in range(S)]
    for _ in range(K):
        body += [f"{ind}    b{s} = b{s} * alpha + beta" for s in range(S)]
    body += [f"{ind}    v{s}[i] = b{s}" for s in range(S)]
    return "\n".join(lines + body) + "\n"


@cache
def ert_kernel(K: int = DEFAULT_K, S: int = DEFAULT_S):
    """Compiled (lazily, per dtype) ERT kernel with K FMAs per element per pass and S streams."""
    if K < 1 or S < 1:
        raise ValueError("K and S must be >= 1")
    ns: dict = {"prange": prange}
    exec(compile(ert_source(K, S), f"<rooflab ert K={K} S={S}>", "exec"), ns)
    return njit(parallel=True, fastmath={"contract"})(ns["ert"])


def block_elements(l1_bytes: int, itemsize: int, S: int = DEFAULT_S) -> int:
    """Block length that uses a quarter of L1 (room for the stack and the other streams),
    rounded down to a multiple of S * 64 bytes so every stream starts on a cache line."""
    quantum = S * max(1, 64 // itemsize)
    n = max(quantum, (l1_bytes // 4) // itemsize)
    return n - n % quantum


def alpha_beta(total_fmas: int, dtype) -> tuple:
    """Coefficients with x -> 1 as the fixed point and alpha**total_fmas = 1/2, so the result of
    a verification call still depends on the input: x_m = x0/2 + 1/2."""
    alpha = 0.5 ** (1.0 / max(total_fmas, 1))
    beta = 1.0 - alpha
    t = np.dtype(dtype).type
    return t(alpha), t(beta)


def reference(x0: np.ndarray, total_fmas: int, alpha, beta) -> np.ndarray:
    """Closed form of ``total_fmas`` steps of x = x*alpha + beta, in float64."""
    a = float(alpha)
    b = float(beta)
    am = a**total_fmas
    return np.asarray(x0, dtype=np.float64) * am + b * (1.0 - am) / (1.0 - a)
