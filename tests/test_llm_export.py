"""Llama-family ONNX export: the graph is verified (decode after prefill = the longer prefill),
a broken cache is caught, it holds exactly the architecture's parameters, and bad requests are
refused; onnxruntime times a tiny model."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rooflab import cli
from rooflab.errors import RooflabError
from rooflab.models import llm
from rooflab.models.llm import export as llm_export
from rooflab.models.runtimes import llm_check, ort

pytest.importorskip("onnxruntime")

TINY = {
    "model_type": "qwen2", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 128, "max_position_embeddings": 64,
    "tie_word_embeddings": False,
}  # fmt: skip


@pytest.fixture
def tiny(tmp_path):
    f = tmp_path / "config.json"
    f.write_text(json.dumps(TINY))
    return str(f)


def test_exported_graph_is_verified_and_holds_the_parameters(tiny, tmp_path):
    (tmp_path / "v").mkdir()
    assert ort.verify(tiny, tmp_path / "v") < 1e-3
    import onnx

    path = llm_export.export(tiny, tmp_path / "m.onnx", seq=4)
    m = onnx.load(str(path), load_external_data=False)
    n = sum(int(np.prod(t.dims)) for t in m.graph.initializer if not t.name.startswith("const_"))
    assert n == llm.param_counts(llm.load(tiny))["total"]
    assert not list(tmp_path.glob(".*tmp*"))


def test_a_cache_fed_wrong_is_caught(tiny, tmp_path):
    a = llm_export.export(tiny, tmp_path / "p.onnx", seq=3)
    d = llm_export.export(tiny, tmp_path / "d.onnx", cache=4)
    b = llm_export.export(tiny, tmp_path / "p1.onnx", seq=4)
    ids = np.arange(4, dtype=np.int64).reshape(1, 4)
    sa, sd, sb = (ort.llm_session(x, 1) for x in (a, d, b))
    out = sa.run(None, {"input_ids": ids[:, :3]})
    past = {o.name.replace("present", "past"): v for o, v in zip(sa.get_outputs(), out) if "present" in o.name}
    ref = sb.run(None, {"input_ids": ids})[0]
    good = sd.run(None, {"input_ids": ids[:, 3:], **past})[0]
    assert np.allclose(good, ref, rtol=1e-4, atol=1e-5)
    swapped = {k: past[k.replace("key", "value") if "key" in k else k.replace("value", "key")] for k in past}
    assert not np.allclose(sd.run(None, {"input_ids": ids[:, 3:], **swapped})[0], ref, rtol=1e-3, atol=1e-4)


def test_export_refuses_what_it_cannot_build(tmp_path, capsys):
    with pytest.raises(RooflabError, match="not a dense Llama-family"):
        llm_export.export("mixtral-8x7b", tmp_path / "x.onnx", cache=8)
    with pytest.raises(RooflabError, match="not a dense Llama-family"):
        llm_export.export("gpt-neox-20b", tmp_path / "x.onnx", cache=8)
    assert cli.main(["export", "smollm-135m", "-o", str(tmp_path / "x.onnx"), "--seq", "4", "--cache", "8"]) == 2
    assert "not both" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_ort_times_each_phase(tiny, tmp_path):
    p = llm_export.export(tiny, tmp_path / "d.onnx", cache=8)
    m = ort.timed(p, threads=1, runs=3)
    assert m["median_s"] > 0 and "MatMul" in m["by_op_type_s"]


def test_the_decode_check_predicts_the_graphs_kv_concat(tiny, tmp_path):
    """The exported decode graph copies its whole KV cache (Concat) where rooflab's decode appends
    one position in place: the check's prediction swaps the in-place append for the graph's copy
    (graph_kv_copy), keeps the in-place figure beside it, and says so. The attention then reads the
    cache the Concat just wrote: its streamed (cold) charge is swapped for its warm one."""

    def row(phase, **k):
        ops = [
            {"kind": kind, "total_s": t, "seconds": t, "library_seconds": t, "count": 1, "mult": 1}
            for kind, t in (("batched_gemm", 0.004), ("concat", 0.001))
        ]
        if phase == "decode":  # the attention charged streamed, 0.0015 s warm; a cold GEMM stays as charged
            ops[0].update(cold=True, warm_seconds=0.0015)
            ops.append({"kind": "gemm", "cold": True, "warm_seconds": 0.0, "total_s": 0.0, "seconds": 0.0,
                        "library_seconds": 0.0, "count": 1, "mult": 1})  # fmt: skip
        return {"phase": phase, "batch": 1, "seconds": 0.005, "library_seconds": 0.005, "roof_seconds": 0.002,
                "ops": ops, **k}  # fmt: skip

    asked = []

    def copy(context, batch=1):
        asked.append(context)
        return 0.003 * batch

    rows = [row("prefill", prompt=4), row("decode", context=8)]
    c = ort.compare(tiny, rows, threads=1, prompt=4, context=8, runs=3, graph_kv_copy=copy)
    d, p = c["decode"], c["prefill"]
    assert asked == [8]
    assert d["predicted_s"] == pytest.approx(0.005 - 0.001 + 0.003 - 0.0025) and d["predicted_in_place_s"] == 0.005
    assert d["predicted_by_kind_s"][llm_check.KIND_TO_ORT["concat"]] == pytest.approx(0.003)
    assert d["predicted_by_kind_s"][llm_check.KIND_TO_ORT["batched_gemm"]] == pytest.approx(0.0015)
    assert d["kv_reread_warm_s"] == pytest.approx(-0.0025)
    assert any("charged warm, -2.50 ms" in line for line in llm_check.lines(c))
    assert d["error_pct"] == pytest.approx(100 * (d["predicted_s"] - d["measured_s"]) / d["measured_s"])
    assert p["predicted_s"] == 0.005 and "graph_kv_copy_s" not in p
    assert any("KV Concats copy the whole cache" in line for line in llm_check.lines(c))
    # the words say who measured and who predicted, and which way the error goes
    said = "\n".join(llm_check.lines(c))
    assert "onnxruntime measured" in said and "rooflab predicted" in said and "rel. err" not in said
    sign = "slower than measured" if d["error_pct"] >= 0 else "faster than measured"
    assert f"({d['error_pct']:+.0f}%: {sign})" in said
    assert d["batch"] == 1 and d["context"] == 8 and p["prompt"] == 4


def test_onnxruntimes_matmul_is_verified_as_the_runtimes_gemm_and_asked_for_by_the_check():
    import numpy as np

    import rooflab
    from rooflab.families import runtime_gemm
    from rooflab.models.llm import predict

    v = rooflab.get_variant(runtime_gemm.ORT_MATMUL)
    for shape in ({"M": 3, "N": 17, "K": 29, "bias": True}, {"M": 1, "N": 64, "K": 48, "bias": False}):
        args = v.inputs(shape, seed=5)
        assert np.allclose(v(*args, threads=1), v.reference(*args), rtol=1e-5, atol=1e-6)
    A, B, bias = v.inputs({"M": 2, "N": 8, "K": 16, "bias": True}, seed=6)
    assert not np.allclose(v(A, B, None, threads=1), v.reference(A, B, bias))  # a dropped bias shows
    assert predict.runtime_kernels("onnxruntime") == {"gemm": runtime_gemm.ORT_MATMUL}
    assert predict.runtime_kernels(None) is None
