"""Thread control: numba's pool and the BLAS pool, set together for one measurement.

Kernels split work into ``threads`` chunks inside one parallel region; the pools are limited to the
same count, so a 1-thread measurement is really one core and an all-core one uses each core once.
"""

from __future__ import annotations

import contextlib
import sys

from .cpu.machine import physical_cores, usable_cpus
from .errors import RooflabError


def threads_for(logical: int, physical: int, pool: int) -> int:
    """Threads a measurement may use on a machine: one per usable physical core (no SMT siblings),
    within numba's pool (``pool``)."""
    return max(1, min(pool, logical, max(1, physical)))


def max_threads() -> int:
    """This host's ``threads_for``."""
    import numba

    return threads_for(len(usable_cpus()), physical_cores(), numba.config.NUMBA_NUM_THREADS)


def check_threads(n: int) -> int:
    top = max_threads()
    if n < 1:
        raise RooflabError(f"--threads must be at least 1, got {n}")
    if n > top:
        raise RooflabError(
            f"--threads {n} is more than the {top} usable cores of this machine", f"pass --threads {top} or fewer"
        )
    return n


_BLAS: tuple | None = None  # (len(sys.modules) when scanned, threadpoolctl's controller of the BLAS pools)


def blas_pools():
    """threadpoolctl's controller of the loaded BLAS libraries, scanned again only after an import
    (a library comes with a module). threadpool_limits scans every loaded library on each call:
    ~0.3 ms here, 3.7 s of a tiny `rooflab llm` run that verifies ~11k op copies; a kept
    controller limits in ~17 us."""
    global _BLAS
    from threadpoolctl import ThreadpoolController

    if _BLAS is None or _BLAS[0] != len(sys.modules):
        _BLAS = (len(sys.modules), ThreadpoolController().select(user_api="blas"))
    return _BLAS[1]


@contextlib.contextmanager
def use_threads(n: int):
    """numba.set_num_threads(n) and threadpoolctl's BLAS limit for the duration of the block."""
    import numba

    old = numba.get_num_threads()
    numba.set_num_threads(n)
    try:
        with blas_pools().limit(limits=n):
            yield n
    finally:
        numba.set_num_threads(old)


@contextlib.contextmanager
def torch_threads(n: int):
    """torch's intra-op threads set to ``n`` for the duration of the block, the caller's restored
    after (torch imported here: callers have it installed)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield n
    finally:
        torch.set_num_threads(before)


def resolve_threads(threads: int | None) -> int:
    """``threads``, or numba's current thread count when None (what a kernel call will use)."""
    if threads is None:
        import numba

        return numba.get_num_threads()
    return int(threads)
