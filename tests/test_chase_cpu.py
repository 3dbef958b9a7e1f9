"""The `chase` family on the CPU: the chain is one random cycle through every line, the chase ends
where the visiting order says, chases that skip hops or loop a sub-cycle are rejected, bad input
is refused with the variant's name, and records turn into latency ceilings per level."""

import dataclasses

import numpy as np
import pytest
from rooflab.kernels.cpu import chase as K
from rooflab.kernels.cpu import clock

import rooflab
from rooflab.cpu.backend import cpu_backend
from rooflab.driver import Driver, Settings
from rooflab.families import chase as C
from rooflab.registry import check_cases

RUNNER = Driver(cpu_backend(), Settings(budget_s=0.0, min_samples=1, probe_clock=False, max_attempts=1))
NAMES = ["cpu.chase.01-random-cycle", "cpu.chase.02-random-cycle-hugepages"]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("nbytes", [128, 8 << 10, 64 << 10 | 64, 3 << 20])
def test_chain_is_one_cycle_through_every_line(name, nbytes):
    chain, order = rooflab.get_variant(name).inputs(nbytes)
    lines = nbytes // 64
    assert chain.dtype == np.uint64 and chain.size == lines * 8
    assert chain.ctypes.data % (C.HUGE_PAGE if name.endswith("hugepages") and nbytes > 4096 else 64) == 0
    distinct, hops, closed = K.cycle_lines(chain, lines + 1)
    assert (distinct, hops, closed) == (lines, lines, True)
    C.verify_cycle(chain, order)
    assert not np.array_equal(order[1:], np.arange(1, lines)) or lines <= 3, "the order is shuffled"


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("hops", [None, 1, 7, 8, 4096 + 3])
def test_chase_ends_where_the_order_says(name, hops):
    v = rooflab.get_variant(name)
    ins = v.inputs(16 << 10, seed=3)
    for reps in (1, 3):
        rec = RUNNER.measure(v, ins, threads=1, params={"hops": hops}, reps=reps)
        assert rec["status"] == "ok", rec.get("error")
        h = reps * (hops or 256)
        assert v(*ins, hops=hops, reps=reps) == ins[1][h % 256]
        assert rec["work"]["bytes_read"] == 8 * rec["reps"] * (hops or 256)


def _skips_a_hop(chain, order, hops=None, reps=1, threads=None):
    h = reps * (hops or chain.size // 8)
    return np.int64(K.chase(chain, h - 1) // 8)


def _loops_half_the_cycle(chain, order, hops=None, reps=1, threads=None):
    """Restarts at line 0 after half the lines: a working set half the size it claims."""
    lines = chain.size // 8
    h = reps * (hops or lines)
    return np.int64(K.chase(chain, h % (lines // 2)) // 8)


@pytest.mark.parametrize("kernel", [_skips_a_hop, _loops_half_the_cycle])
def test_chases_that_skip_hops_or_loop_a_subcycle_are_rejected(kernel):
    v = dataclasses.replace(rooflab.get_variant(NAMES[0]), name=f"wrong.{kernel.__name__}", kernel=kernel)
    ins = v.inputs(32 << 10, seed=1)
    rec = RUNNER.measure(v, ins, threads=1, params={"hops": 3 * 512 + 300})
    assert rec["status"] == "failed" and rec["error"].startswith(f"wrong.{kernel.__name__}") and "time_s" not in rec


def test_a_chain_with_subcycles_is_rejected_before_timing():
    """A plain random permutation (not one cycle) would chase a fraction of the working set."""
    v = rooflab.get_variant(NAMES[1])
    chain, order = v.inputs(32 << 10, seed=2)
    lines = chain.size // 8
    half = lines // 2  # close the cycle early: order[0..half) loops, the rest is never visited
    chain[order[half - 1] * 8] = 0
    rec = RUNNER.measure(v, (chain, order), threads=1)
    assert rec["status"] == "failed"
    assert f"visits {half} distinct lines in a cycle of {half} hops, not all {lines}" in rec["error"]
    dup = order.copy()
    dup[5] = dup[6]
    rec = RUNNER.measure(v, (v.inputs(32 << 10)[0], dup), threads=1)
    assert rec["status"] == "failed" and "not a permutation" in rec["error"]


def test_bad_input_names_the_variant():
    v = rooflab.get_variant(NAMES[0])
    chain, order = v.inputs(8 << 10)
    with pytest.raises(rooflab.RooflabError, match=r"cpu.chase.01-random-cycle: chain must be a 1-D uint64 array"):
        v(chain.astype(np.int64), order)
    with pytest.raises(rooflab.RooflabError, match=r"01-random-cycle: order must be .* 128 lines"):
        v(chain, order[:10])
    with pytest.raises(rooflab.RooflabError, match="fewer than 2 cache lines"):
        v.inputs(64)


@pytest.mark.skipif(not clock.SUPPORTED, reason="x86-64 assembly checks")
def test_each_hop_is_one_dependent_load():
    from numba import njit

    k = njit(K.chase.py_func)
    k(np.zeros(64, np.uint64), 100)
    asm = k.overloads[k.signatures[0]].library.get_asm_str()
    hops = [ln for ln in asm.splitlines() if ln.strip().startswith("movq") and ",8), %" in ln]
    assert len(hops) >= 8, "8 unrolled loads whose address is the previous load's value"
    assert not any("sarq" in ln or "cmov" in ln for ln in asm.splitlines() if "8)" in ln)


def test_cases_span_8k_to_where_dram_starts():
    from rooflab.cpu.caches import host_measured

    dram_from = host_measured().dram_from()  # this host's probe: the rule, not the OS's LLC
    for quick in (True, False):
        cs = check_cases(C.cases(quick, [1, 2]))
        sizes = sorted({c.size for c in cs})
        assert sizes[0] == 8 << 10 and sizes[-1] >= dram_from and all(c.threads == 1 for c in cs)
        assert {c.variant for c in cs} == ({NAMES[1]} if quick else set(NAMES))
        assert all(c.params["hops"] >= c.size // 64 for c in cs)


CACHES = [
    {"name": "L1", "size_bytes": 32 << 10, "private": True, "instances": 2},
    {"name": "L2", "size_bytes": 1 << 20, "private": True, "instances": 2},
    {"name": "L3", "size_bytes": 32 << 20, "private": False, "instances": 1, "shared_by_cpus": 2},
]


def _rec(variant, nbytes, ns, ghz=3.5):
    hops = 1000
    return {
        "variant": variant,
        "family": "chase",
        "status": "ok",
        "reps": 2,
        "params": {"hops": hops},
        "chase_bytes": nbytes,
        "lines": nbytes // 64,
        "time_s": {"median": ns * 1e-9 * 2 * hops},
        "clock_ghz": {"before": [ghz], "after": [ghz]},
    }


def test_latency_ceilings_per_level_from_the_staircase():
    truth = {8 << 10: 1.2, 16 << 10: 1.2, 128 << 10: 4.0, 256 << 10: 4.2, 4 << 20: 14.0, 8 << 20: 16.0, 128 << 20: 95.0}
    recs = [_rec(NAMES[1], b, ns) for b, ns in truth.items()]
    recs += [_rec(NAMES[0], b, ns * 1.5) for b, ns in truth.items()]
    recs.append({"variant": NAMES[1], "family": "chase", "status": "failed"})
    ceil = {c["level"]: c for c in C.latency_ceilings(recs, CACHES)}
    assert list(ceil) == ["L1", "L2", "L3", "DRAM"]
    assert ceil["L1"]["value"] == pytest.approx(1.2) and ceil["L1"]["cycles"] == pytest.approx(4.2)
    assert ceil["L2"]["value"] == pytest.approx(4.1) and ceil["L3"]["value"] == pytest.approx(15.0)
    assert ceil["DRAM"]["value"] == pytest.approx(95.0) and ceil["DRAM"]["points_bytes"] == [128 << 20]
    assert all(c["kind"] == "latency" and c["unit"] == "ns" and c["kernel"] == NAMES[1] for c in ceil.values())
    assert C.latency_ceilings(recs, CACHES, variant=NAMES[0])[0]["value"] == pytest.approx(1.8)
    assert [ceil[k]["plateau_end_bytes"] for k in ("L1", "L2", "L3", "DRAM")] == [16 << 10, 256 << 10, 8 << 20, None]
    assert not any(c["noisy"] for c in ceil.values())
    early = [r for r in recs if r.get("chase_bytes") != 8 << 20] + [_rec(NAMES[1], 8 << 20, 90.0)]  # L3 gives out early
    l3 = {c["level"]: c for c in C.latency_ceilings(early, CACHES)}["L3"]
    assert l3["plateau_end_bytes"] == 4 << 20
    # its window then holds two plateaus (14 and 90 ns): flagged, with the reason, never silently a
    # median; the value is the plateau that still hits L3, not DRAM's latency under L3's name
    assert l3["noisy"] and "not a plateau" in l3["noise_reasons"][0] and "up to 4 MiB" in l3["noise_reasons"][0]
    assert l3["value"] == pytest.approx(14.0) and l3["points_bytes"] == [4 << 20]
    assert l3["window_points_bytes"] == [4 << 20, 8 << 20] and l3["window_spread"] == pytest.approx(90 / 14)
    stairs = C.staircase(recs, NAMES[1])
    assert [p["bytes"] for p in stairs] == sorted(truth) and stairs[0]["cycles"] == pytest.approx(4.2)


def test_latency_level_measured_below_the_runs_best_clock_is_flagged():
    """A level chased while the core ran slow reads the same cycles but more ns: flagged, with the
    clock, where the run's best clock is >5 % higher; the same level at the best clock is not."""
    recs = [_rec(NAMES[1], b, 1.2 * 3.5 / 3.2, ghz=3.2) for b in (8 << 10, 16 << 10)]  # L1 at 3.2 GHz
    recs += [_rec(NAMES[1], b, 4.0) for b in (128 << 10, 256 << 10)]  # L2 at 3.5 GHz
    ceil = {c["level"]: c for c in C.latency_ceilings(recs, CACHES, best_ghz=3.5)}
    assert ceil["L1"]["noisy"] and "below the run's best clock" in ceil["L1"]["noise_reasons"][0]
    assert ceil["L1"]["cycles"] == pytest.approx(4.2)
    assert not ceil["L2"]["noisy"]
    assert not any(c["noisy"] for c in C.latency_ceilings(recs, CACHES, best_ghz=3.3))  # within 5 %


def test_a_size_measured_in_passes_keeps_its_fastest_and_flags_a_spread():
    """Passes of the same working set: the staircase keeps the fastest (interference only adds
    time) and the spread; a level whose sizes typically disagree by >5 % is flagged, one whose
    passes agree is not."""
    recs = [_rec(NAMES[1], b, ns) for b, ns in ((8 << 10, 1.20), (16 << 10, 1.21))]
    recs += [_rec(NAMES[1], b, ns) for b, ns in ((8 << 10, 1.22), (16 << 10, 1.20))]  # L1: within 2 %
    recs += [_rec(NAMES[1], b, ns) for b, ns in ((128 << 10, 4.0), (256 << 10, 4.1))]
    recs += [_rec(NAMES[1], b, ns) for b, ns in ((128 << 10, 4.6), (256 << 10, 4.8), (128 << 10, 4.2))]  # L2
    stairs = {p["bytes"]: p for p in C.staircase(recs, NAMES[1])}
    assert len(stairs) == 4 and stairs[128 << 10]["ns"] == pytest.approx(4.0)
    assert stairs[128 << 10]["passes"] == 3 and stairs[128 << 10]["pass_spread"] == pytest.approx(0.15)
    ceil = {c["level"]: c for c in C.latency_ceilings(recs, CACHES)}
    assert ceil["L2"]["value"] == pytest.approx(4.05) and ceil["L2"]["noisy"]
    assert "passes differ" in ceil["L2"]["noise_reasons"][0]
    assert not ceil["L1"]["noisy"] and ceil["L1"]["passes"] == 2
