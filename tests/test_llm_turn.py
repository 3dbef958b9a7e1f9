"""The turn to compute-bound (issue 40): where the runtime's decode tokens/s against batch flattens
(the knee of its two asymptotes), checked against the batch where the prediction has the weight
GEMMs turn compute-bound; the runtime's decode sweep verified per batch before it is timed."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rooflab.errors import RooflabError
from rooflab.models import llm
from rooflab.models.llm import grid as llm_grid
from rooflab.models.llm import turn
from tests.test_plots import synthetic


def _curve(step_s, batches):
    return [{"batch": B, "tokens_per_s": B / step_s(B)} for B in batches]


@pytest.mark.parametrize("knee_at", [3, 8, 24])
def test_the_knee_of_a_roofline_step_is_where_compute_meets_the_weight_read(knee_at):
    weights_s, per_seq_s = 0.02, 0.02 / knee_at  # max(weights read, batch x compute): the turn at knee_at
    bs = turn.batches(knee_at, 1024)
    assert bs[0] == 1 and bs[-1] >= turn.PAST_TURN * knee_at and all(b == 2 * a for a, b in zip(bs, bs[1:]))
    k = turn.knee(_curve(lambda B: max(weights_s, B * per_seq_s), bs))
    assert k["flat"] and k["batch"] == pytest.approx(knee_at)
    # a runtime that adds the two instead of overlapping them: the same knee (half the plateau there)
    k = turn.knee(_curve(lambda B: weights_s + B * per_seq_s, bs))
    assert k["batch"] == pytest.approx(knee_at, rel=0.3)


def test_a_curve_still_rising_is_a_lower_bound_and_no_verdict():
    pts = _curve(lambda B: 0.02 + B * 0.001, [1, 2, 4])  # the knee is at 20: 4 is far short of it
    k = {**turn.knee(pts), "top_batch": 4}
    assert not k["flat"]
    c = turn.check(10, k)
    assert c["ok"] is None and "still rises at batch 4" in c["why"]


def test_the_check_passes_within_one_batch_step_and_fails_beyond():
    flat = {"batch": 12.0, "flat": True}
    assert turn.check(8, flat)["ok"] and turn.check(24, flat)["ok"]
    assert turn.check(4, flat)["ok"] is False and turn.check(32, flat)["ok"] is False
    assert turn.check(None, flat)["ok"] is None


def test_the_grid_sweeps_decode_against_batch_per_thread_count_and_checks_the_turn(monkeypatch):
    arch = llm.load("smollm-135m")
    grid = {**llm_grid.GRIDS["small"], "turn_cap": 64}
    monkeypatch.setattr(llm_grid, "available_bytes", lambda: 64 << 30)
    swept = []

    def measure_sets(sets, roofs, T):
        return []

    def compare(rows, T, roofs, B, S, L, phases):
        return {phases[0]: {"measured_s": 1.0, "predicted_s": 1.0, "error_pct": 0.0}}

    def decode_sweep(T, L, batches):
        swept.append((T, L, list(batches)))
        return {B: {"median_s": max(0.05, B * 0.05 / 6)} for B in batches}  # flattens at batch 6

    g = llm_grid.run(arch, grid, runtime="onnxruntime", dtype="float32", weights=None, ceil=synthetic(),
                     measure_sets=measure_sets, compare=compare, decode_sweep=decode_sweep)  # fmt: skip
    (t,) = g["turns"]
    assert swept == [(1, 128, [p["batch"] for p in t["points"]])] and t["points"][-1]["batch"] <= 64
    assert t["knee"]["batch"] == pytest.approx(6) and t["predicted_gemm_turn"] >= 1
    # the prediction's knee by the same rule over the same batches, and the verdict on the two
    assert [p["batch"] for p in t["predicted_points"]] == [p["batch"] for p in t["points"]]
    pk = t["predicted_knee"]["batch"]
    assert pk > 1 and t["check"]["ok"] == (0.5 <= 6 / pk <= 2)
    text = "\n".join(llm_grid.lines(g))
    assert "turn to compute-bound, onnxruntime 1T" in text and "flattens at batch 6.0" in text


def test_the_turn_chart_shows_the_measured_curve_the_knee_and_the_prediction(tmp_path):
    from rooflab.charts import llm as charts

    pts = _curve(lambda B: max(0.05, B * 0.05 / 6), [1, 2, 4, 8, 16, 32])
    pred = _curve(lambda B: max(0.04, B * 0.04 / 8), [1, 2, 4, 8, 16, 32])
    t = {"runtime": "torch", "threads": 2, "context": 128, "points": pts, "predicted_gemm_turn": 8,
         "knee": {**turn.knee(pts), "top_batch": 32}, "predicted_points": pred, "predicted_knee": turn.knee(pred)}  # fmt: skip
    files = charts.turn_charts({"config": "x", "grid": {"turns": [t, {**t, "runtime": "onnxruntime"}]}}, tmp_path / "x")
    assert [f.suffix for f in files] == [".png", ".svg"]
    svg = files[1].read_text()
    assert "measured knee: batch 6.0" in svg and "predicted knee: batch 8.0" in svg
    assert "compute-bound on their roofs from batch 8" in svg
    assert charts.turn_charts({"grid": {"turns": []}}, tmp_path / "y") == []


def test_onnxruntimes_decode_sweep_verifies_each_batch_and_a_mixed_up_batch_fails(tmp_path, monkeypatch):
    pytest.importorskip("onnxruntime")
    from rooflab.models.runtimes import ort

    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({
        "model_type": "qwen2", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 128, "max_position_embeddings": 64,
    }))  # fmt: skip
    got = ort.decode_sweep(str(cfg), 1, 16, [1, 2, 4], runs=3)
    assert sorted(got) == [1, 2, 4] and all(v["median_s"] > 0 and v["verified_rel_err"] < 1e-3 for v in got.values())

    def broken_exporter(config, tmp):  # batch 1 is checked by the exporter's own end-to-end check
        raise RooflabError("the exported graph is wrong: decode after prefill differs by 0.5")

    with monkeypatch.context() as m:
        m.setattr(ort, "verify", broken_exporter)
        with pytest.raises(RooflabError, match="decode after prefill differs"):
            ort.decode_sweep(str(cfg), 1, 16, [1], runs=3)

    real = ort.llm_session

    class Swapped:  # a batched graph that hands back its sequences' logits in the wrong order
        def __init__(self, s):
            self.s = s

        def __getattr__(self, name):
            return getattr(self.s, name)

        def run(self, names, feeds):
            out = self.s.run(names, feeds)
            return [np.ascontiguousarray(out[0][::-1]), *out[1:]]

    monkeypatch.setattr(ort, "llm_session", lambda path, threads, *a: (Swapped if "-b1" not in str(path) else
                                                                      (lambda s: s))(real(path, threads, *a)))  # fmt: skip
    with pytest.raises(RooflabError, match="at batch 2 is wrong"):
        ort.decode_sweep(str(cfg), 1, 16, [1, 2], runs=3)


def test_the_predicted_gemm_turn_follows_the_weight_bytes_and_precedes_the_whole_step():
    from rooflab.models import place
    from rooflab.models.llm import predict

    arch = llm.load("smollm-135m")
    roofs = place.Roofs(synthetic(), 1, "cpu")
    fp32 = predict.curves(arch, roofs, "float32", 1, 1024, 32, None)
    int8 = predict.curves(arch, roofs, "float32", 1, 1024, 32, 8)
    int4 = predict.curves(arch, roofs, "float32", 1, 1024, 32, 4)
    turns = [c["gemm_compute_bound_batch"] for c in (fp32, int8, int4)]
    # fewer bytes a weight (4, 1.125, 0.625), the same FLOPs: each meets its compute roof sooner (not by
    # the bytes ratio: the quantized GEMMs' roof is the dequantize-and-FMA path's, below the FP32 peak)
    assert all(turns) and turns[0] > turns[1] >= turns[2], turns
    whole = fp32["compute_bound_batch"]  # attention's KV reads stay memory-bound: the whole step turns later
    assert whole is None or whole >= fp32["gemm_compute_bound_batch"]


def test_the_report_shows_the_grid_and_the_turn():
    from rooflab.models.llm.report import llm_section

    cells = [{"runtime": "onnxruntime", "threads": 1, "phase": "decode", "batch": 1, "context": 128,
              "measured_s": 0.05, "predicted_s": 0.055, "error_pct": 10.0}]  # fmt: skip
    pts = _curve(lambda B: max(0.05, B * 0.05 / 6), [1, 2, 4, 8, 16, 32])
    t = {"runtime": "onnxruntime", "threads": 1, "context": 128, "points": pts, "predicted_gemm_turn": 8,
         "knee": {**turn.knee(pts), "top_batch": 32}, "predicted_points": pts,
         "predicted_knee": {**turn.knee(pts), "top_batch": 32}}  # fmt: skip
    t["check"] = turn.check(t["predicted_knee"]["batch"], t["knee"])
    g = {"cells": cells, "mape": llm_grid.mape(cells), "worst": cells, "turns": [t]}
    s = {"config": "tiny", "arch": "llama", "params": {"total": 10, "active": 10}, "dtype_requested": "float32",
         "threads": 1, "rows": [], "grid": g}  # fmt: skip
    html = llm_section({"llm": s})
    assert "MAPE onnxruntime: decode 10.0%" in html and "within one batch step (1.00x)" in html
    assert html.count("<img") == 2
    assert "<img" not in llm_section({"llm": {**s, "grid": {}}})
