"""The charts as figure objects: panels, legends, labels that do not overlap, roofs that stop at their
dtype's peak, readable log ticks. Inputs: a committed schema-1 result (results/intel-xeon-2c) and a
synthetic one built to crowd the labels (L2 and L3 roofs 12 % apart, two models' ops in one cloud)."""

import itertools
import json
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pytest

from rooflab import charts
from rooflab.charts import labels as chart_labels
from rooflab.charts import roofline, staircase, style

RESULTS = Path(__file__).resolve().parent.parent / "results" / "intel-xeon-2c"
MODELS_RESULT = RESULTS / "rooflab-models-cpu-20261202T191910Z.json"
CEILINGS_RESULT = RESULTS / "rooflab-ceilings-cpu-20261202T190544Z.json"


def _stats(v):
    return {"median": v, "p20": v * 0.97, "p80": v * 1.03, "min": v * 0.95, "max": v * 1.04}


def synthetic(op_threads=(2,), device="cpu") -> dict:
    """A result in the schema-1 layout: ceilings at 1 and 2 threads, ops only where asked."""
    caches = [
        {"level": 1, "name": "L1", "size_bytes": 32 << 10, "instances": 2, "shared_by_cpus": 1, "private": True},
        {"level": 2, "name": "L2", "size_bytes": 1 << 20, "instances": 2, "shared_by_cpus": 1, "private": True},
        {"level": 3, "name": "L3", "size_bytes": 32 << 20, "instances": 1, "shared_by_cpus": 2, "private": False},
    ]
    threads = (0,) if device == "cuda" else (1, 2)
    ceilings, theo, bw_pts, sweep = [], [], [], []
    for t in threads:
        n = max(t, 1)
        for dtype, per in (("float64", 16), ("float32", 32)):
            theo.append({"dtype": dtype, "threads": t, "gflops": n * 2.8 * per, "formula": f"{n} x 2.8 x {per}"})
            ceilings.append(
                {
                    "name": f"{dtype} FMA peak, {t} threads",
                    "kind": "compute",
                    "level": None,
                    "dtype": dtype,
                    "threads": t,
                    "value": 0.92 * n * 2.8 * per,
                    "kernel": "ert K=32 S=8",
                    "fraction_of_theoretical": 0.92,
                }
            )
        # the case: an L3 roof measured 12 % above the L2 one, so the two nearly coincide
        for level, kernel, gbps in (
            ("L1", "triad", 420),
            ("L2", "update", 193),
            ("L3", "update", 218),
            ("DRAM", "triad", 24),
        ):
            ceilings.append(
                {"name": f"{level} {kernel}", "kind": "bandwidth", "level": level, "dtype": "float64", "threads": t}
                | {"kernel": kernel, "value": gbps * n, "noisy": level == "L3"}
            )
        for kernel, scale in (("read", 1.0), ("copy", 0.8), ("triad", 0.9), ("update", 1.1)):
            for ws in (1 << p for p in range(13, 31)):
                g = 420 if ws < 32 << 10 else 193 if ws < 1 << 20 else 150 if ws < 32 << 20 else 24
                bw_pts.append(
                    {
                        "threads": t,
                        "kernel": kernel,
                        "working_set_bytes": ws,
                        "gbps": _stats(g * n * scale),
                        "status": "ok",
                    }
                )
        for i in range(-3, 9):
            sweep.append(
                {
                    "threads": t,
                    "dtype": "float64",
                    "flops_per_byte": 2.0**i,
                    "gflops": _stats(min(2.0**i * 24 * n, 40 * n)),
                }
            )
    rng = np.random.default_rng(0)
    ops = []
    for t in op_threads:
        for model in ("resnet50-b1", "gpt2-decode"):
            for i in range(30):
                dense = i % 2 == 0
                ops.append(
                    {
                        "model": model,
                        "name": f"{model[:6]}.block{i}.{'conv' if dense else 'add'}",
                        "intensity": float(rng.uniform(20, 60) if dense else rng.uniform(0.1, 0.3)),
                        "achieved_gflops": float(rng.uniform(60, 80) * max(t, 1) if dense else rng.uniform(2, 5)),
                        "total_time_s": float(rng.uniform(1e-4, 5e-3)),
                        "class": "compute-bound" if dense else "memory-bound",
                        "dtype": "float32",
                        "threads": t,
                        "count": 1 + i % 3,
                    }
                )
    machine = {
        "id": "synthetic-2c",
        "cpu": {"model": "Synthetic CPU", "caches": caches, "theoretical": {"peaks": theo}},
    }
    if device == "cuda":
        machine["gpu"] = {"name": "Synthetic GPU", "l2_bytes": 50 << 20, "theoretical": {"peaks": theo}}
    return {
        "schema_version": 1,
        "kind": "rooflab-result",
        "device": device,
        "started": "2026-12-03T00:00:00Z",
        "machine": machine,
        "ceilings": ceilings,
        "sweeps": {"bandwidth": bw_pts, "intensity": sweep},
        "ops_placed": ops,
    }


def labels(ax):
    return [t for t in ax.texts if t.get_gid() == chart_labels.LABEL_GID]


def overlapping_labels(fig) -> list[tuple[str, str]]:
    """Pairs of placed labels whose boxes overlap (each other or the legend), and labels outside
    their axes, after a draw."""
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    bad = []
    for ax in fig.axes:
        boxes = [(t.get_text(), chart_labels.text_box(t, r)) for t in labels(ax)]  # the text, not its leader line
        legend = ax.get_legend()
        if legend is not None:
            boxes.append(("<legend>", legend.get_window_extent(r)))
        for (ta, a), (tb, b) in itertools.combinations(boxes, 2):
            w = min(a.x1, b.x1) - max(a.x0, b.x0)
            h = min(a.y1, b.y1) - max(a.y0, b.y0)
            if w > 0.5 and h > 0.5:
                bad.append((ta, tb))
        area = ax.get_window_extent(r)
        bad += [(t, "<outside the axes>") for t, b in boxes if b.x0 < area.x0 - 1 or b.x1 > area.x1 + 1]
    return bad


@pytest.fixture(scope="module")
def committed_models():
    return json.loads(MODELS_RESULT.read_text())


@pytest.fixture(scope="module")
def models_fig(committed_models):
    fig = roofline.roofline_figure(committed_models, ops=committed_models["ops_placed"])
    yield fig
    plt.close(fig)


@pytest.fixture(scope="module")
def synthetic_fig():
    data = synthetic()
    fig = roofline.roofline_figure(data, ops=data["ops_placed"])
    yield fig, data
    plt.close(fig)


def test_one_panel_per_thread_count_that_has_ops(models_fig, synthetic_fig):
    assert [ax.get_title() for ax in models_fig.axes] == ["2 threads"]  # the committed run placed ops at 2
    fig, _ = synthetic_fig
    assert [ax.get_title() for ax in fig.axes] == ["2 threads"]
    both = synthetic(op_threads=(1, 2))
    f2 = roofline.roofline_figure(both, ops=both["ops_placed"])
    assert [ax.get_title() for ax in f2.axes] == ["1 thread", "2 threads"]
    plt.close(f2)
    f3 = roofline.roofline_figure(synthetic(op_threads=()))  # no ops: one panel per thread count with ceilings
    assert [ax.get_title() for ax in f3.axes] == ["1 thread", "2 threads"]
    assert all(ax.lines for ax in f3.axes)
    plt.close(f3)


def test_a_marker_per_model_and_a_legend(models_fig, synthetic_fig, committed_models):
    for fig, ops in ((models_fig, committed_models["ops_placed"]), (synthetic_fig[0], synthetic_fig[1]["ops_placed"])):
        ax = fig.axes[-1]
        entries = [t.get_text() for t in ax.get_legend().get_texts()]
        models = sorted({o["model"] for o in ops})
        assert set(models) <= set(entries)
        markers = {h.get_marker() for h, t in zip(ax.get_legend().legend_handles, entries) if t in models}
        assert len(markers) == len(models)  # each model its own marker


def test_labels_never_overlap(models_fig, synthetic_fig):
    for fig in (models_fig, synthetic_fig[0]):
        assert overlapping_labels(fig) == []
        ax = fig.axes[-1]
        texts = [t.get_text() for t in labels(ax)]
        assert any("peak" in t for t in texts) and any(t.startswith("L2 ") for t in texts)
        assert sum(1 for t in texts if "GB/s" not in t and "peak" not in t and "theoretical" not in t) >= 3  # ops


def test_the_overlap_check_can_fail():
    fig, ax = plt.subplots()
    for _ in range(2):
        ax.text(0.5, 0.5, "FP32 peak 453 GFLOP/s", gid=chart_labels.LABEL_GID)
    assert overlapping_labels(fig)
    plt.close(fig)


def test_close_roofs_get_separate_labels_naming_their_kernel(synthetic_fig):
    fig, data = synthetic_fig
    ax = fig.axes[0]
    texts = [t.get_text() for t in labels(ax)]
    for c in data["ceilings"]:
        if c["kind"] == "bandwidth" and c["threads"] == 2:
            assert any(t.startswith(f"{c['level']} ") and f"({c['kernel']})" in t for t in texts), c["level"]
        if c["kind"] == "compute" and c["threads"] == 2:
            assert any("peak" in t and c["kernel"] in t for t in texts)


def _roof_lines(ax):
    colors = set(style.LEVEL_COLORS.values())
    return [ln for ln in ax.lines if ln.get_color() in colors]


def test_slanted_roofs_stop_at_the_peak_of_their_dtype(synthetic_fig):
    fig, data = synthetic_fig  # FP32 ops: roofs drawn for FP32, up to the FP32 peak
    fp32 = max(
        c["value"] for c in data["ceilings"] if c["kind"] == "compute" and c["dtype"] == "float32" and c["threads"] == 2
    )
    solid = [ln for ln in _roof_lines(fig.axes[0]) if ln.get_linestyle() == "-"]
    assert solid and max(ln.get_ydata().max() for ln in solid) <= fp32 * (1 + 1e-9)
    f = roofline.roofline_figure(synthetic(op_threads=()))  # ceilings only: drawn for FP64, dotted on to FP32
    for ax, t in zip(f.axes, (1, 2)):
        peak = {c["dtype"]: c["value"] for c in data["ceilings"] if c["kind"] == "compute" and c["threads"] == t}
        solid = [ln for ln in _roof_lines(ax) if ln.get_linestyle() == "-"]
        dotted = [ln for ln in _roof_lines(ax) if ln.get_linestyle() == ":"]
        assert max(ln.get_ydata().max() for ln in solid) <= peak["float64"] * (1 + 1e-9)
        assert dotted and max(ln.get_ydata().max() for ln in dotted) <= peak["float32"] * (1 + 1e-9)
        assert max(ln.get_ydata().max() for ln in dotted) > peak["float64"]
    plt.close(f)


def _labelled_ticks(ax):
    lo, hi = ax.get_ylim()
    return [t.get_text() for t in ax.yaxis.get_ticklabels() if t.get_text() and lo <= t.get_position()[1] <= hi]


def test_bandwidth_staircase_has_enough_labelled_ticks_and_clear_labels():
    for data in (json.loads(CEILINGS_RESULT.read_text()), synthetic()):
        fig = staircase.bandwidth_figure(data)
        fig.canvas.draw()
        assert len(fig.axes) == 2
        for ax in fig.axes:
            assert len(_labelled_ticks(ax)) >= 4, _labelled_ticks(ax)
        assert overlapping_labels(fig) == []
        plt.close(fig)


def test_roofline_log_axis_has_labelled_ticks(models_fig):
    models_fig.canvas.draw()
    assert len(_labelled_ticks(models_fig.axes[0])) >= 4


@pytest.mark.slow
def test_gpu_result_is_one_panel_and_files_are_written(tmp_path):
    data = synthetic(op_threads=(0,), device="cuda")
    fig = roofline.roofline_figure(data, ops=data["ops_placed"])
    assert [ax.get_title() for ax in fig.axes] == ["GPU"] and overlapping_labels(fig) == []
    plt.close(fig)
    files = charts.all_plots(data, tmp_path / "r", ops=data["ops_placed"])
    assert {f.suffix for f in files} == {".png", ".svg"} and all(f.stat().st_size > 5000 for f in files)


def test_the_llm_decode_chart_names_rooflab_s_prediction_and_the_runtime_s_measurement():
    """The check calls rooflab's op-by-op sum "predicted": the chart says so, and draws the
    runtime's own measured decode step beside it."""
    from rooflab.charts.llm import decode_figure

    curve = [
        {"batch": b, "context": 64, "memory_tokens_per_s": 50.0 * b, "compute_tokens_per_s": 4000.0} for b in (1, 2, 4)
    ]
    ctx = [
        {"batch": 1, "context": n, "memory_tokens_per_s": 50.0, "compute_tokens_per_s": 4000.0} for n in (16, 64, 256)
    ]
    summary = {
        "config": "tiny",
        "curves": {"vs_batch": curve, "vs_context": ctx, "batch": 1, "context": 64, "dram_gbps": 20.0,
                   "dtype": "float32", "peak_gflops": 100.0, "compute_bound_batch": None},
        "rows": [{"phase": "decode", "batch": 1, "context": 64, "tokens_per_s": 40.0}],
        "runtime_check": {"check_name": "onnxruntime", "decode": {"batch": 1, "context": 64, "measured_s": 0.02}},
    }  # fmt: skip
    fig = decode_figure(summary)
    for ax in fig.axes:
        labels = [t.get_text() for t in ax.get_legend().get_texts()]
        assert "rooflab predicted (its measured ops summed)" in labels and "onnxruntime measured" in labels
        (pt,) = [ln for ln in ax.get_lines() if ln.get_label() == "onnxruntime measured"]
        assert list(pt.get_ydata()) == [50.0]  # 1 sequence / 0.02 s
