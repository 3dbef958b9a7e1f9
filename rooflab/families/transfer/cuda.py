"""Host <-> device transfers (issue 14): the interconnect's latency (small copies) and bandwidth
(large ones), pageable and pinned, as ceilings beside HBM's.

  cuda.transfer.00-h2d-pageable   device_array.set(numpy array): what cupy.asarray does (the driver
                                  stages pageable memory through a pinned bounce buffer)
  cuda.transfer.01-h2d-pinned     the same from page-locked memory (cupyx.empty_pinned): DMA direct
  cuda.transfer.00-d2h-pageable   device_array.get(out=numpy array)
  cuda.transfer.01-d2h-pinned     the same into page-locked memory
Each direction is its own ladder (``op`` = "h2d" / "d2h"): pageable is what a library user gets,
pinned is the technique.

Sizes: bytes (int, a multiple of 4) or {"bytes": n}, 4 KiB to 1 GiB in the suite; a size larger than
the free device memory or the available host memory is refused with the figures, before anything is
allocated. Verification: the copy must equal its source, element for element (float32 data).
Declared work: the bytes copied (read and written once each side: Work.bytes_read = n, written = n is
not counted twice; bandwidth = n / t as nvbandwidth reports it).
Napkin math: PCIe 5.0 x16 ~ 55-64 GB/s in each direction pinned (H200 SXM: NVLink-C2C only on Grace
systems, ~450 GB/s); 4 KiB takes ~10 us of fixed cost, so the small end is a latency.
Run: ``rooflab run --device cuda --suite transfer``, or
``python -m pytest tests/test_cuda_families_gpu.py -k transfer`` on a GPU machine.
"""

from __future__ import annotations

import numpy as np

from ...cuda.args import cupy, free_device_bytes, require
from ...errors import RooflabError
from ...memory import available_bytes, fmt_bytes
from ...registry import Case, Variant, register
from ...work import Work

DTYPE = np.dtype(np.float32)


def nbytes_of(name: str, size) -> int:
    n = size.get("bytes") if isinstance(size, dict) else size
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n <= 0 or n % DTYPE.itemsize:
        raise RooflabError(f"{name}: size must be a positive number of bytes, a multiple of 4, got {size!r}")
    return int(n)


def check_fits(name: str, n: int, host_copies: int = 1) -> None:
    """Refuse a transfer whose buffers do not fit, naming the figures (before allocating anything)."""
    free = free_device_bytes()
    if n > 0.9 * free:
        raise RooflabError(
            f"{name}: {fmt_bytes(n)} does not fit in the GPU's {fmt_bytes(free)} of free memory",
            "pass a smaller transfer size",
        )
    avail = available_bytes()
    if avail is not None and host_copies * n > 0.8 * avail:
        raise RooflabError(
            f"{name}: {fmt_bytes(host_copies * n)} of host buffers do not fit in the {fmt_bytes(avail)} available",
            "pass a smaller transfer size",
        )


def _host(n_elems: int, pinned: bool):
    if pinned:
        import cupyx

        return cupyx.empty_pinned((n_elems,), dtype=DTYPE)
    return np.empty(n_elems, dtype=DTYPE)


def _fill(a, seed):
    a[...] = np.random.default_rng(seed).standard_normal(a.size, dtype=np.float32)


def _h2d_inputs(name, pinned):
    def inputs(size=None, dtype=None, seed=0, threads=None):
        n = nbytes_of(name, size if size is not None else 1 << 20)
        check_fits(name, n)
        host = _host(n // DTYPE.itemsize, pinned)
        _fill(host, seed)
        return cupy().empty(host.size, dtype=DTYPE), host

    return inputs


def _d2h_inputs(name, pinned):
    def inputs(size=None, dtype=None, seed=0, threads=None):
        n = nbytes_of(name, size if size is not None else 1 << 20)
        check_fits(name, n)
        dev = cupy().random.default_rng(seed).standard_normal(n // DTYPE.itemsize, dtype=np.float32)
        host = _host(dev.size, pinned)
        host[...] = 0.0
        return host, dev

    return inputs


def _check_pair(name, host, dev):
    require(name, dev, "device array", dtype=DTYPE, ndim=1)
    if not isinstance(host, np.ndarray) or host.dtype != DTYPE or host.shape != dev.shape:
        raise RooflabError(f"{name}: the host array must be a float32 numpy array of shape {tuple(dev.shape)}")
    if not host.flags.c_contiguous:
        raise RooflabError(f"{name}: the host array is not C-contiguous")


def _h2d(name, pinned):
    def kernel(dev, host, reps=1, threads=None):
        _check_pair(name, host, dev)
        for _ in range(int(reps)):
            dev.set(host)
        return dev

    return kernel


def _d2h(name, pinned):
    def kernel(host, dev, reps=1, threads=None):
        _check_pair(name, host, dev)
        for _ in range(int(reps)):
            dev.get(out=host)
        return host

    return kernel


def _work(a, b, reps=1, **_):
    return Work(bytes_read=a.nbytes, launches=1).scaled(reps)  # n bytes over the link per copy


VARIANTS = {}
for _num, _dir, _pinned in ((0, "h2d", False), (1, "h2d", True), (0, "d2h", False), (1, "d2h", True)):
    _name = f"cuda.transfer.{_num:02d}-{_dir}-{'pinned' if _pinned else 'pageable'}"
    VARIANTS[_dir, _pinned] = _name
    h2d = _dir == "h2d"
    register(
        Variant(
            name=_name,
            family="transfer",
            device="cuda",
            number=_num,
            description=f"{'host -> device' if h2d else 'device -> host'}, {'pinned' if _pinned else 'pageable'} host memory",
            kernel=_h2d(_name, _pinned) if h2d else _d2h(_name, _pinned),
            reference=(lambda dev, host, **_: host) if h2d else (lambda host, dev, **_: dev),
            work=_work,
            inputs=_h2d_inputs(_name, _pinned) if h2d else _d2h_inputs(_name, _pinned),
            result_dtype=lambda *a, **k: DTYPE,
            op=_dir,
            dtypes=("float32",),
        )
    )


def sizes(quick: bool) -> list[int]:
    """4 KiB to 1 GiB, x4 steps (quick: x16 steps up to 256 MiB)."""
    return [4096 << (4 * i) for i in range(5)] if quick else [4096 << (2 * i) for i in range(10)]


def cases(quick: bool, threads=None) -> list[Case]:
    out = []
    for n in sizes(quick):
        for (direction, pinned), name in VARIANTS.items():
            out.append(
                Case(
                    variant=name,
                    size={"bytes": n},
                    dtype="float32",
                    threads=0,
                    label=f"{direction} {'pinned' if pinned else 'pageable'} {n >> 10} KiB",
                    meta={"level": "host", "direction": direction, "pinned": pinned, "kind": "transfer"},
                )
            )
    return out
