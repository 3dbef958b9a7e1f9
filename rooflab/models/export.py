"""The catalog's networks as ONNX graphs with random weights (`rooflab export MODEL -o MODEL.onnx`).

Real architectures, no downloads: each graph is built with onnx.helper by walking the catalog's op
list (rooflab/workloads/catalog.py, the one source of shapes), adding the nodes an exporter adds
around them, so a runtime (onnxruntime, `rooflab place MODEL.onnx --runtime onnxruntime`) runs the
model as it would run the real one. Performance does not depend on the weights' values: they are a
fixed pool of N(0, 0.02) numbers tiled over every tensor (cheap for 124 M parameters; batch-norm
variances are positive, so nothing divides by zero).

  resnet50      Conv (no bias) -> BatchNormalization -> Relu, bottlenecks with a 1x1 downsample
                projection, Add -> Relu, MaxPool, GlobalAveragePool -> Flatten -> Gemm (transB)
  mobilenetv2   the same with depthwise Conv (group = channels) and Clip(0, 6) for ReLU6
  bert-base     Gather x 3 (word, position, token type) -> Add -> LayerNormalization (opset 17);
                per layer MatMul + Add (bias) for Q, K, V, Reshape/Transpose to heads, MatMul,
                Div by sqrt(64), Softmax, MatMul, Transpose/Reshape back, output MatMul + Add,
                residual Add, LayerNormalization, FFN MatMul + Add, erf GELU (Div, Erf, Add, Mul,
                Mul: PyTorch's export), MatMul + Add, Add, LayerNormalization; pooler: Gather of the
                first token -> Gemm -> Tanh. No attention mask (every token attends).
  gpt2-decode   one token with a KV cache of ``cache - 1`` past positions (inputs past_key_i,
                past_value_i; outputs present_*): Gather wte + wpe -> Add; per layer
                LayerNormalization, c_attn MatMul + Add, Split into Q, K, V, Reshape/Transpose,
                Concat with the past, Transpose K, MatMul, Div, Softmax, MatMul, c_proj, Add,
                LayerNormalization, c_fc, erf GELU (GPT-2's tanh form costs the same passes), c_proj,
                Add; ln_f, lm head = Gemm against wte (transB: tied weights, stored once).

What the catalog does not list (bias Adds of MatMul + Add, the embedding sums, the attention
scale, Tanh of the pooler, reshapes, transposes, splits and concats) is data movement or a
handful of elementwise FLOPs; tests/test_runtime.py checks that ``ops_from_onnx`` on each exported
file gives back the catalog's ops and FLOPs exactly, plus those extras.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np

from ..errors import RooflabError
from ..workloads import catalog

EXPORTS = ("resnet50", "mobilenetv2", "bert-base", "gpt2-decode")
ALIASES = {"bert": "bert-base", "gpt2": "gpt2-decode", "mobilenet": "mobilenetv2", "mobilenet-v2": "mobilenetv2"}
OPSET = 17
_POOL = np.random.default_rng(15).normal(0.0, 0.02, 1 << 16).astype(np.float32)


def canonical(model: str) -> str:
    name = ALIASES.get(str(model).lower(), str(model).lower())
    if name not in EXPORTS:
        raise RooflabError(f"unknown model {model!r} for export", f"use one of: {', '.join(EXPORTS)}")
    return name


class _Graph:
    """Nodes, initializers and inputs of one graph; every node's output is named after the node."""

    def __init__(self):
        import onnx
        from onnx import TensorProto, helper, numpy_helper

        self.onnx, self.helper, self.numpy_helper, self.TP = onnx, helper, numpy_helper, TensorProto
        self.nodes, self.inits, self.inputs, self.outputs = [], [], [], []
        self._offset = 0
        self._consts: dict[tuple, str] = {}

    def weight(self, name: str, shape, positive: bool = False) -> str:
        n = math.prod(shape)
        start = self._offset % _POOL.size
        self._offset += 7919  # a prime stride: neighbouring tensors start at different pool entries
        a = np.resize(np.roll(_POOL, -start), n).reshape(shape)
        if positive:
            a = 1.0 + np.abs(a)
        self.inits.append(self.numpy_helper.from_array(np.ascontiguousarray(a, np.float32), name))
        return name

    def const(self, value, dtype=np.float32) -> str:
        """A shared constant initializer (scalars, shapes, indices)."""
        arr = np.asarray(value, dtype)
        key = (arr.dtype.str, arr.shape, arr.tobytes())
        if key not in self._consts:
            name = f"const_{len(self._consts)}"
            self.inits.append(self.numpy_helper.from_array(arr, name))
            self._consts[key] = name
        return self._consts[key]

    def input(self, name, shape, elem=None) -> str:
        self.inputs.append(self.helper.make_tensor_value_info(name, elem or self.TP.FLOAT, shape))
        return name

    def output(self, name, elem=None):
        self.outputs.append(self.helper.make_tensor_value_info(name, elem or self.TP.FLOAT, None))

    def node(self, op_type: str, inputs, name: str, n_out: int = 1, **attrs):
        outs = [name] if n_out == 1 else [f"{name}:{i}" for i in range(n_out)]
        self.nodes.append(self.helper.make_node(op_type, list(inputs), outs, name=name, **attrs))
        return outs[0] if n_out == 1 else outs

    def model(self, name: str, doc: str):
        g = self.helper.make_graph(self.nodes, name, self.inputs, self.outputs, initializer=self.inits)
        m = self.helper.make_model(
            g, opset_imports=[self.helper.make_opsetid("", OPSET)], producer_name="rooflab export", doc_string=doc
        )
        m.ir_version = 8  # onnxruntime >= 1.14 reads IR 8 with opset 17
        return m

    # ---- the pieces every network uses ---------------------------------------------------------

    def conv(self, x: str, op: dict) -> str:
        s = op["shape"]
        w = self.weight(op["name"] + ".weight", [s["K"], s["C"] // s["groups"], s["R"], s["S"]])
        ins = [x, w] + ([self.weight(op["name"] + ".bias", [s["K"]])] if s.get("bias") else [])
        return self.node(
            "Conv",
            ins,
            op["name"],
            kernel_shape=[s["R"], s["S"]],
            strides=[s["stride_h"], s["stride_w"]],
            pads=[s["pad_h"], s["pad_w"], s["pad_h"], s["pad_w"]],
            group=s["groups"],
        )

    def bn(self, x: str, op: dict) -> str:
        c, n = op["shape"]["C"], op["name"]
        ins = [self.weight(f"{n}.weight", [c]), self.weight(f"{n}.bias", [c])]
        ins += [self.weight(f"{n}.running_mean", [c]), self.weight(f"{n}.running_var", [c], positive=True)]
        return self.node("BatchNormalization", [x] + ins, n, epsilon=1e-5)

    def linear(self, x: str, op: dict, k: int, n: int) -> str:
        """MatMul + Add(bias), as PyTorch exports nn.Linear on 3-D activations."""
        name = op["name"]
        y = self.node("MatMul", [x, self.weight(f"{name}.weight", [k, n])], name)
        if op["shape"].get("bias"):
            y = self.node("Add", [y, self.weight(f"{name}.bias", [n])], f"{name}.bias_add")
        return y

    def layernorm(self, x: str, op: dict) -> str:
        d, n = op["shape"]["cols"], op["name"]
        ins = [self.weight(f"{n}.weight", [d], positive=True), self.weight(f"{n}.bias", [d])]
        return self.node("LayerNormalization", [x] + ins, n, axis=-1, epsilon=1e-12 if "LayerNorm" in n else 1e-5)

    def gelu(self, x: str, name: str) -> str:
        """x * 0.5 * (1 + erf(x / sqrt 2)): PyTorch's export of the erf GELU."""
        d = self.node("Div", [x, self.const(math.sqrt(2.0))], f"{name}/div")
        e = self.node("Erf", [d], f"{name}/erf")
        a = self.node("Add", [e, self.const(1.0)], f"{name}/add")
        m = self.node("Mul", [x, a], f"{name}/mul")
        return self.node("Mul", [m, self.const(0.5)], f"{name}/mul_half")

    def heads(self, x: str, name: str, B: int, S: int, H: int, D: int, perm) -> str:
        r = self.node("Reshape", [x, self.const([B, S, H, D], np.int64)], f"{name}/reshape")
        return self.node("Transpose", [r], f"{name}/transpose", perm=list(perm))

    def merge(self, x: str, name: str, B: int, S: int, d: int) -> str:
        t = self.node("Transpose", [x], f"{name}/transpose", perm=[0, 2, 1, 3])
        return self.node("Reshape", [t, self.const([B, S, d], np.int64)], f"{name}/reshape")


def _take(ops: list[dict], suffix: str) -> dict:
    """The next op of a layer's list, which must end with ``suffix`` (the catalog's order)."""
    op = ops.pop(0)
    if not op["name"].endswith(suffix):
        raise AssertionError(f"catalog order changed: expected *{suffix}, got {op['name']}")  # pragma: no cover
    return op


def _cnn(name: str, ops: list[dict], batch: int, image: int):
    """ResNet-50 and MobileNetV2 from their catalog lists: a chain, plus the residual structure the
    names give (``layerS.B.*``/``features.I.*`` blocks, ``downsample`` projections, ``add``)."""
    g = _Graph()
    TP = g.TP
    cur = g.input("input", [batch, 3, image, image])
    block_in, block, shortcut = cur, None, None
    for op in ops:
        kind, n = op["kind"], op["name"]
        parts = n.split(".")
        this_block = ".".join(parts[:2]) if parts[0] in ("features",) or parts[0].startswith("layer") else None
        if this_block != block:  # a new residual block starts with the current activation
            block, block_in, shortcut = this_block, cur, None
        if ".downsample." in n:  # the projection of the block's input
            shortcut = g.conv(block_in, op) if kind == "conv2d" else g.bn(shortcut, op)
            continue
        if kind == "conv2d":
            cur = g.conv(cur, op)
        elif kind == "batchnorm":
            cur = g.bn(cur, op)
        elif kind == "relu":
            cur = g.node("Relu", [cur], n)
        elif kind == "relu6":
            cur = g.node("Clip", [cur, g.const(0.0), g.const(6.0)], n)
        elif kind == "add":
            cur = g.node("Add", [cur, shortcut or block_in], n)
        elif kind == "maxpool":
            s = op["shape"]
            cur = g.node(
                "MaxPool", [cur], n, kernel_shape=[s["kernel"]] * 2, strides=[s["stride"]] * 2, pads=[s["pad"]] * 4
            )
        elif kind == "avgpool":
            cur = g.node("GlobalAveragePool", [cur], n)
            cur = g.node("Flatten", [cur], f"{n}.flatten", axis=1)
        elif kind == "gemm":
            s = op["shape"]
            w = g.weight(f"{n}.weight", [s["N"], s["K"]])
            cur = g.node("Gemm", [cur, w, g.weight(f"{n}.bias", [s["N"]])], n, transB=1)
        else:  # pragma: no cover - the catalog's CNNs have no other kinds
            raise AssertionError(f"no ONNX export for {kind} ({n})")
    g.outputs.append(g.helper.make_tensor_value_info(cur, TP.FLOAT, [batch, 1000]))
    return g.model(name, f"{name} (catalog architecture, random weights) exported by rooflab")


def _bert(seq: int, batch: int):
    ops = catalog.bert_base(seq, batch)
    g = _Graph()
    TP, B, S = g.TP, batch, seq
    d, H = 768, 12
    D = d // H
    emb = ops.pop(0)
    ids = g.input("input_ids", [B, S], TP.INT64)
    types = g.input("token_type_ids", [B, S], TP.INT64)
    word = g.node("Gather", [g.weight("embeddings.word_embeddings.weight", [emb["shape"]["vocab"], d]), ids],
                  "embeddings.word_embeddings")  # fmt: skip
    positions = g.const(np.arange(S, dtype=np.int64).reshape(1, S), np.int64)
    pos = g.node("Gather", [g.weight("embeddings.position_embeddings.weight", [512, d]), positions],
                 "embeddings.position_embeddings")  # fmt: skip
    typ = g.node("Gather", [g.weight("embeddings.token_type_embeddings.weight", [2, d]), types],
                 "embeddings.token_type_embeddings")  # fmt: skip
    x = g.node("Add", [word, pos], "embeddings.add_position")
    x = g.node("Add", [x, typ], "embeddings.add_token_type")
    x = g.layernorm(x, ops.pop(0))
    for _layer in range(12):
        h = x
        q = g.linear(h, _take(ops, ".query"), d, d)
        k = g.linear(h, _take(ops, ".key"), d, d)
        v = g.linear(h, _take(ops, ".value"), d, d)
        scores = _take(ops, "scores QK^T")
        p = scores["name"].split(".")[0]
        qh = g.heads(q, f"{p}.query.heads", B, S, H, D, (0, 2, 1, 3))
        kh = g.heads(k, f"{p}.key.heads", B, S, H, D, (0, 2, 3, 1))  # K^T directly, as PyTorch exports it
        vh = g.heads(v, f"{p}.value.heads", B, S, H, D, (0, 2, 1, 3))
        s = g.node("MatMul", [qh, kh], scores["name"])
        s = g.node("Div", [s, g.const(math.sqrt(D))], f"{p}.scores.scale")
        s = g.node("Softmax", [s], _take(ops, ".softmax")["name"], axis=-1)
        c = g.node("MatMul", [s, vh], _take(ops, "context PV")["name"])
        c = g.merge(c, f"{p}.context", B, S, d)
        a = g.linear(c, _take(ops, ".attention.output"), d, d)
        a = g.node("Add", [a, h], _take(ops, ".attention.residual")["name"])
        a = g.layernorm(a, _take(ops, ".attention.LayerNorm"))
        f1 = _take(ops, "(FFN1)")
        f = g.linear(a, f1, d, f1["shape"]["N"])
        f = g.gelu(f, _take(ops, ".gelu")["name"])
        f = g.linear(f, _take(ops, "(FFN2)"), f1["shape"]["N"], d)
        f = g.node("Add", [f, a], _take(ops, ".output.residual")["name"])
        x = g.layernorm(f, _take(ops, ".output.LayerNorm"))
    pooler = _take(ops, "pooler")
    first = g.node("Gather", [x, g.const(0, np.int64)], "pooler.first_token", axis=1)
    pw, pb = g.weight("pooler.weight", [d, d]), g.weight("pooler.bias", [d])
    pooled = g.node("Gemm", [first, pw, pb], pooler["name"], transB=1)
    pooled = g.node("Tanh", [pooled], "pooler.tanh")
    g.outputs.append(g.helper.make_tensor_value_info(x, TP.FLOAT, [B, S, d]))
    g.outputs.append(g.helper.make_tensor_value_info(pooled, TP.FLOAT, [B, d]))
    assert not ops, [o["name"] for o in ops]
    return g.model("bert-base", f"BERT-base encoder, sequence {S}, batch {B} (random weights) exported by rooflab")


def _gpt2_decode(cache: int):
    ops = catalog.gpt2("decode", cache=cache)
    g = _Graph()
    TP = g.TP
    d, H, vocab = 768, 12, 50257
    D, past = d // H, cache - 1
    emb = ops.pop(0)
    ids = g.input("input_ids", [1, 1], TP.INT64)
    position = g.input("position_ids", [1, 1], TP.INT64)
    wte = g.weight("wte.weight", [vocab, d])
    tok = g.node("Gather", [wte, ids], "wte")
    posv = g.node("Gather", [g.weight("wpe.weight", [1024, d]), position], "wpe")
    x = g.node("Add", [tok, posv], emb["name"].replace("+", "_add_"))
    for layer in range(12):
        p = f"h{layer}"
        pk = g.input(f"past_key_{layer}", [1, H, past, D])
        pv = g.input(f"past_value_{layer}", [1, H, past, D])
        h = g.layernorm(x, _take(ops, ".ln_1"))
        qkv = g.linear(h, _take(ops, "c_attn (QKV)"), d, 3 * d)
        q, k, v = g.node("Split", [qkv, g.const([d, d, d], np.int64)], f"{p}.attn.split", n_out=3, axis=-1)
        qh = g.heads(q, f"{p}.attn.query.heads", 1, 1, H, D, (0, 2, 1, 3))
        kh = g.heads(k, f"{p}.attn.key.heads", 1, 1, H, D, (0, 2, 1, 3))
        vh = g.heads(v, f"{p}.attn.value.heads", 1, 1, H, D, (0, 2, 1, 3))
        kall = g.node("Concat", [pk, kh], f"{p}.attn.present_key", axis=2)
        vall = g.node("Concat", [pv, vh], f"{p}.attn.present_value", axis=2)
        g.output(kall)
        g.output(vall)
        kt = g.node("Transpose", [kall], f"{p}.attn.key_t", perm=[0, 1, 3, 2])
        s = g.node("MatMul", [qh, kt], _take(ops, "attn scores")["name"])
        s = g.node("Div", [s, g.const(math.sqrt(D))], f"{p}.attn.scale")
        s = g.node("Softmax", [s], _take(ops, "attn softmax")["name"], axis=-1)
        c = g.node("MatMul", [s, vall], _take(ops, "attn context")["name"])
        c = g.merge(c, f"{p}.attn.context", 1, 1, d)
        a = g.linear(c, _take(ops, ".attn.c_proj"), d, d)
        a = g.node("Add", [a, x], _take(ops, ".residual1")["name"])
        h = g.layernorm(a, _take(ops, ".ln_2"))
        fc = _take(ops, ".mlp.c_fc")
        f = g.linear(h, fc, d, fc["shape"]["N"])
        f = g.gelu(f, _take(ops, ".mlp.gelu")["name"])
        f = g.linear(f, _take(ops, ".mlp.c_proj"), fc["shape"]["N"], d)
        x = g.node("Add", [f, a], _take(ops, ".residual2")["name"])
    x = g.layernorm(x, _take(ops, "ln_f"))
    x = g.node("Reshape", [x, g.const([1, d], np.int64)], "ln_f.flatten")
    logits = g.node("Gemm", [x, wte], _take(ops, "lm_head (tied to wte)")["name"], transB=1)
    g.outputs.insert(0, g.helper.make_tensor_value_info(logits, TP.FLOAT, [1, vocab]))
    assert not ops, [o["name"] for o in ops]
    return g.model("gpt2-decode", f"GPT-2 small decode step, KV cache {cache} (random weights) exported by rooflab")


def check(model: str, batch: int | None = None, seq: int | None = None, cache: int | None = None) -> str:
    """The canonical name, once the model and its sizes are known to be exportable."""
    name = canonical(model)
    for what, v in (("--batch", batch), ("--seq", seq), ("--cache", cache)):
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
            raise RooflabError(f"{what} must be a positive integer, got {v!r}")
    if seq is not None and name == "bert-base" and seq > 512:
        raise RooflabError(f"--seq {seq} is longer than BERT-base's 512 positions", "use --seq 512 or less")
    if seq is not None and name != "bert-base":
        raise RooflabError(f"--seq applies to bert-base, not {name}", "drop --seq")
    if cache is not None and (name != "gpt2-decode" or not 2 <= cache <= 1024):
        raise RooflabError(f"--cache {cache}: a KV cache of 2 to 1024 positions, for gpt2-decode only")
    if batch not in (None, 1) and name == "gpt2-decode":
        raise RooflabError("the GPT-2 decode step is exported at batch 1", "drop --batch")
    return name


def build(model: str, batch: int | None = None, seq: int | None = None, cache: int | None = None):
    """The ONNX ModelProto of a catalog network (random weights)."""
    name = check(model, batch, seq, cache)
    if name == "resnet50":
        return _cnn("resnet50", catalog.resnet50(batch or 1), batch or 1, 224)
    if name == "mobilenetv2":
        return _cnn("mobilenetv2", catalog.mobilenet_v2(batch or 1), batch or 1, 224)
    if name == "bert-base":
        return _bert(seq or 128, batch or 1)
    return _gpt2_decode(cache or 1024)


def export(model: str, path, batch: int | None = None, seq: int | None = None, cache: int | None = None) -> Path:
    """Write the network as ``path`` (an .onnx file). Bad names, sizes and unwritable paths are
    refused before anything is built; the file is written whole or not at all."""
    import tempfile

    check(model, batch, seq, cache)
    path = Path(path)
    if path.suffix.lower() != ".onnx":
        raise RooflabError(f"{path}: the output must be an .onnx file", f"use -o {path.with_suffix('.onnx').name}")
    if path.is_dir():
        raise RooflabError(f"{path} is a directory", "give a file name, e.g. -o model.onnx")
    try:
        import onnx
    except ImportError:
        raise RooflabError("exporting ONNX graphs needs the onnx package", "pip install 'rooflab[onnx]'") from None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
    except OSError as e:
        raise RooflabError(f"cannot write {path}: {e.strerror or e}", "pass a writable -o FILE") from None
    try:
        onnx.save(build(model, batch, seq, cache), tmp)
        from ..results import readable_mode

        readable_mode(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path
