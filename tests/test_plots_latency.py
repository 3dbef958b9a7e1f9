"""The latency charts: the latency staircase under the bandwidth staircase (shared x axis, one
line per chase variant, each level's ceiling labelled), the latency chart (a row per latency path,
a panel for the tiny chains), the latency floor boxed on the roofline, and the files written.
Input: tests/test_plots.py's synthetic result plus synthetic chase, dispatch and tiny-chain records
(the ceilings derived by the real functions)."""

import matplotlib.pyplot as plt
import numpy as np
import pytest

from rooflab import charts
from rooflab.charts import labels as chart_labels
from rooflab.charts import latency, roofline, staircase
from rooflab.families import chase
from rooflab.families.latency import dispatch_ceilings
from tests.test_plots import labels, overlapping_labels, synthetic


def _chase_records(caches, variant="cpu.chase.02-random-cycle-hugepages", scale=1.0):
    out = []
    for p in range(13, 29):  # 8 KiB .. 256 MiB
        nbytes = 1 << p
        ns = scale * (1.2 if nbytes <= 32 << 10 else 4.0 if nbytes <= 1 << 20 else 15.0 if nbytes <= 32 << 20 else 95.0)
        hops = max(nbytes // 64, 4096)
        out.append(
            {
                "family": "chase",
                "variant": variant,
                "status": "ok",
                "chase_bytes": nbytes,
                "lines": nbytes // 64,
                "params": {"hops": hops},
                "reps": 3,
                "time_s": {"median": ns * 1e-9 * hops * 3},
                "clock_ghz": {"before": [3.5], "after": [3.7]},
                "noisy": p == 20,
            }
        )
    return out


def _dispatch_records():
    out = []
    for name, ns, threads in (("empty", 40.0, 1), ("ufunc", 450.0, 1), ("fork_join", 2100.0, 2)):
        samples = list(ns * 1e-9 * 1000 * np.linspace(0.95, 1.2, 7))
        out.append(
            {
                "family": "latency",
                "variant": f"cpu.latency.{name}",
                "status": "ok",
                "threads": threads,
                "noisy": False,
                "samples_s": samples,
                "work": {"launches": 1000},
                "ns_per_launch": {"median": ns, "p20": ns * 0.97, "p80": ns * 1.1, "min": ns * 0.95, "max": ns * 1.2},
            }
        )
    return out


def _chain_records():
    return [
        {"family": "elementwise", "status": "ok", "group": "tiny_chain", "n_ops": n, "fused": fused, "reps": 100,
         "variant": "fused" if fused else "numpy", "time_s": {"median": 100 * (300 + (0 if fused else 450 * n)) * 1e-9}}
        for n in (1, 2, 4, 8, 16, 32) for fused in (False, True)
    ]  # fmt: skip


def with_latency(data: dict, chain: bool = True, pages4k: bool = False) -> dict:
    caches = data["machine"]["cpu"]["caches"]
    recs = _chase_records(caches)
    if pages4k:
        recs += _chase_records(caches, "cpu.chase.01-random-cycle", scale=1.3)
    recs += _dispatch_records() + (_chain_records() if chain else [])
    data = dict(data, records=recs)
    data["ceilings"] = data["ceilings"] + dispatch_ceilings(recs) + chase.latency_ceilings(recs, caches)
    return data


@pytest.fixture(scope="module")
def result():
    return with_latency(synthetic(op_threads=()), pages4k=True)


def test_latency_ceilings_per_level_from_the_synthetic_staircase(result):
    mem = {c["level"]: c for c in result["ceilings"] if c["name"].startswith("memory latency")}
    assert list(mem) == ["L1", "L2", "L3", "DRAM"]
    assert [round(mem[k]["value"], 6) for k in mem] == [1.2, 4.0, 15.0, 95.0]  # the huge-page variant's
    assert mem["L1"]["cycles"] == pytest.approx(1.2 * 3.6)  # at the median probed clock


def test_the_staircase_gets_a_latency_panel_sharing_the_x_axis(result):
    fig = staircase.bandwidth_figure(result)
    top, lat = fig.axes[0], fig.axes[-1]
    assert len(fig.axes) == 3  # 1T and 2T bandwidth, and latency under the 1-thread panel
    assert lat.get_yscale() == "log" and "ns" in lat.get_ylabel()
    assert lat in lat.get_shared_x_axes().get_siblings(fig.axes[0]) and top.get_title().startswith("1 thread")
    assert lat.get_xlim() == fig.axes[0].get_xlim()
    assert len([ln for ln in lat.lines if len(ln.get_xdata()) == 16]) == 2  # both page sizes drawn
    texts = [t.get_text() for t in labels(lat)]
    for level in ("L1", "L2", "L3", "DRAM"):
        assert any(t.startswith(f"{level} ") and "cycles" in t for t in texts), (level, texts)
    assert any("(OS)" in t for t in texts)  # the cache sizes, as above it
    assert lat.patches or any(c.__class__.__name__ == "Rectangle" for c in lat.get_children())  # level shading
    assert overlapping_labels(fig) == []
    plt.close(fig)


def test_no_chase_points_no_latency_panel():
    fig = staircase.bandwidth_figure(synthetic(op_threads=()))
    assert len(fig.axes) == 2 and all("GB/s" in ax.get_ylabel() for ax in fig.axes)
    plt.close(fig)


def test_latency_chart_has_a_row_per_path_and_the_chain_panel(result, tmp_path):
    fig = latency.latency_figure(result)
    rows, chain = fig.axes
    names = [t.get_text() for t in rows.get_yticklabels()]
    assert names[:3] == ["dispatch: empty", "dispatch: ufunc", "dispatch: fork-join (2T)"]
    assert [n.split(",")[0] for n in names[3:]] == ["memory L1", "memory L2", "memory L3", "memory DRAM"]
    assert rows.get_xscale() == "log"
    values = [t.get_text() for t in labels(rows)]
    assert "40 ns" in values and "2.1 us" in values and "95 ns" in values
    assert len(rows.collections) == 7  # the samples / per-size points of every row
    assert {ln.get_label() for ln in chain.lines} >= {"op by op (numpy: N ufunc calls)", "N x dispatch: ufunc"}
    assert overlapping_labels(fig) == []
    plt.close(fig)
    files = latency.latency(result, tmp_path / "r.latency")
    assert [f.suffix for f in files] == [".png", ".svg"] and all(f.stat().st_size > 5000 for f in files)


def test_no_latency_no_chart(tmp_path):
    data = synthetic(op_threads=())
    data["ceilings"] = [c for c in data["ceilings"] if c["kind"] != "latency"]
    assert latency.latency_figure(data) is None and latency.latency(data, tmp_path / "x") == []


def test_the_roofline_boxes_the_dispatch_floor_without_collisions(result):
    data = dict(result, ops_placed=synthetic()["ops_placed"])
    fig = roofline.roofline_figure(data, ops=data["ops_placed"])
    texts = [t.get_text() for ax in fig.axes for t in labels(ax)]
    floor = [t for t in texts if t.startswith("dispatch latency per call")]
    notes = [t.get_text() for ax in fig.axes for t in ax.texts if t.get_gid() == chart_labels.LABEL_GID + "-note"]
    assert floor or any("dispatch latency per call" in n for n in notes)
    assert not floor or ("ufunc 450 ns" in floor[0] and "fork/join (2T) 2.1 us" in floor[0])
    assert overlapping_labels(fig) == []
    plt.close(fig)


@pytest.mark.slow
def test_all_plots_writes_the_latency_chart(result, tmp_path):
    files = charts.all_plots(result, tmp_path / "r")
    names = {f.name for f in files}
    assert {"r.roofline.png", "r.bandwidth.png", "r.latency.png", "r.latency.svg"} <= names
