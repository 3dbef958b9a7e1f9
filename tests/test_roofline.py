import numpy as np
import pytest

from rooflab import roofline
from rooflab.roofline import Roofline, attainable, bandwidth_ceilings, level_windows, ridge_point

CACHES = [
    {"name": "L1", "level": 1, "size_bytes": 32 << 10, "instances": 2, "private": True, "shared_by_cpus": 1},
    {"name": "L2", "level": 2, "size_bytes": 512 << 10, "instances": 2, "private": True, "shared_by_cpus": 1},
    {"name": "L3", "level": 3, "size_bytes": 32 << 20, "instances": 1, "private": False, "shared_by_cpus": 2},
]


def test_attainable_and_ridge():
    assert attainable(0.5, 100.0, 20.0) == pytest.approx(10.0)
    assert attainable(50, 100.0, 20.0) == pytest.approx(100.0)
    np.testing.assert_allclose(attainable([1, 5, 10], 100.0, 20.0), [20, 100, 100])
    assert ridge_point(100.0, 20.0) == 5.0


def test_windows_scale_private_caches_with_threads():
    w1 = {w["level"]: w for w in level_windows(CACHES, 1)}
    w2 = {w["level"]: w for w in level_windows(CACHES, 2)}
    assert w1["L1"]["hi"] == 16 << 10 and w2["L1"]["hi"] == 32 << 10
    assert w1["L2"]["lo"] == 64 << 10 and w1["L2"]["hi"] == 256 << 10
    assert w1["L3"]["hi"] == 8 << 20 and w2["L3"]["hi"] == 8 << 20  # shared LLC: C/4, not scaled
    assert w1["DRAM"]["lo"] == 128 << 20 and w1["DRAM"]["hi"] is None


def _points(profile, threads=1, kernel="read"):
    return [
        {"working_set_bytes": s, "gbps": {"median": v}, "threads": threads, "kernel": kernel, "status": "ok"}
        for s, v in profile
    ]


def test_bandwidth_ceilings_from_a_synthetic_staircase():
    sizes = [8 << 10 << i for i in range(18)]  # 8 KiB .. 1 GiB

    def bw(s):
        if s <= 32 << 10:
            return 100.0
        if s <= 512 << 10:
            return 50.0
        if s <= 8 << 20:
            return 30.0  # the L3 plateau ends at 8 MiB although the OS says 32 MiB
        return 10.0

    pts = _points([(s, bw(s)) for s in sizes])
    cs = {c["level"]: c for c in bandwidth_ceilings(pts, CACHES, 1, "read")}
    assert set(cs) == {"L1", "L2", "L3", "DRAM"}
    assert cs["L1"]["value"] == 100 and cs["L2"]["value"] == 50 and cs["L3"]["value"] == 30
    assert cs["DRAM"]["value"] == 10 and cs["DRAM"]["points_bytes"][0] == 128 << 20
    assert cs["L3"]["plateau_end_bytes"] == 8 << 20 and cs["L3"]["os_size_bytes"] == 32 << 20
    assert cs["L1"]["plateau_end_bytes"] == 32 << 10
    assert cs["L1"]["unit"] == "GB/s" and cs["L1"]["kind"] == "bandwidth"


def test_median_is_robust_to_one_outlier():
    sizes = [64 << 10, 128 << 10, 256 << 10]
    pts = _points([(sizes[0], 50.0), (sizes[1], 52.0), (sizes[2], 5.0)])
    cs = {c["level"]: c for c in bandwidth_ceilings(pts, CACHES, 1, "read")}
    assert cs["L2"]["value"] == 50.0 and cs["L2"]["stats"]["min"] == 5.0


def test_a_size_counts_its_fastest_sample_over_all_passes():
    """STREAM's estimator: per size the best rate of any pass, not the best pass's median; the
    medians stay beside it and still decide the noise flag."""
    size = 128 << 10  # inside L2's window
    passes = [
        {"median": 40.0, "max": 41.0},  # a disturbed pass with an undisturbed moment...
        {"median": 36.0, "max": 50.0},  # ...and one whose fastest sample is the roof
        {"median": 42.0, "max": 44.0},
    ]
    pts = [{"working_set_bytes": size, "gbps": g, "threads": 1, "kernel": "read", "status": "ok"} for g in passes]
    (c,) = [c for c in bandwidth_ceilings(pts, CACHES, 1, "read") if c["level"] == "L2"]
    assert c["value"] == 50.0
    assert c["best_pass_median"] == 42.0  # the previous estimator, kept beside it
    assert c["noisy"]  # pass medians 36-42: 14 % apart
    # a record without a maximum (older files) falls back to its median
    old = [{**p, "gbps": {"median": p["gbps"]["median"]}} for p in pts]
    (c,) = [c for c in bandwidth_ceilings(old, CACHES, 1, "read") if c["level"] == "L2"]
    assert c["value"] == 42.0


def test_roofline_lookup_prefers_the_fastest_kernel_per_level():
    result = {
        "ceilings": [
            {"name": "p", "kind": "compute", "dtype": "float64", "threads": 2, "value": 200.0, "unit": "GFLOP/s"},
            {"name": "d1", "kind": "bandwidth", "level": "DRAM", "threads": 2, "kernel": "read", "value": 30.0},
            {"name": "d2", "kind": "bandwidth", "level": "DRAM", "threads": 2, "kernel": "triad", "value": 25.0},
            {"name": "l1", "kind": "bandwidth", "level": "L1", "threads": 2, "kernel": "read", "value": 500.0},
        ]
    }
    rf = Roofline(result)
    assert rf.peak("float64", 2)["value"] == 200.0 and rf.peak("float32", 2) is None
    assert [c["level"] for c in rf.memory_roofs(2)] == ["L1", "DRAM"]
    assert rf.main_memory_roof(2)["kernel"] == "read"
    assert rf.ridge("float64", 2) == pytest.approx(200 / 30)
    assert roofline.capacity(CACHES[2], 2) == 32 << 20


@pytest.mark.parametrize("quick", [True, False])
def test_every_kernel_has_a_sweep_point_in_the_dram_window(quick, monkeypatch):
    """The quick sweep once ended 128 bytes below 4x the LLC for triad (no DRAM ceiling): every
    kernel's largest working set, as allocated, must be inside the DRAM window."""
    from rooflab.kernels.cpu import stream

    from rooflab import memory, suite_ceilings

    monkeypatch.setattr(memory, "available_bytes", lambda: 1 << 40)
    caches = [
        {"name": "L1", "size_bytes": 32 << 10, "private": True, "instances": 2},
        {"name": "L2", "size_bytes": 1 << 20, "private": True, "instances": 2},
        {"name": "L3", "size_bytes": 32 << 20, "private": False, "instances": 1, "shared_by_cpus": 2},
    ]
    plan = suite_ceilings.Plan(threads_all=2, quick=quick, sweep_factor=4.0 if quick else 2**0.5)
    sizes = suite_ceilings.sweep_sizes(plan.min_ws, suite_ceilings.default_max_ws(caches, quick), plan.sweep_factor)
    for kernel in suite_ceilings.KERNELS:
        cases = [c for c in suite_ceilings.bandwidth_cases(plan, sizes) if c.variant.endswith(kernel)]
        largest = max(c.size for c in cases) * 8 * stream.ARRAYS[kernel]
        dram = roofline.level_windows(caches, 2)[-1]
        assert largest >= dram["lo"], (kernel, largest, dram["lo"])


def test_without_cache_sizes_only_large_sets_count_as_dram():
    windows = level_windows([], 2)
    assert [w["level"] for w in windows] == ["DRAM"] and windows[0]["lo"] >= 1 << 30
    pts = _points([(8 << 10, 300.0), (64 << 20, 50.0), (2 << 30, 20.0)], kernel="triad")
    (c,) = bandwidth_ceilings(pts, [], 1, "triad")
    assert c["level"] == "DRAM" and c["value"] == 20.0  # the cache-resident points are not DRAM


def _dram_update(threads, value):
    return {
        "name": f"DRAM update bandwidth, {threads}T",
        "kind": "bandwidth",
        "level": "DRAM",
        "kernel": "update",
        "threads": threads,
        "value": value,
        "noisy": False,
    }


def test_a_sweep_point_streaming_dram_faster_than_the_update_roof_flags_both():
    """The sweep streams DRAM with the update kernel's mix: a point above the update roof means the
    roof was measured on a busier memory bus. Points at or under the roof change nothing."""
    roofs = [_dram_update(1, 50.0), _dram_update(2, 54.0)]
    sweep = [
        {"threads": 2, "intensity": 0.5, "gflops": {"median": 46.7}},  # 93.4 GB/s > 54 * 1.05
        {"threads": 2, "intensity": 0.125, "gflops": {"median": 6.6}},  # 52.8 GB/s: under the roof
        {"threads": 1, "intensity": 0.125, "gflops": {"median": 6.5}},  # 52 GB/s: within 5 % of 50
        {"threads": 2, "intensity": 8.0, "gflops": {"median": 110.0}},  # compute-bound: 13.8 GB/s
    ]
    notes = roofline.sweep_above_roof(roofs, sweep)
    assert len(notes) == 1 and "93.4 GB/s" in notes[0] and "73% above" in notes[0]
    assert roofs[1]["noisy"] and roofs[1]["beaten_by_sweep"] == pytest.approx(93.4)
    assert sweep[0]["noisy"] and sweep[0]["above_dram_roof"] == pytest.approx(93.4 / 54)
    assert not roofs[0]["noisy"] and not any(p.get("noisy") for p in sweep[1:])


def _bw(level, value, threads=1, kernel="triad"):
    return {"name": f"{level} {kernel} {threads}T", "kind": "bandwidth", "level": level, "kernel": kernel,
            "threads": threads, "value": value, "noisy": False}  # fmt: skip


def test_a_slower_level_above_a_faster_one_flags_the_low_nearer_one_only():
    """Neighbours and non-neighbours alike: L1 low from noise with L2 above both L1 and L3, L3 above L1;
    only L1 is flagged (interference only slows: it flagged L2 and L3 too, issue 37)."""
    cs = [_bw("L1", 100.0), _bw("L2", 110.0), _bw("L3", 104.0), _bw("DRAM", 20.0), _bw("L1", 300.0, threads=2)]
    notes = roofline.order_violations(cs)
    flagged = {c["name"] for c in cs if c.get("order_violation")}
    assert flagged == {"L1 triad 1T"}
    assert cs[0]["noisy"] and not any(c["noisy"] for c in cs[1:])
    assert len(notes) == 2 and any("L3 triad 1T" in n and "L1 triad 1T" in n for n in notes)
    ordered = [_bw("L1", 100.0), _bw("L2", 101.0), _bw("L3", 50.0)]  # within 2 %: not a violation
    assert roofline.order_violations(ordered) == [] and not any(c["noisy"] for c in ordered)


def test_an_all_thread_dram_figure_that_did_not_scale_while_the_caches_did_is_flagged_noisy():
    """Issue 37: a quick run's 2-thread DRAM equal to its 1-thread one (16.8 GB/s; the full run on that
    SKU: 32.5) was taken as a roof unflagged. A run whose DRAM scales a little (one core nearly fills
    the bus, as on the Zen 3 VM: 39.8 -> 46.2 GB/s) is left alone."""
    cs = [_bw("L1", 300.0), _bw("L2", 100.0), _bw("DRAM", 16.8), _bw("L1", 590.0, 2), _bw("L2", 190.0, 2),
          _bw("DRAM", 16.8, 2)]  # fmt: skip
    notes = roofline.flat_main_memory(cs)
    assert cs[-1]["noisy"] and cs[-1]["flat_with_threads"] and len(notes) == 1 and "DRAM" in notes[0]
    assert not any(c["noisy"] for c in cs[:-1])
    zen3 = [_bw("L1", 205.0), _bw("L2", 176.0), _bw("DRAM", 39.8), _bw("L1", 410.0, 2), _bw("L2", 333.0, 2),
            _bw("DRAM", 46.2, 2)]  # fmt: skip
    assert roofline.flat_main_memory(zen3) == [] and not any(c["noisy"] for c in zen3)
    no_scale = [_bw("L1", 300.0), _bw("DRAM", 16.8), _bw("L1", 310.0, 2), _bw("DRAM", 16.8, 2)]  # one core's worth
    assert roofline.flat_main_memory(no_scale) == []
