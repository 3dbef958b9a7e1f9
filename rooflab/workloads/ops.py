"""One formula per op kind: FLOPs and minimum (compulsory) bytes.

FLOP conventions are the DeepSpeed flops profiler's (also torch.utils.flop_counter's for GEMM/conv):
GEMM/conv = 2 x MACs (an FMA is 2 FLOP), Linear bias not counted, conv bias = N*K*P*Q;
relu/gelu/softmax/add = 1 per element; batch norm (inference, affine) = 2 per element; layer norm
(affine) = 5 per element; RMS norm = 4 per element (square, sum, scale, weight); RoPE = 3 per rotated
element (x*cos + rotate(x)*sin); pooling = 1 per *input* element; embedding gather = 0.
Every other elementwise kind (scale, sigmoid, tanh, relu6, hardswish, hardsigmoid, silu, mul, sub,
div) = 1 per output element, as DeepSpeed counts activations; data movement (reshape, transpose,
concat) = 0.
Minimum bytes: every distinct input read once and every output written once; weights shared over
the batch are read once; token ids are int64. intensity = flops / min_bytes is an upper bound on
the DRAM intensity of any implementation. Unary elementwise kinds: 2 x numel; binary kinds
(add, mul, sub, div): (inputs - 1) x numel + broadcast_numel + numel, where broadcast_numel is the
smaller operand's size when it is broadcast (a per-channel scale, a bias; default numel);
reshape (Reshape, Flatten, Squeeze, Unsqueeze: a view) 0; transpose and concat (a copy) 2 x numel.
A causal batched GEMM (``causal_q``: S query positions per block of M rows, each attending to the
N - S cached keys and to itself and the earlier ones; ``causal_keys_k``: the keys lie along K, P V)
counts only the (query, key) pairs the mask keeps; its bytes are the full operands'.
Quantized GEMMs: ``qgemm_nbits`` (weight-only, ``bits`` 4 or 8, block 32, fp32 scales: activations
and output in the op's dtype, weights K N (bits/8 + 4/32) bytes; a bias is a separate add op) and
``qgemm_int8`` (u8 activations x s8 weights -> int32: M K + K N + 4 M N bytes); FLOPs 2 M N K
(integer ops for qgemm_int8), as for GEMM. An integer GEMM requantized to 8 bits (QLinearMatMul,
QGemm with an output scale, a QDQ MatMul followed by QuantizeLinear) writes ``out_itemsize`` = 1
byte per output (default 4: int32, or fp32 scaled at the store as MatMulIntegerToFloat does).
8-bit graphs: dtype ``int8`` (1 byte, signed or not) for a conv, GEMM, pooling or elementwise op
that runs on 8-bit tensors (QLinearConv, QLinearAdd, a QDQ-wrapped op); a conv or GEMM whose 8-bit
product is written as float (a QDQ Gemm without QuantizeLinear after it) gives ``out_itemsize`` 4.
``quantize`` (QuantizeLinear, DynamicQuantizeLinear with ``dynamic``: its range found first) and
``dequantize`` (DequantizeLinear): dtype is the float side, the other side 1 byte per element; 1
FLOP per element (x / s + z rounded and clamped; (q - z) s), 2 for a dynamic quantize (min/max
pass, then the quantize); bytes numel x (itemsize + 1).

An op is a dict: {"kind": ..., "shape": {...}, "dtype": "float32", "name": ..., "count": 1, "model": ...}
"""

from __future__ import annotations

import math

from ..errors import RooflabError

ITEMSIZE = {
    "float64": 8,
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "int8": 1,  # 8-bit integers, signed or not (a quantized graph's u8 activations and s8 weights)
    "fp32": 4,
    "fp16": 2,
    "bf16": 2,
    "fp64": 8,
}
DTYPE_ALIASES = {
    "fp32": "float32",
    "fp16": "float16",
    "bf16": "bfloat16",
    "fp64": "float64",
    "uint8": "int8",
    "u8": "int8",
}

# kind -> required shape fields (optional ones get defaults in _shape)
REQUIRED = {
    "gemm": ("M", "N", "K"),
    "qgemm_nbits": ("M", "N", "K", "bits"),
    "qgemm_int8": ("M", "N", "K"),
    "quantize": ("numel",),
    "dequantize": ("numel",),
    "batched_gemm": ("batch", "M", "N", "K"),
    "conv2d": ("N", "C", "H", "W", "K", "R", "S"),
    "batchnorm": ("N", "C", "H", "W"),
    "relu": ("numel",),
    "gelu": ("numel",),
    "add": ("numel",),
    "softmax": ("rows", "cols"),
    "layernorm": ("rows", "cols"),
    "rmsnorm": ("rows", "cols"),
    "rope": ("tokens", "heads", "head_dim"),
    "embedding": ("tokens", "dim", "vocab"),
    "maxpool": ("N", "C", "H", "W", "kernel", "stride"),
    "avgpool": ("N", "C", "H", "W"),
    "scale": ("numel",),
    "sigmoid": ("numel",),
    "tanh": ("numel",),
    "relu6": ("numel",),
    "hardswish": ("numel",),
    "hardsigmoid": ("numel",),
    "silu": ("numel",),
    "mul": ("numel",),
    "sub": ("numel",),
    "div": ("numel",),
    "reshape": ("numel",),
    "transpose": ("numel",),
    "concat": ("numel",),
}
KIND_ALIASES = {
    "matmul": "gemm",
    "linear": "gemm",
    "gemv": "gemm",
    "bmm": "batched_gemm",
    "batched_gemv": "batched_gemm",
    "conv": "conv2d",
    "batchnorm_inference": "batchnorm",
    "batch_norm": "batchnorm",
    "layer_norm": "layernorm",
    "rms_norm": "rmsnorm",
    "rotary": "rope",
    "global_avgpool": "avgpool",
    "multiply": "mul",
    "subtract": "sub",
    "divide": "div",
    "swish": "silu",
    "hard_swish": "hardswish",
    "hard_sigmoid": "hardsigmoid",
    "flatten": "reshape",
    "squeeze": "reshape",
    "unsqueeze": "reshape",
    "view": "reshape",
    "permute": "transpose",
    "cat": "concat",
}
QGEMM = ("qgemm_nbits", "qgemm_int8")
QUANT_BITS = (4, 8)
QUANT_BLOCK = 32
QUANTIZE = ("quantize", "dequantize")  # float <-> 8-bit integers: the op's dtype is the float side
OUT_ITEMSIZE = ("gemm", "conv2d", "qgemm_int8")  # kinds whose output may be stored at another width
UNARY = ("relu", "gelu", "scale", "sigmoid", "tanh", "relu6", "hardswish", "hardsigmoid", "silu")
BINARY = ("add", "mul", "sub", "div")
ELEMENTWISE = UNARY + BINARY
DATA_MOVEMENT = ("reshape", "transpose", "concat")


def conv_shape(N, C, H, W, K, R, S=None, *, stride=1, pad=0, groups=1, bias=None) -> dict:
    """A conv2d op's shape fields, the one place they are spelled (normalize adds P and Q): stride
    and pad one number for both axes or an (h, w) pair; S (the filter's width) defaults to R."""
    sh, sw = stride if isinstance(stride, (tuple, list)) else (stride, stride)
    ph, pw = pad if isinstance(pad, (tuple, list)) else (pad, pad)
    d = {"N": N, "C": C, "H": H, "W": W, "K": K, "R": R, "S": R if S is None else S,
         "stride_h": sh, "stride_w": sw, "pad_h": ph, "pad_w": pw, "groups": groups}  # fmt: skip
    if bias is not None:
        d["bias"] = bias
    return d


def normalize(op: dict) -> dict:
    """Validated copy of ``op`` with canonical kind, dtype and derived shape fields.

    Raises RooflabError naming the op and the problem (unknown kind, missing or inconsistent field)."""
    if not isinstance(op, dict):
        raise RooflabError(f"op {op!r} is not an object", 'each op is {"kind": ..., "shape": {...}}')
    name = op.get("name") or op.get("layer") or op.get("kind", "?")
    kind = KIND_ALIASES.get(str(op.get("kind", "")).lower(), str(op.get("kind", "")).lower())
    if kind not in REQUIRED:
        raise RooflabError(
            f"op {name!r}: unknown kind {op.get('kind')!r}",
            f"use one of: {', '.join(sorted(REQUIRED))} (or matmul, linear, gemv, bmm)",
        )
    shape = dict(op.get("shape") or {})
    if kind == "gemm" and "M" not in shape and op.get("kind") in ("gemv",):
        shape["M"] = 1
    missing = [f for f in REQUIRED[kind] if f not in shape]
    if missing:
        raise RooflabError(
            f"op {name!r} ({kind}): missing shape field(s) {', '.join(missing)}", f"give {', '.join(REQUIRED[kind])}"
        )
    for k, v in shape.items():
        if isinstance(v, bool) or k in ("bias",):
            continue
        if not isinstance(v, int) or v < 0:
            raise RooflabError(f"op {name!r}: shape field {k}={v!r} must be a non-negative integer")
    dtype = DTYPE_ALIASES.get(str(op.get("dtype", "float32")), str(op.get("dtype", "float32")))
    if dtype not in ITEMSIZE:
        raise RooflabError(
            f"op {name!r}: unknown dtype {op.get('dtype')!r}", "use float32, float64, float16, bfloat16 or int8"
        )
    if "out_itemsize" in shape and (kind not in OUT_ITEMSIZE or shape["out_itemsize"] not in (1, 2, 4, 8)):
        raise RooflabError(
            f"op {name!r}: out_itemsize={shape['out_itemsize']!r} is not valid for {kind}",
            f"give 1, 2, 4 or 8, on {', '.join(OUT_ITEMSIZE)} ops only",
        )
    if kind in QUANTIZE and dtype not in ("float32", "float16", "bfloat16", "float64"):
        raise RooflabError(f"op {name!r}: a {kind}'s dtype is its float side, not {dtype}", "use float32")
    if kind == "conv2d":
        shape.setdefault("stride_h", shape.pop("stride", 1) if "stride" in shape else 1)
        shape.setdefault("stride_w", shape["stride_h"])
        shape.setdefault("pad_h", shape.pop("pad", 0) if "pad" in shape else 0)
        shape.setdefault("pad_w", shape["pad_h"])
        shape.setdefault("groups", 1)
        shape.setdefault("bias", False)
        P = (shape["H"] + 2 * shape["pad_h"] - shape["R"]) // shape["stride_h"] + 1
        Q = (shape["W"] + 2 * shape["pad_w"] - shape["S"]) // shape["stride_w"] + 1
        if P < 1 or Q < 1:
            raise RooflabError(f"op {name!r}: filter {shape['R']}x{shape['S']} does not fit the padded input")
        if "P" in shape and shape["P"] != P or "Q" in shape and shape["Q"] != Q:
            raise RooflabError(
                f"op {name!r}: given output {shape.get('P')}x{shape.get('Q')} is inconsistent "
                f"with input, filter, stride and padding ({P}x{Q})"
            )
        shape["P"], shape["Q"] = P, Q
        if shape["C"] % shape["groups"] or shape["K"] % shape["groups"]:
            raise RooflabError(f"op {name!r}: C and K must be multiples of groups={shape['groups']}")
    if kind == "gemm":
        shape.setdefault("batch", 1)
        shape.setdefault("bias", False)
    if kind == "qgemm_nbits" and shape["bits"] not in QUANT_BITS:
        raise RooflabError(
            f"op {name!r}: {shape['bits']}-bit weights are not modelled",
            f"use bits {' or '.join(map(str, QUANT_BITS))}",
        )
    if kind == "qgemm_nbits" and shape["K"] % QUANT_BLOCK:
        raise RooflabError(f"op {name!r}: K={shape['K']} is not a multiple of the quantization block {QUANT_BLOCK}")
    if kind == "batched_gemm":
        shape.setdefault("bias", False)
        q = shape.get("causal_q")
        keys = shape["K"] if shape.get("causal_keys_k") else shape["N"]
        if q and (shape["M"] % q or q > keys):
            raise RooflabError(f"op {name!r}: causal_q={q} must divide M and be at most the key count {keys}")
    if kind == "rope":
        shape.setdefault("rot_dim", shape["head_dim"])
        if shape["rot_dim"] > shape["head_dim"] or shape["rot_dim"] % 2:
            raise RooflabError(f"op {name!r}: rot_dim must be even and at most head_dim")
    if kind == "maxpool":
        shape.setdefault("pad", 0)
        P = (shape["H"] + 2 * shape["pad"] - shape["kernel"]) // shape["stride"] + 1
        shape["P"] = shape["Q"] = P
        if "W" in shape:
            shape["Q"] = (shape["W"] + 2 * shape["pad"] - shape["kernel"]) // shape["stride"] + 1
    if kind in BINARY:
        shape.setdefault("inputs", 2)
        b = shape.get("broadcast_numel", shape["numel"])
        if b < 1 or b > shape["numel"] or shape["numel"] % b:
            raise RooflabError(
                f"op {name!r}: broadcast_numel={b} must divide numel={shape['numel']}",
                "give the element count of the smaller (broadcast) operand",
            )
    if kind == "transpose":
        shape.setdefault("inner", 1)
        shape.setdefault("cols", 1)
        if shape["cols"] * shape["inner"] == 0 or shape["numel"] % (shape["cols"] * shape["inner"]):
            raise RooflabError(f"op {name!r}: cols x inner must divide numel", "give rows x cols x inner = numel")
    if kind == "concat":
        shape.setdefault("inputs", 2)
    count = op.get("count", op.get("count_per_forward", 1))
    if not isinstance(count, int) or count < 1:
        raise RooflabError(f"op {name!r}: count must be a positive integer, got {count!r}")
    return {"kind": kind, "shape": shape, "dtype": dtype, "name": str(name), "count": count, "model": op.get("model")}


def flops(op: dict) -> float:
    k, s = op["kind"], op["shape"]
    if k == "gemm":
        return 2.0 * s.get("batch", 1) * s["M"] * s["N"] * s["K"]
    if k in QGEMM:
        return 2.0 * s["M"] * s["N"] * s["K"]
    if k == "batched_gemm":
        return 2.0 * s["batch"] * s["M"] * s["N"] * s["K"] * _causal_fraction(s)
    if k == "conv2d":
        f = 2.0 * s["N"] * s["K"] * s["P"] * s["Q"] * (s["C"] // s["groups"]) * s["R"] * s["S"]
        return f + (s["N"] * s["K"] * s["P"] * s["Q"] if s.get("bias") else 0)
    if k == "batchnorm":
        return 2.0 * s["N"] * s["C"] * s["H"] * s["W"]
    if k in ELEMENTWISE:
        return float(s["numel"])
    if k in QUANTIZE:
        return float(s["numel"]) * (2 if s.get("dynamic") else 1)
    if k in DATA_MOVEMENT:
        return 0.0
    if k == "softmax":
        return float(s["rows"] * s["cols"])
    if k == "layernorm":
        return 5.0 * s["rows"] * s["cols"]
    if k == "rmsnorm":
        return 4.0 * s["rows"] * s["cols"]
    if k == "rope":
        return 3.0 * s["tokens"] * s["heads"] * s["rot_dim"]
    if k == "embedding":
        return 0.0
    if k in ("maxpool", "avgpool"):
        return float(s["N"] * s["C"] * s["H"] * s["W"])
    raise KeyError(k)  # pragma: no cover - normalize() guards


def min_bytes(op: dict) -> float:
    k, s = op["kind"], op["shape"]
    e = ITEMSIZE[op["dtype"]]
    if k == "gemm":
        b = s.get("batch", 1)
        n = b * s["M"] * s["K"] + s["K"] * s["N"] + (s["N"] if s.get("bias") else 0)
        return e * n + output_bytes(op)
    if k == "qgemm_nbits":
        return e * (s["M"] * s["K"] + s["M"] * s["N"]) + weight_bytes(op)
    if k == "qgemm_int8":
        return s["M"] * s["K"] + s["K"] * s["N"] + output_bytes(op)
    if k == "batched_gemm":
        return e * s["batch"] * (s["M"] * s["K"] + s["K"] * s["N"] + s["M"] * s["N"])
    if k == "conv2d":
        n = (
            s["N"] * s["C"] * s["H"] * s["W"]
            + s["K"] * (s["C"] // s["groups"]) * s["R"] * s["S"]
            + (s["K"] if s.get("bias") else 0)
        )
        return e * n + output_bytes(op)
    if k == "batchnorm":
        return e * (2 * s["N"] * s["C"] * s["H"] * s["W"] + 4 * s["C"])
    if k in UNARY:
        return e * 2 * s["numel"]
    if k in QUANTIZE:
        return (e + 1) * s["numel"]
    if k in BINARY:
        n = s["numel"]
        return e * ((s.get("inputs", 2) - 1) * n + s.get("broadcast_numel", n) + n)
    if k == "reshape":
        return 0.0
    if k in ("transpose", "concat"):
        return e * 2 * s["numel"]
    if k == "softmax":
        return e * 2 * s["rows"] * s["cols"]
    if k == "layernorm":
        return e * (2 * s["rows"] * s["cols"] + 2 * s["cols"])
    if k == "rmsnorm":
        return e * (2 * s["rows"] * s["cols"] + s["cols"])
    if k == "rope":  # x in, out, and the cos and sin tables (tokens x rot_dim/2 each)
        return e * (2 * s["tokens"] * s["heads"] * s["head_dim"] + s["tokens"] * s["rot_dim"])
    if k == "embedding":
        # gather `tokens` rows (word + position + type tables summed where several), ids in int64
        tables = s.get("tables", 1)
        return 8 * s["tokens"] + e * (tables * s["tokens"] * s["dim"] + s["tokens"] * s["dim"])
    if k == "maxpool":
        return e * (s["N"] * s["C"] * s["H"] * s["W"] + s["N"] * s["C"] * s["P"] * s["Q"])
    if k == "avgpool":
        return e * (s["N"] * s["C"] * s["H"] * s["W"] + s["N"] * s["C"])
    raise KeyError(k)  # pragma: no cover


def weight_bytes(op: dict) -> float:
    """Bytes of an op's stored weights (a weight GEMM's B at its dtype, or quantized with its scales)."""
    k, s = op["kind"], op["shape"]
    if k == "qgemm_nbits":
        return s["K"] * s["N"] * (s["bits"] / 8 + 4 / QUANT_BLOCK)
    if k == "qgemm_int8":
        return s["K"] * s["N"]
    if k == "gemm" and s.get("weight", True):
        return s["K"] * s["N"] * ITEMSIZE[op["dtype"]]
    return 0.0


def _causal_fraction(s: dict) -> float:
    """Share of a batched GEMM's (query, key) pairs a causal mask keeps (1 without ``causal_q``)."""
    q = s.get("causal_q")
    if not q:
        return 1.0
    keys = s["K"] if s.get("causal_keys_k") else s["N"]
    return (q * (keys - q) + q * (q + 1) / 2) / (q * keys)


def macs(op: dict) -> float:
    """Multiply-accumulates of GEMM/conv ops (0 for the others)."""
    if op["kind"] in ("gemm", "batched_gemm", "conv2d", *QGEMM):
        f = flops(op)
        if op["kind"] == "conv2d" and op["shape"].get("bias"):
            s = op["shape"]
            f -= s["N"] * s["K"] * s["P"] * s["Q"]
        return f / 2
    return 0.0


def params(op: dict) -> int:
    """Learned parameters an op owns (weights, biases, norm affine), for model totals."""
    k, s = op["kind"], op["shape"]
    if k == "gemm" and s.get("weight", True):
        return s["K"] * s["N"] + (s["N"] if s.get("bias") else 0)
    if k in QGEMM:
        return s["K"] * s["N"]
    if k == "conv2d":
        return s["K"] * (s["C"] // s["groups"]) * s["R"] * s["S"] + (s["K"] if s.get("bias") else 0)
    if k == "batchnorm":
        return 2 * s["C"]
    if k == "layernorm":
        return 2 * s["cols"]
    if k == "rmsnorm":
        return s["cols"]
    if k == "embedding":
        return s["vocab"] * s["dim"] if s.get("owns_table", True) else 0
    return 0


def intensity(op: dict) -> float:
    b = min_bytes(op)
    return flops(op) / b if b else math.inf


def output_numel(op: dict) -> int:
    k, s = op["kind"], op["shape"]
    if k == "gemm":
        return s.get("batch", 1) * s["M"] * s["N"]
    if k in QGEMM:
        return s["M"] * s["N"]
    if k == "batched_gemm":
        return s["batch"] * s["M"] * s["N"]
    if k == "conv2d":
        return s["N"] * s["K"] * s["P"] * s["Q"]
    if k == "batchnorm":
        return s["N"] * s["C"] * s["H"] * s["W"]
    if k in ELEMENTWISE or k in DATA_MOVEMENT or k in QUANTIZE:
        return s["numel"]
    if k in ("softmax", "layernorm", "rmsnorm"):
        return s["rows"] * s["cols"]
    if k == "rope":
        return s["tokens"] * s["heads"] * s["head_dim"]
    if k == "embedding":
        return s["tokens"] * s["dim"]
    if k == "maxpool":
        return s["N"] * s["C"] * s["P"] * s["Q"]
    if k == "avgpool":
        return s["N"] * s["C"]
    raise KeyError(k)  # pragma: no cover


def output_bytes(op: dict) -> int:
    """Bytes an op writes: its output at the width it is stored (``out_itemsize``; a quantize's 8-bit
    codes; an integer GEMM's int32 or fp32 by default)."""
    k, s = op["kind"], op["shape"]
    if k == "reshape":  # a view: nothing written
        return 0
    if k == "quantize":
        return s["numel"]
    if k == "qgemm_int8":
        return s.get("out_itemsize", 4) * output_numel(op)
    return s.get("out_itemsize", ITEMSIZE[op["dtype"]]) * output_numel(op)
