import pytest

onnx = pytest.importorskip("onnx")
import numpy as np  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from rooflab.models import ops as opsmod  # noqa: E402
from rooflab.models.onnx_import import ops_from_model  # noqa: E402


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
        "fc": "gemm",
        "softmax": "softmax",
    }
    conv = next(o for o in ops if o["name"] == "conv")
    assert conv["shape"]["P"] == 16 and opsmod.flops(conv) == 2 * 8 * 16 * 16 * 3 * 9
    fc = next(o for o in ops if o["name"] == "fc")
    assert (fc["shape"]["M"], fc["shape"]["N"], fc["shape"]["K"]) == (1, 10, 8)
    assert unsupported == [{"op": "flatten", "error": "unsupported ONNX op Flatten"}]


@pytest.mark.slow
def test_place_command_on_onnx(tmp_path, capsys):
    from rooflab import cli

    out = tmp_path / "res"
    assert cli.main(["run", "--quick", "--max-working-set", "256K", "--budget", "0.005", "--out", str(out)]) == 0
    path = tmp_path / "tiny.onnx"
    onnx.save(_model(), str(path))
    assert cli.main(["place", str(path), "--out", str(out), "--quick"]) == 0
    text = capsys.readouterr().out
    assert "skipped: flatten" in text and "conv" in text and "bound" in text
    assert list(out.glob("*/rooflab-place-cpu-*.ops.csv"))
