"""Family `latency`: the fixed cost of asking for work (dispatch on the CPU, launch on the GPU).

An op whose time is within 2x of these is latency-bound: making it faster means calling less.
"""

from __future__ import annotations

import numpy as np

from ..cuda import knobs as kn
from ..cuda import loader
from ..kernels.cpu import latency
from ..memory import random_aligned
from ..registry import Variant, register
from ..threads import resolve_threads
from ..work import Work

# ---- latency: dispatch paths ---------------------------------------------------------------------


def _fork_join(out, reps=1, threads=None):
    for _ in range(int(reps)):
        latency.fork_join(out)
    return out


def _empty_calls(reps=1, threads=None):
    """``reps`` dependent calls of the empty @njit function; returns how many ran."""
    n = 0
    for _ in range(int(reps)):
        n = latency.empty(n)
    return np.int64(n)


register(
    Variant(
        name="cpu.latency.empty",
        family="latency",
        device="cpu",
        description="an @njit call with one integer argument and no work",
        kernel=_empty_calls,
        reference=lambda reps=1, **_: np.int64(reps),  # every call made, none skipped
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
        inputs=lambda n=8, dtype=np.float64, seed=0, **_: random_aligned(n, dtype, seed, 3),
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
        inputs=lambda n=None, dtype=np.float64, seed=0, threads=None, **_: (np.zeros(resolve_threads(threads)),),
    )
)


# ---- launch latency ----------------------------------------------------------------------------


def empty_kernel():
    return loader.kernel("launch.cu", "empty_kernel")


def _empty(flag, reps=1, threads=None):
    fn = empty_kernel()
    for _ in range(int(reps)):
        fn((1,), (32,), (flag,))
    return flag


register(
    Variant(
        name="cuda.launch.empty",
        family="launch",
        device="cuda",
        description="an empty kernel launch",
        kernel=_empty,
        reference=lambda flag, **_: np.int32(0),
        work=lambda flag, reps=1, **_: Work(launches=int(reps)),
        inputs=lambda n=None, dtype=None, seed=0, **_: (kn.cp().full(1, 12345, dtype=kn.cp().int32),),
        result_dtype=lambda *a, **k: np.dtype(np.int32),
    )
)
