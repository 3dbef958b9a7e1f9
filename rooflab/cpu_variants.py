"""Registers the CPU kernels of kernels/cpu with their references, declared work and inputs."""

from __future__ import annotations

import numpy as np

from .kernels.cpu import clock, ert, latency, stream
from .memory import aligned_empty
from .registry import Variant, register
from .work import Work


def _threads(threads):
    if threads is None:
        import numba

        return numba.get_num_threads()
    return int(threads)


def _random(n, dtype, seed, count):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        a = aligned_empty(n, dtype)
        a[:] = rng.random(n, dtype=np.float64) + 0.5
        out.append(a)
    return tuple(out)


# ---- stream: read, copy, triad -------------------------------------------------------------------


def _read(a, reps=1, threads=None):
    return stream.read_sum(a, int(reps), _threads(threads))


def _copy(dst, src, reps=1, threads=None):
    stream.copy(dst, src, int(reps), _threads(threads), dst.dtype.type(0.0))
    return dst


def _triad(a, b, c, s=3.0, reps=1, threads=None):
    stream.triad(a, b, c, a.dtype.type(s), int(reps), _threads(threads))
    return a


register(
    Variant(
        name="cpu.stream.read",
        family="stream",
        device="cpu",
        description="s += a[i] over 4 interleaved streams (8 B/element read)",
        kernel=_read,
        reference=lambda a, reps=1, **_: np.float64(reps) * np.sum(a, dtype=np.float64),
        work=lambda a, reps=1, **_: Work(flops=a.size * reps, bytes_read=a.nbytes * reps),
        inputs=lambda n, dtype=np.float64, seed=0, **_: _random(n, dtype, seed, 1),
        result_dtype=lambda a, **_: a.dtype,
    )
)

register(
    Variant(
        name="cpu.stream.copy",
        family="stream",
        device="cpu",
        description="c[i] = a[i] as an explicit load/store loop (16 B/element)",
        kernel=_copy,
        reference=lambda dst, src, **_: src.copy(),  # exact: a copy must reproduce every bit
        work=lambda dst, src, reps=1, **_: Work(bytes_read=src.nbytes * reps, bytes_written=dst.nbytes * reps),
        inputs=lambda n, dtype=np.float64, seed=0, **_: _random(n, dtype, seed, 2),
    )
)

register(
    Variant(
        name="cpu.stream.triad",
        family="stream",
        device="cpu",
        description="a[i] = b[i] + s*c[i] (24 B/element, 1 FMA)",
        kernel=_triad,
        reference=lambda a, b, c, s=3.0, **_: (
            np.asarray(b, np.float64) + np.float64(a.dtype.type(s)) * np.asarray(c, np.float64)
        ),
        work=lambda a, b, c, reps=1, **_: Work(
            flops=2 * a.size * reps, bytes_read=(b.nbytes + c.nbytes) * reps, bytes_written=a.nbytes * reps
        ),
        inputs=lambda n, dtype=np.float64, seed=0, **_: _random(n, dtype, seed, 3),
        defaults={"s": 3.0},
    )
)


def _update(a, s=1.0, reps=1, threads=None):
    stream.update(a, a.dtype.type(s), int(reps), _threads(threads))
    return a


register(
    Variant(
        name="cpu.stream.update",
        family="stream",
        device="cpu",
        description="a[i] = s*a[i] in place (16 B/element, no write-allocate); s=1 when timed",
        kernel=_update,
        reference=lambda a, s=1.0, reps=1, **_: np.asarray(a, np.float64) * np.float64(a.dtype.type(s)) ** int(reps),
        work=lambda a, reps=1, **_: Work(
            flops=a.size * reps, bytes_read=a.nbytes * reps, bytes_written=a.nbytes * reps
        ),
        inputs=lambda n, dtype=np.float64, seed=0, **_: _random(n, dtype, seed, 1),
        defaults={"s": 1.0},
    )
)


# ---- ert: FMA chains (peak) and the intensity sweep ----------------------------------------------


def _ert(a, K=ert.DEFAULT_K, S=ert.DEFAULT_S, block=None, reps=1, threads=None, alpha=None, beta=None):
    """K FMAs per element per pass, ``reps`` passes over each L1 block, a updated in place."""
    nthreads = _threads(threads)
    block = int(block or a.size // nthreads)
    if a.size % (block * nthreads):
        raise ValueError(f"array of {a.size} elements is not a whole number of {nthreads} x {block} blocks")
    if alpha is None:
        alpha, beta = ert.alpha_beta(K * reps, a.dtype)
    ert.ert_kernel(int(K), int(S))(a, block, int(reps), a.dtype.type(alpha), a.dtype.type(beta), nthreads)
    return a


def _ert_reference(a, K=ert.DEFAULT_K, reps=1, alpha=None, beta=None, **_):
    if alpha is None:
        alpha, beta = ert.alpha_beta(K * reps, a.dtype)
    return ert.reference(a, K * reps, alpha, beta)


register(
    Variant(
        name="cpu.ert.fma",
        family="ert",
        device="cpu",
        description="x = x*alpha + beta, K dependent FMAs x S streams per element, L1-blocked passes",
        kernel=_ert,
        reference=_ert_reference,
        work=lambda a, K=ert.DEFAULT_K, reps=1, **_: Work(
            flops=2.0 * K * reps * a.size, bytes_read=a.nbytes, bytes_written=a.nbytes
        ),
        inputs=lambda n, dtype=np.float64, seed=0, **_: _random(n, dtype, seed, 1),
        defaults={"K": ert.DEFAULT_K, "S": ert.DEFAULT_S},
    )
)


# ---- latency: dispatch paths ---------------------------------------------------------------------


def _fork_join(out, reps=1, threads=None):
    for _ in range(int(reps)):
        latency.fork_join(out)
    return out


register(
    Variant(
        name="cpu.latency.empty",
        family="latency",
        device="cpu",
        description="an @njit call with no arguments and no work",
        kernel=lambda reps=1, threads=None: [latency.empty() for _ in range(int(reps))][-1],
        reference=lambda **_: np.int64(0),
        work=lambda reps=1, **_: Work(launches=int(reps)),
        inputs=lambda n=0, dtype=None, seed=0, **_: (),
        result_dtype=lambda **_: np.dtype(np.int64),
    )
)

register(
    Variant(
        name="cpu.latency.ufunc",
        family="latency",
        device="cpu",
        description="np.add(a, b, out=c) on 8-element float64 arrays",
        kernel=lambda a, b, c, reps=1, threads=None: [latency.ufunc_add(a, b, c) for _ in range(int(reps))][-1],
        reference=lambda a, b, c, **_: a.astype(np.float64) + b,
        work=lambda a, b, c, reps=1, **_: Work(
            flops=a.size * reps,
            bytes_read=(a.nbytes + b.nbytes) * reps,
            bytes_written=c.nbytes * reps,
            launches=int(reps),
        ),
        inputs=lambda n=8, dtype=np.float64, seed=0, **_: _random(n, dtype, seed, 3),
    )
)

register(
    Variant(
        name="cpu.latency.fork_join",
        family="latency",
        device="cpu",
        description="a numba parallel region that writes one value per thread (pool wake-up + barrier)",
        kernel=_fork_join,
        reference=lambda out, **_: np.arange(1, out.size + 1, dtype=np.float64),
        work=lambda out, reps=1, **_: Work(launches=int(reps)),
        inputs=lambda n=None, dtype=np.float64, seed=0, threads=None, **_: (np.zeros(_threads(threads)),),
    )
)


# ---- clock probe -----------------------------------------------------------------------------------


def _clock(blocks=1000, reps=1, threads=None):
    n = _threads(threads)
    if n == 1:
        return np.array([clock.add_chain(int(blocks) * int(reps), 0)], dtype=np.int64)
    return clock.add_chain_threads(int(blocks) * int(reps), n)


register(
    Variant(
        name="cpu.clock.add_chain",
        family="clock",
        device="cpu",
        description="dependent register adds, 1 per cycle: the running clock of each thread",
        kernel=_clock,
        reference=lambda blocks=1000, reps=1, threads=None, **_: (
            np.arange(_threads(threads), dtype=np.int64) + clock.ADDS_PER_BLOCK * int(blocks) * int(reps)
        ),
        work=lambda blocks=1000, reps=1, **_: Work(flops=0, launches=1),
        inputs=lambda n=None, dtype=None, seed=0, **_: (),
        result_dtype=lambda **_: np.dtype(np.int64),
        defaults={"blocks": 1000},
    )
)
