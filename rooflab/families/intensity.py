"""Family `intensity`: the intensity sweep, 1/8 to 256 FLOP/byte, that traces the roof between the
DRAM slope and the FMA peak.

  cpu.intensity.ert-rotating   the `fma` family's ERT kernel (K FMAs x ``reps`` passes per L1 block)
                               on the next slice of a DRAM-sized array on every call: each call
                               streams data untouched for >= 4x LLC bytes, i.e. from DRAM
  cuda.intensity.f64           nfma dependent FP64 FMAs per element over a >= 8x-L2 array

Napkin (CPU): intensity = K x passes / 8 FLOP/B in FP64. A 512 MiB array at ~20 GB/s is 50 ms per
pass, and a 256 FLOP/B point over all of it would take seconds, hence one slice per call, sized on
the first call for ~``target_s`` (at least 8 MiB, so the parallel region's fork/join stays noise).
The suite (rooflab/suite_ceilings.py) declares one Case per (intensity, thread count).
"""

from __future__ import annotations

import time

import numpy as np

from ..cuda import knobs as kn
from ..cuda import loader
from ..errors import RooflabError
from ..kernels.cpu import ert, stream
from ..memory import aligned_empty
from ..registry import Variant, register
from ..threads import resolve_threads
from ..work import Work
from .fma import _ert, _ert_reference

# ---- CPU: the ERT kernel over one slice of a DRAM-sized array per call ---------------------------


class Rotation:
    """Which slice of the array the next call processes, and how long slices are per point."""

    MIN_SLICE_BYTES = 8 << 20

    def __init__(self, a):
        self.a, self.offset, self.n, self.sizes = a, 0, a.size, {}

    def prepare(self, K, S, block, reps, threads, target_s) -> None:
        """Size the slice for ~target_s per call at this point, once, from a timed 1/16 of the array
        (at most MIN_SLICE_BYTES: the probe of a 1.9 GiB array at 256 FLOP/B took seconds, twice).
        The untimed first call, which compiles and wakes the threads, runs on one block per thread."""
        key = (K, S, block, reps, threads)
        if key not in self.sizes:
            unit = block * threads
            probe = max(unit, min(self.a.size // 16, self.MIN_SLICE_BYTES // self.a.itemsize) // unit * unit)
            chunk = self.a[:probe]
            _ert(self.a[:unit], K=K, S=S, block=block, reps=reps, threads=threads)  # compile
            t0 = time.perf_counter()
            _ert(chunk, K=K, S=S, block=block, reps=reps, threads=threads)
            dt = time.perf_counter() - t0
            floor = max(unit, (self.MIN_SLICE_BYTES // self.a.itemsize) // unit * unit)
            want = max(floor, probe * target_s / max(dt, 1e-6))
            self.sizes[key] = int(min(self.a.size, want) // unit * unit)
            self.offset = 0
        self.n = self.sizes[key]
        if self.offset + self.n > self.a.size:
            self.offset = 0

    def current(self):
        return self.a[self.offset : self.offset + self.n]

    def advance(self) -> None:
        self.offset += self.n


def _rotating_inputs(nbytes, dtype=None, seed=0, threads=None):
    """(a, rotation): a DRAM-sized FP64 array first-touched by every thread with distinct values."""
    n = int(nbytes) // 8
    a = aligned_empty(n, np.float64)
    stream.fill_pattern(a, resolve_threads(threads), seed)
    return a, Rotation(a)


def _point(rot, K, S, block, reps, threads, target_s):
    """The block actually used (a small array gets shorter blocks: each thread needs one) and threads."""
    threads, S = resolve_threads(threads), int(S)
    quantum = S * 8  # S streams starting on 64-byte lines
    fit = (rot.a.size // threads) // quantum * quantum
    if fit < quantum:
        raise RooflabError(
            f"cpu.intensity.ert-rotating: an array of {rot.a.nbytes} bytes cannot give {threads} threads "
            f"a block of {S} cache lines",
            "use a larger array",
        )
    block = min(int(block or ert.block_elements(32 << 10, 8, S)), fit)
    rot.prepare(int(K), S, block, int(reps), threads, float(target_s))
    return block, threads


def _ert_rotating(a, rot, reps=1, threads=None, K=ert.DEFAULT_K, S=8, block=None, target_s=0.05):
    block, threads = _point(rot, K, S, block, reps, threads, target_s)
    out = _ert(rot.current(), K=K, S=S, block=block, reps=reps, threads=threads)
    rot.advance()
    return out


def _ert_rotating_reference(a, rot, reps=1, threads=None, K=ert.DEFAULT_K, S=8, block=None, target_s=0.05, **_):
    _point(rot, K, S, block, reps, threads, target_s)  # the slice the kernel will process next
    return _ert_reference(rot.current(), K=K, reps=reps)


register(
    Variant(
        name="cpu.intensity.ert-rotating",
        family="intensity",
        device="cpu",
        description="ERT kernel (K FMAs x passes per L1 block) on the next slice of a DRAM-sized array per call",
        kernel=_ert_rotating,
        reference=_ert_rotating_reference,
        work=lambda a, rot, K=ert.DEFAULT_K, reps=1, **_: Work(
            flops=2.0 * K * reps * rot.n, bytes_read=rot.n * 8, bytes_written=rot.n * 8
        ),
        inputs=_rotating_inputs,
        defaults={"K": ert.DEFAULT_K, "S": 8, "target_s": 0.05},
        result_dtype=lambda *a, **k: np.dtype(np.float64),
        dtypes=("float64",),
    )
)

# ---- intensity sweep ---------------------------------------------------------------------------


def _coefficients(nfma, reps, alpha, beta):
    """x <- alpha x + beta applied m = nfma x reps times. By default alpha^m = 1/2 and the fixed
    point is 0.25, so the result x0/2 + 0.125 depends on every input value and on the FMA count (a
    fixed point reached after the first sweep point would let a kernel doing no FMAs pass)."""
    if alpha is None:
        alpha = 0.5 ** (1.0 / (int(nfma) * int(reps)))
        beta = 0.25 * (1.0 - alpha)
    return alpha, beta


def _intensity(a, reps=1, threads=None, nfma=1, alpha=None, beta=None):
    alpha, beta = _coefficients(nfma, reps, alpha, beta)
    fn = loader.kernel("intensity.cu", "intensity_f64", kn.INTENSITY_KNOBS)
    for _ in range(int(reps)):
        loader.launch(
            fn,
            kn.grid("intensity_f64"),
            kn.BLOCK,
            (a, np.int64(a.size), np.int32(nfma), np.float64(alpha), np.float64(beta)),
            "intensity_f64",
        )
    return a


def _intensity_reference(a, reps=1, nfma=1, alpha=None, beta=None, **_):
    alpha, beta = _coefficients(nfma, reps, alpha, beta)
    m = nfma * int(reps)
    am = alpha**m
    return a.astype(kn.cp().float64) * am + beta * (1 - am) / (1 - alpha)


register(
    Variant(
        name="cuda.intensity.f64",
        family="intensity",
        device="cuda",
        description="nfma dependent FMAs per element, fp64",
        kernel=_intensity,
        reference=_intensity_reference,
        work=lambda a, reps=1, nfma=1, **_: Work(
            flops=2.0 * nfma * a.size * reps, bytes_read=a.nbytes * reps, bytes_written=a.nbytes * reps
        ),
        inputs=lambda n, dtype=None, seed=0, **_: (
            kn.cp().random.default_rng(seed).random(n, dtype=kn.cp().float64) + 0.5,
        ),
        defaults={"nfma": 1},
    )
)
