"""Host memory: cache-line (page) aligned arrays, a check that a working set fits, and the size cap
every suite that sizes its own arrays reads (--max-working-set, a quick run's budget, free memory).

Bandwidth kernels need arrays that start on a cache line: a 64 B vector load that straddles two
lines is two loads, and numpy only guarantees 16 B. Page alignment also keeps runs comparable
(the same offset into every page, whatever malloc returned).
"""

from __future__ import annotations

import math
import os

import numpy as np
from numba import njit

from .errors import RooflabError

PAGE = 4096


@njit(cache=True)
def _address(a):
    """The data pointer (``a.ctypes.data`` costs ~1.2 us from Python, this ~0.2 us: kernels on small
    planes allocate their output per call, where the microsecond shows)."""
    return a.ctypes.data


def aligned_empty(n: int, dtype=np.float64, align: int = PAGE) -> np.ndarray:
    """Uninitialised 1-D array of ``n`` elements whose data pointer is a multiple of ``align``."""
    dtype = np.dtype(dtype)
    raw = np.empty(n * dtype.itemsize + align, dtype=np.uint8)
    offset = (-_address(raw)) % align
    return raw[offset : offset + n * dtype.itemsize].view(dtype)


def aligned_array(shape, dtype=np.float64, zero: bool = False) -> np.ndarray:
    """An ``aligned_empty`` array of ``shape`` (zero-filled if ``zero``): what kernels that load
    whole vectors from arbitrary user-sized arrays are given (numpy's large arrays start 16 B
    into a line here, and every zmm load then spans two lines: the NHWC depthwise conv ran 1.3-1.6x
    slower on them)."""
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(map(int, shape))
    a = aligned_empty(math.prod(shape), dtype).reshape(shape)
    if zero:
        a[...] = 0
    return a


def meminfo(key: str) -> int | None:
    """A /proc/meminfo field in bytes (None where the OS does not say)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def available_bytes() -> int | None:
    """Memory that can be allocated without swapping (MemAvailable)."""
    avail = meminfo("MemAvailable")
    if avail is not None:
        return avail
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


QUICK_BUDGET = 3 << 30  # all a --quick suite's arrays at once: fits a 4 GB machine with the interpreter
_working_set_limit: int | None = None  # this run's --max-working-set (None: free memory decides)


def set_working_set_limit(nbytes: int | None) -> None:
    """The run's --max-working-set, read by every suite that sizes its own arrays (cmd_run sets it)."""
    global _working_set_limit
    _working_set_limit = nbytes


def working_set_limit() -> int | None:
    return _working_set_limit


def array_cap(live_arrays: int, quick: bool = False) -> int:
    """The largest array a suite may allocate when ``live_arrays`` arrays of that size are alive at
    once (its kernel's arrays, the reference's output, verification temporaries): the run's
    --max-working-set, 3 GiB in a --quick run and 80 % of the free memory, shared among them.
    (A quick elementwise run sized by 4x an OS-reported 480 MiB LLC held ~16 GB and was OOM-killed.)"""
    budgets = [b for b in (_working_set_limit, QUICK_BUDGET if quick else None) if b]
    avail = available_bytes()
    if avail:
        budgets.append(int(0.8 * avail))
    return min(budgets) // max(live_arrays, 1) if budgets else 1 << 62


def require_fits(nbytes: int, what: str, headroom: float = 0.8, hint: str | None = None) -> None:
    """Raise a RooflabError before allocating ``nbytes`` that would not fit in free memory."""
    avail = available_bytes()
    if avail is not None and nbytes > headroom * avail:
        raise RooflabError(
            f"{what} needs {fmt_bytes(nbytes)} but only {fmt_bytes(avail)} of memory is free",
            hint or "pass a smaller --max-working-set (e.g. --max-working-set 1G) or free memory",
        )


def check_footprint(nbytes: int, what: str) -> None:
    """Refuse, before anything is allocated, a case whose arrays (``nbytes`` at once) exceed the
    run's --max-working-set or would not fit in free memory (RooflabError: the driver records it
    as that case's error and goes on with the next)."""
    if _working_set_limit and nbytes > _working_set_limit:
        raise RooflabError(
            f"{what} holds {fmt_bytes(nbytes)} at once, over --max-working-set {fmt_bytes(_working_set_limit)}: not run",
            "pass a larger --max-working-set to measure it",
        )
    require_fits(nbytes, what)


def fmt_bytes(n: float) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            v = n / size
            return f"{v:.0f} {unit}" if v == int(v) else f"{v:.1f} {unit}"
    return f"{int(n)} B"


def parse_size(text: str) -> int:
    """'64K', '32MiB', '2G', '1048576' -> bytes (binary multiples)."""
    s = str(text).strip().upper().replace("IB", "").replace("B", "")
    mult = 1
    for suffix, m in (("K", 1 << 10), ("M", 1 << 20), ("G", 1 << 30), ("T", 1 << 40)):
        if s.endswith(suffix):
            s, mult = s[:-1], m
            break
    try:
        value = float(s)
    except ValueError:
        raise RooflabError(f"cannot read size {text!r}", "write it like 64K, 32M or 2G") from None
    if value <= 0:
        raise RooflabError(f"size must be positive, got {text!r}")
    return int(value * mult)


def random_aligned(n: int, dtype, seed: int, count: int) -> tuple:
    """``count`` cache-line aligned arrays of ``n`` values uniform in [0.5, 1.5) (fixed seed): every
    element differs, so a kernel that skips or repeats elements changes the checked result."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        a = aligned_empty(n, dtype)
        a[:] = rng.random(n, dtype=np.float64) + 0.5
        out.append(a)
    return tuple(out)
