"""A real runtime's per-node times on the roofline: `rooflab export` (the catalog's networks as ONNX
graphs), the mapping of onnxruntime's optimized (fused, renamed) nodes back to the graph's ops, the
profile parsing, the placement of fused nodes, `rooflab place MODEL.onnx --runtime onnxruntime`,
its bad-input cases, and rooflab.place_torch (skipped without torch)."""

import importlib.util
import json
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from rooflab import cli  # noqa: E402
from rooflab.errors import RooflabError  # noqa: E402
from rooflab.models import export  # noqa: E402
from rooflab.models.onnx_import import ops_from_model  # noqa: E402
from rooflab.models.runtimes import ort, ort_nodes, placement  # noqa: E402
from rooflab.workloads import catalog  # noqa: E402
from rooflab.workloads import ops as opsmod  # noqa: E402

CEILINGS = (
    Path(__file__).resolve().parent.parent / "results" / "intel-xeon-2c" / "rooflab-ceilings-cpu-20261202T190544Z.json"
)


def _exported_ops(name, **kw):
    """ops_from_onnx's view of an exported network (dims only: the skeleton drops weight data)."""
    ops, unsupported = ops_from_model(ort_nodes.skeleton(export.build(name, **kw), {}))
    assert unsupported == []
    return ops


def _sig(ops, kinds=None):
    return sorted((o["kind"], opsmod.flops(o)) for o in ops if kinds is None or o["kind"] in kinds)


# ---- export: the catalog's networks, given back by the ONNX importer ---------------------------------


@pytest.mark.parametrize("name", ["resnet50", "mobilenetv2"])
def test_exported_cnns_give_back_the_catalog_ops(name):
    """Op for op, in order, same FLOPs and bytes; the exporter adds one Flatten (a view) only."""
    got = _exported_ops(name)
    cat = catalog.model_ops(name)
    assert [o["kind"] for o in got if o["kind"] == "reshape"] == ["reshape"]
    body = [o for o in got if o["kind"] != "reshape"]
    assert [(o["kind"], opsmod.flops(o), opsmod.min_bytes(o)) for o in body] == [
        (o["kind"], opsmod.flops(o), opsmod.min_bytes(o)) for o in cat
    ]
    depthwise = [o for o in body if o["kind"] == "conv2d" and o["shape"]["groups"] > 1]
    assert len(depthwise) == (17 if name == "mobilenetv2" else 0)


def test_catalog_mobilenet_v2_matches_torchvision():
    m = catalog.model_ops("mobilenetv2")
    assert sum(opsmod.params(o) for o in m) == 3_504_872  # torchvision num_params
    assert sum(opsmod.macs(o) for o in m) == pytest.approx(300.774e6, rel=1e-5)


def _transformer_extras(got, cat, T, attention_scores, linears):
    """What the exporter adds around a transformer's catalog ops: bias Adds of MatMul + Add, the
    embedding sums, the attention scale; everything else is data movement (0 FLOPs)."""
    core = ("gemm", "batched_gemm", "softmax", "layernorm", "gelu")
    assert _sig(got, core) == _sig(cat, core)
    adds = [o for o in got if o["kind"] == "add"]
    bias = [o for o in adds if o["name"].endswith(".bias_add")]
    residual = [o for o in adds if o not in bias]
    assert len(bias) == linears
    gemms = {o["name"]: o for o in got if o["kind"] == "gemm"}
    for b in bias:  # each bias Add is the size of its MatMul's output, the bias one row of it
        g = gemms[b["name"].removesuffix(".bias_add")]
        assert b["shape"]["numel"] == opsmod.output_numel(g)
        assert b["shape"].get("broadcast_numel", b["shape"]["numel"]) == g["shape"]["N"]
    cat_adds = sorted(opsmod.flops(o) for o in cat if o["kind"] == "add")
    emb_adds = [o for o in residual if o["name"].startswith(("embeddings.", "wte"))]
    assert sorted(opsmod.flops(o) for o in residual if o not in emb_adds) == cat_adds
    assert all(opsmod.flops(o) == T * 768 for o in emb_adds)
    scale = [o for o in got if o["kind"] == "scale"]
    assert len(scale) == 12 and sum(opsmod.flops(o) for o in scale) == attention_scores
    moved = {o["kind"] for o in got} - set(core) - {"add", "scale", "embedding", "tanh"}
    assert moved <= {"reshape", "transpose", "concat"}
    assert all(opsmod.flops(o) == 0 for o in got if o["kind"] in moved)
    extra = sum(opsmod.flops(o) for o in bias + emb_adds + scale) + sum(
        opsmod.flops(o) for o in got if o["kind"] == "tanh"
    )
    assert sum(opsmod.flops(o) for o in got) == sum(opsmod.flops(o) for o in cat) + extra


@pytest.mark.slow
def test_exported_bert_gives_back_the_catalog_ops():
    S, B = 64, 2
    got = _exported_ops("bert-base", seq=S, batch=B)
    cat = catalog.model_ops("bert-base", seq=S, batch=B)
    _transformer_extras(got, cat, B * S, attention_scores=12 * B * 12 * S * S, linears=72)
    emb = sorted((o["shape"]["vocab"], o["shape"]["tokens"]) for o in got if o["kind"] == "embedding")
    assert emb == [(2, B * S), (512, S), (30522, B * S)]  # positions: one (1, S) lookup, broadcast over the batch
    assert Counter(o["kind"] for o in got)["tanh"] == 1  # the pooler's


@pytest.mark.slow
def test_exported_gpt2_decode_gives_back_the_catalog_ops():
    got = _exported_ops("gpt2-decode", cache=256)
    cat = catalog.gpt2("decode", cache=256)
    cat = [catalog.normalize(dict(o, dtype="float32")) for o in cat]
    _transformer_extras(got, cat, 1, attention_scores=12 * 12 * 256, linears=48)
    kv = [o for o in got if o["kind"] == "concat" and "present" in o["name"]]
    assert len(kv) == 24 and all(o["shape"]["numel"] == 12 * 256 * 64 for o in kv)  # past 255 + the new token


def test_export_writes_a_loadable_file_and_refuses_bad_requests(tmp_path):
    out = tmp_path / "m.onnx"
    assert cli.main(["export", "mobilenetv2", "-o", str(out)]) == 0
    m = onnx.load(str(out))
    onnx.checker.check_model(m)
    assert m.graph.input[0].type.tensor_type.shape.dim[0].dim_value == 1
    assert not list(tmp_path.glob(".*tmp"))
    for bad in (["vgg16"], ["bert-base", "--seq", "1024"], ["resnet50", "--seq", "8"], ["resnet50", "--batch", "0"]):
        target = tmp_path / f"{bad[0]}.onnx"
        assert cli.main(["export", *bad, "-o", str(target)]) == 2
        assert not target.exists()


def test_export_unwritable_output_is_one_line(tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    assert cli.main(["export", "mobilenetv2", "-o", str(blocker / "m.onnx")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot write" in err[0]
    assert cli.main(["export", "mobilenetv2", "-o", str(tmp_path / "m.txt")]) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]


# ---- mapping optimized nodes back to the graph (no runtime needed) ----------------------------------


def _residual_graph():
    """conv1 -> bn1 -> relu1 -> conv2 -> bn2 -> add(relu1) -> relu2 -> gap -> flatten -> fc (+bias)."""
    f = TensorProto.FLOAT
    x = helper.make_tensor_value_info("x", f, [1, 8, 8, 8])
    y = helper.make_tensor_value_info("fc_bias", f, [1, 4])
    w = lambda name, *s: numpy_helper.from_array(np.full(s, 0.1, np.float32), name)  # noqa: E731
    inits = [w("w1", 8, 8, 3, 3), w("w2", 8, 8, 3, 3), w("fcw", 8, 4), w("fcb", 4)]
    for b in ("bn1", "bn2"):
        inits += [w(f"{b}_{p}", 8) for p in "sbmv"]

    def bn(name, inp):
        return helper.make_node("BatchNormalization", [inp] + [f"{name}_{p}" for p in "sbmv"], [name], name=name)

    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["conv1"], name="conv1", pads=[1, 1, 1, 1]),
        bn("bn1", "conv1"),
        helper.make_node("Relu", ["bn1"], ["relu1"], name="relu1"),
        helper.make_node("Conv", ["relu1", "w2"], ["conv2"], name="conv2", pads=[1, 1, 1, 1]),
        bn("bn2", "conv2"),
        helper.make_node("Add", ["bn2", "relu1"], ["add"], name="add"),
        helper.make_node("Relu", ["add"], ["relu2"], name="relu2"),
        helper.make_node("GlobalAveragePool", ["relu2"], ["gap"], name="gap"),
        helper.make_node("Flatten", ["gap"], ["flat"], name="flatten"),
        helper.make_node("MatMul", ["flat", "fcw"], ["fc"], name="fc"),
        helper.make_node("Add", ["fc", "fcb"], ["fc_bias"], name="fc_bias"),
    ]
    g = helper.make_graph(nodes, "residual", [x], [y], initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


# what onnxruntime's CPU provider makes of it: BN folded, Relu and the residual Add fused into NCHWc
# convolutions named after the tensor they replace, a layout conversion back, MatMul + Add -> Gemm
# between two Reshapes it adds (every tensor in between renamed)
OPT_NODES = [
    ("relu1_nchwc", "Conv", ["x", "reorder_w1", "fused_b1"], ["reorder_token_0"]),
    ("bn2_nchwc", "Conv", ["reorder_token_0", "reorder_w2", "fused_b2", "reorder_token_0"], ["reorder_token_1"]),
    ("ReorderOutput", "ReorderOutput", ["reorder_token_1"], ["relu2"]),
    ("gap", "GlobalAveragePool", ["relu2"], ["gap"]),
    ("flatten", "Flatten", ["gap"], ["flat"]),
    ("gemm_input_reshape", "Reshape", ["flat", "shape_in"], ["gemm_in"]),
    ("fc/MatMulAddFusion", "Gemm", ["gemm_in", "fcw", "fcb"], ["gemm_out"]),
    ("gemm_output_reshape", "Reshape", ["gemm_out", "shape_out"], ["fc_bias"]),
]
OPT_INITS = {"reorder_w1", "fused_b1", "reorder_w2", "fused_b2", "shape_in", "shape_out", "fcw", "fcb"}


def test_fused_and_renamed_nodes_map_back_to_every_graph_op():
    index = ort_nodes.GraphIndex(_residual_graph())
    groups, not_executed = ort_nodes.map_optimized(index, OPT_NODES, OPT_INITS)
    assert not_executed == []
    times = {n[0]: [1e-4 * (i + 1)] * 3 for i, n in enumerate(OPT_NODES)}
    rows = ort_nodes.rows_for(index, OPT_NODES, groups, times, 3)
    by = {r["node"]: r for r in rows}
    assert [p["kind"] for p in by["relu1_nchwc"]["parts"]] == ["conv2d", "batchnorm", "relu"]
    # the residual Add and its Relu ran inside the second convolution: they are its parts
    assert by["bn2_nchwc"]["graph_nodes"] == ["conv2", "bn2", "add", "relu2"]
    assert [p["kind"] for p in by["bn2_nchwc"]["parts"]] == ["conv2d", "batchnorm", "add", "relu"]
    gemm = by["fc/MatMulAddFusion"]  # one row, three runtime nodes, times summed per run
    assert gemm["runtime_nodes"] == ["gemm_input_reshape", "fc/MatMulAddFusion", "gemm_output_reshape"]
    assert gemm["runtime_s"] == pytest.approx(1e-4 * (6 + 7 + 8)) and gemm["dispatches"] == 3
    assert [p["kind"] for p in gemm["parts"]] == ["gemm", "add"]
    assert "layout" in by["ReorderOutput"]["note"] and by["ReorderOutput"]["parts"][0]["kind"] == "transpose"
    covered = sorted(n for r in rows for n in r["graph_nodes"])
    assert covered == sorted(n.name for n in _residual_graph().graph.node)


def test_fused_node_bytes_leave_out_the_tensors_that_stay_inside():
    index = ort_nodes.GraphIndex(_residual_graph())
    groups, _ = ort_nodes.map_optimized(index, OPT_NODES, OPT_INITS)
    rows = ort_nodes.rows_for(index, OPT_NODES, groups, {}, 1)
    r = next(r for r in rows if r["node"] == "bn2_nchwc")
    act, w, C = 8 * 8 * 8 * 4, 8 * 8 * 9 * 4, 8
    # input + weights + the residual read + the output written + BN's 4 per-channel vectors
    assert r["bytes_min"] == act + w + act + act + 4 * C * 4
    assert r["written"] == act
    assert r["flops"] == sum(opsmod.flops(p) for p in r["parts"])
    single = next(r for r in rows if r["node"] == "gap")
    assert single["bytes_min"] == opsmod.min_bytes(single["parts"][0])
    assert "not in the profile" in single["note"]  # no times given: said, not hidden


def test_profile_parsing_drops_warmups_and_takes_the_median():
    def run(ts, dur):
        return {"cat": "Session", "name": "model_run", "ts": ts, "dur": dur}

    def node(name, ts, dur):
        return {"cat": "Node", "name": f"{name}_kernel_time", "ts": ts, "dur": dur, "args": {"op_name": "X"}}

    events = [run(0, 100), node("a", 10, 50), node("b", 70, 20)]  # warm-up
    for k, (a, b) in enumerate([(5, 1), (7, 3), (6, 2)]):
        t0 = 1000 * (k + 1)
        events += [run(t0, 100), node("a", t0 + 10, a), node("b", t0 + 50, b), {"cat": "Node", "name": "a_fence"}]
    times, runs = ort_nodes.parse_profile({"traceEvents": events}, warmup=1)
    assert runs == 3 and sorted(times) == ["a", "b"]
    assert times["a"] == pytest.approx([5e-6, 7e-6, 6e-6]) and times["b"] == pytest.approx([1e-6, 3e-6, 2e-6])
    with pytest.raises(RooflabError, match="no measured run"):
        ort_nodes.parse_profile(events[:3], warmup=1)


def test_summary_shares_listed_nodes_and_most_time_above_the_roof():
    def row(name, t, cls, roof, parts=True):
        r = {"node": name, "op_type": "X", "runtime_s": t, "class": cls, "parts": [1] if parts else []}
        if parts:
            r.update(pct_of_roof=100 * roof / t, below_roof=roof / t < 0.5, predicted_s={"c": roof, "m": 0.0},
                     flops=1e6, kind="gemm")  # fmt: skip
        return r

    rows = [
        row("a", 4e-3, "compute-bound", 3e-3),
        row("b", 3e-3, "memory-bound", 1e-3),
        row("c", 2e-3, "memory-bound", 0.1e-3),
        row("d", 1e-3, placement.LISTED, 0, parts=False),
    ]
    s = placement.summarize(rows, [12e-3, 11e-3, 10e-3], "m.onnx", "rt", "cpu")
    assert s["e2e_s"] == 11e-3 and s["nodes_over_e2e"] == pytest.approx(10 / 11)
    assert s["share_pct"] == pytest.approx({"compute-bound": 40, "memory-bound": 50, placement.LISTED: 10})
    assert s["below_roof_pct"] == pytest.approx(50)  # b (33 %) and c (5 %) are more than 2x below
    assert [w["node"] for w in s["most_time_above_roof"]] == ["b", "c", "a"]  # 2, 1.9, 1 ms above
    assert s["listed"] == [{"node": "d", "op_type": "X", "share_pct": pytest.approx(10)}]
    assert "91% of it" in s["line"] and "d 10.0%" in s["line"] and "1 listed" in s["line"]


# ---- onnxruntime ------------------------------------------------------------------------------------

needs_ort = pytest.mark.skipif(
    importlib.util.find_spec("onnxruntime") is None, reason="onnxruntime is not installed (pip install 'rooflab[onnx]')"
)


def _fusable_graph():
    """Conv + Relu, then MatMul + Add (bias) + erf GELU, Softmax, and an op rooflab has no formula
    for (Erf alone, outside a GELU)."""
    f = TensorProto.FLOAT
    x = helper.make_tensor_value_info("x", f, [1, 4, 16, 16])
    y = helper.make_tensor_value_info("y", f, [1, 8, 32])
    z = helper.make_tensor_value_info("z", f, [1, 8, 16, 16])
    rng = np.random.default_rng(0)
    w = lambda name, *s: numpy_helper.from_array(rng.standard_normal(s).astype(np.float32) * 0.1, name)  # noqa: E731
    c = lambda name, v: numpy_helper.from_array(np.array(v, np.float32), name)  # noqa: E731
    inits = [w("cw", 8, 4, 3, 3), w("cb", 8), w("mw", 256, 32), w("mb", 32)]
    inits += [c("sqrt2", math.sqrt(2)), c("one", 1.0), c("half", 0.5)]
    inits.append(numpy_helper.from_array(np.array([1, 8, 256], np.int64), "shape"))
    nodes = [
        helper.make_node("Conv", ["x", "cw", "cb"], ["conv"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["conv"], ["relu"], name="relu"),
        helper.make_node("Erf", ["relu"], ["z"], name="lonely_erf"),
        helper.make_node("Reshape", ["relu", "shape"], ["flat"], name="reshape"),
        helper.make_node("MatMul", ["flat", "mw"], ["mm"], name="mm"),
        helper.make_node("Add", ["mm", "mb"], ["mm_bias"], name="mm_bias"),
        helper.make_node("Div", ["mm_bias", "sqrt2"], ["g0"], name="gelu/div"),
        helper.make_node("Erf", ["g0"], ["g1"], name="gelu/erf"),
        helper.make_node("Add", ["g1", "one"], ["g2"], name="gelu/add"),
        helper.make_node("Mul", ["mm_bias", "g2"], ["g3"], name="gelu/mul"),
        helper.make_node("Mul", ["g3", "half"], ["g4"], name="gelu/mul_half"),
        helper.make_node("Softmax", ["g4"], ["y"], name="softmax", axis=-1),
    ]
    g = helper.make_graph(nodes, "fusable", [x], [y, z], initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


@needs_ort
def test_onnxruntime_profile_maps_every_profiled_node_or_lists_it(tmp_path):
    path = tmp_path / "fusable.onnx"
    onnx.save(_fusable_graph(), str(path))
    prof = ort.profile_onnx(path, threads=1, runs=3, quick=True)
    rows = prof["rows"]
    assert prof["runs"] == 3 and len(prof["e2e_samples_s"]) == 3
    ran = {n for r in rows for n in r["runtime_nodes"]}
    assert set(prof["profiled_nodes"]) <= ran  # every profiled node is in a row
    covered = sorted(n for r in rows for n in r["graph_nodes"]) + sorted(n["node"] for n in prof["not_executed"])
    assert covered == sorted(n.name for n in _fusable_graph().graph.node)
    kinds = [[p["kind"] for p in r["parts"]] for r in rows]
    conv = next(k for k in kinds if "conv2d" in k)
    assert conv == ["conv2d", "relu"]  # onnxruntime fuses the Relu into the convolution
    gelu_row = next(r for r in rows if any(p["kind"] == "gelu" for p in r["parts"]))
    assert {n for n in gelu_row["graph_nodes"]} >= {"gelu/div", "gelu/erf", "gelu/add", "gelu/mul", "gelu/mul_half"}
    assert any(p["kind"] == "gemm" for r in rows for p in r["parts"])
    erf = next(r for r in rows if "lonely_erf" in r["graph_nodes"])
    assert erf["parts"] == [] and "lonely_erf" in erf["note"]  # no formula: listed, with its time
    for r in rows:
        r["class"] = "placed later" if r["parts"] else placement.LISTED
    s = placement.summarize(rows, prof["e2e_samples_s"], "f", "ort", "cpu")
    assert s["nodes_listed"] >= 1 and sum(r["share_pct"] for r in s["listed"]) > 0
    assert sum(r["share_pct"] for r in rows) == pytest.approx(100)


@needs_ort
@pytest.mark.slow
def test_place_runtime_cli_writes_table_plot_and_summary(tmp_path, capsys):
    path = tmp_path / "fusable.onnx"
    onnx.save(_fusable_graph(), str(path))
    out = tmp_path / "res"
    args = ["place", str(path), "--runtime", "onnxruntime", "--ceilings", str(CEILINGS), "--out", str(out)]
    assert cli.main([*args, "--quick", "--threads", "1", "--runs", "3"]) == 0
    text = capsys.readouterr().out
    assert "fusable.onnx in onnxruntime" in text and "end to end" in text and "listed" in text
    (res,) = out.glob("*/rooflab-runtime-cpu-*.json")
    data = json.loads(res.read_text())
    s = data["runtime"]["summary"]
    assert s["nodes_placed"] >= 3 and s["nodes_listed"] >= 1 and data["status"] == "complete"
    nodes = data["runtime"]["nodes"]
    placed = [n for n in nodes if n["parts"]]
    assert all(n["class"] in ("compute-bound", "memory-bound", "latency-bound") for n in placed if n["runtime_s"] > 0)
    assert all(n["pct_of_attainable"] is None or n["pct_of_attainable"] <= 100 + 1e-6 for n in placed if "class" in n)
    assert any(n.get("rooflab_s") for n in placed)  # rooflab's own re-execution of the same ops
    models = {o["model"] for o in data["ops_placed"]}
    assert any(m.startswith("onnxruntime") for m in models) and "rooflab re-execution (numpy/BLAS)" in models
    for ext in (".nodes.csv", ".nodes.md", ".roofline.png", ".roofline.svg"):
        assert Path(str(res)[:-5] + ext).exists()


def _err(capsys):
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("rooflab: error:"), err
    return err[0]


@needs_ort
def test_place_runtime_bad_input_is_one_line_and_writes_nothing(tmp_path, capsys, monkeypatch):
    out = tmp_path / "res"
    good = tmp_path / "m.onnx"
    onnx.save(_fusable_graph(), str(good))
    base = ["--runtime", "onnxruntime", "--ceilings", str(CEILINGS), "--out", str(out)]
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"\xff\x00 this is not a protobuf \x12\x34")
    foreign = tmp_path / "notes.onnx"
    foreign.write_text("hello")
    ops_json = tmp_path / "ops.json"
    ops_json.write_text('[{"kind": "relu", "shape": {"numel": 8}}]')
    cases = [
        ([str(garbage)], "not a readable ONNX model"),
        ([str(foreign)], "ONNX"),
        ([str(ops_json)], "runs an ONNX model"),
        ([str(good), "--batch", "0"], "--batch must be a positive integer"),
        ([str(good), "--batch", "4"], "fixed batch dimension of 1"),
        ([str(good), "--dim", "seq"], "NAME=SIZE"),
    ]
    for argv, needle in cases:
        assert cli.main(["place", *argv, *base]) == 2, argv
        assert needle in _err(capsys)
    assert cli.main(["place", str(good), "--runtime", "tvm", "--out", str(out)]) == 2
    assert "unknown runtime" in _err(capsys)
    assert cli.main(["place", str(good), "--runtime", "torch", "--out", str(out)]) == 2
    assert "place_torch" in _err(capsys)
    assert cli.main(["place", str(ops_json), "--batch", "2", "--out", str(out)]) == 2
    assert "--runtime" in _err(capsys)
    monkeypatch.setitem(__import__("sys").modules, "onnxruntime", None)  # onnxruntime not installed
    assert cli.main(["place", str(good), *base]) == 2
    assert "pip install 'rooflab[onnx]'" in _err(capsys)
    assert not out.exists() or not any(out.rglob("*.json"))


@needs_ort
@pytest.mark.slow
def test_resnet50_in_onnxruntime_every_node_mapped_or_listed(tmp_path, capsys):
    path = export.export("resnet50", tmp_path / "resnet50.onnx")
    out = tmp_path / "res"
    argv = ["place", str(path), "--runtime", "onnxruntime", "--ceilings", str(CEILINGS), "--out", str(out)]
    assert cli.main([*argv, "--quick", "--no-own", "--threads", "1"]) == 0
    (res,) = out.glob("*/rooflab-runtime-cpu-*.json")
    data = json.loads(res.read_text())
    nodes, s = data["runtime"]["nodes"], data["runtime"]["summary"]
    covered = sorted(n for r in nodes for n in r["graph_nodes"])
    covered += [n["node"] for n in data["runtime"]["not_executed"]]
    assert sorted(covered) == sorted([o["name"] for o in catalog.resnet50(1)] + ["avgpool.flatten"])
    convs = [p for r in nodes for p in r["parts"] if p["kind"] == "conv2d"]
    assert len(convs) == 53
    assert s["nodes_placed"] + s["nodes_listed"] == len(nodes)


@needs_ort
@pytest.mark.slow
def test_per_node_times_sum_to_the_end_to_end_time(tmp_path):
    """MobileNetV2 in onnxruntime on one thread: the profile's per-node times sum to within 15 % of
    the end-to-end time measured without the profiler (a ratio of two measurements of one run)."""
    path = export.export("mobilenetv2", tmp_path / "m.onnx")
    prof = ort.profile_onnx(path, threads=1)
    per_run = [sum(r["samples_s"][k] for r in prof["rows"] if r["samples_s"]) for k in range(prof["runs"])]
    assert per_run == pytest.approx(prof["run_totals_s"])  # every profiled node is in a row
    ratio = placement.median([a / b for a, b in zip(prof["run_totals_s"], prof["e2e_samples_s"])])
    assert ratio == pytest.approx(1.0, abs=placement.SUM_TOLERANCE)


# ---- PyTorch ----------------------------------------------------------------------------------------


def test_place_torch_without_torch_says_how_to_install(monkeypatch):
    import rooflab

    monkeypatch.setitem(__import__("sys").modules, "torch", None)
    with pytest.raises(rooflab.RooflabError, match=r"pip install 'rooflab\[torch\]'"):
        rooflab.place_torch(object(), ())


def test_aten_operators_map_to_rooflab_ops():
    from rooflab.models.runtimes.pytorch import op_for

    assert op_for("aten::addmm", [[10], [4, 8], [8, 10]], None) == {
        "kind": "gemm",
        "shape": {"M": 4, "N": 10, "K": 8, "bias": True},
    }
    assert op_for("aten::linear", [[2, 5, 8], [16, 8], []], None)["shape"] == {"M": 10, "N": 16, "K": 8, "bias": False}
    assert op_for("aten::matmul", [[2, 12, 5, 64], [2, 12, 64, 5]], None)["shape"] == {
        "batch": 24,
        "M": 5,
        "N": 5,
        "K": 64,
    }
    conv = {"type": "Conv2d", "stride": (2, 2), "pad": (1, 1), "groups": 1}
    c = opsmod.normalize(op_for("aten::conv2d", [[1, 3, 32, 32], [8, 3, 3, 3], [8]], conv))
    assert (c["shape"]["P"], c["shape"]["bias"]) == (16, True)
    assert op_for("aten::conv2d", [[1, 3, 32, 32], [8, 3, 3, 3], []], None) is None  # stride unknown: no guess
    assert op_for("aten::mul", [[4, 8], []], None) == {"kind": "scale", "shape": {"numel": 32}}
    assert op_for("aten::add_", [[4, 8], [8]], None)["shape"] == {"numel": 32, "broadcast_numel": 8}
    assert op_for("aten::hardtanh_", [[4, 8]], None)["kind"] == "relu6"
    assert op_for("aten::cat", [[4, 8], [4, 8]], None) is None


def _small_net(torch):
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 16, 3, stride=2, padding=1)
            self.bn = torch.nn.BatchNorm2d(16)
            self.pool = torch.nn.MaxPool2d(2)
            self.fc = torch.nn.Linear(16 * 8 * 8, 10)

        def forward(self, x):
            x = self.pool(torch.relu(self.bn(self.conv(x))))
            return torch.softmax(self.fc(torch.flatten(x, 1)), -1)

    return Net()


@pytest.mark.slow
def test_place_torch_places_every_operator_or_lists_it(tmp_path):
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'rooflab[torch]')")
    import rooflab

    s = rooflab.place_torch(
        _small_net(torch), (torch.randn(1, 3, 32, 32),), out=tmp_path, ceilings=str(CEILINGS), threads=1,
        quick=True, runs=3, own=False,
    )  # fmt: skip
    data = json.loads(Path(s["result"]).read_text())
    nodes = {n["node"]: n for n in data["runtime"]["nodes"]}
    conv = nodes["conv: aten::conv2d"]["parts"][0]["shape"]
    assert (conv["stride_h"], conv["pad_h"], conv["K"]) == (2, 1, 16)  # from the nn.Conv2d that ran it
    assert nodes["pool: aten::max_pool2d"]["parts"][0]["shape"]["kernel"] == 2
    assert nodes["fc: aten::linear"]["parts"][0]["kind"] == "gemm"
    assert "Python between operators" in nodes and not nodes["Python between operators"]["parts"]
    assert s["nodes_placed"] >= 6 and len(s["e2e_samples_s"]) == 3
    assert sum(n["share_pct"] for n in nodes.values()) == pytest.approx(100)
