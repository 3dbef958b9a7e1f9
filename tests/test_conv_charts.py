"""The conv suite's charts (rooflab/charts/conv.py) from a synthetic result: the bars are the
fastest verified variant per algorithm with % of im2col + BLAS, the crossovers are where the curves
cross (checked against the closed form of the synthetic curves), the roofline shows both the nominal
and the real arithmetic, and `rooflab plot` on a conv result writes all three. No kernel runs."""

from __future__ import annotations

import json
import math

import pytest

from rooflab.charts import conv as charts
from rooflab.results import KIND, SCHEMA_VERSION

BYTES = 1e6


def _rec(variant, number, alg, suite, layer, shape, t, flops, real=None, threads=1, status="ok", verified=True, reps=4):
    return {
        "variant": f"cpu.conv.{number:02d}-{variant}",
        "family": "conv",
        "device": "cpu",
        "label": f"{layer} | {number:02d}-{variant}",
        "threads": threads,
        "dtype": "float32",
        "shape": shape,
        "params": {},
        "status": status,
        "verified": verified,
        "reps": reps,
        "number": number,
        "library": number == 0,
        "time_s": {"median": t * reps},  # a record's time covers reps calls
        "gflops": {"median": flops / t / 1e9},
        "work": {
            "flops": flops * reps,
            "bytes": BYTES * reps,
            "algorithm": alg,
            "algorithm_flops": (real or flops) * reps,
        },
        "layer": layer,
        "suite": suite,
        "count": 1,
    }


RUNGS = {
    "im2col": [("im2col-blas", 0), ("im2col-own-gemm", 4)],
    "direct": [("direct-naive", 1), ("direct-blocked-simd", 2)],
    "winograd-f4x4": [("winograd-f4x4-3x3", 6)],
    "fft": [("fft", 7)],
}


def t_im2col(R):
    return 4e-4 * R * R


def t_direct(R):
    return 7e-5 * R * R


T_FFT = 5e-3
SWEEP = (3, 5, 7, 9, 11)


def synthetic() -> dict:
    recs = []
    s3 = {"N": 1, "C": 64, "H": 56, "W": 56, "K": 64, "R": 3, "S": 3, "stride_h": 1}
    s1 = {"N": 1, "C": 64, "H": 56, "W": 56, "K": 256, "R": 1, "S": 1, "stride_h": 1}
    L3, L1 = "resnet50-b1 layer1.0.conv2", "resnet50-b1 layer1.0.conv3"
    F = 1e8
    # 3x3 layer: library 10 ms, own GEMM 12, naive 50, blocked 5 (200 %), F(4x4) 4 (250 %, real
    # FLOPs a quarter), FFT 20 (50 %); a failed direct at 1 ms and an unverified Winograd at 1 ms
    for (v, n), t in zip(RUNGS["im2col"], (10e-3, 12e-3)):
        recs.append(_rec(v, n, "im2col", "resnet50", L3, s3, t, F))
    for (v, n), t in zip(RUNGS["direct"], (50e-3, 5e-3)):
        recs.append(_rec(v, n, "direct", "resnet50", L3, s3, t, F))
    recs.append(_rec("winograd-f4x4-3x3", 6, "winograd-f4x4", "resnet50", L3, s3, 4e-3, F, real=F / 4))
    recs.append(_rec("fft", 7, "fft", "resnet50", L3, s3, 20e-3, F, real=F / 2))
    recs.append(_rec("direct-blocked-simd", 2, "direct", "resnet50", L3, s3, 1e-3, F, status="failed"))
    recs.append(_rec("winograd-f2x2-3x3", 5, "winograd-f2x2", "resnet50", L3, s3, 1e-3, F, verified=False))
    # 1x1 layer: no Winograd (refused), direct 80 % of the library
    recs.append(_rec("im2col-blas", 0, "im2col", "resnet50", L1, s1, 2e-3, F / 9))
    recs.append(_rec("direct-blocked-simd", 2, "direct", "resnet50", L1, s1, 2.5e-3, F / 9))
    # the sweep: fft flat, im2col and direct ~ R^2; a failed FFT that would move the crossover
    for R in SWEEP:
        s = {"N": 1, "C": 32, "H": 64, "W": 64, "K": 32, "R": R, "S": R, "stride_h": 1}
        name, flops = f"sweep 32@64 R={R}", 2.0 * 32 * 32 * 64 * 64 * R * R
        recs.append(_rec("im2col-blas", 0, "im2col", "sweep", name, s, t_im2col(R), flops))
        recs.append(_rec("direct-blocked-simd", 2, "direct", "sweep", name, s, t_direct(R), flops))
        recs.append(_rec("direct-naive", 1, "direct", "sweep", name, s, 20 * t_direct(R), flops))
        recs.append(_rec("fft", 7, "fft", "sweep", name, s, T_FFT, flops, real=3e7))
        if R == 3:
            recs.append(_rec("fft", 7, "fft", "sweep", name, s, 1e-5, flops, status="failed"))
    return {
        "kind": KIND,
        "schema_version": SCHEMA_VERSION,
        "suite": "conv",
        "device": "cpu",
        "status": "complete",
        "machine": {"id": "synthetic-2c", "cpu": {"model": "Synthetic CPU"}},
        "records": recs,
    }


def ceilings() -> dict:
    def c(kind, value, level=None, kernel=None, dtype="float32", name=None):
        return {"kind": kind, "value": value, "threads": 1, "level": level, "kernel": kernel, "dtype": dtype,
                "name": name or f"{level or dtype} {kind}", "unit": "GFLOP/s" if kind == "compute" else "GB/s"}  # fmt: skip

    return {
        "suite": "ceilings",
        "machine": {"id": "synthetic-2c"},
        "ceilings": [c("compute", 100.0), c("bandwidth", 80.0, "L2", "copy"), c("bandwidth", 20.0, "DRAM", "triad")],
    }


def _log_cross(ta0, tb0, ta1, tb1, r0, r1):
    d0, d1 = math.log(ta0 / tb0), math.log(ta1 / tb1)
    return r0 + (r1 - r0) * d0 / (d0 - d1)


def test_best_per_algorithm_skips_failed_and_unverified_records():
    rows = charts.best_per_algorithm(synthetic()["records"], "resnet50")
    row = rows[("resnet50-b1 layer1.0.conv2", 1, "float32")]
    assert row["direct"]["variant"].endswith("02-direct-blocked-simd") and charts.seconds(row["direct"]) == 5e-3
    assert row["winograd"]["variant"].endswith("06-winograd-f4x4-3x3")  # not the unverified F(2x2)
    assert row["im2col"]["number"] == 0 and row["library"]["number"] == 0
    assert charts.pct_of_library(row, "winograd") == pytest.approx(250.0)
    assert charts.pct_of_library(row, "fft") == pytest.approx(50.0)
    assert "winograd" not in rows[("resnet50-b1 layer1.0.conv3", 1, "float32")]


def test_crossovers_are_where_the_curves_cross():
    curves = charts.sweep_curves(synthetic())[(1, "float32")]
    assert [R for R, _t, _r in curves["fft"]] == list(SWEEP)
    assert all(r["number"] == 2 for _R, _t, r in curves["direct"])  # the best direct, not the naive one
    got = {c["b"]: c for c in charts.sweep_crossovers(curves)}
    want_im2col = _log_cross(T_FFT, t_im2col(3), T_FFT, t_im2col(5), 3, 5)
    want_direct = _log_cross(T_FFT, t_direct(7), T_FFT, t_direct(9), 7, 9)
    assert got["im2col"]["R"] == pytest.approx(want_im2col) and 3 < want_im2col < 5
    assert got["direct"]["R"] == pytest.approx(want_direct) and 7 < want_direct < 9
    assert got["im2col"]["faster_after"] == got["direct"]["faster_after"] == "fft"
    assert len(got) == 2


def test_crossover_helper_both_directions_and_none():
    a = [(1, 1.0), (2, 1.0), (3, 1.0)]
    assert charts.crossovers(a, [(1, 0.5), (2, 2.0), (3, 4.0)]) == [
        {"R": pytest.approx(1 + math.log(2) / (math.log(2) + math.log(2))), "faster_after": "a"}
    ]
    assert charts.crossovers(a, [(1, 2.0), (2, 0.5), (3, 0.25)])[0]["faster_after"] == "b"
    assert charts.crossovers(a, [(1, 2.0), (2, 3.0), (3, 4.0)]) == []


@pytest.mark.slow
def test_layers_figure_bars_and_annotations():
    fig = charts.layers_figure(synthetic())
    (ax,) = fig.axes
    texts = {t.get_gid(): [] for t in ax.texts}
    for t in ax.texts:
        texts[t.get_gid()].append(t.get_text())
    assert texts["pct-winograd"] == ["250% (06)"]  # only the 3x3 layer has one
    assert texts["pct-direct"] == ["200% (02)", "80% (02)"]
    assert texts["pct-im2col"] == ["100% (00)", "100% (00)"]
    assert texts["pct-fft"] == ["50% (07)"]
    heights = sorted(p.get_height() for p in ax.patches)
    assert heights == sorted([10e-3, 5e-3, 4e-3, 20e-3, 2e-3, 2.5e-3])  # one bar per algorithm's best
    assert ax.get_yscale() == "log"


def test_crossover_figure_marks_the_crossings():
    fig = charts.crossover_figure(synthetic())
    ax_t = fig.axes[0]
    stars = [ln for ln in ax_t.lines if ln.get_gid() == "crossover"]
    xs = sorted(float(ln.get_xdata()[0]) for ln in stars)
    assert xs == pytest.approx(
        sorted(
            [
                _log_cross(T_FFT, t_im2col(3), T_FFT, t_im2col(5), 3, 5),
                _log_cross(T_FFT, t_direct(7), T_FFT, t_direct(9), 7, 9),
            ]
        )
    )
    for ln in stars:  # on the FFT curve (flat here)
        assert float(ln.get_ydata()[0]) == pytest.approx(T_FFT)
    (g,) = [ln for ln in fig.axes[1].lines if ln.get_gid() == "gflops-im2col"]
    assert list(g.get_ydata()) == pytest.approx([2.0 * 32 * 32 * 64 * 64 * R * R / t_im2col(R) / 1e9 for R in SWEEP])


def test_roofline_has_effective_and_real_points_under_the_roofs():
    data = synthetic()
    fig = charts.roofline_figure(data, ceilings())
    (ax,) = fig.axes
    by = {ln.get_gid(): ln for ln in ax.lines if ln.get_gid()}
    eff, real = by["effective-winograd"], by["real-winograd"]
    assert list(eff.get_xdata()) == pytest.approx([1e8 / BYTES]) and list(eff.get_ydata()) == pytest.approx([25.0])
    assert list(real.get_xdata()) == pytest.approx([0.25e8 / BYTES]) and list(real.get_ydata()) == pytest.approx([6.25])
    usable = [r for r in data["records"] if r["status"] == "ok" and r["verified"]]
    n_eff = sum(len(ln.get_xdata()) for g, ln in by.items() if g.startswith("effective-"))
    n_real = sum(len(ln.get_xdata()) for g, ln in by.items() if g.startswith("real-"))
    assert n_eff == n_real == len(usable)
    assert float(by["peak"].get_ydata()[0]) == 100.0
    assert {"roof-L2", "roof-DRAM"} <= set(by)
    assert max(by["roof-L2"].get_ydata()) <= 100.0  # slanted roofs stop at the peak


def test_no_figure_without_the_cases():
    empty = dict(synthetic(), records=[r for r in synthetic()["records"] if r["suite"] == "sweep"])
    assert charts.layers_figure(empty) is None
    assert charts.crossover_figure(empty) is not None
    assert charts.roofline_figure(dict(empty, records=[])) is None


@pytest.mark.slow
def test_rooflab_plot_writes_the_conv_charts(tmp_path):
    from rooflab.cli import main

    d = tmp_path / "synthetic-2c"
    d.mkdir()
    path = d / "rooflab-conv-cpu-20260101T000000Z.json"
    path.write_text(json.dumps(synthetic()))
    assert main(["plot", str(path)]) == 0
    for name in ("layers", "crossover", "conv-roofline"):
        for ext in ("png", "svg"):
            f = d / f"rooflab-conv-cpu-20260101T000000Z.{name}.{ext}"
            assert f.exists() and f.stat().st_size > 1000, f


def test_asv_conv_parameters_name_real_layers_and_one_variant_per_algorithm():
    """benchmarks/bench_families.py ConvAlgorithmsCPU: the issue's "best variant of each algorithm
    on two layers"; a renamed layer or variant would orphan the asv history (the table is append-only)."""
    import rooflab
    from rooflab.asv_params import BENCH_PARAMS
    from rooflab.families import conv as F

    layers = {s["name"] for s in F.resnet50_3x3_targets(1)}
    assert len(BENCH_PARAMS["conv_layers"]) == 2 and set(BENCH_PARAMS["conv_layers"]) <= layers
    algs = [charts.algorithm_of({"variant": n, "work": {}}) for n in BENCH_PARAMS["conv_algorithms"]]
    assert sorted(algs) == sorted(charts.ALGORITHMS)
    for n in BENCH_PARAMS["conv_algorithms"]:
        assert rooflab.get_variant(n).family == "conv"
