"""Family `qgraph`: the 8-bit elementwise, pooling and shape ops of a static-quantized graph (dtype
int8 in workloads/ops.py), each run by the node onnxruntime runs for it, on the same values, as
variant 0; their 8-bit convs are the `qconv` family's, their integer GEMMs `qgemm`'s.

  add      QLinearAdd (com.microsoft): c = clamp(rint((sa (a - za) + sb (b - zb)) / sc) + zc), u8
           (a QDQ Add between DequantizeLinear and QuantizeLinear, fused so by onnxruntime)
  maxpool  numpy: one maximum per window tap over strided views of the u8 codes, padded with code 0
           (a max commutes with the affine dequantize: no requantization; code 0 never wins over a
           window's real codes), as the pool family's numpy path. onnxruntime's own MaxPool on
           uint8 NCHW is not the library here: 7.3 ms at 64x112x112 3x3/2, 1 thread, where its
           float32 MaxPool takes 0.53 ms (measured on Zen 3); a QDQ graph's layout transformer runs
           its pooling as NhwcMaxPool instead
  avgpool  QLinearGlobalAveragePool (com.microsoft): clamp(rint(sx / sy (mean(x) - zx)) + zy)
  reshape  numpy reshape of the u8 codes (a view; onnxruntime's Reshape moves no data either)

add and avgpool are onnxruntime's nodes (the graph's own kernels); maxpool and reshape are numpy,
the framework path of the float pool and graph families.

Inputs are u8 codes uniform over 0..255 with scales and zero points that make every code matter
and some outputs clamp (add: a range of +-7 over an output step of 0.04); each result is held to
the float64 formula above within one code (onnxruntime computes in float32 or fixed point, which
rounds a tie apart; a dropped scale or zero point moves codes by many).

Napkin: ResNet-50's layer1 residual add at batch 1 moves 0.8 M codes x 3 (two read, one written)
= 2.4 MB where its float32 twin moves 9.6 MB: 4x less, bandwidth-bound either way.
"""

from __future__ import annotations

import json

import numpy as np

from ..errors import RooflabError
from ..registry import Variant, register
from ..threads import resolve_threads
from ..work import Work

FAMILY = "qgraph"
ADD = {"sa": 0.02, "za": 100, "sb": 0.03, "zb": 140, "sc": 0.04, "zc": 120}
AVG = {"sx": 0.05, "zx": 60, "sy": 0.02, "zy": 10}


class _Inputs:
    """One op's u8 arrays (``nbytes``: its compulsory traffic, what the driver sizes) and the op."""

    def __init__(self, op: dict, seed: int):
        from ..workloads import ops

        self.op, self.kind, s = op, op["kind"], op["shape"]
        self.nbytes = ops.min_bytes(op)
        self.dtype = np.dtype(np.uint8)
        rng = np.random.default_rng(seed)
        codes = lambda *shape: rng.integers(0, 256, shape, dtype=np.uint8)  # noqa: E731
        if self.kind == "add":
            n, bn = s["numel"], s.get("broadcast_numel", s["numel"])
            self.a, self.b = codes(n // bn, bn), codes(bn)
        elif self.kind in ("maxpool", "avgpool"):
            self.x = codes(s["N"], s["C"], s["H"], s["W"])
        elif self.kind == "reshape":
            self.x = codes(s["numel"])
        else:
            raise RooflabError(f"qgraph: no 8-bit {self.kind!r} op", "8-bit add, maxpool, avgpool and reshape run here")
        self.size = self.nbytes


def _scalar(name, value, dtype):
    from onnx import numpy_helper

    return numpy_helper.from_array(np.array(value, dtype), name)


def _model(i: _Inputs) -> bytes:
    """The one-node graph onnxruntime runs for the op (its scales and zero points constants)."""
    from onnx import TensorProto, helper

    f32, u8 = np.float32, np.uint8
    if i.kind == "add":
        q = ADD
        node = helper.make_node(
            "QLinearAdd", ["a", "sa", "za", "b", "sb", "zb", "sc", "zc"], ["y"], domain="com.microsoft"
        )
        inits = [_scalar(k, q[k], f32 if k[0] == "s" else u8) for k in ("sa", "za", "sb", "zb", "sc", "zc")]
        ins = [("a", i.a.shape), ("b", i.b.shape)]
    elif i.kind == "avgpool":
        q = AVG
        node = helper.make_node(
            "QLinearGlobalAveragePool", ["x", "sx", "zx", "sy", "zy"], ["y"], domain="com.microsoft", channels_last=0
        )
        inits = [_scalar(k, q[k], f32 if k[0] == "s" else u8) for k in ("sx", "zx", "sy", "zy")]
        ins = [("x", i.x.shape)]
    else:
        raise RooflabError(f"qgraph: onnxruntime does not run the 8-bit {i.kind!r} op here")
    g = helper.make_graph(
        [node],
        f"q{i.kind}",
        [helper.make_tensor_value_info(n, TensorProto.UINT8, list(shape)) for n, shape in ins],
        [helper.make_tensor_value_info("y", TensorProto.UINT8, None)],
        inits,
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    return helper.make_model(g, opset_imports=opsets).SerializeToString()


_SESSIONS: dict = {}


def _session(i: _Inputs, threads: int):
    """One session per op shape and thread count."""
    from ..ort_session import options, session

    key = (i.kind, json.dumps(i.op["shape"], sort_keys=True), threads)
    if key not in _SESSIONS:
        _SESSIONS[key] = session(_model(i), options(threads, what=f"variant 0 of qgraph {i.kind}"))
    return _SESSIONS[key]


def _feeds(i: _Inputs) -> dict:
    return {"a": i.a, "b": i.b} if i.kind == "add" else {"x": i.x}


def _ort(i: _Inputs, reps=1, threads=None):
    sess = _session(i, resolve_threads(threads))
    feeds = _feeds(i)
    y = None
    for _ in range(int(reps)):
        y = sess.run(None, feeds)[0]
    return y


def _reshape(i: _Inputs, reps=1, threads=None):
    y = None
    for _ in range(int(reps)):
        y = i.x.reshape(-1, 1)
    return y


def _maxpool(i: _Inputs, reps=1, threads=None):
    s = i.op["shape"]
    k, st, p, P, Q = s["kernel"], s["stride"], s.get("pad", 0), s["P"], s["Q"]
    y = np.empty((s["N"], s["C"], P, Q), np.uint8)
    for _ in range(int(reps)):
        x = np.pad(i.x, ((0, 0), (0, 0), (p, p), (p, p))) if p else i.x
        taps = [
            x[:, :, a : a + st * (P - 1) + 1 : st, b : b + st * (Q - 1) + 1 : st] for a in range(k) for b in range(k)
        ]
        np.copyto(y, taps[0])
        for t in taps[1:]:
            np.maximum(y, t, out=y)
    return y


def reference(i: _Inputs, **_) -> np.ndarray:
    if i.kind == "add":
        q = ADD
        real = q["sa"] * (i.a.astype(np.float64) - q["za"]) + q["sb"] * (i.b.astype(np.float64) - q["zb"])
        return np.clip(np.rint(real / q["sc"]) + q["zc"], 0, 255)
    if i.kind == "avgpool":
        q = AVG
        mean = i.x.astype(np.float64).mean(axis=(2, 3), keepdims=True)
        return np.clip(np.rint(q["sx"] / q["sy"] * (mean - q["zx"])) + q["zy"], 0, 255)
    if i.kind == "maxpool":
        s = i.op["shape"]
        k, st, p = s["kernel"], s["stride"], s.get("pad", 0)
        x = np.pad(i.x.astype(np.float64), ((0, 0), (0, 0), (p, p), (p, p)), constant_values=-np.inf)
        win = np.lib.stride_tricks.sliding_window_view(x, (k, k), axis=(2, 3))[:, :, ::st, ::st]
        return win.max(axis=(4, 5))[:, :, : s["P"], : s["Q"]]
    return i.x.astype(np.float64).reshape(-1, 1)


def _inputs(kind: str):
    def inputs(shape, dtype=None, seed=0, threads=None):
        from ..workloads import ops

        op = ops.normalize({"kind": kind, "shape": dict(shape), "dtype": "int8", "name": kind})
        return (_Inputs(op, seed),)

    return inputs


def work(i: _Inputs, reps=1, **_) -> Work:
    from ..workloads import ops

    written = ops.output_bytes(i.op)
    return Work(
        flops=ops.flops(i.op) * reps,
        bytes_read=(ops.min_bytes(i.op) - written) * reps,
        bytes_written=written * reps,
        launches=int(reps),
    )


for _kind, _run, _desc in (
    ("add", _ort, "onnxruntime QLinearAdd (the u8 codes requantized to the output's scale)"),
    ("maxpool", _maxpool, "numpy: one maximum per window tap over strided views of the u8 codes"),
    ("avgpool", _ort, "onnxruntime QLinearGlobalAveragePool"),
    ("reshape", _reshape, "numpy reshape of the u8 codes (a view)"),
):
    register(
        Variant(
            name=f"cpu.{FAMILY}.{_kind}.00-{'ort' if _run is _ort else 'numpy'}",
            family=FAMILY,
            device="cpu",
            number=0,
            op=_kind,
            description=_desc,
            kernel=_run,
            reference=reference,
            work=work,
            inputs=_inputs(_kind),
            result_dtype=lambda *_, **__: "uint8",
            dtypes=("int8",),
        )
    )
