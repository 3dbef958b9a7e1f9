"""Family `chase`: load-to-use latency of every memory level, by a dependent pointer chase.

What both devices share: the random single cycle over a working set (cache lines), its check,
the closed-form expected end of a chase, declared work, the suite's cases, and the derivation of
`latency` ceilings per level (L1, L2, L3, DRAM) from the records.

The chain. ``L = bytes / 64`` lines; a random visiting order ``order`` (line 0 first, the others
shuffled: every one of the (L-1)! single cycles is equally likely, as with Sattolo's algorithm)
and line ``order[i]`` points to line ``order[i+1]``, the last back to line 0. Because the order is
kept, the line reached after H hops is ``order[H mod L]`` without walking, so the check is
independent of the kernel:

  - a kernel that skips, adds or stops hops ends on another line and is rejected;
  - a chain that is not ONE cycle through all L lines (a plain random permutation has sub-cycles:
    the chase would loop in a fraction of the working set and report a cache's latency for a
    DRAM-sized set) is rejected before timing: the order must visit each line exactly once and
    every link must follow it, i.e. distinct lines visited = cycle length = L.

Ceilings (``latency_ceilings``): median ns per hop over the working sets inside each level's window
of rooflab.roofline.level_windows (1 thread): L1 (0, C1/2], L2 [2 C1, C2/2], L3 [2 C2, C3/4],
DRAM [4 C3, inf); cycles at the clock the runner probed around each measurement.
"""

from __future__ import annotations

import ctypes
import math
from statistics import median

import numpy as np

from ...errors import RooflabError, VerificationError
from ...memory import aligned_empty, fmt_bytes
from ...registry import Case
from ...roofline import PASS_SPREAD, point_stats
from ...work import Work

FAMILY = "chase"
LINE = 64
SLOTS = LINE // 8
HUGE_PAGE = 2 << 20
MADV_HUGEPAGE = 14
MIN_BYTES = 8 << 10


def _madvise_huge(addr: int, length: int) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.madvise(ctypes.c_void_p(addr), ctypes.c_size_t(length), ctypes.c_int(MADV_HUGEPAGE)) == 0
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        return False


def thp_mode() -> str | None:
    """The kernel's transparent huge page policy ([always] / [madvise] / [never]), if it says."""
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            text = f.read()
        return text[text.index("[") + 1 : text.index("]")]
    except (OSError, ValueError):
        return None


def chain_array(lines: int, hugepages: bool) -> np.ndarray:
    """Zeroed uint64 array of ``lines`` cache lines; 2 MiB-aligned and madvised for huge pages
    (before the first touch, so the kernel can back it with 2 MiB pages)."""
    n = lines * SLOTS
    if not hugepages:
        a = aligned_empty(n, np.uint64)
        a[:] = 0
        return a
    nbytes = n * 8
    raw = np.empty(nbytes + 2 * HUGE_PAGE, dtype=np.uint8)
    off = (-raw.ctypes.data) % HUGE_PAGE
    buf = raw[off : off + nbytes]
    _madvise_huge(buf.ctypes.data, -(-nbytes // 4096) * 4096)
    a = buf.view(np.uint64)
    a[:] = 0
    return a


def lines_of(size) -> int:
    nbytes = int(size["bytes"] if isinstance(size, dict) else size)
    lines = nbytes // LINE
    if lines < 2:
        raise RooflabError(f"chase: a working set of {nbytes} B has fewer than 2 cache lines", "pass at least 128 B")
    return lines


def make_inputs(size, seed: int = 0, hugepages: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(chain, order): a random single cycle through all lines of a ``size``-byte working set."""
    lines = lines_of(size)
    rng = np.random.default_rng(seed)
    order = np.empty(lines, dtype=np.int64)
    order[0] = 0
    order[1:] = rng.permutation(np.arange(1, lines, dtype=np.int64))
    chain = chain_array(lines, hugepages)
    chain[order * SLOTS] = np.roll(order, -1).astype(np.uint64) * SLOTS
    return chain, order


def check_inputs(variant: str, chain, order) -> int:
    """Shape and dtype of (chain, order); returns L. RooflabError names the variant."""
    if not isinstance(chain, np.ndarray) or chain.dtype != np.uint64 or chain.ndim != 1:
        raise RooflabError(
            f"{variant}: chain must be a 1-D uint64 array, got "
            f"{getattr(chain, 'dtype', type(chain).__name__)} {getattr(chain, 'shape', '')}",
            "build it with rooflab.families.chase.make_inputs",
        )
    if not chain.flags.c_contiguous or chain.size % SLOTS or chain.size < 2 * SLOTS:
        raise RooflabError(
            f"{variant}: chain must be contiguous and a whole number (>= 2) of {LINE} B lines", "use make_inputs"
        )
    lines = chain.size // SLOTS
    if not isinstance(order, np.ndarray) or order.ndim != 1 or order.size != lines:
        raise RooflabError(
            f"{variant}: order must be a 1-D array of the chain's {lines} lines, got shape "
            f"{getattr(order, 'shape', None)}",
            "pass the (chain, order) pair make_inputs returns",
        )
    return lines


def verify_cycle(chain: np.ndarray, order: np.ndarray, what: str = "chase") -> None:
    """Raise VerificationError unless the chain is ONE cycle through every line, in ``order``."""
    lines = chain.size // SLOTS
    counts = np.bincount(order, minlength=lines) if order.min() >= 0 and order.max() < lines else None
    if counts is None or counts.size != lines or not np.all(counts == 1) or order[0] != 0:
        raise VerificationError(f"{what}: the visiting order is not a permutation of the {lines} lines from line 0")
    links = chain[order * SLOTS]
    bad = np.flatnonzero(links != np.roll(order, -1).astype(np.uint64) * SLOTS)
    if bad.size:
        from ...kernels.cpu.chase import cycle_lines

        distinct, hops, closed = cycle_lines(chain, lines + 1)
        raise VerificationError(
            f"{what}: {bad.size} of {lines} links leave the cycle (first after line {int(order[bad[0]])}); "
            f"from line 0 the chase visits {distinct} distinct lines"
            + (f" in a cycle of {hops} hops" if closed else "")
            + f", not all {lines}"
        )


def expected_line(order: np.ndarray, hops: int) -> np.int64:
    return np.int64(order[int(hops) % order.size])


def total_hops(chain, hops=None, reps=1) -> int:
    lines = chain.size // SLOTS
    return int(reps) * int(hops if hops is not None else lines)


def work(chain, order, hops=None, reps=1, **_) -> Work:
    """One 8-byte load per hop (the line it sits in is what moves: 64 B)."""
    return Work(flops=0, bytes_read=8 * total_hops(chain, hops, reps), bytes_written=0, launches=1)


# ---- the suite --------------------------------------------------------------------------------------


def sizes(llc: int, quick: bool, lo: int = MIN_BYTES) -> list[int]:
    """8 KiB to 4x the LLC, factor 2 (quick) or sqrt(2), whole 4 KiB pages."""
    factor = 2.0 if quick else math.sqrt(2.0)
    out, s = [], float(lo)
    while True:
        v = max(4096, int(round(s / 4096)) * 4096)
        if not out or v > out[-1]:
            out.append(v)
        if v >= 4 * llc:
            return out
        s *= factor


def hops_for(nbytes: int) -> int:
    """Hops per rep: the whole cycle, at least 4096 (the driver repeats reps inside the call)."""
    return max(nbytes // LINE, 4096)


def cases(
    quick: bool, threads: list[int] | None = None, device: str = "cpu", llc: int | None = None, max_bytes=None
) -> list[Case]:
    """The `chase` suite: working sets from 8 KiB to 4x ``llc`` (default: a quarter of where DRAM starts on
    this host, rooflab/cpu/caches.py: the sizes end there),
    at most ``max_bytes``, 1 thread (latency is per core); huge pages in --quick, both page sizes
    in a full run (the difference is the page walk)."""
    if llc is None:  # the sizes end where DRAM starts on this host (its probe), as in a ceilings run
        from ...cpu.caches import host_measured

        llc = -(-host_measured().dram_from() // 4)
    if max_bytes is None:  # the family suite: the run's --max-working-set
        from ...memory import working_set_limit

        max_bytes = working_set_limit()
    names = [f"{device}.chase.02-random-cycle-hugepages"]
    if not quick:
        names.insert(0, f"{device}.chase.01-random-cycle")
    out = []
    for nbytes in sizes(llc, quick):
        if max_bytes and nbytes > max_bytes:
            break
        for name in names:
            out.append(
                Case(
                    name,
                    nbytes,
                    "uint64",
                    1,
                    params={"hops": hops_for(nbytes)},
                    label=f"chase {nbytes // 1024} KiB {name.split('.')[-1]}",
                    meta={"chase_bytes": nbytes, "lines": nbytes // LINE, "thp": thp_mode()},
                    timing={"target_s": 0.02, "cv_limit": 0.1},
                )
            )
    return out


# ---- from records to ceilings ---------------------------------------------------------------------


def ns_per_hop(record: dict) -> float:
    """ns per hop of a record: the GPU kernel's own on-chip clocks (``chase_latency``, launch and
    warm pass excluded), else the driver's median time over the hops of one call (CPU)."""
    if record.get("chase_latency"):
        return float(record["chase_latency"]["ns_per_hop"])
    hops = record["params"].get("hops") or record["lines"]
    return record["time_s"]["median"] / (int(record["reps"]) * int(hops)) * 1e9


def _clock(record: dict) -> float | None:
    if record.get("chase_latency"):
        return float(record["chase_latency"]["sm_clock_ghz"])
    c = record.get("clock_ghz") or {}
    vals = [v for k in ("before", "after") for v in (c.get(k) or [])]
    return float(median(vals)) if vals else None


def staircase(records: list[dict], variant: str | None = None) -> list[dict]:
    """One point per working set: bytes, ns per hop, cycles per hop (for the latency staircase
    plotted next to the bandwidth staircase). A set measured in several passes keeps its fastest
    pass (a neighbour only ever adds time to a load) and the spread between passes."""
    by_size: dict = {}
    for r in records:
        if r.get("family") != FAMILY or r.get("status", "ok") != "ok" or (variant and r["variant"] != variant):
            continue
        ns = ns_per_hop(r)
        ghz = _clock(r)
        lat = r.get("chase_latency") or {}
        p = {
            "variant": r["variant"],
            "bytes": int(r["chase_bytes"]),
            "ns": ns,
            "cycles": lat.get("cycles_per_hop") or (ns * ghz if ghz else None),
            "clock_ghz": ghz,
            "noisy": bool(r.get("noisy")),
            "level": r.get("level"),
        }
        by_size.setdefault((p["variant"], p["bytes"]), []).append(p)
    pts = []
    for passes in by_size.values():
        best = min(passes, key=lambda p: p["ns"])
        best.update(passes=len(passes), pass_spread=max(p["ns"] for p in passes) / best["ns"] - 1)
        pts.append(best)
    return sorted(pts, key=lambda p: (p["variant"], p["bytes"]))


CLOCK_DIP = 0.05  # a level measured this far below the run's best clock is flagged
FLAT = 1.5  # a level's window whose slowest point is this many times its fastest is not one plateau


def _level_ceiling(level: str, inside: list[dict], threads: int, variant: str) -> dict:
    """One `latency` ceiling from the staircase points of a level: the median ns per hop, flagged
    when most points are noisy or when the points differ by more than FLAT. Then the window holds
    two plateaus (on a shared VM the L3 that answers a random chase can end at 3-4 MiB of the 32
    the OS reports) and the value is the median of the first one, the sizes within FLAT of the
    window's fastest (interference only adds time, so the fastest point is the level answering):
    the window's median would be the next level's latency under this one's name."""
    from ...roofline import LATENCY_UNIT

    spread = max(p["ns"] for p in inside) / min(p["ns"] for p in inside)
    window_bytes = [p["bytes"] for p in inside]
    if spread > FLAT:
        fastest = min(p["ns"] for p in inside)
        inside = [p for p in inside if p["ns"] <= FLAT * fastest]
    ns = [p["ns"] for p in inside]
    cyc = [p["cycles"] for p in inside if p["cycles"]]
    clocks = [p["clock_ghz"] for p in inside if p["clock_ghz"]]
    c = {
        "name": f"memory latency {level} (pointer chase)",
        "kind": "latency",
        "level": level,
        "dtype": None,
        "threads": threads,
        "value": float(median(ns)),
        "unit": LATENCY_UNIT,
        "stats": point_stats(ns),
        "cycles": float(median(cyc)) if cyc else None,
        "clock_ghz": float(median(clocks)) if clocks else None,
        "kernel": variant,
        "points_bytes": [p["bytes"] for p in inside],
        "noisy": sum(p["noisy"] for p in inside) > len(inside) / 2 or spread > FLAT,
        "window_spread": spread,
        "passes": min(p.get("passes", 1) for p in inside),
        "pass_spread": float(median(p.get("pass_spread", 0.0) for p in inside)),
    }
    if spread > FLAT:  # the window straddles a step: the level is not where it was expected
        c["window_points_bytes"] = window_bytes
        c.setdefault("noise_reasons", []).append(
            f"points in the window differ {spread:.1f}x: not a plateau (the cache that answers "
            "is smaller than the OS reports, or pages are not huge); the value is the "
            f"{len(inside)} size(s) up to {fmt_bytes(max(p['bytes'] for p in inside))} that still hit it"
        )
    if c["pass_spread"] > PASS_SPREAD:  # the passes of a typical size disagree: a neighbour was there
        c["noisy"] = True
        c.setdefault("noise_reasons", []).append(
            f"passes differ by {c['pass_spread']:.0%} (median over the level's sizes): the fastest is kept"
        )
    return c


GPU_VARIANT = "cuda.chase.01-random-ld-ca"
GPU_LEVELS = ("L1", "L2", "HBM")


def gpu_latency_ceilings(records: list[dict], variant: str = GPU_VARIANT) -> list[dict]:
    """`latency` ceilings of a GPU: per level the case was sized for (L1 bytes, fractions and
    multiples of the device's L2), the median ns per hop the kernel measured on the chip over the
    working sets of that level (threads = 0: the whole device, one thread chasing)."""
    pts = [p for p in staircase(records, variant) if p["level"]]
    out = []
    for level in GPU_LEVELS:
        inside = [p for p in pts if p["level"] == level]
        if not inside:
            continue
        out.append(_level_ceiling(level, inside, 0, variant))
    return out


def ceilings(data: dict) -> list[dict]:
    """The latency ceilings of a result's chase records (CPU: per cache window; GPU: per level)."""
    recs = [r for r in data.get("records", []) if r.get("status") == "ok" and r.get("family") == FAMILY]
    if data.get("device") == "cuda":
        return gpu_latency_ceilings(recs)
    cpu = data["machine"].get("cpu", {})
    return latency_ceilings(recs, cpu.get("caches", []), best_ghz=cpu.get("measured_ghz"))


def latency_ceilings(
    records: list[dict], caches: list[dict], variant: str | None = None, best_ghz: float | None = None
) -> list[dict]:
    """`latency` ceilings, one per memory level, from chase records (1 thread).

    ``variant`` picks the page size (default: the huge-page variant when present, since 4 KiB
    pages add a page walk to every hop beyond the TLB's reach). ``best_ghz``: the best 1-thread
    clock of the whole run; a level measured while the core ran more than CLOCK_DIP below it is
    flagged (its ns per load hold only for that lower clock: cache latencies are fixed in cycles)."""
    from ...roofline import level_windows

    pts = staircase(records)
    if variant is None:
        names = {p["variant"] for p in pts}
        variant = next((n for n in sorted(names) if n.endswith("hugepages")), next(iter(sorted(names)), None))
    pts = [p for p in pts if p["variant"] == variant]
    out = []
    for w in level_windows(caches, 1):
        inside = [p for p in pts if p["bytes"] >= w["lo"] and (w["hi"] is None or p["bytes"] <= w["hi"])]
        if not inside:
            continue
        c = _level_ceiling(w["level"], inside, 1, variant)
        c.update(window_bytes=[w["lo"], w["hi"]], os_size_bytes=w["os_bytes"])
        if best_ghz and c["clock_ghz"] and c["clock_ghz"] < (1 - CLOCK_DIP) * best_ghz:
            c["noisy"] = True
            c.setdefault("noise_reasons", []).append(
                f"measured at {c['clock_ghz']:.2f} GHz, {1 - c['clock_ghz'] / best_ghz:.0%} below the run's best "
                f"clock ({best_ghz:.2f} GHz): the ns per load hold for that clock only"
            )
        out.append(c)
    _plateau_ends(out, pts)
    return out


def _plateau_ends(ceilings: list[dict], pts: list[dict]) -> None:
    """Where each level's plateau really ends: the last size, walking up from its window, still
    faster than the geometric mean of this level's and the next level's latency (on a shared VM the
    L3 that answers can be a fraction of the L3 the OS reports)."""
    for cur, nxt in zip(ceilings, ceilings[1:]):
        threshold = math.sqrt(cur["value"] * nxt["value"])
        end = None
        for p in pts:
            if p["bytes"] < cur["window_bytes"][0]:
                continue
            if p["ns"] > threshold:
                break
            end = p["bytes"]
        cur["plateau_end_bytes"] = end
        cur["plateau_threshold_ns"] = threshold
    if ceilings:
        ceilings[-1].setdefault("plateau_end_bytes", None)
