"""The per-thread clock probe: many short probes, the best kept per thread, the add count checked."""

import numpy as np
import pytest
from rooflab.kernels.cpu import clock

from rooflab.cpu import clock as clock_probe
from rooflab.cpu import machine as cpu_machine
from rooflab.errors import VerificationError
from rooflab.threads import max_threads

needs_probe = pytest.mark.skipif(not clock.PROBES_SUPPORTED, reason="per-thread probe needs Linux x86-64")


@needs_probe
def test_probe_runs_on_every_thread_and_counts_its_adds():
    n = min(2, max_threads())
    p = clock_probe.probe_clock(n, probes=5, probe_s=0.0005)
    assert p["verified"] and p["threads"] == n and len(p["per_thread_ghz"]) == n
    assert np.array(p["samples"]).shape == (n, 5) and np.array(p["cpus"]).shape == (n, 5)
    for best, samples in zip(p["per_thread_ghz"], p["samples"]):
        assert best == pytest.approx(max(samples), rel=1e-3)  # the best probe is kept
        assert 0.2 < best < 10  # a clock, not a unit slip (adds/ns)
    assert p["ghz"] == min(p["per_thread_ghz"]) and 0.0 <= p["concurrency"] <= 1.0
    assert p["adds_per_probe"] % clock.ADDS_PER_BLOCK == 0


@needs_probe
def test_the_kernel_result_is_its_closed_form():
    start, end, cpu0, cpu1, result = clock.add_chain_probes(1000, 3, 1)
    assert result.tolist() == [3 * 1000 * clock.ADDS_PER_BLOCK]
    assert np.all(end > start) and np.all(cpu0 >= 0)


def _fake_kernel(slow, skip_thread=None):
    """add_chain_probes stand-in: 1 ns per add at 3 GHz (1000 blocks = 33.3 us), some probes slowed."""

    def run(blocks, probes, nthreads):
        adds = blocks * clock.ADDS_PER_BLOCK
        ns = np.full((nthreads, probes), adds / 3.0)
        for (t, p), factor in slow.items():
            if t < nthreads and p < probes:
                ns[t, p] *= factor
        end = np.cumsum(ns, axis=1).astype(np.int64) + 1000
        start = end - ns.astype(np.int64)
        cpus = np.tile(np.arange(nthreads)[:, None], (1, probes))
        result = np.arange(nthreads, dtype=np.int64) + probes * adds
        if skip_thread is not None:
            result[skip_thread] -= adds  # one probe's adds never ran
        return start, end, cpus, cpus.copy(), result

    return run


@needs_probe
def test_disturbed_probes_do_not_lower_the_clock(monkeypatch):
    # thread 0: all but one probe shared with a neighbour (1.7 GHz as in the issue); thread 1 clean
    slow = {(0, p): 3.0 / 1.7 for p in range(8)}
    monkeypatch.setattr(clock, "add_chain_probes", _fake_kernel(slow))
    p = clock_probe.probe_clock(2 if max_threads() >= 2 else 1, probes=9)
    assert p["per_thread_ghz"][0] == pytest.approx(3.0, rel=1e-3)  # one undisturbed probe is enough
    assert p["median_ghz"][0] == pytest.approx(1.7, rel=1e-2)  # the spread is still on record
    assert clock_probe.contended(p) == []
    everything_slow = {(0, q): 2.0 for q in range(9)}
    monkeypatch.setattr(clock, "add_chain_probes", _fake_kernel(everything_slow))
    if max_threads() >= 2:
        assert clock_probe.contended(clock_probe.probe_clock(2, probes=9)) == [0]


@needs_probe
def test_a_chain_that_skipped_work_is_refused(monkeypatch):
    monkeypatch.setattr(clock, "add_chain_probes", _fake_kernel({}, skip_thread=0))
    with pytest.raises(VerificationError, match="chain results"):
        clock_probe.probe_clock(1, probes=3)


@needs_probe
def test_per_thread_clocks_feed_the_per_count_peaks(monkeypatch):
    monkeypatch.setattr(clock, "add_chain_probes", _fake_kernel({}))
    cpu = {"physical_cores": 2, "fma_units": cpu_machine.fma_units("AuthenticAMD", 0x19, 0x11, {"avx2", "fma"})}
    one = clock_probe.probe_clock(1)
    theo = cpu_machine.peaks_at_clocks(cpu, {1: one["per_thread_ghz"], 2: [3.0, 2.5]})
    by = {(p["dtype"], p["threads"]): p["gflops"] for p in theo["peaks"]}
    assert by[("float64", 1)] == pytest.approx(3.0 * 16, rel=1e-3)
    assert by[("float64", 2)] == pytest.approx((3.0 + 2.5) * 16)
