"""Passes of a ceiling judged per cycle where they run at the core's clock.

A Zen 5 VM's quick run measured FP64 FMA at 115.5 then 121.7 GFLOP/s, its unit clock 3.93 then
4.07 GHz: 29.4 and 29.9 FLOP per cycle. The clock moved, nobody disturbed the peak; flagged
`noisy` it taught users to ignore the flag. These tests hold both sides: a clock move is not
noise (and is said), a slowdown at the same clock still is; the L3 and DRAM stay judged as measured.
"""

from __future__ import annotations

from rooflab import roofline
from rooflab.suite_ceilings import pass_agreement, pass_fields


def _pass(gflops: float, ghz: float, noisy: bool = False) -> dict:
    return {
        "gflops": {"median": gflops},
        "clock_ghz": {"unit": [ghz], "unit_per_sample": [ghz, ghz * 1.001, ghz * 0.999]},
        "noisy": noisy,
    }


def test_a_clock_that_moved_between_passes_is_not_noise_and_is_said():
    cands = [_pass(115.5, 3.93), _pass(121.7, 4.07)]
    f = pass_fields(cands[1], pass_agreement(cands, cands[1]))
    assert f["pass_spread"] > roofline.PASS_SPREAD  # in FLOP/s they are 5 % apart: the interval keeps it
    assert f["per_cycle_spread"] < 0.02
    assert not f["noisy"]
    assert "3.93-4.07 GHz" in f["clock_moved"]
    assert "clock moved" in " ".join(roofline.ceiling_notes({"kind": "compute", **f}))


def test_a_slow_pass_at_the_same_clock_is_still_noise():
    cands = [_pass(110.0, 4.07), _pass(121.7, 4.07)]
    f = pass_fields(cands[1], pass_agreement(cands, cands[1]))
    assert f["noisy"] and "clock_moved" not in f


def test_a_slowdown_larger_than_the_clock_move_is_still_noise():
    cands = [_pass(100.0, 3.93), _pass(121.7, 4.07)]  # 3.5 % clock, 18 % rate
    assert pass_fields(cands[1], pass_agreement(cands, cands[1]))["noisy"]


def test_without_unit_clocks_the_passes_are_judged_as_measured():
    cands = [{"gflops": {"median": 115.5}, "noisy": False}, {"gflops": {"median": 121.7}, "noisy": False}]
    f = pass_fields(cands[1], pass_agreement(cands, cands[1]))
    assert f["per_cycle_spread"] is None and f["noisy"]


def test_a_noisy_best_pass_stays_noisy_whatever_the_clock():
    cands = [_pass(121.0, 4.07), _pass(121.7, 4.07, noisy=True)]
    assert pass_fields(cands[1], pass_agreement(cands, cands[1]))["noisy"]


def _bw(size: int, gbps: float, ghz: float) -> dict:
    return {
        "working_set_bytes": size,
        "gbps": {"median": gbps * 0.98, "max": gbps},
        "clock_ghz": {"before": [ghz], "after": [ghz]},
        "noisy": False,
    }


def test_core_clocked_levels_corroborate_per_cycle_the_others_as_measured():
    # the same bytes per cycle at 3.93 and 4.10 GHz: 4.3 % apart in GB/s (inside 5 %) would pass
    # anyway; 8 % apart needs the clock
    pts = roofline.best_of_passes([_bw(8192, 400.0, 3.80), _bw(8192, 437.0, 4.15)])
    (p,) = pts
    assert p["corroborated"] == 1 and p["corroborated_per_cycle"] == 2
    assert roofline.disturbed(p)  # an L3 or DRAM size: judged as measured
    assert not roofline.disturbed(p, per_cycle=True)  # an L1 or L2 size: the clock moved
    (q,) = roofline.best_of_passes([_bw(8192, 380.0, 4.15), _bw(8192, 437.0, 4.15)])
    assert roofline.disturbed(q, per_cycle=True)  # slower at the same clock: disturbed


def test_a_pass_without_a_clock_probe_falls_back_to_the_measured_rule():
    a, b = _bw(8192, 400.0, 3.80), _bw(8192, 437.0, 4.15)
    del a["clock_ghz"]
    (p,) = roofline.best_of_passes([a, b])
    assert p["corroborated_per_cycle"] is None
    assert roofline.disturbed(p, per_cycle=True)


def test_every_noisy_ceiling_says_why():
    """The flag alone told a user nothing: each cause of `noisy` gives its reason, in the file and the
    table; a quiet ceiling gets none."""
    cands = [_pass(110.0, 4.07), _pass(121.7, 4.07)]
    compute = {"kind": "compute", "value": 121.7, **pass_fields(cands[1], pass_agreement(cands, cands[1]))}
    pts = [{"working_set_bytes": s, "rate": 50.0 + (s % 3), "best_median": 50.0, "threads": 1, "kernel": "read",
            "dtype": "float64", "gbps": {"median": 50.0, "max": 51.0}, "noisy": s > 4 << 10}
           for s in (4 << 10, 8 << 10, 16 << 10, 24 << 10, 28 << 10)]  # fmt: skip
    caches = [{"name": "L1", "size_bytes": 32 << 10, "private": True, "instances": 1}]
    (bw,) = [c for c in roofline.bandwidth_ceilings(pts, caches, 1, "read") if c["level"] == "L1"]
    latency = {"kind": "latency", "value": 90.0, "noisy": True, "pass_spread": 0.4}
    driver_only = {"kind": "latency", "value": 90.0, "noisy": True, "pass_spread": 0.01}
    order = {"kind": "bandwidth", "value": 40.0, "noisy": True, "order_violation": True}
    quiet = {"kind": "compute", "value": 1.0, "noisy": False}
    cs = [compute, bw, latency, driver_only, order, quiet]
    roofline.say_why_noisy(cs)
    assert "passes differ by 10% per cycle" in compute["noise_reasons"][0]
    k, n = bw["disturbed_sizes"]
    assert bw["noisy"] and k > n / 2 and f"{k} of {n} sizes disturbed" in bw["noise_reasons"][0], bw
    assert "passes differ by 40%" in latency["noise_reasons"][0]
    assert "flagged while it was timed" in driver_only["noise_reasons"][0]
    assert "farther level measured faster" in order["noise_reasons"][0]
    assert "noise_reasons" not in quiet
    assert roofline.ceiling_notes(latency)[0] == "noisy: its passes differ by 40%"
