"""ONNX graphs to rooflab ops (optional extra `onnx`): shapes come from onnx's shape inference.

Mapped, one node to one op: Conv, Gemm, MatMul, Softmax, LayerNormalization, Relu, Gelu,
BatchNormalization, MaxPool, GlobalAveragePool, Gather (embedding lookups of an initializer table);
the elementwise family: Add, Sub, Mul, Div (Mul/Div by a scalar = ``scale``; a broadcast operand is
counted at its own size), Sigmoid, Tanh, Clip (a clamp: ``relu6``, MobileNet's ReLU6), HardSwish,
HardSigmoid; and data movement, zero FLOPs: Reshape, Flatten, Squeeze, Unsqueeze, Identity
(``reshape``: a view, 0 bytes), Transpose and Concat (a copy: read and write every element); Split,
Slice and a Gather from an activation (not an initializer table: the first token of BERT's pooler)
are copies too, counted with the concat formula (every element read once and written once).
Mapped, several nodes to one op (the op a fusing framework runs):
  SiLU       Sigmoid(x) -> Mul(x, .)                                       silu
  HardSwish  HardSigmoid(x) -> Mul(x, .)                                   hardswish
  GELU       Div(x, sqrt 2) | Mul(x, 1/sqrt 2) -> Erf -> Add 1 -> Mul x -> Mul 0.5 (any order of
             the two Muls, or x * 0.5 computed apart): PyTorch's export of BERT's erf GELU   gelu
Quantized (onnxruntime's quantizers): MatMulNBits (com.microsoft; weight-only 4/8 bits, block 32,
symmetric) -> ``qgemm_nbits``, its weights counted as stored; MatMulInteger -> ``qgemm_int8`` (one
zero point per tensor); shapes past contrib ops from onnxruntime's symbolic shape inference. A
scheme rooflab does not model (another block size, 2-bit weights, a zero-point tensor, per-channel
activation zero points) is one line naming the node, the rest placed.
Each op lists the ONNX nodes it stands for (``nodes``). Constant nodes are graph constants, like
initializers, not ops. Every other node, and any mapped node whose shapes could not be inferred,
is returned as unsupported with the reason; the rest are still placed.
"""

from __future__ import annotations

import math
from pathlib import Path

from ..errors import RooflabError
from .ops import normalize

ELEM_DTYPE = {1: "float32", 10: "float16", 11: "float64", 16: "bfloat16"}
SHAPE_ONLY = ("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity")
UNARY = {
    "Relu": "relu",
    "Gelu": "gelu",
    "Sigmoid": "sigmoid",
    "Tanh": "tanh",
    "Clip": "relu6",
    "HardSwish": "hardswish",
    "HardSigmoid": "hardsigmoid",
}
BINARY = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div"}
SUPPORTED = (
    "Conv",
    "Gemm",
    "MatMul",
    "Softmax",
    "LayerNormalization",
    "BatchNormalization",
    "MaxPool",
    "GlobalAveragePool",
    "Gather",
    "Transpose",
    "Concat",
    "Split",
    "Slice",
    "MatMulNBits",  # com.microsoft: weight-only 4/8-bit (onnxruntime's quantizer)
    "MatMulInteger",
    *SHAPE_ONLY,
    *UNARY,
    *BINARY,
)


def _import_onnx():
    try:
        import onnx
        from onnx import shape_inference
    except ImportError:
        raise RooflabError("reading .onnx files needs the onnx package", "pip install 'rooflab[onnx]'") from None
    return onnx, shape_inference


class _Graph:
    """Producers, consumers and scalar constants of a graph, for the multi-node patterns."""

    def __init__(self, onnx, g):
        from onnx import numpy_helper

        self.producer = {o: n for n in g.node for o in n.output}
        self.consumers: dict[str, list] = {}
        for n in g.node:
            for i in n.input:
                self.consumers.setdefault(i, []).append(n)
        self.scalars: dict[str, float] = {}
        for t in g.initializer:
            if math.prod(t.dims) == 1:
                self.scalars[t.name] = float(numpy_helper.to_array(t).reshape(-1)[0])
        for n in g.node:
            if n.op_type == "Constant":
                for a in n.attribute:
                    v = onnx.helper.get_attribute_value(a)
                    if a.name == "value" and math.prod(v.dims) == 1:
                        self.scalars[n.output[0]] = float(numpy_helper.to_array(v).reshape(-1)[0])
                    elif a.name == "value_float":
                        self.scalars[n.output[0]] = float(v)

    def only_consumer(self, name, op_type):
        c = self.consumers.get(name, [])
        return c[0] if len(c) == 1 and c[0].op_type == op_type else None

    def scalar(self, name, value=None, tol=1e-3):
        v = self.scalars.get(name)
        if v is None or value is None:
            return v
        return v if abs(v - value) <= tol * max(1.0, abs(value)) else None

    def other(self, node, name):
        """The input of a two-input node that is not ``name`` (None if both or neither are)."""
        ins = list(node.input)
        if len(ins) != 2 or ins.count(name) != 1:
            return None
        return ins[1] if ins[0] == name else ins[0]

    def erf_gelu(self, erf):
        """Nodes of x * 0.5 * (1 + erf(x / sqrt 2)) around ``erf``, and x; or None."""
        pre = self.producer.get(erf.input[0])
        if pre is None or pre.op_type not in ("Div", "Mul") or len(pre.input) != 2:
            return None
        want = math.sqrt(2) if pre.op_type == "Div" else 1 / math.sqrt(2)
        if self.scalar(pre.input[1], want) is not None:
            x = pre.input[0]
        elif pre.op_type == "Mul" and self.scalar(pre.input[0], want) is not None:
            x = pre.input[1]
        else:
            return None
        add = self.only_consumer(erf.output[0], "Add")
        if add is None or self.scalar(self.other(add, erf.output[0]) or "", 1.0) is None:
            return None
        m1 = self.only_consumer(add.output[0], "Mul")
        other = self.other(m1, add.output[0]) if m1 is not None else None
        if other is None:
            return None
        nodes = [pre, erf, add, m1]
        if other == x:  # x * (1 + erf) ... * 0.5
            m2 = self.only_consumer(m1.output[0], "Mul")
            if m2 is None or self.scalar(self.other(m2, m1.output[0]) or "", 0.5) is None:
                return None
            return nodes + [m2], x
        if self.scalar(other, 0.5) is not None:  # (1 + erf) * 0.5 ... * x
            m2 = self.only_consumer(m1.output[0], "Mul")
            if m2 is None or self.other(m2, m1.output[0]) != x:
                return None
            return nodes + [m2], x
        half = self.producer.get(other)  # (x * 0.5) * (1 + erf)
        if half is not None and half.op_type == "Mul" and self.scalar(self.other(half, x) or "", 0.5) is not None:
            return [half] + nodes, x
        return None

    def gated(self, gate):
        """Mul(x, gate(x)) after a Sigmoid / HardSigmoid node: SiLU / HardSwish; or None."""
        x = gate.input[0]
        m = self.only_consumer(gate.output[0], "Mul")
        if m is None or self.other(m, gate.output[0]) != x:
            return None
        return [gate, m], x


def ops_from_model(model) -> tuple[list[dict], list[dict]]:
    onnx, shape_inference = _import_onnx()
    try:
        model = shape_inference.infer_shapes(model)
    except Exception as e:  # onnx raises its own InferenceError types
        raise RooflabError(f"ONNX shape inference failed: {e}") from None
    if any(n.domain == "com.microsoft" for n in model.graph.node):
        model = _contrib_shapes(model)
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
    graph = _Graph(onnx, g)

    def attr(node, name, default=None):
        for a in node.attribute:
            if a.name == name:
                return onnx.helper.get_attribute_value(a)
        return default

    def label_of(node):
        return node.name or f"{node.op_type}_{list(g.node).index(node)}"

    # multi-node patterns first: the op is emitted at the pattern's last node
    fused: dict[int, tuple[str, str, list]] = {}  # id(last node) -> (kind, x, labels)
    absorbed: set[int] = set()
    for node in g.node:
        if id(node) in absorbed:
            continue
        found = None
        if node.op_type == "Erf":
            m = graph.erf_gelu(node)
            found = ("gelu", m) if m else None
        elif node.op_type in ("Sigmoid", "HardSigmoid"):
            m = graph.gated(node)
            found = ("silu" if node.op_type == "Sigmoid" else "hardswish", m) if m else None
        if found:
            kind, (nodes, x) = found
            order = sorted(nodes, key=list(g.node).index)
            absorbed.update(id(n) for n in order)
            fused[id(order[-1])] = (kind, x, [label_of(n) for n in order])

    ops, unsupported = [], []
    for idx, node in enumerate(g.node):
        label = node.name or f"{node.op_type}_{idx}"
        if node.op_type == "Constant":
            continue
        if id(node) in fused:
            kind, x, labels = fused[id(node)]
            dims = shapes.get(x)
            if dims is None or None in dims:
                unsupported.append(
                    {"op": label, "error": f"{kind} ({', '.join(labels)}): shapes could not be inferred"}
                )
                continue
            op = {"kind": kind, "shape": {"numel": math.prod(dims)}}
            _append(ops, unsupported, op, f"{kind}: " + "+".join(labels), dtypes.get(x, "float32"), labels)
            continue
        if id(node) in absorbed:
            continue
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
        _append(ops, unsupported, op, label, dtype, [label])
    return ops, unsupported


def _contrib_shapes(model):
    """Shapes through onnxruntime's contrib ops (MatMulNBits ...), which onnx's inference does not
    know (it stops there): onnxruntime's own symbolic shape inference, where it is installed."""
    try:
        from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference
    except ImportError:
        return model
    try:
        return SymbolicShapeInference.infer_shapes(model, auto_merge=True) or model
    except Exception:  # noqa: BLE001 - its failure leaves the ops it could not size unsupported
        return model


def _append(ops, unsupported, op, label, dtype, nodes):
    try:
        ops.append({**normalize({**op, "name": label, "dtype": dtype, "model": "onnx"}), "nodes": nodes})
    except RooflabError as e:
        unsupported.append({"op": label, "error": str(e)})


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
    if kind == "MatMulNBits":
        bits, block = attr(node, "bits", 4), attr(node, "block_size", 0)
        if bits not in (4, 8):
            raise ValueError(f"{bits}-bit weights are not modelled (4 or 8)")
        if block != 32:
            raise ValueError(f"block size {block}: rooflab models blocks of 32")
        if len(node.input) > 3 and any(node.input[3:]):
            raise ValueError("a zero-point, g_idx or bias input (asymmetric or reordered weights) is not modelled")
        M = math.prod(out[:-1])
        return {"kind": "qgemm_nbits", "shape": {"M": M, "N": attr(node, "N"), "K": attr(node, "K"), "bits": bits}}
    if kind == "MatMulInteger":
        a, b = ins[0], ins[1]
        if len(b) != 2:
            raise ValueError("a batched integer MatMul is not modelled")
        for zp in node.input[2:4]:
            if zp and math.prod(inits.get(zp, [1])) > 1:
                raise ValueError(f"per-channel zero point {zp} is not modelled (one per tensor)")
        return {"kind": "qgemm_int8", "shape": {"M": math.prod(out[:-1]), "N": b[1], "K": a[-1]}}
    if kind in ("Softmax", "LayerNormalization"):
        axis = attr(node, "axis", -1)
        cols = out[axis]
        return {"kind": "softmax" if kind == "Softmax" else "layernorm", "shape": {"rows": numel // cols, "cols": cols}}
    if kind in UNARY:
        return {"kind": UNARY[kind], "shape": {"numel": numel}}
    if kind in BINARY:
        sizes = [math.prod(d) for d in ins[:2] if d is not None]
        if len(sizes) != 2:
            raise ValueError("a binary op needs two inputs with known shapes")
        small = min(sizes)
        if kind in ("Mul", "Div") and small == 1:  # x * c, x / c: one read, one write
            return {"kind": "scale", "shape": {"numel": numel}}
        shape = {"numel": numel}
        if small != numel:
            shape["broadcast_numel"] = small
        return {"kind": BINARY[kind], "shape": shape}
    if kind in SHAPE_ONLY:  # a view of the same bytes
        return {"kind": "reshape", "shape": {"numel": numel}}
    if kind == "Transpose":
        dims = ins[0]
        nd = len(dims)
        perm = list(attr(node, "perm", list(range(nd))[::-1]))
        fixed = 0  # trailing axes the permutation leaves in place move as contiguous blocks
        while fixed < nd and perm[nd - 1 - fixed] == nd - 1 - fixed:
            fixed += 1
        k = nd - fixed
        inner = math.prod(dims[k:])
        cols = dims[k - 1] if k >= 2 else 1
        return {"kind": "transpose", "shape": {"numel": numel, "cols": cols, "inner": inner}}
    if kind == "Concat":
        return {"kind": "concat", "shape": {"numel": numel, "inputs": len(node.input)}}
    if kind == "Split":  # one read, one write of every element, like a concat backwards
        return {"kind": "concat", "shape": {"numel": math.prod(ins[0]), "inputs": len(node.output)}}
    if kind == "Slice":
        return {"kind": "concat", "shape": {"numel": numel, "inputs": 1}}
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
        if table is None:  # rows of an activation (BERT's pooler takes the first token): a copy
            return {"kind": "concat", "shape": {"numel": numel, "inputs": 1}}
        if len(table) != 2:
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
