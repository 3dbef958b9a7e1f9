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
Quantized (onnxruntime's quantizers), every tensor counted at the width it is stored:
  MatMulNBits (com.microsoft; weight-only 4/8 bits, block 32, symmetric)      qgemm_nbits
  MatMulInteger (one zero point per tensor), with the Cast to float and the scale Mul(s) after it
             (what onnxruntime fuses into MatMulIntegerToFloat: scaled at the store)   qgemm_int8
  DynamicQuantizeLinear (range, then quantize: dynamic INT8)                    quantize (dynamic)
  QLinearConv, QLinearMatMul, QGemm, QLinearAdd, QLinearMul, QLinearGlobalAveragePool (QOperator
             format): conv2d / qgemm_int8 / add / mul / avgpool on 8-bit tensors (dtype int8)
  QDQ format: an op whose float inputs all come from DequantizeLinear nodes runs on the 8-bit
             tensors (onnxruntime's QDQ fusions: QLinearConv, QLinearMatMul, QLinearAdd ...): it
             is one op with those DequantizeLinear nodes and the QuantizeLinear after it, dtype
             int8 (a GEMM: qgemm_int8), its output at 1 byte, or 4 where no QuantizeLinear follows
  QuantizeLinear / DequantizeLinear that no such op absorbs (the graph's input and output, an
             int8 embedding table's rows)                                      quantize / dequantize
Shapes past contrib ops come from onnxruntime's symbolic shape inference. A scheme rooflab does not
model (another block size, 2- or 3-bit weights, a zero-point tensor of MatMulNBits, per-channel
zero points or scales on activations, 4-bit QDQ tensors) is one line naming the node, the rest
placed.
Each op lists the ONNX nodes it stands for (``nodes``). Constant nodes are graph constants, like
initializers, not ops. Every other node, and any mapped node whose shapes could not be inferred,
is returned as unsupported with the reason; the rest are still placed.
"""

from __future__ import annotations

import math
from pathlib import Path

from ..errors import RooflabError, first_line
from ..workloads.ops import conv_shape, normalize

ELEM_DTYPE = {1: "float32", 2: "int8", 3: "int8", 10: "float16", 11: "float64", 16: "bfloat16"}
INT8_ELEM = (2, 3)  # uint8, int8: the 8-bit tensors rooflab models; int32 (6) is a quantized bias
FLOAT_ELEM = (1, 10, 11, 16)
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
    "DynamicQuantizeLinear",
    "QuantizeLinear",
    "DequantizeLinear",
    "QLinearConv",
    "QLinearMatMul",
    "QGemm",  # com.microsoft, as the next three
    "QLinearAdd",
    "QLinearMul",
    "QLinearGlobalAveragePool",
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

    def rms_norm(self, mean, shape, inits):
        """Mul(x, x) | Pow(x, 2) -> ReduceMean -> Add eps -> Sqrt -> Div(x, .) | Reciprocal -> Mul(x, .)
        -> Mul weight (a Llama export's RMSNorm) around ``mean``: (nodes, x) or None."""
        sq = self.producer.get(mean.input[0])
        if sq is None or not (
            sq.op_type == "Mul"
            and len(sq.input) == 2
            and sq.input[0] == sq.input[1]
            or sq.op_type == "Pow"
            and self.scalar(sq.input[1], 2.0) is not None
        ):
            return None
        x = sq.input[0]
        add = self.only_consumer(mean.output[0], "Add")
        other = self.other(add, mean.output[0]) if add is not None else None
        if other is None or self.scalar(other) is None:
            return None
        sqrt = self.only_consumer(add.output[0], "Sqrt")
        if sqrt is None:
            return None
        nodes = [sq, mean, add, sqrt]
        div = self.only_consumer(sqrt.output[0], "Div")
        if div is not None and list(div.input) == [x, sqrt.output[0]]:
            normed = div
        else:
            rec = self.only_consumer(sqrt.output[0], "Reciprocal")
            normed = self.only_consumer(rec.output[0], "Mul") if rec is not None else None
            if normed is None or self.other(normed, rec.output[0]) != x:
                return None
            nodes.append(rec)
        nodes.append(normed)
        mw = self.only_consumer(normed.output[0], "Mul")
        w = self.other(mw, normed.output[0]) if mw is not None else None
        dims = shape(x)
        if w is None or w not in inits or not dims or math.prod(inits[w]) != dims[-1]:
            return None
        return nodes + [mw], x

    def rope(self, neg, shape):
        """rotate_half RoPE around ``neg``: Slice x[..., :h], Slice x[..., h:], Neg, Concat, Mul(x, cos),
        Mul(rot, sin), Add: (nodes, x) or None."""
        x2 = self.producer.get(neg.input[0])
        cat = self.only_consumer(neg.output[0], "Concat")
        if x2 is None or x2.op_type != "Slice" or cat is None or len(cat.input) != 2 or cat.input[0] != neg.output[0]:
            return None
        x1 = self.producer.get(cat.input[1])
        x = x2.input[0]
        if x1 is None or x1.op_type != "Slice" or x1.input[0] != x:
            return None
        msin = self.only_consumer(cat.output[0], "Mul")
        add = self.only_consumer(msin.output[0], "Add") if msin is not None else None
        if add is None:
            return None
        mcos = self.producer.get(self.other(add, msin.output[0]) or "")
        if mcos is None or mcos.op_type != "Mul" or x not in mcos.input:
            return None
        dims = shape(x)
        if not dims or len(dims) != 4 or shape(neg.output[0]) is None:
            return None
        return [x1, x2, neg, cat, mcos, msin, add], x

    def int_gemm_to_float(self, mmi, shape):
        """MatMulInteger -> Cast(float) -> Mul(scale), and the Mul of the two scalar scales feeding
        it (onnxruntime's dynamic quantizer; fused by onnxruntime into MatMulIntegerToFloat):
        the nodes in graph order, or None."""
        cast = self.only_consumer(mmi.output[0], "Cast")
        if cast is None or not any(a.name == "to" and a.i == 1 for a in cast.attribute):
            return None
        mul = self.only_consumer(cast.output[0], "Mul")
        scale = self.other(mul, cast.output[0]) if mul is not None else None
        dims, out = shape(scale), shape(mul.output[0]) if mul is not None else None
        if scale is None or dims is None or not out or math.prod(dims) not in (1, out[-1]):
            return None  # a scale per tensor or per output column only
        nodes = [mmi, cast, mul]
        pre = self.producer.get(scale)
        if (
            pre is not None
            and pre.op_type == "Mul"
            and len(self.consumers.get(scale, [])) == 1
            and all(shape(i) is not None and math.prod(shape(i)) == 1 for i in pre.input)
        ):
            nodes.insert(0, pre)  # the activation's scale times the weight's: one number
        return nodes

    def qdq_ops(self, nodes, elem, numel, inits):
        """QDQ format: {id(node): (DequantizeLinear nodes it reads, the QuantizeLinear after it or
        None, why it cannot be modelled or None)} for every node whose float inputs all come from
        DequantizeLinear nodes (scalar constants aside) and whose output goes to a QuantizeLinear
        (a MatMul or Gemm without one: the integer GEMM that writes float, MatMulIntegerToFloat /
        QGemm): the ops onnxruntime's QDQ fusions run on 8-bit tensors."""
        out = {}
        for n in nodes:
            if n.op_type in ("QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "Constant"):
                continue
            if not n.input or not n.input[0] or not n.output:
                continue
            p0 = self.producer.get(n.input[0])
            if p0 is None or p0.op_type != "DequantizeLinear":
                continue
            dqs, mixed = [], False
            for i in n.input:
                p = self.producer.get(i) if i else None
                if p is not None and p.op_type == "DequantizeLinear":
                    dqs.append(p)
                elif i and elem.get(i) in FLOAT_ELEM and numel(i) != 1:
                    mixed = True  # a float tensor beside the 8-bit ones: the op runs in float
            if mixed:
                continue
            why = None
            for dq in dqs:
                x, scale = dq.input[0], dq.input[1]
                zp = dq.input[2] if len(dq.input) > 2 else ""
                if elem.get(x) not in INT8_ELEM + (6,):
                    why = f"{dq.name or 'DequantizeLinear'}: QDQ tensors of element type {elem.get(x)} are not modelled (8-bit only)"
                elif x not in inits and ((numel(scale) or 1) > 1 or (zp and (numel(zp) or 1) > 1)):
                    why = f"{dq.name or 'DequantizeLinear'}: per-channel zero points or scales on activations are not modelled"
            q = self.only_consumer(n.output[0], "QuantizeLinear")
            if q is None and n.op_type not in ("MatMul", "Gemm"):
                continue  # no 8-bit output: runs in float on the dequantized inputs
            out[id(n)] = (dqs, q, why)
        return out

    def gated(self, gate):
        """Mul(x, gate(x)) after a Sigmoid / HardSigmoid node: SiLU / HardSwish; or None."""
        x = gate.input[0]
        m = self.only_consumer(gate.output[0], "Mul")
        if m is None or self.other(m, gate.output[0]) != x:
            return None
        return [gate, m], x


def inferred(model):
    """``model`` with every tensor's shape inferred (onnx's inference, then the contrib ops')."""
    _onnx, shape_inference = _import_onnx()
    try:
        model = shape_inference.infer_shapes(model)
    except Exception as e:  # onnx raises its own InferenceError types
        raise RooflabError(f"ONNX shape inference failed: {first_line(e)}") from None
    if any(n.domain == "com.microsoft" for n in model.graph.node):
        model = _contrib_shapes(model)
    return model


def ops_from_model(model) -> tuple[list[dict], list[dict]]:
    onnx, _ = _import_onnx()
    model = inferred(model)
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

    elem = {vi.name: vi.type.tensor_type.elem_type for vi in list(g.input) + list(g.value_info) + list(g.output)}
    elem.update({i.name: i.data_type for i in g.initializer})

    def dims_of(name):
        d = shapes.get(name)
        return None if d is None or None in d else d

    def numel_of(name):
        d = dims_of(name)
        return None if d is None else math.prod(d)

    # multi-node patterns first: the op is emitted at the pattern's last node
    fused: dict[int, tuple] = {}  # id(last node) -> (kind, x, labels, node to map or None)
    absorbed: set[int] = set()
    rot_dims: dict[int, int] = {}
    for node in g.node:
        if id(node) in absorbed:
            continue
        found, head = None, None
        if node.op_type == "Erf":
            m = graph.erf_gelu(node)
            found = ("gelu", m) if m else None
        elif node.op_type in ("Sigmoid", "HardSigmoid"):
            m = graph.gated(node)
            found = ("silu" if node.op_type == "Sigmoid" else "hardswish", m) if m else None
        elif node.op_type == "MatMulInteger":
            m = graph.int_gemm_to_float(node, dims_of)
            found, head = (None, (m, None)) if m else None, node
        elif node.op_type == "ReduceMean":
            m = graph.rms_norm(node, dims_of, inits)
            found = ("rmsnorm", m) if m else None
        elif node.op_type == "Neg":
            m = graph.rope(node, dims_of)
            found = ("rope", m) if m else None
            if m:  # the rotated width: twice the negated half
                rot_dims[id(m[0][-1])] = 2 * dims_of(node.output[0])[-1]
        if found:
            kind, (nodes, x) = found
            order = sorted(nodes, key=list(g.node).index)
            absorbed.update(id(n) for n in order)
            fused[id(order[-1])] = (kind, x, [label_of(n) for n in order], head)
    # QDQ format: the ops that run on 8-bit tensors absorb their DequantizeLinear inputs (where every
    # reader of one is such an op) and the QuantizeLinear after them
    qdq = graph.qdq_ops(g.node, elem, numel_of, set(inits))
    qdq_extra: dict[int, tuple[list, list]] = {}  # id(op node) -> (labels before, labels after)
    for n in g.node:
        if id(n) not in qdq:
            continue
        dqs, q, _why = qdq[id(n)]
        before = []
        for dq in dqs:
            if id(dq) in absorbed or not all(id(c) in qdq for c in graph.consumers.get(dq.output[0], [])):
                continue
            absorbed.add(id(dq))
            before.append(label_of(dq))
        after = []
        if q is not None and id(q) not in absorbed:
            absorbed.add(id(q))
            after.append(label_of(q))
        qdq_extra[id(n)] = (before, after)

    ops, unsupported = [], []

    def emit(node, label, labels, dtype, q8=None):
        """Map one node to its op; ``q8`` (a QDQ op: is a QuantizeLinear after it) runs it on 8-bit
        tensors."""
        ins = [shapes.get(n) for n in node.input]
        out = shapes.get(node.output[0]) if node.output else None
        if any(s is None or None in s for s in ins[:1]) or out is None or None in out:
            unsupported.append({"op": label, "error": f"{node.op_type}: shapes could not be inferred (dynamic dims?)"})
            return
        try:
            op = _map(node.op_type, node, ins, out, attr, inits)
            if q8 is not None:
                op = _on_8bit(op, requantized=q8)
        except (KeyError, IndexError, TypeError, ValueError) as e:
            unsupported.append({"op": label, "error": f"{node.op_type}: cannot map ({e})"})
            return
        if node.op_type == "DequantizeLinear":
            dtype = dtypes.get(node.output[0], "float32")
        _append(ops, unsupported, op, label, dtype, labels)

    for idx, node in enumerate(g.node):
        label = node.name or f"{node.op_type}_{idx}"
        if node.op_type == "Constant":
            continue
        if id(node) in fused:
            kind, x, labels, head = fused[id(node)]
            if head is not None:
                emit(head, "+".join(labels), labels, dtypes.get(head.input[0], "float32"))
                continue
            dims = shapes.get(x)
            if dims is None or None in dims:
                unsupported.append(
                    {"op": label, "error": f"{kind} ({', '.join(labels)}): shapes could not be inferred"}
                )
                continue
            if kind == "rmsnorm":
                shape = {"rows": math.prod(dims[:-1]), "cols": dims[-1]}
            elif kind == "rope":  # x: batch, heads, tokens, head_dim; rotated: the Neg's width x 2
                B, H, T, D = dims
                shape = {"tokens": B * T, "heads": H, "head_dim": D, "rot_dim": rot_dims[id(node)]}
            else:
                shape = {"numel": math.prod(dims)}
            op = {"kind": kind, "shape": shape}
            _append(ops, unsupported, op, f"{kind}: " + "+".join(labels), dtypes.get(x, "float32"), labels)
            continue
        if id(node) in absorbed:
            continue
        if id(node) in qdq:
            dqs, q, why = qdq[id(node)]
            before, after = qdq_extra[id(node)]
            if why:
                unsupported.append({"op": label, "error": f"{node.op_type} (QDQ): {why}"})
                continue
            if node.op_type not in SUPPORTED:
                unsupported.append({"op": label, "error": f"unsupported ONNX op {node.op_type} (QDQ)"})
                continue
            emit(node, label, before + [label] + after, "int8", q8=q is not None)
            continue
        if node.op_type not in SUPPORTED:
            unsupported.append({"op": label, "error": f"unsupported ONNX op {node.op_type}"})
            continue
        emit(node, label, [label], dtypes.get(node.input[0], "float32"))
    return ops, unsupported


def _8bit_gemm(op: dict, requantized: bool) -> dict:
    s = op["shape"]
    if op["kind"] != "gemm":
        raise ValueError("an 8-bit batched MatMul (two activations) is not modelled")
    return {
        "kind": "qgemm_int8",
        "shape": {"M": s["M"], "N": s["N"], "K": s["K"], "out_itemsize": 1 if requantized else 4},
    }


def _on_8bit(op: dict, requantized: bool) -> dict:
    """A QDQ-wrapped op as onnxruntime runs it: on the 8-bit tensors; a GEMM is an integer GEMM
    (QLinearMatMul, or QGemm / MatMulIntegerToFloat writing float where no QuantizeLinear follows),
    a conv writes 8 bits (QLinearConv) or float."""
    k, s = op["kind"], op["shape"]
    if k in ("gemm", "batched_gemm"):
        return _8bit_gemm(op, requantized)
    if k == "conv2d" and not requantized:
        return {**op, "shape": {**s, "out_itemsize": 4}}
    return op


def _contrib_shapes(model):
    """Shapes through onnxruntime's contrib ops (MatMulNBits, QLinearAdd ...), which onnx's
    inference does not know (it stops there): onnxruntime's own symbolic shape inference where it
    is installed and knows them all, else the contrib ops rooflab maps are sized here and onnx's
    inference resumed after each (a graph whose weights were stripped, runtimes.ort_nodes.skeleton, is one
    the symbolic inference cannot read)."""
    try:
        from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference

        return SymbolicShapeInference.infer_shapes(model, auto_merge=True) or model
    except Exception:  # noqa: BLE001 - not installed, or an op it does not know: size ours below
        pass
    from onnx import helper, shape_inference

    for _ in range(len(model.graph.node)):
        known = {
            vi.name: vi for vi in list(model.graph.input) + list(model.graph.value_info) + list(model.graph.output)
        }
        known_dims = {i.name: list(i.dims) for i in model.graph.initializer}
        for name, vi in known.items():
            t = vi.type.tensor_type
            if t.HasField("shape") and all(d.HasField("dim_value") for d in t.shape.dim):
                known_dims[name] = [d.dim_value for d in t.shape.dim]
        added = False
        for n in model.graph.node:
            if n.domain != "com.microsoft" or not n.output or n.output[0] in known_dims:
                continue
            dims = _contrib_out(n, known_dims)
            if dims is None:
                continue
            elem = known[n.input[0]].type.tensor_type.elem_type if n.input[0] in known else 2
            if n.op_type == "MatMulNBits":
                elem = 1 if n.input[0] not in known else elem  # the activations' float type
            if n.op_type == "QGemm" and not (len(n.input) > 7 and n.input[7]):
                elem = 1  # no output scale: float
            model.graph.value_info.append(helper.make_tensor_value_info(n.output[0], elem, dims))
            added = True
        if not added:
            break
        try:
            model = shape_inference.infer_shapes(model)
        except Exception:  # noqa: BLE001 - keep what is known; the rest is reported unsupported
            break
    return model


def _contrib_out(node, dims: dict):
    """Output shape of a contrib op rooflab maps, from its inputs' (None when unknown)."""
    ins = [dims.get(i) for i in node.input]
    a = ins[0] if ins else None
    if a is None:
        return None
    if node.op_type in ("QLinearAdd", "QLinearMul"):
        b = ins[3] if len(ins) > 3 else None
        if b is None:
            return None
        n = max(len(a), len(b))
        a, b = [1] * (n - len(a)) + a, [1] * (n - len(b)) + b
        return [max(x, y) for x, y in zip(a, b)]
    if node.op_type == "QLinearGlobalAveragePool":
        last = any(at.name == "channels_last" and at.i for at in node.attribute)
        return [a[0], 1, 1, a[-1]] if last else [a[0], a[1]] + [1] * (len(a) - 2)
    if node.op_type == "MatMulNBits":
        n = next((at.i for at in node.attribute if at.name == "N"), None)
        return None if n is None else a[:-1] + [n]
    if node.op_type == "QGemm" and len(ins) > 3 and ins[3] is not None:
        ta = any(at.name == "transA" and at.i for at in node.attribute)
        tb = any(at.name == "transB" and at.i for at in node.attribute)
        return [a[1] if ta else a[0], ins[3][0] if tb else ins[3][1]]
    return None


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
            "shape": conv_shape(
                N,
                C,
                H,
                W,
                K,
                R,
                S,
                stride=(strides[0], strides[1]),
                pad=(pads[0], pads[1]),
                groups=attr(node, "group", 1),
                bias=len(node.input) > 2,
            ),  # fmt: skip
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
    if kind in ("QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear"):
        shape = {"numel": numel}
        if kind == "DynamicQuantizeLinear":
            shape["dynamic"] = True
        elif len(node.input) > 2 and node.input[2] and node.input[2] not in inits and math.prod(ins[2] or [1]) > 1:
            raise ValueError("per-channel zero points on activations are not modelled")
        return {"kind": "quantize" if kind != "DequantizeLinear" else "dequantize", "shape": shape}
    if kind.startswith("QLinear") or kind == "QGemm":  # x, x_scale, x_zero_point, w (or b), ...
        for zp in node.input[2:3] + (node.input[5:6] if kind != "QLinearGlobalAveragePool" else []):
            if zp and zp not in inits and math.prod(ins[node.input.index(zp)] or [1]) > 1:
                raise ValueError(f"per-channel zero point {zp} on an activation is not modelled")
        if kind == "QLinearConv":
            op = _map("Conv", node, [ins[0], ins[3]], out, attr, inits)
            op["shape"]["bias"] = len(node.input) > 8 and bool(node.input[8])
            return op
        if kind == "QLinearMatMul":
            op = _map("MatMul", node, [ins[0], ins[3]], out, attr, inits)
            return _8bit_gemm(op, requantized=True)
        if kind == "QGemm":  # com.microsoft: A, a_scale, a_zp, B, b_scale, b_zp, C, y_scale, y_zp
            op = _map("Gemm", node, [ins[0], ins[3]], out, attr, inits)
            return _8bit_gemm(op, requantized=len(node.input) > 7 and bool(node.input[7]))
        if kind in ("QLinearAdd", "QLinearMul"):
            return _map(kind[len("QLinear") :], node, [ins[0], ins[3]], out, attr, inits)
        if kind == "QLinearGlobalAveragePool":
            N, *rest = ins[0]
            C, H, W = (rest[2], rest[0], rest[1]) if attr(node, "channels_last", 0) else rest
            return {"kind": "avgpool", "shape": {"N": N, "C": C, "H": H, "W": W}}
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
