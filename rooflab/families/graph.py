"""Family `graph`: the elementwise and data-movement ops ONNX graphs add beyond the core kinds
(MobileNet, EfficientNet, transformer exports): sigmoid, tanh, relu6, hardswish,
hardsigmoid, silu, mul/sub/div (with a broadcast operand), and the shape ops reshape (a view),
transpose and concat (a copy). Variant 0 of each is the framework path, the ufunc sequence numpy
runs on the CPU and cupy on the GPU; each is a few passes over memory, so memory- or
latency-bound: e.g. sigmoid as negative, exp, +1, reciprocal is 4 passes where 1 would do.

Each builder returns an ``Impl`` (the call, its float64 reference, the library calls it makes);
the module registers each as variant 0 of its op kind (CPU and GPU), executed by the one driver.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..registry import Variant, register
from ..work import Work
from ._xp import XP_NAME, rand, xp_for


@dataclass
class Impl:
    name: str
    run: Callable
    reference: Callable
    dispatches: int
    footprint: int


_MORE_ELEMENTWISE = ("scale", "sigmoid", "tanh", "relu6", "hardswish", "hardsigmoid", "silu", "mul", "sub", "div")


def _more(k, s, rng, dt, need, xp=np) -> Impl:
    """The elementwise and data-movement kinds ONNX graphs add (MobileNet, EfficientNet, exports of
    transformers): each as the ufunc sequence numpy (or cupy) runs."""
    lib = xp.__name__
    f64 = np.float64
    n = s["numel"]
    x = rand(xp, rng, (n,), dt, 4.0)
    y = xp.empty_like(x)
    if k == "scale":
        c = dt.type(1.5)
        return Impl(f"{lib}.multiply", lambda: xp.multiply(x, c, out=y), lambda: x.astype(f64) * float(c), 1, need)
    if k == "tanh":
        return Impl(f"{lib}.tanh", lambda: xp.tanh(x, out=y), lambda: xp.tanh(x.astype(f64)), 1, need)
    if k == "relu6":
        return Impl(f"{lib}.clip(0, 6)", lambda: xp.clip(x, 0, 6, out=y), lambda: xp.clip(x.astype(f64), 0, 6), 1, need)
    if k in ("sigmoid", "silu"):

        def run():
            xp.negative(x, out=y)
            xp.exp(y, out=y)
            xp.add(y, 1, out=y)
            return xp.divide(x, y, out=y) if k == "silu" else xp.reciprocal(y, out=y)

        def ref():
            x64 = x.astype(f64)
            return x64 / (1 + xp.exp(-x64)) if k == "silu" else 1 / (1 + xp.exp(-x64))

        return Impl(f"{lib} {k} (4 passes)", run, ref, 4, need)
    if k == "hardswish":

        def hswish():
            xp.add(x, 3, out=y)
            xp.clip(y, 0, 6, out=y)
            xp.multiply(y, x, out=y)
            return xp.multiply(y, dt.type(1 / 6), out=y)

        return Impl(
            f"{lib} hardswish (4 passes)", hswish, lambda: x.astype(f64) * xp.clip(x.astype(f64) + 3, 0, 6) / 6, 4, need
        )
    if k == "hardsigmoid":

        def hsig():
            xp.multiply(x, dt.type(1 / 6), out=y)
            xp.add(y, 0.5, out=y)
            return xp.clip(y, 0, 1, out=y)

        return Impl(f"{lib} hardsigmoid (3 passes)", hsig, lambda: xp.clip(x.astype(f64) / 6 + 0.5, 0, 1), 3, need)
    if k in ("mul", "sub", "div"):
        b_n = s.get("broadcast_numel", n)
        a2 = x.reshape(n // b_n, b_n)
        b = (rng.random(b_n) + 0.5).astype(dt)
        fn = {"mul": xp.multiply, "sub": xp.subtract, "div": xp.divide}[k]
        y2 = y.reshape(a2.shape)
        return Impl(
            f"{lib}.{fn.__name__}" + (" (broadcast)" if b_n != n else ""),
            lambda: fn(a2, b, out=y2),
            lambda: fn(a2.astype(f64), b.astype(f64)),
            1,
            need,
        )
    if k == "reshape":
        return Impl(f"{lib} reshape (a view)", lambda: x.reshape(-1, 1), lambda: x.astype(f64).reshape(-1, 1), 1, need)
    if k == "transpose":
        cols, inner = s.get("cols", 1), s.get("inner", 1)
        rows = n // (cols * inner)
        src = x.reshape(rows, cols, inner).transpose(1, 0, 2)
        y3 = y.reshape(cols, rows, inner)

        def run():
            xp.copyto(y3, src)
            return y3

        return Impl(f"{lib} transpose copy", run, lambda: src.astype(f64), 1, need)
    if k == "concat":
        m = max(1, s.get("inputs", 2))
        cuts = [n * i // m for i in range(m + 1)]
        parts = [x[cuts[i] : cuts[i + 1]] for i in range(m)]
        return Impl(
            f"{lib}.concatenate",
            lambda: xp.concatenate(parts, out=y),
            lambda: xp.concatenate([p.astype(f64) for p in parts]),
            1,
            need,
        )
    raise KeyError(k)  # pragma: no cover


class _Built:
    """The inputs of one graph op: its arrays (what the driver sizes) and the built call."""

    def __init__(self, impl: Impl, op: dict):
        self.impl, self.op = impl, op
        self.nbytes = impl.footprint
        self.dtype = np.dtype(op["dtype"])
        self.size = op["shape"].get("numel", 0)


def _inputs(kind: str, device: str):
    def inputs(shape, dtype=np.float32, seed=0, threads=None):
        from ..models import ops

        xp = xp_for(device)
        op = ops.normalize({"kind": kind, "shape": dict(shape), "dtype": np.dtype(dtype).name, "name": kind})
        impl = _more(kind, op["shape"], xp.random.default_rng(seed), np.dtype(dtype), ops.min_bytes(op), xp)
        return (_Built(impl, op),)

    return inputs


def _kernel(built, reps=1, threads=None):
    out = None
    for _ in range(int(reps)):
        out = built.impl.run()
    return out


def _work(built, reps=1, **_):
    from ..models import ops

    b, op = built.impl, built.op
    written = ops.output_numel(op) * ops.ITEMSIZE[op["dtype"]]
    total = ops.min_bytes(op)
    return Work(
        flops=ops.flops(op) * reps,
        bytes_read=(total - written) * reps,
        bytes_written=written * reps,
        launches=b.dispatches * int(reps),
    )


for device in ("cpu", "cuda"):
    for kind in (*_MORE_ELEMENTWISE, "reshape", "transpose", "concat"):
        if kind == "scale":  # the elementwise family's variant 0 executes scale
            continue
        lib = XP_NAME[device]
        register(
            Variant(
                name=f"{device}.graph.{kind}.00-{lib}",
                family="graph",
                device=device,
                number=0,
                op=kind,
                description=f"{lib}: the ufunc sequence of {kind}",
                kernel=_kernel,
                reference=lambda built, **_: built.impl.reference(),
                work=_work,
                inputs=_inputs(kind, device),
                result_dtype=lambda built, **_: np.dtype(built.op["dtype"]),
                dtypes=("float32", "float64"),
            )
        )
