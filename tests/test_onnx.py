import pytest

onnx = pytest.importorskip("onnx")
import numpy as np  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from rooflab.models.onnx_import import ops_from_model  # noqa: E402
from rooflab.workloads import ops as opsmod  # noqa: E402


def _model():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])
    w = numpy_helper.from_array(np.zeros((8, 3, 3, 3), np.float32), "w")
    fcw = numpy_helper.from_array(np.zeros((8, 10), np.float32), "fcw")
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1], strides=[1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("Add", ["r", "r"], ["a"], name="add"),
        helper.make_node("GlobalAveragePool", ["a"], ["p"], name="gap"),
        helper.make_node("Flatten", ["p"], ["f"], name="flatten"),
        helper.make_node("MatMul", ["f", "fcw"], ["m"], name="fc"),
        helper.make_node("Softmax", ["m"], ["y"], name="softmax", axis=-1),
    ]
    g = helper.make_graph(nodes, "tiny", [x], [y], initializer=[w, fcw])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_onnx_graph_maps_to_ops_and_lists_unsupported():
    ops, unsupported = ops_from_model(_model())
    kinds = {o["name"]: o["kind"] for o in ops}
    assert kinds == {
        "conv": "conv2d",
        "relu": "relu",
        "add": "add",
        "gap": "avgpool",
        "flatten": "reshape",
        "fc": "gemm",
        "softmax": "softmax",
    }
    conv = next(o for o in ops if o["name"] == "conv")
    assert conv["shape"]["P"] == 16 and opsmod.flops(conv) == 2 * 8 * 16 * 16 * 3 * 9
    fc = next(o for o in ops if o["name"] == "fc")
    assert (fc["shape"]["M"], fc["shape"]["N"], fc["shape"]["K"]) == (1, 10, 8)
    assert unsupported == []
    flat = next(o for o in ops if o["name"] == "flatten")
    assert opsmod.flops(flat) == 0 and opsmod.min_bytes(flat) == 0  # a view: data movement, no copy


@pytest.mark.slow  # on the shared quick run's ceilings
def test_place_command_on_onnx(tmp_path, capsys, quick_result):
    from rooflab import cli

    out = tmp_path / "res"
    path = tmp_path / "tiny.onnx"
    onnx.save(_model(), str(path))
    assert cli.main(["place", str(path), "--ceilings", str(quick_result), "--out", str(out), "--quick"]) == 0
    text = capsys.readouterr().out
    assert "skipped" not in text and "flatten" in text and "conv" in text and "bound" in text
    assert list(out.glob("*/rooflab-place-cpu-*.ops.csv"))


def _mobilenet_block():
    """MobileNet-v3-style: stem conv + BN + ReLU6 (Clip), depthwise conv (group) + BN + HardSwish,
    squeeze-excite (GAP, 1x1 convs, HardSigmoid, channel Mul), pointwise conv + BN, residual Add,
    head: GAP, Flatten, Gemm, Softmax, Reshape."""
    f = TensorProto.FLOAT
    x = helper.make_tensor_value_info("x", f, [1, 3, 32, 32])
    y = helper.make_tensor_value_info("y", f, [10])

    def w(name, *shape):
        return numpy_helper.from_array(np.full(shape, 0.01, np.float32), name)

    inits = [w("w1", 16, 3, 3, 3), w("wd", 16, 1, 3, 3), w("wse1", 4, 16, 1, 1), w("wse2", 16, 4, 1, 1)]
    inits += [w("wp", 16, 16, 1, 1), w("fcw", 10, 16), w("fcb", 10)]
    inits += [
        numpy_helper.from_array(np.zeros(1, np.float32), "zero"),
        numpy_helper.from_array(np.full(1, 6, np.float32), "six"),
    ]
    inits.append(numpy_helper.from_array(np.array([10], np.int64), "shape10"))
    for b in ("bn1", "bn2", "bn3"):
        inits += [w(f"{b}_{p}", 16) for p in ("s", "b", "m", "v")]

    def bn(name, inp, out):
        return helper.make_node("BatchNormalization", [inp] + [f"{name}_{p}" for p in "sbmv"], [out], name=name)

    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], name="stem", pads=[1, 1, 1, 1], strides=[2, 2]),
        bn("bn1", "c1", "b1"),
        helper.make_node("Clip", ["b1", "zero", "six"], ["r1"], name="relu6"),
        helper.make_node("Conv", ["r1", "wd"], ["d1"], name="dw", pads=[1, 1, 1, 1], group=16),
        bn("bn2", "d1", "b2"),
        helper.make_node("HardSwish", ["b2"], ["h1"], name="hswish"),
        helper.make_node("GlobalAveragePool", ["h1"], ["se0"], name="se_pool"),
        helper.make_node("Conv", ["se0", "wse1"], ["se1"], name="se_fc1"),
        helper.make_node("Relu", ["se1"], ["se2"], name="se_relu"),
        helper.make_node("Conv", ["se2", "wse2"], ["se3"], name="se_fc2"),
        helper.make_node("HardSigmoid", ["se3"], ["se4"], name="se_gate"),
        helper.make_node("Mul", ["h1", "se4"], ["se5"], name="se_scale"),
        helper.make_node("Conv", ["se5", "wp"], ["p1"], name="pw"),
        bn("bn3", "p1", "b3"),
        helper.make_node("Add", ["b3", "r1"], ["res"], name="residual"),
        helper.make_node("GlobalAveragePool", ["res"], ["gap"], name="gap"),
        helper.make_node("Flatten", ["gap"], ["flat"], name="flatten"),
        helper.make_node("Gemm", ["flat", "fcw", "fcb"], ["logits"], name="fc", transB=1),
        helper.make_node("Softmax", ["logits"], ["prob"], name="softmax", axis=-1),
        helper.make_node("Reshape", ["prob", "shape10"], ["y"], name="reshape"),
    ]
    g = helper.make_graph(nodes, "mobilenet_block", [x], [y], initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_mobilenet_style_graph_maps_every_node():
    ops, unsupported = ops_from_model(_mobilenet_block())
    assert unsupported == []
    kinds = {o["name"]: o["kind"] for o in ops}
    assert kinds == {
        "stem": "conv2d",
        "bn1": "batchnorm",
        "relu6": "relu6",
        "dw": "conv2d",
        "bn2": "batchnorm",
        "hswish": "hardswish",
        "se_pool": "avgpool",
        "se_fc1": "conv2d",
        "se_relu": "relu",
        "se_fc2": "conv2d",
        "se_gate": "hardsigmoid",
        "se_scale": "mul",
        "pw": "conv2d",
        "bn3": "batchnorm",
        "residual": "add",
        "gap": "avgpool",
        "flatten": "reshape",
        "fc": "gemm",
        "softmax": "softmax",
        "reshape": "reshape",
    }
    by = {o["name"]: o for o in ops}
    assert by["dw"]["shape"]["groups"] == 16 and by["dw"]["shape"]["P"] == 16
    n = 16 * 16 * 16
    assert by["relu6"]["shape"]["numel"] == n and opsmod.min_bytes(by["relu6"]) == 4 * 2 * n
    se = by["se_scale"]  # a per-channel scale: the (1,16,1,1) operand is read once, 16 elements
    assert se["shape"]["broadcast_numel"] == 16 and opsmod.min_bytes(se) == 4 * (n + 16 + n)
    assert opsmod.flops(by["reshape"]) == 0 and opsmod.min_bytes(by["reshape"]) == 0
    assert all(o["nodes"] == [o["name"]] for o in ops)


def _transformer_bits():
    """PyTorch's export of BERT's erf GELU (two orders of its Muls), SiLU, Sigmoid/Tanh, scalar
    Div/Sub, a head transpose (B, S, H, D) -> (B, H, S, D), Concat, Squeeze/Unsqueeze."""
    f = TensorProto.FLOAT
    x = helper.make_tensor_value_info("x", f, [2, 8, 4, 16])
    outs = [helper.make_tensor_value_info(n, f, None) for n in ("g1", "g2", "cat", "sq", "t", "sig", "sub")]
    c = {"sqrt2": np.sqrt(2), "one": 1.0, "half": 0.5, "three": 3.0, "rsqrt2": 1 / np.sqrt(2)}
    inits = [numpy_helper.from_array(np.array(v, np.float32), k) for k, v in c.items()]
    inits.append(numpy_helper.from_array(np.array([0], np.int64), "ax0"))
    nodes = [
        helper.make_node("Div", ["x", "sqrt2"], ["e0"], name="gelu_div"),
        helper.make_node("Erf", ["e0"], ["e1"], name="gelu_erf"),
        helper.make_node("Add", ["e1", "one"], ["e2"], name="gelu_add"),
        helper.make_node("Mul", ["x", "e2"], ["e3"], name="gelu_mul_x"),
        helper.make_node("Mul", ["e3", "half"], ["g1"], name="gelu_mul_half"),
        helper.make_node("Mul", ["g1", "rsqrt2"], ["k0"], name="gelu2_mul"),
        helper.make_node("Erf", ["k0"], ["k1"], name="gelu2_erf"),
        helper.make_node("Add", ["one", "k1"], ["k2"], name="gelu2_add"),
        helper.make_node("Mul", ["g1", "half"], ["k3"], name="gelu2_half"),
        helper.make_node("Mul", ["k3", "k2"], ["g2"], name="gelu2_mul"),
        helper.make_node("Sigmoid", ["g2"], ["s0"], name="silu_sig"),
        helper.make_node("Mul", ["s0", "g2"], ["s1"], name="silu_mul"),
        helper.make_node("Transpose", ["s1"], ["t"], name="heads", perm=[0, 2, 1, 3]),
        helper.make_node("Concat", ["t", "t"], ["cat"], name="concat", axis=0),
        helper.make_node("Unsqueeze", ["t", "ax0"], ["u"], name="unsqueeze"),
        helper.make_node("Squeeze", ["u", "ax0"], ["sq"], name="squeeze"),
        helper.make_node("Tanh", ["sq"], ["th"], name="tanh"),
        helper.make_node("Sigmoid", ["th"], ["sig"], name="sigmoid"),
        helper.make_node("Sub", ["sig", "three"], ["sub"], name="sub"),
    ]
    g = helper.make_graph(nodes, "bits", [x], outs, initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_erf_gelu_silu_and_data_movement_map_without_unsupported_nodes():
    ops, unsupported = ops_from_model(_transformer_bits())
    assert unsupported == []
    n = 2 * 8 * 4 * 16
    by = {o["kind"] + ":" + o["name"].split(":")[-1].strip(): o for o in ops}
    gelus = [o for o in ops if o["kind"] == "gelu"]
    assert [o["nodes"] for o in gelus] == [
        ["gelu_div", "gelu_erf", "gelu_add", "gelu_mul_x", "gelu_mul_half"],
        ["gelu2_mul", "gelu2_erf", "gelu2_add", "gelu2_half", "gelu2_mul"],
    ]
    assert all(o["shape"]["numel"] == n and opsmod.min_bytes(o) == 4 * 2 * n for o in gelus)
    silu = next(o for o in ops if o["kind"] == "silu")
    assert silu["nodes"] == ["silu_sig", "silu_mul"]
    t = next(o for o in ops if o["kind"] == "transpose")
    assert (t["shape"]["cols"], t["shape"]["inner"]) == (4, 16)  # (B*S, H, D) -> (H, B*S, D) blocks of D
    assert opsmod.flops(t) == 0 and opsmod.min_bytes(t) == 4 * 2 * n
    cat = next(o for o in ops if o["kind"] == "concat")
    assert cat["shape"]["numel"] == 2 * n and opsmod.min_bytes(cat) == 4 * 4 * n
    assert [o["kind"] for o in ops if o["name"] in ("unsqueeze", "squeeze")] == ["reshape", "reshape"]
    assert {o["name"]: o["kind"] for o in ops if o["name"] in ("tanh", "sigmoid", "sub")} == {
        "tanh": "tanh",
        "sigmoid": "sigmoid",
        "sub": "sub",
    }
    sub = next(o for o in ops if o["name"] == "sub")
    assert sub["shape"]["broadcast_numel"] == 1 and opsmod.min_bytes(sub) == 4 * (2 * n + 1)
    covered = sorted(x for o in ops for x in o["nodes"])
    assert covered == sorted(node.name for node in _transformer_bits().graph.node)
    assert by  # every op has a name


@pytest.mark.parametrize(
    "kind",
    [
        "scale",
        "sigmoid",
        "tanh",
        "relu6",
        "hardswish",
        "hardsigmoid",
        "silu",
        "mul",
        "sub",
        "div",
        "reshape",
        "transpose",
        "concat",
    ],
)
def test_new_kinds_run_through_numpy_and_match_float64(kind):
    from rooflab.cpu.backend import cpu_backend
    from rooflab.driver import Driver, Settings
    from rooflab.models import measure

    shape = {"numel": 4 * 6 * 8}
    if kind in ("mul", "sub", "div"):
        shape["broadcast_numel"] = 8
    if kind == "transpose":
        shape.update(cols=6, inner=8)
    op = opsmod.normalize({"kind": kind, "shape": shape, "dtype": "float32"})
    (v,), _ = measure.variants_for(op, "cpu")
    driver = Driver(cpu_backend(probe=False), Settings(budget_s=0.0, min_samples=1, max_attempts=1))
    rec = driver.measure(v, v.inputs(op["shape"], np.float32), reps=1)
    assert rec.status == "ok", rec.error
    assert rec.work["launches"] >= 1


def test_graph_ops_are_variants_and_a_dropped_pass_is_caught():
    """The graph family's one thing to run is the Variant (no second call object beside it): every
    OPS row is variant 0 of its kind on both devices, its declared dispatches are the passes it
    makes, and the same variant with one pass of its sequence dropped fails verification."""
    import dataclasses

    import rooflab
    from rooflab.cpu.backend import cpu_backend
    from rooflab.driver import Driver, Settings
    from rooflab.families import graph

    names = {v.op: v for v in rooflab.list_variants(family="graph", device="cpu")}
    assert set(names) == set(graph.OPS) == {v.op for v in rooflab.list_variants(family="graph", device="cuda")}
    v = names["sigmoid"]
    (i,) = v.inputs({"numel": 512}, np.float32, seed=2)
    assert v.work(i, reps=3).launches == 3 * graph.OPS["sigmoid"][0] == 12

    def three_passes(i, reps=1, threads=None):  # the +1 pass forgotten
        xp = i.xp
        xp.negative(i.x, out=i.y)
        xp.exp(i.y, out=i.y)
        return xp.reciprocal(i.y, out=i.y)

    driver = Driver(cpu_backend(probe=False), Settings(budget_s=0.0, min_samples=1, max_attempts=1))
    assert driver.measure(v, v.inputs({"numel": 512}, np.float32), reps=1).status == "ok"
    wrong = dataclasses.replace(v, name="cpu.graph.sigmoid.wrong", kernel=three_passes)
    rec = driver.measure(wrong, wrong.inputs({"numel": 512}, np.float32), reps=1)
    assert rec.status == "failed" and not rec.verified


def test_llama_rmsnorm_and_rope_patterns_are_one_op_each():
    """A Llama export's RMSNorm (Mul x x, ReduceMean, Add eps, Sqrt, Div, Mul w) and rotate-half RoPE
    (Slice, Slice, Neg, Concat, Mul cos, Mul sin, Add) map to one rmsnorm and one rope op, with the
    shapes of rooflab.models.llm's ops; a RMSNorm without its weight Mul is not one."""
    from rooflab.models.export import _Graph
    from rooflab.models.llm.export import _rms, _rope

    g = _Graph()
    x = g.input("x", [1, 4, 6, 64])  # batch, heads, tokens, head_dim
    cos = g.weight("cos", [6, 64])
    sin = g.weight("sin", [6, 64])
    r = _rope(g, x, "rope", cos, sin, 64)
    flat = g.node("Reshape", [r, g.const([24, 64], np.int64)], "flat")
    y = _rms(g, flat, "norm", 64, 1e-6)
    g.output(y)
    ops, bad = ops_from_model(g.model("llama-bits", ""))
    assert bad == []
    kinds = {o["kind"]: o for o in ops}
    assert set(kinds) == {"rope", "reshape", "rmsnorm"}
    assert kinds["rope"]["shape"] == {"tokens": 6, "heads": 4, "head_dim": 64, "rot_dim": 64}
    assert len(kinds["rope"]["nodes"]) == 7 and len(kinds["rmsnorm"]["nodes"]) == 6
    assert kinds["rmsnorm"]["shape"] == {"rows": 24, "cols": 64}
    # without the weight Mul, the pieces stand alone (Sqrt and ReduceMean have no formula)
    g.nodes = [n for n in g.nodes if n.name != "norm"]
    g.outputs = []
    g.output("norm/div")
    ops, bad = ops_from_model(g.model("no-weight", ""))
    assert {b["error"] for b in bad} == {"unsupported ONNX op ReduceMean", "unsupported ONNX op Sqrt"}


@pytest.mark.slow  # on the shared quick run's ceilings
def test_identical_ops_are_timed_once_and_errors_said_once(tmp_path, capsys, quick_result):
    """An OPS.json with the same GEMM under two names, an unknown kind and an op too large for memory:
    the GEMM is timed once and placed twice (the second ``measured_as`` the first); each error is one
    line, printed once, the size said once; a file where nothing is placed says so."""
    import json

    from rooflab import cli

    gemm = {"kind": "gemm", "shape": {"M": 64, "N": 64, "K": 64}}
    ops = [
        {**gemm, "name": "layer0.fc"},
        {**gemm, "name": "layer1.fc"},
        {"kind": "bogus", "name": "b"},
        {"kind": "gemm", "name": "huge", "shape": {"M": 400000, "N": 400000, "K": 400000}},
    ]
    f = tmp_path / "ops.json"
    f.write_text(json.dumps(ops))
    out = tmp_path / "res"
    assert cli.main(["place", str(f), "--ceilings", str(quick_result), "--out", str(out), "--quick"]) == 0
    text = capsys.readouterr().out
    assert text.count("unknown kind 'bogus'") == 1 and "skipped:" not in text
    (huge,) = [line for line in text.splitlines() if "op 'huge'" in line]
    assert huge.count("GiB") == 2  # needs X GiB but only Y GiB is free: no third copy of X
    (res,) = out.glob("*/rooflab-place-cpu-*.json")
    placed = json.loads(res.read_text())["ops_placed"]
    first = [p for p in placed if p["name"].startswith("layer0.fc")]
    again = [p for p in placed if p["name"].startswith("layer1.fc")]
    assert first and len(again) == len(first) and all(p["measured_as"] == "layer0.fc" for p in again)
    assert [p["seconds"] for p in again] == [p["seconds"] for p in first]
    assert not any("measured_as" in p for p in first)
    f.write_text(json.dumps([ops[2]]))
    assert cli.main(["place", str(f), "--ceilings", str(quick_result), "--out", str(out), "--quick"]) == 1
    assert "no op placed; not placed (1): b" in capsys.readouterr().out


def test_place_runs_the_ops_at_the_threads_of_their_roofs(tmp_path, capsys):
    """Ceilings whose 2-thread roofs cannot be true: `place --threads 2` says so, runs the ops at 1
    thread and records that (issue 37: a 1M relu timed at 2 threads read 183 % of a 1-thread roof)."""
    import json

    from rooflab import cli
    from tests.test_implausible import bad_two_threads

    ceil = tmp_path / "ceilings.json"
    ceil.write_text(json.dumps(bad_two_threads() | {"suite": "ceilings", "status": "complete"}))
    f = tmp_path / "ops.json"
    f.write_text(json.dumps([{"kind": "relu", "name": "r", "shape": {"numel": 4096}}]))
    out = tmp_path / "res"
    argv = ["place", str(f), "--ceilings", str(ceil), "--out", str(out), "--quick", "--threads", "2"]
    assert cli.main(argv) == 0
    assert "ops run at 1 thread(s)" in capsys.readouterr().out
    (res,) = out.glob("*/rooflab-place-cpu-*.json")
    assert json.loads(res.read_text())["config"]["threads"] == 1
