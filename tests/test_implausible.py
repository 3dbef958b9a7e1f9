"""Ceilings that cannot be true (issue 27): flagged with the reason, kept in the file, never used as
roofs (placement uses the other thread count's roofs with a one-line note, or refuses), re-measured
once by the run, drawn grey and dashed; an op measured above its roof is a warning.

Input: tests/test_plots.py's synthetic ceilings (clean at 1 and 2 threads) with the issue's quick run
pasted into its 2-thread ceilings: FP32 peak 0.24 GFLOP/s (0 % of theoretical), L1 1.96 GB/s."""

from __future__ import annotations

import copy

import pytest

from rooflab import roofline
from rooflab.charts import roofline as roofline_chart
from rooflab.errors import RooflabError
from rooflab.models import place
from tests.test_plots import synthetic


def bad_two_threads() -> dict:
    d = synthetic(op_threads=())
    for c in d["ceilings"]:
        if c["threads"] == 2 and c["kind"] == "compute" and c["dtype"] == "float32":
            c["value"], c["fraction_of_theoretical"] = 0.24, 0.24 / 179.2
        if c["threads"] == 2 and c.get("level") == "L1":
            c["value"] = 1.96
    return d


def names(flags: dict) -> set:
    return {k for k in flags}


def test_the_clean_synthetic_ceilings_are_all_plausible():
    assert roofline.implausible(synthetic()["ceilings"]) == {}


def test_each_rule_names_the_ceiling_that_cannot_be_true():
    flags = roofline.implausible(bad_two_threads()["ceilings"])
    assert ("float32 FMA peak, 2 threads", 2) in flags
    assert "theoretical" in flags[("float32 FMA peak, 2 threads", 2)]
    assert "below" in flags[("L1 triad", 2)]  # under DRAM and under its own 1-thread figure
    assert all(t == 2 for _, t in flags)  # the 1-thread ceilings stay roofs


def test_a_level_below_a_slower_one_and_two_threads_below_one():
    cs = copy.deepcopy(synthetic()["ceilings"])
    one_l2 = next(c for c in cs if c["threads"] == 1 and c["level"] == "L2")
    one_l2["value"] = 10.0  # below the 1-thread L3 update figure (218 GB/s) by more than 1.5x
    two_dram = next(c for c in cs if c["threads"] == 2 and c["level"] == "DRAM")
    two_dram["value"] = 15.0  # below the 1-thread DRAM figure (24)
    flags = roofline.implausible(cs)
    assert "below L3 update" in flags[("L2 update", 1)]
    assert "1-thread" in flags[("DRAM triad", 2)]


def test_flagged_ceilings_are_no_roofs_but_stay_in_the_file():
    d = bad_two_threads()
    notes = roofline.mark_implausible(d["ceilings"])
    assert len(notes) == 2 and all("cannot be true" in n for n in notes)
    rf = roofline.Roofline(d)
    assert rf.peak("float32", 2) is None  # not 0.24: the FP32 peak of 2 threads has no usable figure
    assert rf.peak("float32", 1)["value"] > 80
    assert rf.memory_roof("L1", 2) is None
    assert {c["name"] for c in rf.flagged_ceilings(2)} == {"float32 FMA peak, 2 threads", "L1 triad"}
    assert len(d["ceilings"]) == len(synthetic()["ceilings"])  # kept


def test_placement_uses_the_other_thread_count_with_one_line_note():
    roofs = place.Roofs(bad_two_threads(), 2)
    assert roofs.threads == 1
    assert "cannot be true" in roofs.note and "ops run at 1 thread(s)" in roofs.note
    assert place.run_threads(roofs, 2) == 1  # the ops run at the threads of the roofs they meet
    assert place.Roofs(synthetic(), 2).note is None and place.run_threads(place.Roofs(synthetic(), 2), 2) == 2


def test_placement_refuses_when_every_thread_count_has_impossible_roofs():
    d = bad_two_threads()
    for c in d["ceilings"]:
        if c["threads"] == 1 and c.get("level") == "L1":
            c["value"] = 1.0
    with pytest.raises(RooflabError, match="cannot be true at every thread count"):
        place.Roofs(d, 2)


def test_an_op_above_its_roof_is_a_warning_never_a_quiet_number():
    roofs = place.Roofs(synthetic(), 1)
    # 1 GFLOP of relu-like work at 0.125 FLOP/B in 1 ms: 1000 GFLOP/s, far above every roof
    p = place.place_work(1e9, 8e9, 4e9, "float32", 1e-3, 1, roofs, "own-cpu")
    assert p["above_roof"] and p["pct_of_roof"] > 105
    p["name"], p["count"], p["kind"], p["impl"] = "relu", 1, "relu", "own"
    line = place.above_roof_warning([p])
    assert line.startswith("warning:") and "relu" in line
    assert "ABOVE its roof" in place.to_markdown([p])
    ok = place.place_work(1e6, 8e6, 4e6, "float32", 1.0, 1, roofs, "own-cpu")
    assert not ok["above_roof"] and place.above_roof_warning([dict(ok, name="slow")]) is None


def test_the_chart_draws_flagged_ceilings_grey_and_dashed_with_the_reason():
    d = bad_two_threads()
    fig = roofline_chart.roofline_figure(d, threads=[2])
    ax = fig.axes[0]
    grey = [ln for ln in ax.get_lines() if ln.get_color() == "#aaaaaa" and ln.get_linestyle() not in ("-", "None")]
    assert len(grey) >= 2
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "cannot be true: not a roof" in legend
    text = " ".join(t.get_text() for t in ax.texts)
    assert "L1 triad 1.96 GB/s" in text and "theoretical peak" in text
    assert "L1 1.96 GB/s" not in text  # never labelled as a roof


class _Driver:
    def __init__(self):
        self.ran = []

    def run(self, cases, writer, progress):
        self.ran += cases


class _Writer:
    def __init__(self, data):
        self.data = data


def test_the_run_measures_impossible_ceilings_once_more(monkeypatch):
    from rooflab import suite_ceilings as sc

    plan = sc.Plan(threads_all=2, quick=True)
    suite = sc.peak_cases(plan, 32 << 10) + sc.bandwidth_cases(plan, [16 << 10, 1 << 30])
    d = bad_two_threads()
    d["notes"] = []
    monkeypatch.setattr(sc, "derive_ceilings", lambda data: data["ceilings"])
    drv = _Driver()
    again = sc.remeasure_implausible(drv, _Writer(d), suite, None)
    assert drv.ran == again and again
    assert {(k.variant, k.threads) for k in again} == {("cpu.ert.fma", 2), ("cpu.stream.triad", 2)}
    assert all(k.dtype == "float32" for k in again if k.variant == "cpu.ert.fma")
    assert "re-measured" in d["notes"][0]
    clean = synthetic()
    clean["notes"] = []
    assert sc.remeasure_implausible(_Driver(), _Writer(clean), suite, None) == []


@pytest.mark.slow  # draws a two-panel chart (~5-10 s on a shared 2-core VM)
def test_the_family_chart_places_close_1_and_2_thread_peaks_without_overlap_and_skips_false_roofs():
    from rooflab.charts import family
    from tests.test_plots import labels, overlapping_labels

    ceil = synthetic(op_threads=())
    for c in ceil["ceilings"]:  # the VM: the 2-thread FP32 peak barely above the 1-thread one
        if c["kind"] == "compute" and c["dtype"] == "float32":
            c["name"] = f"FP32 FMA peak, {c['threads']}T"
            c["value"] = 100.0 if c["threads"] == 1 else 104.0
    ceil["ceilings"].append(dict(ceil["ceilings"][0], name="FP64 broken, 2T", threads=2, value=0.2,
                                 fraction_of_theoretical=0.001))  # fmt: skip
    recs = [
        {"variant": f"cpu.gemm.{v}", "status": "ok", "threads": t, "library": v.startswith("00"),
         "gflops": {"median": g}, "work": {"flops": 2 * n**3, "bytes": 12 * n * n}, "shape": {"M": n}}
        for v, t, g, n in (("00-numpy-blas", 1, 90, 512), ("00-numpy-blas", 2, 95, 512), ("05-multithreaded", 2, 80, 512),
                           ("01-naive", 1, 1, 128))
    ]  # fmt: skip
    result = {"suite": "gemm", "device": "cpu", "machine": ceil["machine"], "records": recs}
    fig = family.chart_figure(result, ceil)
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    placed = [t.get_text() for ax in fig.axes for t in labels(ax)]
    assert "FP32 FMA peak, 1T" in placed and "FP32 FMA peak, 2T" in placed
    assert overlapping_labels(fig) == []
    assert not any("FP64 broken" in t for t in texts)  # a ceiling that cannot be true is no roof


def test_the_runtime_summary_never_lists_an_op_zero_ms_above_its_roof():
    """'most time above the roof: avgpool.flatten 0.00 ms above its roof' came from ops faster than
    their (false) roof: only ops slower than their roof's time are listed."""
    from rooflab.models.runtimes import placement

    def row(node, runtime_s, roof_s):
        return {"node": node, "kind": "relu", "op_type": "Relu", "class": "memory-bound", "runtime_s": runtime_s,
                "parts": [node], "pct_of_roof": 100 * roof_s / runtime_s, "below_roof": False, "flops": 1e6,
                "predicted_s": {"compute-bound": 0.0, "memory-bound": roof_s, "latency-bound": 0.0}}  # fmt: skip

    s = placement.summarize([row("slow", 2e-3, 1e-3), row("flatten", 1e-4, 5e-4)], [3e-3], "m", "ort", "cpu")
    assert [w["node"] for w in s["most_time_above_roof"]] == ["slow"]
    assert "flatten" not in s["line"]
    # "above" means faster than possible elsewhere: the time an op loses against its roof is "slower"
    assert "slow 1.00 ms slower than its roof allows (at 50% of its memory-bound roof)" in s["line"]
    assert "above" not in s["line"]


def test_a_gpu_s_shared_memory_and_host_link_are_off_the_level_ladder():
    cs = [
        {"name": n, "kind": "bandwidth", "level": lvl, "threads": 0, "kernel": "read", "value": v, "unit": "GB/s"}
        for n, lvl, v in (("L2", "L2", 7000.0), ("HBM", "HBM", 3000.0), ("smem", "shared", 20000.0), ("pcie", "host", 25.0))
    ]  # fmt: skip
    assert roofline.implausible(cs) == {}


def test_a_re_measurement_keeps_the_progress_under_100_percent(capsys):
    from rooflab.progress import RichProgress

    p = RichProgress("t")
    p.start(2)
    p.extend(2)
    for i in range(4):
        p.step(f"s{i}")
    p.close()
    import re

    pcts = [int(x) for x in re.findall(r"(\d+)% s", capsys.readouterr().err)]
    assert pcts and max(pcts) < 100 and p.total == 4  # without extend: 150 %


def test_a_ceilings_run_without_dram_is_never_the_default(tmp_path, capsys):
    """A newer complete run that measured only cache levels (`--max-working-set 1K`) is passed over,
    saying what it lacks; given explicitly it is used with that line; alone it is refused."""
    import json

    from rooflab.ceilings_file import find_ceilings, lacks

    full = synthetic() | {"suite": "ceilings", "status": "complete"}
    mid = full["machine"]["id"]
    part = copy.deepcopy(full)
    part["ceilings"] = [c for c in part["ceilings"] if c.get("level") != "DRAM"]
    assert lacks(part, "cpu") == ["DRAM bandwidth"] and lacks(full, "cpu") == []
    d = tmp_path / mid
    d.mkdir()
    (d / "rooflab-ceilings-cpu-20260101T000000Z.json").write_text(json.dumps(full))
    (d / "rooflab-ceilings-cpu-20260102T000000Z.json").write_text(json.dumps(part))
    data, src = find_ceilings(tmp_path, mid, "cpu", None)
    assert src.endswith("20260101T000000Z.json")
    assert "passed over the newer rooflab-ceilings-cpu-20260102T000000Z.json: it lacks DRAM bandwidth" in (
        capsys.readouterr().err
    )
    find_ceilings(tmp_path, mid, "cpu", str(d / "rooflab-ceilings-cpu-20260102T000000Z.json"))
    assert "lacks DRAM bandwidth" in capsys.readouterr().err
    (d / "rooflab-ceilings-cpu-20260101T000000Z.json").unlink()
    with pytest.raises(RooflabError, match="lacks DRAM bandwidth"):
        find_ceilings(tmp_path, mid, "cpu", None)
