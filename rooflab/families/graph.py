"""Family `graph`: the elementwise and data-movement ops ONNX graphs add beyond the core kinds
(MobileNet, EfficientNet, transformer exports): sigmoid, tanh, relu6, hardswish,
hardsigmoid, silu, mul/sub/div (with a broadcast operand), quantize/dequantize (float <-> u8 of
quantized graphs; a dynamic quantize finds its range first), and the shape ops reshape (a view),
transpose and concat (a copy). Variant 0 of each is the framework path, the ufunc sequence numpy
runs on the CPU and cupy on the GPU; each is a few passes over memory, so memory- or
latency-bound: e.g. sigmoid as negative, exp, +1, reciprocal is 4 passes where 1 would do.

Each op kind is one row of ``OPS`` (its dispatches per call, the library calls it makes, the call
and its float64 reference on the built inputs), registered as variant 0 of its op kind on the CPU
and the GPU: the variant is the one thing that runs, through the one driver.

Napkin: sigmoid on 1 M float32 elements moves 4 passes x 8 MB = 32 MB where 1 pass (8 MB) would do:
~1 ms at 30 GB/s of DRAM where a fused kernel takes ~0.27 ms.
"""

from __future__ import annotations

import numpy as np

from ..registry import Variant, register
from ..work import Work
from ._xp import XP_NAME, rand, xp_for

F64 = np.float64


class _Inputs:
    """The inputs of one graph op: its arrays (what the driver sizes: ``nbytes`` is the op's
    compulsory traffic), the views the op's call works on, the op dict and the array module."""

    def __init__(self, xp, op: dict, rng, dt):
        from ..workloads import ops

        s = op["shape"]
        n = s["numel"]
        self.xp, self.op = xp, op
        self.nbytes = ops.min_bytes(op)
        self.dtype = dt
        self.size = n
        self.x = rand(xp, rng, (n,), dt, 4.0)
        self.y = xp.empty_like(self.x)
        kind = op["kind"]
        if kind in ("mul", "sub", "div"):  # a broadcast operand of the last dimension
            b_n = s.get("broadcast_numel", n)
            self.a2, self.y2 = self.x.reshape(n // b_n, b_n), self.y.reshape(n // b_n, b_n)
            self.b = (rng.random(b_n) + 0.5).astype(dt)
        elif kind == "transpose":
            cols, inner = s.get("cols", 1), s.get("inner", 1)
            rows = n // (cols * inner)
            self.src = self.x.reshape(rows, cols, inner).transpose(1, 0, 2)
            self.y3 = self.y.reshape(cols, rows, inner)
        elif kind == "quantize":  # x / s + z, rounded, clamped to 0..255 (a u8 activation)
            self.y = xp.empty(n, np.uint8)
            self.t = xp.empty_like(self.x)
            self.scale, self.zp = dt.type(1 / 16), 128.0  # +-8: the tails clamp
        elif kind == "dequantize":  # (q - z) s from u8 codes
            self.q = xp.asarray(np.random.default_rng(n).integers(0, 256, n, dtype=np.uint8))
            self.scale, self.zp = dt.type(1 / 16), 128
        elif kind == "concat":
            m = max(1, s.get("inputs", 2))
            cuts = [n * i // m for i in range(m + 1)]
            self.parts = [self.x[cuts[i] : cuts[i + 1]] for i in range(m)]

    def x64(self):
        return self.x.astype(F64)


def _sigmoid(i):
    xp = i.xp
    xp.negative(i.x, out=i.y)
    xp.exp(i.y, out=i.y)
    xp.add(i.y, 1, out=i.y)
    return xp.reciprocal(i.y, out=i.y)


def _silu(i):
    xp = i.xp
    xp.negative(i.x, out=i.y)
    xp.exp(i.y, out=i.y)
    xp.add(i.y, 1, out=i.y)
    return xp.divide(i.x, i.y, out=i.y)


def _hardswish(i):
    xp = i.xp
    xp.add(i.x, 3, out=i.y)
    xp.clip(i.y, 0, 6, out=i.y)
    xp.multiply(i.y, i.x, out=i.y)
    return xp.multiply(i.y, i.dtype.type(1 / 6), out=i.y)


def _hardsigmoid(i):
    xp = i.xp
    xp.multiply(i.x, i.dtype.type(1 / 6), out=i.y)
    xp.add(i.y, 0.5, out=i.y)
    return xp.clip(i.y, 0, 1, out=i.y)


def _quant_params(xp, x):
    """onnxruntime's DynamicQuantizeLinear: the range widened to hold 0, 255 steps, zero point rounded."""
    lo, hi = min(float(x.min()), 0.0), max(float(x.max()), 0.0)
    scale = (hi - lo) / 255 or 1.0
    return scale, float(min(max(round(-lo / scale), 0), 255))


def _quantize(i):
    xp = i.xp
    if i.op["shape"].get("dynamic"):
        scale, zp = _quant_params(xp, i.x)  # 2 passes: min, max
        inv = i.dtype.type(1 / scale)
    else:
        inv, zp = i.dtype.type(1 / i.scale), i.zp
    xp.multiply(i.x, inv, out=i.t)
    xp.rint(i.t, out=i.t)
    xp.add(i.t, zp, out=i.t)
    xp.clip(i.t, 0, 255, out=i.t)
    i.y[...] = i.t
    return i.y


def _quantize_ref(i):
    x = i.x64()
    scale, zp = _quant_params(i.xp, x) if i.op["shape"].get("dynamic") else (float(i.scale), i.zp)
    return i.xp.clip(i.xp.rint(x / scale) + zp, 0, 255)


def _dequantize(i):
    xp = i.xp
    xp.subtract(i.q, i.zp, out=i.y, dtype=i.dtype, casting="unsafe")
    return xp.multiply(i.y, i.scale, out=i.y)


def _transpose(i):
    i.xp.copyto(i.y3, i.src)
    return i.y3


def _binary(name):
    return lambda i: getattr(i.xp, name)(i.a2, i.b, out=i.y2)


def _binary_ref(name):
    return lambda i: getattr(i.xp, name)(i.a2.astype(F64), i.b.astype(F64))


# kind: (dispatches per call, the library calls it makes, call(inputs), float64 reference(inputs))
OPS = {
    "sigmoid": (4, "{lib} sigmoid (4 passes)", _sigmoid, lambda i: 1 / (1 + i.xp.exp(-i.x64()))),
    "tanh": (1, "{lib}.tanh", lambda i: i.xp.tanh(i.x, out=i.y), lambda i: i.xp.tanh(i.x64())),
    "relu6": (1, "{lib}.clip(0, 6)", lambda i: i.xp.clip(i.x, 0, 6, out=i.y), lambda i: i.xp.clip(i.x64(), 0, 6)),
    "hardswish": (4, "{lib} hardswish (4 passes)", _hardswish, lambda i: i.x64() * i.xp.clip(i.x64() + 3, 0, 6) / 6),
    "hardsigmoid": (3, "{lib} hardsigmoid (3 passes)", _hardsigmoid, lambda i: i.xp.clip(i.x64() / 6 + 0.5, 0, 1)),
    "silu": (4, "{lib} silu (4 passes)", _silu, lambda i: i.x64() / (1 + i.xp.exp(-i.x64()))),
    "mul": (1, "{lib}.multiply", _binary("multiply"), _binary_ref("multiply")),
    "sub": (1, "{lib}.subtract", _binary("subtract"), _binary_ref("subtract")),
    "div": (1, "{lib}.divide", _binary("divide"), _binary_ref("divide")),
    "quantize": (
        5,
        "{lib} quantize (scale, round, shift, clamp, narrow; a dynamic one +min, max)",
        _quantize,
        _quantize_ref,
    ),
    "dequantize": (
        2,
        "{lib} dequantize (shift, scale)",
        _dequantize,
        lambda i: (i.q.astype(F64) - i.zp) * float(i.scale),
    ),
    "reshape": (1, "{lib} reshape (a view)", lambda i: i.x.reshape(-1, 1), lambda i: i.x64().reshape(-1, 1)),
    "transpose": (1, "{lib} transpose copy", _transpose, lambda i: i.src.astype(F64)),
    "concat": (
        1,
        "{lib}.concatenate",
        lambda i: i.xp.concatenate(i.parts, out=i.y),
        lambda i: i.xp.concatenate([p.astype(F64) for p in i.parts]),
    ),
}


def _inputs(kind: str, device: str):
    def inputs(shape, dtype=np.float32, seed=0, threads=None):
        from ..workloads import ops

        xp = xp_for(device)
        op = ops.normalize({"kind": kind, "shape": dict(shape), "dtype": np.dtype(dtype).name, "name": kind})
        return (_Inputs(xp, op, xp.random.default_rng(seed), np.dtype(dtype)),)

    return inputs


def _kernel(call):
    def kernel(i, reps=1, threads=None):
        out = None
        for _ in range(int(reps)):
            out = call(i)
        return out

    return kernel


def _work(dispatches):
    def work(i, reps=1, **_):
        from ..workloads import ops

        written = ops.output_bytes(i.op)
        total = ops.min_bytes(i.op)
        return Work(
            flops=ops.flops(i.op) * reps,
            bytes_read=(total - written) * reps,
            bytes_written=written * reps,
            launches=dispatches * int(reps),
        )

    return work


for device in ("cpu", "cuda"):
    lib = XP_NAME[device]
    for kind, (dispatches, calls, call, ref) in OPS.items():
        register(
            Variant(
                name=f"{device}.graph.{kind}.00-{lib}",
                family="graph",
                device=device,
                number=0,
                op=kind,
                description=f"{calls.format(lib=lib)}: the ufunc sequence of {kind}",
                kernel=_kernel(call),
                reference=lambda i, _ref=ref, **_: _ref(i),
                work=_work(dispatches),
                inputs=_inputs(kind, device),
                result_dtype=lambda i, **_: np.dtype(np.uint8 if i.op["kind"] == "quantize" else i.op["dtype"]),
                dtypes=("float32", "float64"),
            )
        )
