"""Issue 37, published and reported results: every result kind publishes as `rooflab report`
renders it, a family's rungs stand on its machine's ceilings in both, the tables say which model
and phase a row is of and never print "inf", and the charts never draw what cannot be true as a
roof or a point (memory roofs stop at the theoretical peak when no measured peak can be true; a
sweep point far below both neighbours is set aside and named)."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

from rooflab import cli  # noqa: E402
from tests.test_new_user import CEILINGS, MODELS  # noqa: E402
from tests.test_report import _report_inputs  # noqa: E402


def _tree(tmp_path: Path, monkeypatch) -> Path:
    """A results tree of one machine: its ceilings, a gemm run, a six-model placement, a runtime
    placement and an `rooflab llm` result (counted on those ceilings, nothing measured)."""
    ceil, gemm, placed, runtime = _report_inputs()
    mdir = tmp_path / "res" / ceil["machine"]["id"]
    mdir.mkdir(parents=True)
    shutil.copy(CEILINGS, mdir / CEILINGS.name)
    for doc, name in ((gemm, "gemm"), (placed, "models"), (runtime, "runtime")):
        doc = copy.deepcopy(doc)
        doc["started"] = "2026-12-02T20:00:00Z"
        (mdir / f"rooflab-{name}-cpu-20261202T200000Z.json").write_text(json.dumps(doc))
    monkeypatch.setenv("ROOFLAB_MACHINE", ceil["machine"]["id"])  # counted as that machine's, on its ceilings
    out = tmp_path / "llm-out"
    assert (
        cli.main(["llm", "smollm-135m", "--no-measure", "--no-plot", "--ceilings", str(CEILINGS), "--out", str(out)])
        == 0
    )
    (llm_file,) = out.glob("*/rooflab-llm-*.json")
    shutil.copy(llm_file, mdir / llm_file.name)
    return tmp_path / "res"


@pytest.mark.slow  # five pages drawn, the ceilings page's charts among them: ~10 s
def test_every_result_kind_publishes_what_its_report_shows(tmp_path, capsys, monkeypatch):
    res = _tree(tmp_path, monkeypatch)
    assert cli.main(["publish", str(res), "-o", str(tmp_path / "site")]) == 0
    pages = {p.name.split("-")[1]: p.read_text() for p in (tmp_path / "site" / "machines").glob("*/rooflab-*.html")}
    assert set(pages) == {"ceilings", "gemm", "models", "runtime", "llm"}
    for kind in ("models", "runtime"):  # were an empty family table (~800 bytes)
        assert "Model operations on the roofline" in pages[kind] and "<img" in pages[kind], kind
    assert "LLM: smollm-135m" in pages["llm"] and "<img" in pages["llm"]
    assert "resnet50-b32" in pages["models"] and "conv1" in pages["runtime"]
    assert "decode" in pages["llm"] and "prefill" in pages["llm"] and "smollm-135m" in pages["llm"]
    assert "index.html" in pages["llm"]  # the way back to the machine's page
    # a family's rungs on the machine's ceilings, as `plot` draws them: the page says which
    assert "the rungs are drawn on the ceilings of" in pages["gemm"]


@pytest.mark.slow
def test_report_of_a_family_result_finds_its_machines_ceilings_beside_it(tmp_path, capsys, monkeypatch):
    res = _tree(tmp_path, monkeypatch)
    (gemm,) = res.glob("*/rooflab-gemm-*.json")
    assert cli.main(["report", str(gemm), "-o", str(tmp_path / "r.html")]) == 0
    page = (tmp_path / "r.html").read_text()
    assert "the rungs are drawn on the ceilings of" in page and "intensity (no ceilings" not in page
    alone = tmp_path / "alone" / "m" / gemm.name
    alone.parent.mkdir(parents=True)
    shutil.copy(gemm, alone)
    assert cli.main(["report", str(alone), "-o", str(tmp_path / "a.html")]) == 0
    assert "no ceilings result of this machine beside this file" in (tmp_path / "a.html").read_text()


def test_the_ops_table_of_several_models_has_a_model_column_and_no_inf():
    from rooflab import report
    from rooflab.models import place

    placed = json.loads(MODELS.read_text())
    page = report.build([placed])
    head = page.split("<h2>Model operations")[1].split("</tr>")[0]
    assert "<th>model</th>" in head
    view = dict(placed["ops_placed"][0], name="reshape", kind="reshape", intensity=float("inf"), pct_of_roof=50.0)
    view.setdefault("below_roof", False)
    assert "inf" not in place.to_markdown([view]) and "inf" not in place.to_csv([view])
    assert place.fmt_intensity(float("inf")) == "-" and place.fmt_intensity(2.0) == "2"


def test_memory_roofs_stop_at_the_theoretical_peak_when_no_measured_peak_can_be_true():
    from rooflab.charts.roofline import roofline_figure

    doc = json.loads(CEILINGS.read_text())
    for c in doc["ceilings"]:
        if c["kind"] == "compute":  # 1% of their theoretical peaks: cannot be true, not roofs
            c["value"] *= 0.01
            c["fraction_of_theoretical"] = (c.get("fraction_of_theoretical") or 0.9) * 0.01
    fig = roofline_figure(doc)
    theo = max(p["gflops"] for p in doc["machine"]["cpu"]["theoretical"]["peaks"])
    for ax in fig.axes:
        solid = [ln for ln in ax.get_lines() if ln.get_linestyle() == "-" and len(ln.get_ydata()) > 2]
        assert solid, "memory roofs drawn"
        assert max(max(ln.get_ydata()) for ln in solid) <= theo * 1.001  # were drawn to 1024 x bandwidth
        assert any("roofs stop at the theoretical" in t.get_text() for t in ax.get_legend().get_texts())


def test_a_sweep_point_far_below_both_neighbours_is_set_aside_and_named():
    from rooflab.charts.staircase import bandwidth_figure

    doc = json.loads(CEILINGS.read_text())
    pts = sorted(
        (p for p in doc["sweeps"]["bandwidth"] if p["threads"] == 1 and p["kernel"] == "read"),
        key=lambda p: p["working_set_bytes"],
    )
    pts[2]["gbps"] = dict(pts[2]["gbps"], median=0.001, p20=0.001, p80=0.001)
    ax = bandwidth_figure(doc).axes[0]
    drawn = [y for ln in ax.get_lines() for y in ln.get_ydata()]
    assert 0.001 not in drawn and ax.get_ylim()[0] > 0.01  # the axis is not stretched down to it
    assert any("cannot be true" in t.get_text() for t in ax.texts)


def test_each_placed_op_carries_a_tick_at_its_own_roof():
    from rooflab.charts.roofline import roofline_figure

    placed = json.loads(MODELS.read_text())
    ops = [o for o in placed["ops_placed"] if o.get("attainable_gflops")][:5]
    fig = roofline_figure(placed, ops=ops)
    points = {
        (round(float(x), 9), round(float(y), 6)) for ax in fig.axes for c in ax.collections for x, y in c.get_offsets()
    }
    for o in ops:  # a marker at the op's own roof, beside its measured point
        assert (round(o["intensity"], 9), round(o["attainable_gflops"], 6)) in points, o["name"]


def test_an_unknown_model_is_refused_before_any_file_and_an_empty_failed_file_is_not_published(tmp_path, capsys):
    out = tmp_path / "res"
    assert cli.main(["run", "--suite", "models", "--model", "resnet51", "--out", str(out)]) == 2
    assert "unknown model 'resnet51'" in capsys.readouterr().err
    assert not list(out.rglob("*.json"))  # it left a 'failed' file with 0 records, which the site published
    doc = json.loads(CEILINGS.read_text())
    mdir = out / doc["machine"]["id"]
    mdir.mkdir(parents=True)
    shutil.copy(CEILINGS, mdir / CEILINGS.name)
    empty = dict(doc, suite="models", status="failed", records=[], ceilings=[], ops_placed=[])
    (mdir / "rooflab-models-cpu-20261207T000000Z.json").write_text(json.dumps(empty))
    from rooflab import publish

    found = publish.scan(out)  # what build_site pages: the ceilings, not the empty failed file
    assert [f.name for f, _ in found["machines"][doc["machine"]["id"]]] == [CEILINGS.name]
    assert [why for _, why in found["skipped"]] == ["a failed run that measured nothing"]


@pytest.mark.slow  # the tiny model's ops measured: ~10 s
def test_an_llms_ops_table_says_which_phase_each_row_is_of(tmp_path, monkeypatch, capsys):
    """Issue 37: the LLM's ops table had no phase column ("gate_proj + up_proj" twice, FLOP/B 49 and
    0.499: the prefill GEMM and the decode GEMV)."""
    from rooflab import report

    monkeypatch.setenv("ROOFLAB_MACHINE", json.loads(CEILINGS.read_text())["machine"]["id"])
    from tests.test_llm_cli import TINY, _cfg

    out = tmp_path / "o"
    argv = ["llm", _cfg(tmp_path, TINY), "--quick", "--no-own", "--no-plot", "--prompt", "16", "--context", "32",
            "--ceilings", str(CEILINGS), "--out", str(out)]  # fmt: skip
    assert cli.main(argv) == 0
    (f,) = out.glob("*/rooflab-llm-*.json")
    doc = json.loads(f.read_text())
    gate = {o["phase"] for o in doc["ops_placed"] if o["name"] == "gate_proj + up_proj"}
    assert gate == {"prefill 16 b1", "decode @32 b1"}
    head = report.build([doc]).split("<h2>Model operations")[1].split("</tr>")[0]
    assert "<th>phase</th>" in head


def test_mark_phases_names_the_phase_sets_an_op_is_of():
    from rooflab.models.llm import predict

    gemm = {"kind": "gemm", "dtype": "float32", "shape": {"M": 16, "N": 8, "K": 8}}
    gemv = dict(gemm, shape={"M": 1, "N": 8, "K": 8})
    sets = [{"phase": "prefill", "prompt": 16, "batch": 1, "ops": [gemm]},
            {"phase": "decode", "context": 32, "batch": 1, "ops": [gemv]},
            {"phase": "decode", "context": 64, "batch": 1, "ops": [gemv]}]  # fmt: skip
    measured = {predict._key(o): {"library": {}} for o in (gemm, gemv)}
    predict.mark_phases(sets, measured)
    assert measured[predict._key(gemm)]["phases"] == ["prefill 16 b1"]
    assert measured[predict._key(gemv)]["phases"] == ["decode @32 b1", "decode @64 b1"]


def test_a_sweeps_end_point_is_kept_whatever_its_drop():
    """An end point has one neighbour: a single DRAM point after a server's L3 (5-10x above it) is real."""
    from rooflab.charts.staircase import _cannot_be_true

    def pts(*gbps):
        return [{"working_set_bytes": 1 << (10 + i), "gbps": {"median": g}} for i, g in enumerate(gbps)]

    assert _cannot_be_true(pts(400.0, 390.0, 40.0)) == []
    sel = pts(400.0, 0.001, 390.0)
    assert _cannot_be_true(sel) == [sel[1]]
