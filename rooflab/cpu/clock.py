"""The running clock of every thread, robust to a neighbour on the host.

What it measures: each of ``threads`` threads runs ``probes`` dependent-add chains of ~``probe_s``
(kernels/cpu/clock.py, one add per cycle) back to back, all threads at once, each chain timed on
its own thread. A neighbour that takes a core for a few ms (on the 2-vCPU development VM: a 5-8 ms
stall every few tens of ms, and 1.7 GHz read by a single 5 ms probe on a 2.7 GHz core) spoils
some probes, never makes one faster: a chain cannot beat one add per cycle. So the best probe of
each thread is its clock, and one undisturbed probe out of ``probes`` is enough.

Napkin math: 9 probes x 1 ms on every thread = ~10 ms per call plus one ~0.3 ms sizing probe; the
timer (clock_gettime through the vDSO, ~20-50 ns) is 5e-5 of a probe.

Verified: every thread's chain result is checked against its closed form (start + adds), so a
compiler that folded the chain or a thread that skipped its work raises VerificationError.

    from rooflab.cpu.clock import probe_clock
    p = probe_clock(2)                 # {"per_thread_ghz": [3.62, 3.58], "ghz": 3.58, ...}
    peaks_at_clocks(cpu, {1: probe_clock(1)["per_thread_ghz"], 2: p["per_thread_ghz"]})

Run it: ``python -m rooflab.cpu.clock 2``.
"""

from __future__ import annotations

import numpy as np

from ..errors import RooflabError, VerificationError
from ..threads import use_threads

METHOD = "dependent register adds (1/cycle), best of k ~1 ms probes per thread, each timed on its own thread"


def supported() -> bool:
    from ..kernels.cpu import clock

    return clock.PROBES_SUPPORTED


def _run(blocks: int, probes: int, threads: int):
    from ..kernels.cpu import clock

    start, end, cpu0, cpu1, result = clock.add_chain_probes(int(blocks), int(probes), int(threads))
    expected = np.arange(threads, dtype=np.int64) + int(probes) * int(blocks) * clock.ADDS_PER_BLOCK
    if not np.array_equal(result, expected):
        raise VerificationError(
            f"clock probe: chain results {result.tolist()} != expected {expected.tolist()} "
            f"({probes} probes x {blocks} blocks of {clock.ADDS_PER_BLOCK} adds per thread)"
        )
    return start, end, cpu0, cpu1


def probe_clock(threads: int, probes: int = 9, probe_s: float = 0.001) -> dict:
    """Per-thread running clock: ``threads`` threads at once, ``probes`` probes of ~``probe_s`` each.

    Returns
      per_thread_ghz   best probe of each thread (the clock that thread's core ran at)
      ghz              the slowest thread's best: what an all-thread kernel can count on
      median_ghz       per thread, the median probe (how disturbed the probes were)
      samples          [thread][probe] GHz of every probe, in order
      cpus             [thread][probe] CPU each probe started on; migrated: a probe changed CPU
      concurrency      share of the call's span during which every thread was inside its probes
                       (1.0 = all ran side by side; low = the threads ran one after the other)
      adds_per_probe, probe_s (median seconds per probe), probes, threads, verified, method
    Raises RooflabError on a platform without the probe, VerificationError on a wrong count."""
    from ..kernels.cpu import clock

    if not clock.PROBES_SUPPORTED:
        raise RooflabError("the per-thread clock probe needs Linux on x86-64", "the suite then uses the nominal clock")
    if threads < 1 or probes < 1 or probe_s <= 0:
        raise RooflabError(f"probe_clock: threads {threads}, probes {probes}, probe_s {probe_s} must be positive")
    with use_threads(threads):
        # size the probes: one short chain per thread (also compiles the kernel and wakes the pool)
        sizing = 2000
        s, e, _, _ = _run(sizing, 2, threads)
        ghz_guess = float(np.max(sizing * clock.ADDS_PER_BLOCK / np.maximum(e - s, 1)))
        blocks = max(1000, int(probe_s * ghz_guess * 1e9 / clock.ADDS_PER_BLOCK))
        start, end, cpu0, cpu1 = _run(blocks, probes, threads)
    adds = blocks * clock.ADDS_PER_BLOCK
    ns = np.maximum(end - start, 1)
    ghz = adds / ns
    best = ghz.max(axis=1)
    span = int(end.max() - start.min())
    together = int(end[:, -1].min() - start[:, 0].max())
    return {
        "per_thread_ghz": [float(g) for g in best],
        "ghz": float(best.min()),
        "median_ghz": [float(g) for g in np.median(ghz, axis=1)],
        "samples": ghz.round(4).tolist(),
        "cpus": cpu0.tolist(),
        "migrated": bool(np.any(cpu0 != cpu1) or any(len(set(row)) > 1 for row in cpu0.tolist())),
        "concurrency": max(0.0, together / span) if span > 0 else 0.0,
        "adds_per_probe": adds,
        "probe_s": float(np.median(ns)) * 1e-9,
        "probes": probes,
        "threads": threads,
        "verified": True,
        "method": METHOD,
    }


UNIT_METHOD = (
    "a ~0.2 ms dependent-add chain timed on every thread right after each sample of the unit's own "
    "kernel, the median over the samples of the slowest thread (a core keeps the clock of an AVX-512 "
    "or AMX licence for ~2 ms after the last heavy instruction, so the chain counts the cycles of the "
    "clock that unit ran at, sample by sample)"
)


_CHAIN_BLOCKS: dict[int, int] = {}


def chain_clock(threads: int, chain_s: float = 2e-4) -> list[float]:
    """One short dependent-add chain (~``chain_s``) on each of ``threads`` threads at once: each
    thread's clock in GHz. Run right after a peak kernel's burst (the timer's ``after`` hook), it
    counts the cycles of the clock that burst's unit ran at (a core keeps an AVX-512 or AMX licence
    clock for ~2 ms after the last heavy instruction); paired with every sample, a clock that wanders
    between seconds (a host's turbo under its other tenants' load) is the one each sample ran at."""
    from ..kernels.cpu import clock

    if threads not in _CHAIN_BLOCKS:
        s, e, _, _ = _run(2000, 2, threads)
        ghz_guess = float(np.max(2000 * clock.ADDS_PER_BLOCK / np.maximum(e - s, 1)))
        _CHAIN_BLOCKS[threads] = max(200, int(chain_s * ghz_guess * 1e9 / clock.ADDS_PER_BLOCK))
    blocks = _CHAIN_BLOCKS[threads]
    s, e, _, _ = _run(blocks, 1, threads)
    return [float(g) for g in blocks * clock.ADDS_PER_BLOCK / np.maximum(e[:, 0] - s[:, 0], 1)]


def contended(probe: dict, drop: float = 0.85) -> list[int]:
    """Threads whose best probe is below ``drop`` x the best thread's: even their best 1 ms was
    shared with someone else (turbo differences between cores stay well inside 15 %)."""
    top = max(probe["per_thread_ghz"])
    return [t for t, g in enumerate(probe["per_thread_ghz"]) if g < drop * top]


if __name__ == "__main__":  # pragma: no cover - a tool for looking at one machine
    import sys

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    p = probe_clock(n)
    print(
        f"{n} thread(s): best {', '.join(f'{g:.3f}' for g in p['per_thread_ghz'])} GHz, median "
        f"{', '.join(f'{g:.3f}' for g in p['median_ghz'])} GHz, concurrency {p['concurrency']:.2f}, "
        f"cpus {p['cpus']}"
    )
