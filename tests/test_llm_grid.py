"""`rooflab llm CONFIG --runtime NAME --grid small|full` (issue 40): every cell measured and predicted,
the table, the mean absolute error per runtime and phase, refusals before anything runs."""

from __future__ import annotations

import pytest

from rooflab import cli
from rooflab.models import llm
from rooflab.models.llm import grid as llm_grid
from tests.test_plots import synthetic


def test_the_grid_runs_every_cell_once_per_phase_and_scores_it(monkeypatch):
    arch = llm.load("smollm-135m")
    grid = {"batches": (1, 4), "prompts": (32, 64), "contexts": (128,), "threads": ("1",)}
    measured_sets, compared = [], []

    def measure_sets(sets, roofs, T):
        measured_sets.append(sets)
        return [{"phase": s["phase"], "batch": s["batch"], **{k: s[k] for k in ("prompt", "context") if k in s}}
                for s in sets]  # fmt: skip

    def compare(rows, T, roofs, B, S, L, phases):
        (phase,) = phases
        compared.append((phase, B, S if phase == "prefill" else L))
        measured, predicted = (0.1 * B, 0.11 * B) if phase == "prefill" else (0.02, 0.018)
        return {phase: {"measured_s": measured, "predicted_s": predicted,
                        "error_pct": 100 * (predicted - measured) / measured,
                        "predicted_by_kind_s": {"MatMul/Gemm (weights)": 0.9 * predicted, "Softmax": 0.1 * predicted},
                        "ort_by_op_type_s": {"MatMul": 0.8 * measured, "Concat": 0.2 * measured}}}  # fmt: skip

    g = llm_grid.run(arch, grid, runtime="torch", dtype="float32", weights=None, ceil=synthetic(),
                     measure_sets=measure_sets, compare=compare)  # fmt: skip
    assert len(measured_sets) == 1 and len(measured_sets[0]) == 2 * (2 + 1)  # per batch: 2 prefills, 1 decode
    assert sorted(compared) == sorted(
        [("prefill", B, S) for B in (1, 4) for S in (32, 64)] + [("decode", B, 128) for B in (1, 4)]
    )
    assert g["mape"]["torch"]["prefill"] == pytest.approx(10.0) and g["mape"]["torch"]["decode"] == pytest.approx(10.0)
    assert len(g["cells"]) == 6 and abs(g["worst"][0]["error_pct"]) == pytest.approx(10.0)
    text = "\n".join(llm_grid.lines(g))
    assert "MAPE torch: prefill 10.0%, decode 10.0%" in text and "decode b4 context 128 1T" in text
    # the worst cells come with their op-level breakdown: rooflab's per op kind, the runtime's profile
    w = g["worst"][0]
    assert w["runtime_by_op_type_s"]["MatMul"] == pytest.approx(0.8 * w["measured_s"])
    assert f"{llm_grid._cell_name(w)}: rooflab by op kind (ms): MatMul/Gemm (weights) " in text
    assert f"torch's profile (ms): MatMul {0.8 * w['measured_s'] * 1e3:.2f}, Concat" in text


def test_the_full_grid_is_the_issues_and_small_fits_ci():
    full, small = llm_grid.GRIDS["full"], llm_grid.GRIDS["small"]
    assert full["batches"] == (1, 4, 16) and full["contexts"] == (128, 1024) and full["prompts"] == (32, 512)
    assert set(full["threads"]) == {"1", "all"}
    assert all(set(small[k]) <= set(full[k]) for k in small if k != "turn_cap")
    assert small["turn_cap"] <= full["turn_cap"]


def test_a_grid_without_a_runtime_or_of_an_unknown_name_is_one_line(tmp_path, capsys):
    for argv, words in (
        (["--grid", "small"], "add --runtime"),
        (["--grid", "huge", "--runtime", "torch"], "small or full"),
    ):
        assert cli.main(["llm", "smollm-135m", *argv, "--out", str(tmp_path / "r")]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and words in err
    assert not (tmp_path / "r").exists()


def test_a_cell_that_does_not_fit_is_refused_naming_it_and_its_bytes(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(llm_grid, "available_bytes", lambda: 600 << 20)  # 600 MiB free
    rc = cli.main(["llm", "qwen2-0.5b", "--runtime", "onnxruntime", "--grid", "full", "--out", str(tmp_path / "r")])
    assert rc == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "cell batch 1, prompt 32, context 128" in err and "600 MiB free" in err
    assert not (tmp_path / "r").exists()


def test_the_grid_chart_is_drawn_only_where_there_are_cells(tmp_path):
    from rooflab.charts import llm as charts

    cells = [{"runtime": r, "phase": ph, "measured_s": m, "predicted_s": p, "error_pct": 100 * (p - m) / m}
             for r in ("torch", "onnxruntime") for ph, m, p in (("prefill", 0.13, 0.11), ("decode", 0.047, 0.043))]  # fmt: skip
    files = charts.grid_charts({"grid": {"cells": cells, "mape": llm_grid.mape(cells)}}, tmp_path / "x")
    assert [f.suffix for f in files] == [".png", ".svg"] and all(f.stat().st_size > 1000 for f in files)
    assert charts.grid_charts({}, tmp_path / "y") == []
