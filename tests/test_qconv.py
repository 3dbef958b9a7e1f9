"""The 8-bit convolution rungs (rooflab/families/qconv.py) and the 8-bit graph ops
(rooflab/families/qgraph.py): every rung within one code of the float64 requantized convolution at
odd shapes (batch, stride, pad, groups, a 7x7 stem with 3 channels), kernels that drop a tap or the
zero point caught by the same check, onnxruntime's QLinearConv and the 8-bit add/pool ops held to
their formulas, an 8-bit op never run by a float kernel, and a QDQ graph re-executed by rooflab
with every op placed on the INT8 roof."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
from rooflab.kernels.cpu import qconv as QC

import rooflab
from rooflab import verify
from rooflab.errors import RooflabError, VerificationError
from rooflab.families import qconv as F

needs_ort = pytest.mark.skipif(importlib.util.find_spec("onnxruntime") is None, reason="onnxruntime is not installed")

DENSE = [  # (shape, params)
    (dict(N=1, C=5, H=9, W=11, K=7, R=3, S=2), dict(stride=2, pad=1)),
    (dict(N=2, C=8, H=6, W=5, K=20, R=1, S=1), dict()),
    (dict(N=1, C=3, H=23, W=21, K=16, R=7, S=7), dict(stride=2, pad=3)),
    (dict(N=1, C=8, H=10, W=10, K=12, R=3, S=3), dict(pad=1, groups=4)),
    (dict(N=3, C=17, H=7, W=7, K=33, R=3, S=3), dict(pad=(1, 0), stride=(1, 2))),
]
DEPTHWISE = [
    (dict(N=1, C=16, H=14, W=14, K=16, R=3, S=3), dict(pad=1, groups=16)),
    (dict(N=2, C=6, H=15, W=17, K=6, R=3, S=3), dict(stride=2, pad=1, groups=6)),
    (dict(N=1, C=5, H=17, W=19, K=5, R=5, S=5), dict(stride=3, pad=2, groups=5)),
    (dict(N=1, C=9, H=7, W=7, K=9, R=3, S=3), dict(pad=1, groups=9)),
]


def _run(name, shape, params, threads=1):
    v = rooflab.get_variant(f"cpu.qconv.{name}")
    size = dict(shape)
    for k, val in params.items():  # a pair as the op shape's _h/_w fields
        size.update({f"{k}_h": val[0], f"{k}_w": val[1]} if isinstance(val, tuple) else {k: val})
    x, w, q = v.inputs(size)
    return (x, w, q), v.kernel(x, w, q, threads=threads, **params), v.reference(x, w, q, **params)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shape,params", DENSE)
def test_im2col_rung_within_one_code(shape, params, threads):
    _, got, ref = _run("01-im2col-dpbusd", shape, params, threads)
    assert got.dtype == np.uint8 and got.shape == ref.shape
    verify.check(got, ref, dtype="uint8")
    assert (ref == 0).sum() + (ref == 255).sum() < ref.size // 10  # the codes spread, few clamp


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shape,params", DEPTHWISE)
def test_depthwise_rung_within_one_code(shape, params, threads):
    _, got, ref = _run("02-depthwise", shape, params, threads)
    verify.check(got, ref, dtype="uint8")


def test_each_rung_refuses_the_other_ones_shapes_in_one_line():
    with pytest.raises(RooflabError, match="02-depthwise's"):
        _run("01-im2col-dpbusd", *DEPTHWISE[0])
    with pytest.raises(RooflabError, match="depthwise convs only"):
        _run("02-depthwise", *DENSE[0])
    big = dict(N=1, C=2, H=40, W=40, K=2, R=33, S=33)
    with pytest.raises(RooflabError, match="not exact"):
        _run("02-depthwise", big, dict(groups=2))
    v = rooflab.get_variant("cpu.qconv.01-im2col-dpbusd")
    x, w, q = v.inputs(DENSE[0][0])
    with pytest.raises(RooflabError, match="must be a C-contiguous 4-D uint8"):
        v.kernel(x.astype(np.float32), w, q)


def test_a_dropped_tap_or_zero_point_fails_the_check():
    """The check can fail: the same GEMM path with one filter tap zeroed, or with the input zero
    point taken as 0, is off by many codes."""
    shape, params = DENSE[0]
    (x, w, q), _, ref = _run("01-im2col-dpbusd", shape, params)
    y = np.empty_like(ref, dtype=np.uint8)
    w0 = w.copy()
    w0[:, :, 1, 0] = 0
    args = (shape["R"], shape["S"], 77, float(q[1]), float(q[2]), (2, 2), (1, 1), 1, y)
    QC.conv_gemm(x, QC.pack_weights(w0, 77, 1), *args)
    with pytest.raises(VerificationError):
        verify.check(y, ref, dtype="uint8")
    QC.conv_gemm(x, QC.pack_weights(w, 0, 1), shape["R"], shape["S"], 0, float(q[1]), float(q[2]), (2, 2), (1, 1), 1, y)
    with pytest.raises(VerificationError):
        verify.check(y, ref, dtype="uint8")
    QC.conv_gemm(x, QC.pack_weights(w, 77, 1), *args)
    verify.check(y, ref, dtype="uint8")


def test_the_multiplier_spreads_outputs_over_the_codes():
    """m from the window size alone keeps the outputs' spread near SPREAD codes at any window."""
    for shape, params in (DENSE[0], DENSE[2], DEPTHWISE[0]):
        rung = "02-depthwise" if params.get("groups") == shape["C"] else "01-im2col-dpbusd"
        _, _, ref = _run(rung, shape, params)
        assert 0.6 * F.SPREAD < ref.std() < 1.3 * F.SPREAD


@needs_ort
@pytest.mark.parametrize("shape,params", DENSE[:2] + DEPTHWISE[:2])
def test_onnxruntime_qlinearconv_is_held_to_the_same_formula(shape, params):
    _, got, ref = _run("00-ort-qlinearconv", shape, params)
    verify.check(got, ref, dtype="uint8")


@needs_ort
@pytest.mark.parametrize(
    "kind,shape",
    [
        ("add", {"numel": 1000}),
        ("add", {"numel": 96, "broadcast_numel": 8}),
        ("maxpool", {"N": 1, "C": 3, "H": 9, "W": 9, "kernel": 3, "stride": 2, "pad": 1}),
        ("avgpool", {"N": 2, "C": 5, "H": 7, "W": 7}),
        ("reshape", {"numel": 100}),
    ],
)
def test_8bit_graph_ops_within_one_code_and_a_lost_scale_fails(kind, shape):
    from rooflab.families import qgraph

    v = next(v for v in rooflab.registry.list_variants(device="cpu", op=kind) if "int8" in v.dtypes)
    (i,) = v.inputs(shape)
    got, ref = v.kernel(i), v.reference(i)
    verify.check(got, ref, dtype="uint8")
    assert len(np.unique(ref)) > 5  # every code can move the result
    if kind in ("add", "avgpool"):
        table = qgraph.ADD if kind == "add" else qgraph.AVG
        key = "sc" if kind == "add" else "sy"
        old = table[key]
        try:
            table[key] = 2 * old
            with pytest.raises(VerificationError):
                verify.check(got, v.reference(i), dtype="uint8")
        finally:
            table[key] = old


def test_an_8bit_op_is_never_run_by_a_float_kernel():
    from rooflab.models.measure import variants_for

    for kind in ("conv2d", "add", "avgpool", "maxpool", "reshape"):
        lib, own = variants_for({"kind": kind, "dtype": "int8"}, "cpu")
        assert lib and all("int8" in v.dtypes for v in lib + own), kind
    lib, own = variants_for({"kind": "concat", "dtype": "int8"}, "cpu")
    assert not lib and not own
    lib, _ = variants_for({"kind": "conv2d", "dtype": "float32"}, "cpu")
    assert lib and all("int8" not in v.dtypes for v in lib)


def test_suite_cases_name_registered_variants_and_the_driver_runs_them():
    from rooflab.cpu.backend import cpu_backend
    from rooflab.driver import Driver, Settings

    for quick in (True, False):
        rooflab.registry.check_cases(F.cases(quick=quick, threads=[1, 2]))
    d = Driver(cpu_backend(), Settings(budget_s=0.0, min_samples=1, probe_clock=False, max_attempts=1))
    for name, (shape, params) in (("01-im2col-dpbusd", DENSE[3]), ("02-depthwise", DEPTHWISE[1])):
        case = rooflab.registry.Case(
            variant=f"cpu.qconv.{name}", size={**shape, **params}, dtype="uint8", params=params
        )
        rec = d.run_case(case)
        assert rec.status == "ok", rec.error


@needs_ort
def test_a_qdq_graph_is_re_executed_with_every_op_on_the_int8_roof():
    """A static QDQ graph (conv, depthwise conv, residual add, max pooling) re-executed as `rooflab
    place` does (measure_ops, here on synthetic ceilings with an INT8 peak): no error, each 8-bit op
    run by onnxruntime's node and the convs by rooflab's rungs too, placed on the INT8 peak at 1 byte
    per element."""
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    from rooflab.machine import describe
    from rooflab.models import place
    from rooflab.models.measure import measure_ops
    from rooflab.models.onnx_import import ops_from_model
    from tests.test_plots import synthetic

    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(np.array(0.05, np.float32), "s"),
        numpy_helper.from_array(np.array(128, np.uint8), "z"),
        numpy_helper.from_array(np.array(0, np.int8), "zs8"),
        numpy_helper.from_array(rng.integers(-64, 64, (8, 8, 3, 3), dtype=np.int8), "w"),
        numpy_helper.from_array(rng.integers(-64, 64, (8, 1, 3, 3), dtype=np.int8), "wd"),
    ]
    n = helper.make_node
    nodes = [
        n("QuantizeLinear", ["x", "s", "z"], ["xq"], name="x_q"),
        n("DequantizeLinear", ["xq", "s", "z"], ["xd"], name="x_dq"),
        n("DequantizeLinear", ["w", "s", "zs8"], ["wdq"], name="w_dq"),
        n("Conv", ["xd", "wdq"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        n("QuantizeLinear", ["c", "s", "z"], ["cq"], name="conv_q"),
        n("DequantizeLinear", ["cq", "s", "z"], ["cd"], name="conv_dq"),
        n("DequantizeLinear", ["wd", "s", "zs8"], ["wddq"], name="wd_dq"),
        n("Conv", ["cd", "wddq"], ["d"], name="dw", pads=[1, 1, 1, 1], group=8),
        n("QuantizeLinear", ["d", "s", "z"], ["dq"], name="dw_q"),
        n("DequantizeLinear", ["dq", "s", "z"], ["dd"], name="dw_dq"),
        n("Add", ["dd", "xd"], ["a"], name="add"),
        n("QuantizeLinear", ["a", "s", "z"], ["aq"], name="add_q"),
        n("DequantizeLinear", ["aq", "s", "z"], ["ad"], name="add_dq"),
        n("MaxPool", ["ad"], ["m"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        n("QuantizeLinear", ["m", "s", "z"], ["mq"], name="pool_q"),
        n("DequantizeLinear", ["mq", "s", "z"], ["y"], name="pool_dq"),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 16, 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    graph = helper.make_graph(nodes, "qdq", [x], [y], inits)
    ops_list, bad = ops_from_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    assert bad == []
    d = synthetic(op_threads=())
    fp32 = next(c for c in d["ceilings"] if c["kind"] == "compute" and c["dtype"] == "float32" and c["threads"] == 1)
    d["ceilings"].append(dict(fp32, dtype="int8", name="INT8 peak (test), 1 thread", value=400.0))
    placed, errors = measure_ops(
        ops_list, place.Roofs(d, 1), device="cpu", threads=1, quick=True, machine=describe()
    )  # fmt: skip
    assert errors == []
    names = {(p["name"], p["kind"]) for p in placed}
    for name, kind in (("conv", "conv2d"), ("dw", "conv2d"), ("add", "add"), ("pool", "maxpool")):
        assert (name, kind) in names
    assert {"conv [rooflab]", "dw [rooflab]"} == {
        p["name"] for p in placed if p["own_kernel"] and p["kind"] == "conv2d"
    }
    for p in placed:
        if p["kind"] in ("conv2d", "add", "maxpool"):
            assert p["dtype"] == "int8" and "INT8" in p["peak_used"], p
    conv = next(p for p in placed if p["name"] == "conv")
    assert conv["bytes_min"] == 8 * 256 + 8 * 8 * 9 + 8 * 256  # x, w and y at 1 byte each
