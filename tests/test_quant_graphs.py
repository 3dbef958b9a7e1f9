"""Quantized ONNX graphs (issue 36): QDQ, QOperator and dynamic-INT8 nodes map to ops counted at the
width they are stored; the schemes rooflab does not model are one line each naming the node; the
quantize/dequantize ops run and verify; `rooflab export --quantize` makes the graphs with
onnxruntime's tools, and onnxruntime's own per-node times of them are placed (slow)."""

import importlib.util
import json

import pytest

onnx = pytest.importorskip("onnx")
import numpy as np  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from rooflab import cli  # noqa: E402
from rooflab.errors import RooflabError  # noqa: E402
from rooflab.models.onnx_import import ops_from_model, ops_from_onnx  # noqa: E402
from rooflab.workloads import ops as opsmod  # noqa: E402

needs_ort = pytest.mark.skipif(importlib.util.find_spec("onnxruntime") is None, reason="onnxruntime is not installed")


class _G:
    """A tiny graph under construction: initializers, nodes, one float input."""

    def __init__(self, shape):
        self.inits, self.nodes = [], []
        self.inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)]

    def init(self, name, arr):
        self.inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def node(self, op, ins, name, outs=None, domain=None, **attrs):
        outs = outs or [name]
        self.nodes.append(helper.make_node(op, ins, outs, name=name, domain=domain, **attrs))
        return outs[0]

    def q(self, x, name, scale="s", zp="zu8"):
        return self.node("QuantizeLinear", [x, scale, zp], name)

    def dq(self, x, name, scale="s", zp="zu8"):
        return self.node("DequantizeLinear", [x, scale, zp], name)

    def model(self, out, opset=17):
        y = helper.make_tensor_value_info(out, TensorProto.FLOAT, None)
        g = helper.make_graph(self.nodes, "q", self.inputs, [y], initializer=self.inits)
        ops = [helper.make_opsetid("", opset), helper.make_opsetid("com.microsoft", 1)]
        return helper.make_model(g, opset_imports=ops)


def _qdq_conv_matmul(act_zp=None):
    """x -> Q -> DQ -> Conv(DQ w, DQ bias) -> Q -> DQ -> Flatten... -> MatMul(DQ w2) (no Q after)."""
    g = _G([1, 4, 8, 8])
    g.init("s", np.float32(0.05))
    g.init("zu8", np.uint8(128))
    g.init("zs8", np.int8(0))
    g.init("w", np.ones((8, 4, 3, 3), np.int8))
    g.init("b", np.zeros(8, np.int32))
    g.init("zb", np.int32(0))
    g.init("w2", np.ones((512, 10), np.int8))
    xq = g.q("x", "x_q")
    xd = g.dq(xq, "x_dq", zp=act_zp or "zu8")
    wd = g.dq("w", "w_dq", zp="zs8")
    bd = g.dq("b", "b_dq", zp="zb")
    c = g.node("Conv", [xd, wd, bd], "conv", pads=[1, 1, 1, 1])
    cq = g.q(c, "conv_q")
    cd = g.dq(cq, "conv_dq")
    f = g.node("Flatten", [cd], "flatten")
    w2d = g.dq("w2", "w2_dq", zp="zs8")
    fq = g.q(f, "flat_q")
    fd = g.dq(fq, "flat_dq")
    g.node("MatMul", [fd, w2d], "fc")
    return g.model("fc")


def test_qdq_ops_absorb_their_quantize_nodes_and_count_8bit_bytes():
    ops, bad = ops_from_model(_qdq_conv_matmul())
    assert bad == []
    by = {o["name"]: o for o in ops}
    assert set(by) == {"x_q", "conv", "flatten", "fc"}
    conv = by["conv"]
    assert conv["kind"] == "conv2d" and conv["dtype"] == "int8"
    assert conv["nodes"] == ["x_dq", "w_dq", "b_dq", "conv", "conv_q"]
    s = conv["shape"]
    # every tensor at 1 byte (the int32 bias counted at the op's width: 8 elements)
    assert opsmod.min_bytes(conv) == 4 * 64 + 8 * 4 * 9 + 8 + 8 * 64
    assert opsmod.flops(conv) == 2 * 8 * 64 * 4 * 9 + 8 * 64 and s["P"] == 8
    fc = by["fc"]  # a MatMul with no QuantizeLinear after it: the integer GEMM that writes float
    assert fc["kind"] == "qgemm_int8" and fc["shape"] == {"M": 1, "N": 10, "K": 512, "out_itemsize": 4}
    assert opsmod.min_bytes(fc) == 512 + 512 * 10 + 4 * 10
    assert fc["nodes"] == ["flat_dq", "w2_dq", "fc"]
    assert by["x_q"]["kind"] == "quantize" and opsmod.min_bytes(by["x_q"]) == 5 * 256
    # DequantizeLinear -> Flatten -> QuantizeLinear: the 8-bit view (onnxruntime drops the pair)
    flat = by["flatten"]
    assert flat["kind"] == "reshape" and flat["dtype"] == "int8" and flat["nodes"] == ["conv_dq", "flatten", "flat_q"]
    covered = [n for o in ops for n in o["nodes"]]
    assert sorted(covered) == sorted(n.name for n in _qdq_conv_matmul().graph.node)


def test_per_channel_activation_zero_points_are_one_line_naming_the_node():
    m = _qdq_conv_matmul(act_zp="zvec")
    m.graph.initializer.append(numpy_helper.from_array(np.full(4, 128, np.uint8), "zvec"))
    ops, bad = ops_from_model(m)
    assert [b["op"] for b in bad] == ["conv"]
    assert "x_dq" in bad[0]["error"] and "per-channel" in bad[0]["error"]
    assert {o["name"] for o in ops} >= {"x_q", "fc"}  # the rest is placed


def test_4bit_qdq_weights_are_refused_by_name():
    g = _G([1, 64])
    g.init("s", np.float32(0.05))
    g.init("zu8", np.uint8(128))
    w4 = helper.make_tensor("w4", TensorProto.INT4, [64, 8], np.zeros(64 * 8, np.int8).tolist())
    g.inits.append(w4)
    xd = g.dq(g.q("x", "x_q"), "x_dq")
    wd = g.node("DequantizeLinear", ["w4", "s"], "w4_dq")
    g.q(g.node("MatMul", [xd, wd], "mm"), "mm_q")
    ops, bad = ops_from_model(g.model("mm_q", opset=21))
    assert [b["op"] for b in bad] == ["mm"] and "w4_dq" in bad[0]["error"] and "8-bit only" in bad[0]["error"]
    assert [o["name"] for o in ops] == ["x_q"]


def test_dynamic_int8_matmul_is_one_integer_gemm_scaled_at_the_store():
    """onnxruntime's quantize_dynamic: DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul by the
    product of the two scales: one qgemm_int8 (what MatMulIntegerToFloat runs) and a dynamic
    quantize (2 FLOPs per element: range, then quantize)."""
    g = _G([4, 64])
    g.init("w", np.ones((64, 32), np.int8))
    g.init("ws", np.float32(0.01))
    g.init("wz", np.int8(0))
    g.node("DynamicQuantizeLinear", ["x"], "dql", outs=["xq", "xs", "xz"])
    sm = g.node("Mul", ["xs", "ws"], "scales_mul")
    mm = g.node("MatMulInteger", ["xq", "w", "xz", "wz"], "mmi")
    c = g.node("Cast", [mm], "cast", to=TensorProto.FLOAT)
    g.node("Mul", [c, sm], "out_mul")
    ops, bad = ops_from_model(g.model("out_mul"))
    assert bad == []
    q, gemm = ops
    assert q["kind"] == "quantize" and q["shape"]["dynamic"] and opsmod.flops(q) == 2 * 256
    assert opsmod.min_bytes(q) == 4 * 256 + 256
    assert gemm["kind"] == "qgemm_int8" and gemm["nodes"] == ["scales_mul", "mmi", "cast", "out_mul"]
    assert opsmod.min_bytes(gemm) == 4 * 64 + 64 * 32 + 4 * 4 * 32


def test_qoperator_contrib_nodes_are_sized_without_onnxruntime(monkeypatch):
    """QLinearConv (onnx) then QLinearAdd and QLinearGlobalAveragePool (com.microsoft, which onnx's
    shape inference stops at): sized by rooflab's own rules when onnxruntime's symbolic inference
    is missing, so every node maps."""
    import sys

    monkeypatch.setitem(sys.modules, "onnxruntime.tools.symbolic_shape_infer", None)
    g = _G([1, 4, 8, 8])
    for name, v in (("s", np.float32(0.05)), ("z", np.uint8(128)), ("ws", np.float32(0.01)), ("wz", np.int8(0))):
        g.init(name, v)
    g.init("w", np.ones((4, 4, 1, 1), np.int8))
    xq = g.q("x", "x_q", zp="z")
    c = g.node("QLinearConv", [xq, "s", "z", "w", "ws", "wz", "s", "z"], "qconv")
    a = g.node("QLinearAdd", [c, "s", "z", xq, "s", "z", "s", "z"], "qadd", domain="com.microsoft")
    p = g.node("QLinearGlobalAveragePool", [a, "s", "z", "s", "z"], "qgap", domain="com.microsoft", channels_last=0)
    g.dq(p, "out", zp="z")
    ops, bad = ops_from_model(g.model("out"))
    assert bad == []
    kinds = [(o["kind"], o["dtype"]) for o in ops]
    assert kinds == [
        ("quantize", "float32"),
        ("conv2d", "int8"),
        ("add", "int8"),
        ("avgpool", "int8"),
        ("dequantize", "float32"),
    ]
    assert opsmod.min_bytes(ops[2]) == 3 * 256 and ops[3]["shape"] == {"N": 1, "C": 4, "H": 8, "W": 8}


def test_out_itemsize_and_the_8bit_dtype_are_validated():
    with pytest.raises(RooflabError, match="out_itemsize"):
        opsmod.normalize({"kind": "add", "shape": {"numel": 4, "out_itemsize": 1}})
    with pytest.raises(RooflabError, match="float side"):
        opsmod.normalize({"kind": "quantize", "shape": {"numel": 4}, "dtype": "int8"})
    op = opsmod.normalize({"kind": "gemm", "shape": {"M": 2, "N": 3, "K": 4}, "dtype": "uint8"})
    assert op["dtype"] == "int8" and opsmod.min_bytes(op) == 8 + 12 + 6
    from rooflab.models import llm

    with pytest.raises(RooflabError, match="--weights"):
        llm.dtype_name("int8")


@pytest.mark.parametrize("shape", [{"numel": 3000}, {"numel": 3000, "dynamic": True}])
def test_quantize_and_dequantize_run_verified_and_a_dropped_step_is_caught(shape):
    import dataclasses

    import rooflab
    from rooflab.cpu.backend import cpu_backend
    from rooflab.driver import Driver, Settings

    driver = Driver(cpu_backend(probe=False), Settings(budget_s=0.0, min_samples=1, max_attempts=1))
    vs = {v.op: v for v in rooflab.list_variants(family="graph", device="cpu")}
    for kind in ("quantize", "dequantize"):
        v = vs[kind]
        rec = driver.measure(v, v.inputs(shape, np.float32), reps=1)
        assert rec.status == "ok", rec.error

    def no_clamp(i, reps=1, threads=None):  # the 0..255 clamp forgotten: the tails wrap
        i.t[:] = np.rint(i.x / np.float32(i.scale)) + i.zp
        i.y[...] = i.t.astype(np.int64).astype(np.uint8)
        return i.y

    if not shape.get("dynamic"):
        wrong = dataclasses.replace(vs["quantize"], name="cpu.graph.quantize.wrong", kernel=no_clamp)
        rec = driver.measure(wrong, wrong.inputs(shape, np.float32), reps=1)
        assert rec.status != "ok" and "outside" in rec.error


def test_quantize_scheme_errors_are_one_line_and_exit_2(tmp_path, capsys):
    for argv, msg in (
        (["export", "bert-base", "--quantize", "static"], "is for the CNNs"),
        (["export", "resnet50", "--quantize", "int4"], "quantizes MatMul weights"),
        (["export", "mobilenetv2", "--quantize", "int3"], "not a scheme"),
    ):
        assert cli.main([*argv, "-o", str(tmp_path / "m.onnx")]) == 2
        err = capsys.readouterr().err
        assert msg in err and len(err.strip().splitlines()) == 1
    assert not list(tmp_path.iterdir())  # nothing written


# ---- with onnxruntime: its quantizers, its per-node times ------------------------------------------


def _placed_by_onnxruntime(path, tmp_path, ceilings, *more) -> dict:
    """`place PATH --runtime onnxruntime --no-own` at 1 thread: its result's "runtime" part, once it
    is known that no row is listed without a formula, no node is unsupported, none above its roof."""
    out = tmp_path / "res"
    argv = ["place", str(path), "--runtime", "onnxruntime", "--ceilings", str(ceilings), "--out", str(out)]
    assert cli.main([*argv, "--quick", "--no-own", "--threads", "1", *more]) == 0
    (res,) = out.glob("*/rooflab-runtime-cpu-*.json")
    runtime = json.loads(res.read_text())["runtime"]
    assert runtime["summary"]["nodes_listed"] == 0 and runtime["unsupported"] == []
    assert not [r["node"] for r in runtime["nodes"] if r.get("above_roof")]
    return runtime


@needs_ort
@pytest.mark.slow
def test_static_qdq_mobilenet_placed_from_onnxruntime_every_node_on_the_int8_roof(tmp_path, quick_result):
    """`rooflab export mobilenetv2 --quantize static`, then onnxruntime's own per-node times placed:
    every node of the QDQ graph is in a row, no row is listed without a formula, the 8-bit convs are
    placed on the INT8 roof at 1 byte per element, and no row is above its roof."""
    path = tmp_path / "mnv2-qdq.onnx"
    assert cli.main(["export", "mobilenetv2", "--quantize", "static", "-o", str(path)]) == 0
    ops, bad = ops_from_onnx(path)
    assert bad == [] and sum(o["kind"] == "conv2d" and o["dtype"] == "int8" for o in ops) == 52
    runtime = _placed_by_onnxruntime(path, tmp_path, quick_result)
    nodes = runtime["nodes"]
    model = onnx.load(str(path))
    covered = {n for r in nodes for n in r["graph_nodes"]} | {n["node"] for n in runtime["not_executed"]}
    assert covered == {n.name for n in model.graph.node}
    convs = [r for r in nodes if r.get("kind") == "conv2d"]
    assert len(convs) == 52 and all("int8" in r["peak_used"] or "INT8" in r["peak_used"] for r in convs)


@needs_ort
@pytest.mark.slow
def test_dynamic_int8_bert_placed_from_onnxruntime_none_listed(tmp_path, quick_result):
    """`rooflab export bert-base --seq 8 --quantize dynamic`: DynamicQuantizeLinear + MatMulInteger
    graphs; onnxruntime fuses some (DynamicQuantizeMatMul) and leaves the Q/K/V ones apart (the
    MatMulInteger, Cast and scale Muls are joined into one row): none listed, none above the roof."""
    path = tmp_path / "bert-dyn.onnx"
    assert cli.main(["export", "bert-base", "--seq", "8", "--quantize", "dynamic", "-o", str(path)]) == 0
    nodes = _placed_by_onnxruntime(path, tmp_path, quick_result, "--runs", "3")["nodes"]
    gemms = [r for r in nodes if "qgemm_int8" in (r.get("kind") or "")]
    assert len(gemms) == 73 and all("int8" in r["peak_used"] or "INT8" in r["peak_used"] for r in gemms)


@needs_ort
@pytest.mark.slow
def test_int4_llama_decode_graph_placed_from_onnxruntime_none_listed(tmp_path, quick_result):
    """`rooflab export smollm-135m --cache 16 --quantize int4`: MatMulNBits, RMSNorm and RoPE patterns
    (which onnxruntime partly fuses, partly runs node by node): every node in a placed row."""
    path = tmp_path / "smol-int4.onnx"
    assert cli.main(["export", "smollm-135m", "--cache", "16", "--quantize", "int4", "-o", str(path)]) == 0
    assert path.exists() and (tmp_path / "smol-int4.onnx.data").exists()
    nodes = _placed_by_onnxruntime(path, tmp_path, quick_result, "--runs", "3")["nodes"]
    kinds = {k for r in nodes for k in (r.get("kind") or "").split("+")}
    assert {"qgemm_nbits", "rmsnorm", "rope"} <= kinds
    assert sum("qgemm_nbits" in (r.get("kind") or "") for r in nodes) == 30 * 7
