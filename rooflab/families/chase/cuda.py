"""GPU memory latency by dependent pointer chase (issue 14): ns per load for L1, L2 and HBM, the
latency ceilings that sit under the bandwidth staircase.

  cuda.chase.01-random-ld-ca      random cyclic order over the working set, ld.global.ca (L1 + L2)
  cuda.chase.02-random-ld-cg      the same with ld.global.cg (L2 only): L2 latency at any size
  cuda.chase.03-sequential-ld-ca  slots in address order, one stride apart (what a regular access
                                  pattern gets: the same latency on GPUs, which do not prefetch)

A working set of B bytes holds n = B / stride slots (stride 128 B = one cache line per hop); slot i
stores the address of the next slot of the cycle. One thread walks ``warm`` hops (a whole cycle for
sets up to WARM_MAX_SLOTS slots, so they sit in every cache they fit in; L1 does not survive between
launches), then ``hops`` timed hops; the kernel measures them itself with clock64 and %globaltimer
(``measured_latency(out)``: ns and cycles per hop), so launch overhead and the warm pass stay out of
the figure. Verification: the final slot must be order[(warm + hops) % n], computed on the host
from the permutation; a kernel that skips, repeats or mis-strides a hop fails.

Sizes (``size``): bytes (int), or a dict {"bytes": B} or {"l2": f} (f x cudaDevAttrL2CacheSize,
resolved on the device), with optional "stride" (default 128, a multiple of 8).
Napkin math: ~20 ns L1, ~100-150 ns L2, ~600 ns HBM on H100/H200-class parts; 2^18 HBM hops last
~0.16 s, so a sample is one launch.
Run: ``rooflab run --device cuda --suite chase``, or
``python -m pytest tests/test_cuda_families_gpu.py -k chase`` on a GPU machine.
"""

from __future__ import annotations

import numpy as np

from ...cuda import loader
from ...cuda.args import cupy, free_device_bytes, require
from ...errors import RooflabError
from ...memory import fmt_bytes
from ...registry import Case, Variant, register
from ...work import Work

SOURCE = "chase.cu"
KNOBS = {"CHASE_UNROLL": 8}
LINE = 128
HOPS_MIN, HOPS_MAX = 1 << 16, 1 << 18  # timed hops: a whole cycle where n lies between these
WARM_MAX_SLOTS = 1 << 19  # warm a whole cycle up to 64 MiB at 128 B per slot (above any L2 today)


# ---- the permutation (host) --------------------------------------------------------------------


def cycle_order(n: int, pattern: str = "random", seed: int = 0) -> np.ndarray:
    """The order in which the n slots are visited: a uniformly random single cycle (a random
    permutation read as a cycle: order[j] -> order[j+1] -> ... -> order[0]), or address order."""
    if n < 2:
        raise RooflabError(f"a pointer chase needs at least 2 slots, got {n}")
    if pattern == "random":
        return np.random.default_rng(seed).permutation(n).astype(np.uint32 if n < 1 << 32 else np.int64)
    if pattern == "sequential":
        return np.arange(n, dtype=np.uint32 if n < 1 << 32 else np.int64)
    raise RooflabError(f"unknown chase pattern {pattern!r}", "use 'random' or 'sequential'")


def next_slots(order: np.ndarray) -> np.ndarray:
    """nxt[s] = the slot visited after slot s."""
    nxt = np.empty(order.size, dtype=np.int64)
    nxt[order] = np.roll(order, -1)
    return nxt


def final_slot(order: np.ndarray, hops: int) -> int:
    """Where a walk that starts at order[0] stands after ``hops`` hops."""
    return int(order[int(hops) % order.size])


def walk(nxt: np.ndarray, start: int, hops: int) -> int:
    """The walk itself, hop by hop (for tests of final_slot)."""
    s = int(start)
    for _ in range(int(hops)):
        s = int(nxt[s])
    return s


def plan(n: int, hops=None, warm=None) -> tuple[int, int]:
    """(warm, timed hops) for n slots; explicit values win."""
    h = int(hops) if hops is not None else min(max(n, HOPS_MIN), HOPS_MAX)
    w = int(warm) if warm is not None else (n if n <= WARM_MAX_SLOTS else 0)
    if h < 1 or w < 0:
        raise RooflabError(f"chase: hops={h} must be >= 1 and warm={w} >= 0")
    return w, h


def measured_latency(out) -> dict | None:
    """ns and SM cycles per hop from the kernel's own clocks (out = {final, cycles, ns, hops})."""
    v = np.asarray(out.get() if hasattr(out, "get") else out, dtype=np.float64)
    cycles, ns, hops = v[1], v[2], v[3]
    if hops <= 0 or ns <= 0:
        return None
    return {
        "ns_per_hop": ns / hops,
        "cycles_per_hop": cycles / hops,
        "sm_clock_ghz": cycles / ns,
        "hops": int(hops),
        "method": "clock64 and %globaltimer around the timed hops, on the chip",
    }


# ---- sizes and inputs ----------------------------------------------------------------------------


def l2_bytes() -> int:
    cp = cupy()
    rt = cp.cuda.runtime
    return int(rt.deviceGetAttribute(rt.cudaDevAttrL2CacheSize, cp.cuda.Device().id))


def resolve(name: str, size) -> tuple[int, int]:
    """(working-set bytes, stride) of ``size``; RooflabError for anything malformed."""
    spec = {"bytes": size} if isinstance(size, (int, np.integer)) and not isinstance(size, bool) else size
    if not isinstance(spec, dict) or not ({"bytes", "l2"} & set(spec)):
        raise RooflabError(f"{name}: size must be bytes or a dict with 'bytes' or 'l2', got {size!r}")
    stride = spec.get("stride", LINE)
    if isinstance(stride, bool) or not isinstance(stride, (int, np.integer)) or stride < 8 or stride % 8:
        raise RooflabError(f"{name}: stride={stride!r} must be a positive multiple of 8 bytes")
    nbytes = int(spec["bytes"]) if "bytes" in spec else int(float(spec["l2"]) * l2_bytes())
    if nbytes < 2 * stride:
        raise RooflabError(f"{name}: a {nbytes}-byte working set holds fewer than 2 slots of {stride} B")
    return nbytes - nbytes % int(stride), int(stride)


def _ptr(a) -> int:
    p = getattr(a.data, "ptr", None)  # cupy: a MemoryPointer; numpy stand-ins: their own buffer
    return int(p) if p is not None else int(a.ctypes.data)


def _inputs_fn(name, pattern):
    def inputs(size=None, dtype=None, seed=0, threads=None):
        nbytes, stride = resolve(name, size if size is not None else {"bytes": 64 << 10})
        free = free_device_bytes()
        if nbytes > 0.9 * free:
            raise RooflabError(
                f"{name}: a {fmt_bytes(nbytes)} working set does not fit in the GPU's {fmt_bytes(free)} free",
                "pass a smaller working set",
            )
        cp = cupy()
        n = nbytes // stride
        order = cycle_order(n, pattern, seed)
        chain = cp.zeros(nbytes // 8, dtype=np.uint64)
        heads = chain.reshape(n, stride // 8)[:, 0]  # the first 8 bytes of every slot
        base = np.uint64(_ptr(chain))
        heads[...] = base + cp.asarray(next_slots(order).astype(np.uint64)) * np.uint64(stride)
        return chain, cp.zeros(4, dtype=np.uint64), order

    return inputs


def _check(name, chain, out, order):
    require(name, chain, "chain", dtype=np.uint64, ndim=1)
    require(name, out, "out", dtype=np.uint64, shape=(4,))
    if not isinstance(order, np.ndarray) or order.ndim != 1 or order.size < 2:
        raise RooflabError(f"{name}: order must be the host permutation returned by inputs()")
    if chain.size % order.size:
        raise RooflabError(f"{name}: the chain of {chain.size} words does not hold {order.size} equal slots")


def _kernel_fn(name, function):
    def kernel(chain, out, order, reps=1, threads=None, hops=None, warm=None):
        _check(name, chain, out, order)
        n = order.size
        stride = chain.nbytes // n
        w, h = plan(n, hops, warm)
        base = _ptr(chain)
        start = np.uint64(base + int(order[0]) * stride)
        fn = loader.kernel(SOURCE, function, KNOBS)
        for _ in range(int(reps)):
            loader.launch(fn, 1, 32, (start, np.int64(w), np.int64(h), np.uint64(base), np.uint64(stride), out), name)
        return out[:1]

    return kernel


def reference(chain, out, order, hops=None, warm=None, **_):
    w, h = plan(order.size, hops, warm)
    return np.array([final_slot(order, w + h)], dtype=np.int64)


def _work(chain, out, order, reps=1, hops=None, warm=None, **_):
    w, h = plan(order.size, hops, warm)
    return Work(bytes_read=8.0 * (w + h), launches=1).scaled(reps)


VARIANTS = {}
for _num, _tech, _fn, _pattern, _what in (
    (1, "random-ld-ca", "chase_ca", "random", "dependent loads in random cyclic order, ld.global.ca (L1 + L2)"),
    (2, "random-ld-cg", "chase_cg", "random", "dependent loads in random cyclic order, ld.global.cg (L2 only)"),
    (3, "sequential-ld-ca", "chase_ca", "sequential", "dependent loads in address order, one stride apart"),
):
    _name = f"cuda.chase.{_num:02d}-{_tech}"
    VARIANTS[_tech] = _name
    register(
        Variant(
            name=_name,
            family="chase",
            device="cuda",
            number=_num,
            description=_what,
            kernel=_kernel_fn(_name, _fn),
            reference=reference,
            work=_work,
            inputs=_inputs_fn(_name, _pattern),
            defaults={"hops": None, "warm": None},
            result_dtype=lambda *a, **k: np.dtype(np.int64),
            op=None,
            dtypes=("uint64",),
            after_run=lambda chain, out, *_: {
                "chase_latency": measured_latency(out),  # the hops the kernel timed on the chip
                "chase_bytes": int(chain.nbytes),
            },
        )
    )


# ---- the suite -------------------------------------------------------------------------------------

L1_SIZES = [16 << 10, 32 << 10, 64 << 10, 128 << 10, 192 << 10]
L2_FRACTIONS = [1 / 16, 1 / 8, 1 / 4, 1 / 2, 3 / 4]
HBM_L2_MULTIPLES = [2, 4, 16]
HBM_BYTES = [1 << 30]


def sizes(quick: bool) -> list[tuple[str, dict, str]]:
    """(label, size, level the size is meant for): L1 in bytes, L2 and beyond relative to the
    device's L2 (cudaDevAttrL2CacheSize), then an HBM working set far beyond it."""
    l1 = [16 << 10, 64 << 10] if quick else L1_SIZES
    l2 = [1 / 8, 1 / 2] if quick else L2_FRACTIONS
    hbm = [4] if quick else HBM_L2_MULTIPLES
    out = [(f"{b >> 10} KiB", {"bytes": b}, "L1") for b in l1]
    out += [(f"L2 x {f:g}", {"l2": f}, "L2") for f in l2]
    out += [(f"L2 x {m}", {"l2": m}, "HBM") for m in hbm]
    out += [(f"{b >> 20} MiB", {"bytes": b}, "HBM") for b in ([] if quick else HBM_BYTES)]
    return out


def cases(quick: bool, threads=None) -> list[Case]:
    out = []
    all_sizes = sizes(quick)
    for tech, picks in (
        ("random-ld-ca", all_sizes),
        ("random-ld-cg", [s for s in all_sizes if s[2] != "HBM"][::2]),
        ("sequential-ld-ca", all_sizes[:1] + all_sizes[-1:]),
    ):
        for label, size, level in picks:
            out.append(
                Case(
                    variant=VARIANTS[tech],
                    size=size,
                    dtype="uint64",
                    threads=0,
                    label=f"chase {tech} {label}",
                    meta={"level": level, "kind": "latency", "stride": size.get("stride", LINE)},
                    timing={"reps": 1},
                )
            )
    return out
