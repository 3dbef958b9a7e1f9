"""ONNX graphs to rooflab ops (optional extra `onnx`): shapes come from onnx's shape inference.

Mapped: Conv, Gemm, MatMul, Softmax, LayerNormalization, Relu, Gelu, Add, BatchNormalization,
MaxPool, GlobalAveragePool, Gather (embedding lookups of an initializer table). Every other node,
and any mapped node whose shapes could not be inferred, is returned as unsupported with the reason;
the rest are still placed.
"""

from __future__ import annotations

import math
from pathlib import Path

from ..errors import RooflabError
from .ops import normalize

ELEM_DTYPE = {1: "float32", 10: "float16", 11: "float64", 16: "bfloat16"}
SUPPORTED = (
    "Conv",
    "Gemm",
    "MatMul",
    "Softmax",
    "LayerNormalization",
    "Relu",
    "Gelu",
    "Add",
    "BatchNormalization",
    "MaxPool",
    "GlobalAveragePool",
    "Gather",
)


def _import_onnx():
    try:
        import onnx
        from onnx import shape_inference
    except ImportError:
        raise RooflabError("reading .onnx files needs the onnx package", "pip install 'rooflab[onnx]'") from None
    return onnx, shape_inference


def ops_from_model(model) -> tuple[list[dict], list[dict]]:
    onnx, shape_inference = _import_onnx()
    try:
        model = shape_inference.infer_shapes(model)
    except Exception as e:  # onnx raises its own InferenceError types
        raise RooflabError(f"ONNX shape inference failed: {e}") from None
    g = model.graph
    shapes, dtypes = {}, {}
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        t = vi.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]
        shapes[vi.name] = dims
        dtypes[vi.name] = ELEM_DTYPE.get(t.elem_type, "float32")
    inits = {i.name: list(i.dims) for i in g.initializer}
    for name, dims in inits.items():
        shapes[name] = dims
    for i in g.initializer:
        dtypes[i.name] = ELEM_DTYPE.get(i.data_type, "float32")

    def attr(node, name, default=None):
        for a in node.attribute:
            if a.name == name:
                return onnx.helper.get_attribute_value(a)
        return default

    ops, unsupported = [], []
    for idx, node in enumerate(g.node):
        label = node.name or f"{node.op_type}_{idx}"
        if node.op_type not in SUPPORTED:
            unsupported.append({"op": label, "error": f"unsupported ONNX op {node.op_type}"})
            continue
        ins = [shapes.get(n) for n in node.input]
        out = shapes.get(node.output[0]) if node.output else None
        if any(s is None or None in s for s in ins[:1]) or out is None or None in out:
            unsupported.append({"op": label, "error": f"{node.op_type}: shapes could not be inferred (dynamic dims?)"})
            continue
        dtype = dtypes.get(node.input[0], "float32")
        try:
            op = _map(node.op_type, node, ins, out, attr, inits)
        except (KeyError, IndexError, TypeError, ValueError) as e:
            unsupported.append({"op": label, "error": f"{node.op_type}: cannot map ({e})"})
            continue
        try:
            ops.append(normalize({**op, "name": label, "dtype": dtype, "model": "onnx"}))
        except RooflabError as e:
            unsupported.append({"op": label, "error": str(e)})
    return ops, unsupported


def _map(kind, node, ins, out, attr, inits) -> dict:
    numel = math.prod(out)
    if kind == "Conv":
        (N, C, H, W), (K, _, R, S) = ins[0], ins[1]
        pads = attr(node, "pads", [0, 0, 0, 0])
        strides = attr(node, "strides", [1, 1])
        if pads[0] != pads[2] or pads[1] != pads[3]:
            raise ValueError(f"asymmetric padding {pads}")
        return {
            "kind": "conv2d",
            "shape": {
                "N": N,
                "C": C,
                "H": H,
                "W": W,
                "K": K,
                "R": R,
                "S": S,
                "stride_h": strides[0],
                "stride_w": strides[1],
                "pad_h": pads[0],
                "pad_w": pads[1],
                "groups": attr(node, "group", 1),
                "bias": len(node.input) > 2,
            },
        }
    if kind == "Gemm":
        a, b = ins[0], ins[1]
        M, K = (a[1], a[0]) if attr(node, "transA", 0) else (a[0], a[1])
        N = b[0] if attr(node, "transB", 0) else b[1]
        return {"kind": "gemm", "shape": {"M": M, "N": N, "K": K, "bias": len(node.input) > 2}}
    if kind == "MatMul":
        a, b = ins[0], ins[1]
        a = [1] + a if len(a) == 1 else a
        M, K, N = a[-2], a[-1], b[-1]
        batch = math.prod(out[:-2]) if len(out) > 2 else 1
        if batch > 1 and len(b) > 2:
            return {"kind": "batched_gemm", "shape": {"batch": batch, "M": M, "N": N, "K": K}}
        return {"kind": "gemm", "shape": {"M": M * batch, "N": N, "K": K}}
    if kind in ("Softmax", "LayerNormalization"):
        axis = attr(node, "axis", -1)
        cols = out[axis]
        return {"kind": "softmax" if kind == "Softmax" else "layernorm", "shape": {"rows": numel // cols, "cols": cols}}
    if kind in ("Relu", "Gelu"):
        return {"kind": kind.lower(), "shape": {"numel": numel}}
    if kind == "Add":
        return {"kind": "add", "shape": {"numel": numel}}
    if kind == "BatchNormalization":
        N, C, H, W = ins[0]
        return {"kind": "batchnorm", "shape": {"N": N, "C": C, "H": H, "W": W}}
    if kind == "MaxPool":
        N, C, H, W = ins[0]
        k = attr(node, "kernel_shape")
        st = attr(node, "strides", [1, 1])
        pads = attr(node, "pads", [0, 0, 0, 0])
        if k[0] != k[1] or st[0] != st[1]:
            raise ValueError("non-square pooling")
        return {
            "kind": "maxpool",
            "shape": {"N": N, "C": C, "H": H, "W": W, "kernel": k[0], "stride": st[0], "pad": pads[0]},
        }
    if kind == "GlobalAveragePool":
        N, C, H, W = ins[0]
        return {"kind": "avgpool", "shape": {"N": N, "C": C, "H": H, "W": W}}
    if kind == "Gather":
        table = inits.get(node.input[0])
        if table is None or len(table) != 2:
            raise ValueError("only lookups in a 2-D initializer table are embeddings")
        return {
            "kind": "embedding",
            "shape": {"tokens": math.prod(ins[1]) if ins[1] else 1, "dim": table[1], "vocab": table[0]},
        }
    raise KeyError(kind)  # pragma: no cover


def ops_from_onnx(path) -> tuple[list[dict], list[dict]]:
    onnx, _ = _import_onnx()
    try:
        model = onnx.load(str(Path(path)))
    except Exception as e:
        raise RooflabError(f"{path} is not a readable ONNX model ({type(e).__name__})") from None
    return ops_from_model(model)
