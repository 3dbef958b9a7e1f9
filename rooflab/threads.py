"""Thread control: numba's pool and the BLAS pool, set together for one measurement.

Kernels split work into ``threads`` chunks inside one parallel region; the pools are limited to the
same count, so a 1-thread measurement is really one core and an all-core one uses each core once.
"""

from __future__ import annotations

import contextlib

from .cpu.machine import physical_cores, usable_cpus
from .errors import RooflabError


def max_threads() -> int:
    """Threads a measurement may use: one per usable physical core (no SMT siblings)."""
    import numba

    return min(numba.config.NUMBA_NUM_THREADS, len(usable_cpus()), max(1, physical_cores()))


def check_threads(n: int) -> int:
    top = max_threads()
    if n < 1:
        raise RooflabError(f"--threads must be at least 1, got {n}")
    if n > top:
        raise RooflabError(
            f"--threads {n} is more than the {top} usable cores of this machine", f"pass --threads {top} or fewer"
        )
    return n


@contextlib.contextmanager
def use_threads(n: int):
    """numba.set_num_threads(n) and threadpoolctl's BLAS limit for the duration of the block."""
    import numba
    from threadpoolctl import threadpool_limits

    old = numba.get_num_threads()
    numba.set_num_threads(n)
    try:
        with threadpool_limits(limits=n, user_api="blas"):
            yield n
    finally:
        numba.set_num_threads(old)


def resolve_threads(threads: int | None) -> int:
    """``threads``, or numba's current thread count when None (what a kernel call will use)."""
    if threads is None:
        import numba

        return numba.get_num_threads()
    return int(threads)
