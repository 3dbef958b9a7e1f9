"""Run model ops for real: the framework path (numpy + its BLAS) on the CPU, and rooflab's own
kernel where one exists; each implementation is checked against a float64 reference first.

  gemm / batched_gemm   np.matmul(out=) (+ bias add)            BLAS sgemm/dgemm
  conv2d                im2col (strided view, one copy) + one GEMM; 1x1/stride-1 convs skip im2col
  batchnorm (inference) y = x * scale[c] + shift[c]            2 ufunc passes
  relu / gelu / add     np.maximum / tanh-GELU / np.add         gelu: BERT's erf form differs by <1e-3
                                                                and has the same memory traffic
  softmax               max, subtract, exp, sum, divide        5 ufunc passes
  layernorm             mean, var, normalise, scale, shift
  embedding             np.take of each table, summed
  maxpool / avgpool     np.maximum over the window's strided taps / mean over H, W
  scale / tanh / relu6  np.multiply / np.tanh / np.clip(0, 6)                       1 pass
  sigmoid / silu        negative, exp, +1, reciprocal (x divide for silu)           4 passes
  hardswish             x * clip(x + 3, 0, 6) / 6;  hardsigmoid clip(x / 6 + 0.5, 0, 1)
  mul / sub / div       one ufunc; a broadcast operand of broadcast_numel elements is laid out
                        along the last axis (a bias or a channels-last scale)
  reshape               a view (x.reshape): the cost of the call alone
  transpose / concat    copyto of a (rows, cols, inner) -> (cols, rows, inner) view / np.concatenate
``dispatches`` counts the numpy/BLAS calls an implementation makes: its latency floor is that
many times the measured dispatch latency.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..memory import fmt_bytes, require_fits
from .ops import ITEMSIZE, min_bytes, output_numel


@dataclass
class Impl:
    name: str
    run: Callable[[], np.ndarray]
    reference: Callable[[], np.ndarray]
    dispatches: int
    footprint: int


def _rand(rng, shape, dtype, scale=1.0):
    return (rng.standard_normal(shape, dtype=np.float32) * scale).astype(dtype, copy=False)


def windows(xp, padded, R, S, sh, sw, P, Q):
    """(N, C, P, Q, R, S) strided view of the padded input: no copy, numpy or cupy."""
    sN, sC, sH, sW = padded.strides
    return xp.lib.stride_tricks.as_strided(
        padded, shape=padded.shape[:2] + (P, Q, R, S), strides=(sN, sC, sH * sh, sW * sw, sH, sW)
    )


def footprint_bytes(op: dict) -> int:
    """Rough upper bound of the memory an op's run and verification need."""
    base = min_bytes(op) / ITEMSIZE[op["dtype"]] * 8  # float64 reference copies
    s = op["shape"]
    if op["kind"] == "conv2d":
        cols = s["N"] * s["P"] * s["Q"] * (s["C"] // s["groups"]) * s["R"] * s["S"]
        base += cols * (ITEMSIZE[op["dtype"]] + 8)
    return int(2 * base + 8 * output_numel(op))


def build(op: dict, seed: int = 0, own: bool = False, xp=np) -> Impl | None:
    """Inputs and the callable for one op (None when ``own`` and rooflab has no kernel for it).

    ``xp`` is numpy (CPU, the default) or cupy (the same code then runs on the GPU through cupy's
    cuBLAS matmul and elementwise kernels)."""
    need = footprint_bytes(op)
    if xp is np:
        require_fits(need, f"op {op['name']!r} ({fmt_bytes(need)})")
    else:
        free = xp.cuda.runtime.memGetInfo()[0]
        if need > 0.8 * free:
            from ..errors import RooflabError

            raise RooflabError(f"op {op['name']!r} needs {fmt_bytes(need)} but the GPU has {fmt_bytes(free)} free")
    rng = xp.random.default_rng(seed)
    lib = xp.__name__
    dt = np.dtype("float32" if op["dtype"] in ("float16", "bfloat16") else op["dtype"])
    k, s = op["kind"], op["shape"]
    f64 = np.float64
    if own:
        return _own(op, rng, dt) if xp is np else None
    if k in ("gemm", "batched_gemm"):
        b = s.get("batch", 1) if k == "batched_gemm" else s.get("batch", 1)
        M, N, K = s["M"], s["N"], s["K"]
        a = _rand(rng, (b, M, K) if b > 1 else (M, K), dt)
        w = _rand(rng, (b, K, N) if k == "batched_gemm" and b > 1 else (K, N), dt, 1 / np.sqrt(K))
        c = xp.empty((b, M, N) if b > 1 else (M, N), dtype=dt)
        bias = _rand(rng, (N,), dt) if s.get("bias") else None

        def run():
            xp.matmul(a, w, out=c)
            if bias is not None:
                xp.add(c, bias, out=c)
            return c

        def ref():
            r = xp.matmul(a.astype(f64), w.astype(f64))
            return r + bias if bias is not None else r

        return Impl(
            f"{lib}.matmul ({'BLAS' if xp is np else 'cuBLAS'})" + (" + bias" if bias is not None else ""),
            run,
            ref,
            1 + (bias is not None),
            need,
        )
    if k == "conv2d":
        return _conv(op, rng, dt, need, xp)
    if k == "batchnorm":
        x = _rand(rng, (s["N"], s["C"], s["H"], s["W"]), dt)
        scale = (rng.random(s["C"]) + 0.5).astype(dt)[:, None, None]
        shift = _rand(rng, (s["C"],), dt)[:, None, None]
        y = xp.empty_like(x)

        def run():
            xp.multiply(x, scale, out=y)
            xp.add(y, shift, out=y)
            return y

        return Impl(f"{lib} x*scale+shift", run, lambda: x.astype(f64) * scale + shift, 2, need)
    if k in ("relu", "gelu", "add"):
        n = s["numel"]
        x = _rand(rng, (n,), dt)
        y = xp.empty_like(x)
        if k == "relu":
            return Impl(
                f"{lib}.maximum", lambda: xp.maximum(x, 0, out=y), lambda: xp.maximum(x.astype(f64), 0), 1, need
            )
        if k == "add":
            z = _rand(rng, (n,), dt)
            return Impl(f"{lib}.add", lambda: xp.add(x, z, out=y), lambda: x.astype(f64) + z, 1, need)
        c0, c1 = dt.type(np.sqrt(2 / np.pi)), dt.type(0.044715)
        t = xp.empty_like(x)

        def gelu():
            xp.multiply(x, x, out=t)
            xp.multiply(t, x, out=t)
            xp.multiply(t, c1, out=t)
            xp.add(t, x, out=t)
            xp.multiply(t, c0, out=t)
            xp.tanh(t, out=t)
            xp.add(t, 1, out=t)
            xp.multiply(t, x, out=y)
            xp.multiply(y, 0.5, out=y)
            return y

        def gelu_ref():
            x64 = x.astype(f64)
            return 0.5 * x64 * (1 + xp.tanh(np.sqrt(2 / np.pi) * (x64 + 0.044715 * x64**3)))

        return Impl(f"{lib} tanh-GELU", gelu, gelu_ref, 9, need)
    if k in _MORE_ELEMENTWISE or k in ("reshape", "transpose", "concat"):
        return _more(k, s, rng, dt, need, xp)
    if k == "softmax":
        x = _rand(rng, (s["rows"], s["cols"]), dt, 3.0)
        y = xp.empty_like(x)
        m = xp.empty((s["rows"], 1), dtype=dt)

        def run():
            xp.max(x, axis=1, keepdims=True, out=m)
            xp.subtract(x, m, out=y)
            xp.exp(y, out=y)
            xp.sum(y, axis=1, keepdims=True, out=m)
            xp.divide(y, m, out=y)
            return y

        def ref():
            e = xp.exp(x.astype(f64) - x.max(axis=1, keepdims=True))
            return e / e.sum(axis=1, keepdims=True)

        return Impl(f"{lib} softmax (5 passes)", run, ref, 5, need)
    if k == "layernorm":
        x = _rand(rng, (s["rows"], s["cols"]), dt)
        g = (rng.random(s["cols"]) + 0.5).astype(dt)
        bta = _rand(rng, (s["cols"],), dt)
        y = xp.empty_like(x)
        mu = xp.empty((s["rows"], 1), dtype=dt)
        var = xp.empty((s["rows"], 1), dtype=dt)

        def run():
            xp.mean(x, axis=1, keepdims=True, out=mu)
            xp.subtract(x, mu, out=y)
            xp.mean(xp.square(y), axis=1, keepdims=True, out=var)
            xp.add(var, 1e-5, out=var)
            xp.sqrt(var, out=var)
            xp.divide(y, var, out=y)
            xp.multiply(y, g, out=y)
            xp.add(y, bta, out=y)
            return y

        def ref():
            x64 = x.astype(f64)
            mu64 = x64.mean(axis=1, keepdims=True)
            return (x64 - mu64) / np.sqrt(x64.var(axis=1, keepdims=True) + 1e-5) * g + bta

        return Impl(f"{lib} layernorm", run, ref, 9, need)
    if k == "embedding":
        T, d, V = s["tokens"], s["dim"], s["vocab"]
        tables = [_rand(rng, (V, d), dt)] + [_rand(rng, (max(T, 2), d), dt) for _ in range(s.get("tables", 1) - 1)]
        ids = [rng.integers(0, V, T)] + [xp.arange(T) for _ in tables[1:]]
        y = xp.empty((T, d), dtype=dt)
        tmp = xp.empty_like(y)

        def run():
            xp.take(tables[0], ids[0], axis=0, out=y)
            for tab, i in zip(tables[1:], ids[1:]):
                xp.take(tab, i, axis=0, out=tmp)
                xp.add(y, tmp, out=y)
            return y

        def ref():
            return sum(t.astype(f64)[i] for t, i in zip(tables, ids))

        return Impl(f"{lib}.take (+ add per extra table)", run, ref, 1 + 2 * (len(tables) - 1), need)
    if k == "maxpool":
        x = _rand(rng, (s["N"], s["C"], s["H"], s["W"]), dt)
        p, kk, st = s["pad"], s["kernel"], s["stride"]
        xpad = xp.pad(x, ((0, 0), (0, 0), (p, p), (p, p)), constant_values=-np.inf)
        P, Q = s["P"], s["Q"]
        y = xp.empty((s["N"], s["C"], P, Q), dtype=dt)
        taps = [
            xpad[:, :, i : i + st * (P - 1) + 1 : st, j : j + st * (Q - 1) + 1 : st]
            for i in range(kk)
            for j in range(kk)
        ]

        def run():  # one maximum per tap of the window over strided views (what frameworks' CPU paths do)
            xp.copyto(y, taps[0])
            for t in taps[1:]:
                xp.maximum(y, t, out=y)
            return y

        def ref():
            return windows(xp, xpad.astype(f64), kk, kk, st, st, P, Q).max(axis=(4, 5))

        return Impl(f"{lib} max over window taps", run, ref, kk * kk, need)
    if k == "avgpool":
        x = _rand(rng, (s["N"], s["C"], s["H"], s["W"]), dt)
        y = xp.empty((s["N"], s["C"]), dtype=dt)
        return Impl(
            f"{lib}.mean", lambda: xp.mean(x, axis=(2, 3), out=y), lambda: x.astype(f64).mean(axis=(2, 3)), 1, need
        )
    raise KeyError(k)  # pragma: no cover


_MORE_ELEMENTWISE = ("scale", "sigmoid", "tanh", "relu6", "hardswish", "hardsigmoid", "silu", "mul", "sub", "div")


def _more(k, s, rng, dt, need, xp=np) -> Impl:
    """The elementwise and data-movement kinds ONNX graphs add (MobileNet, EfficientNet, exports of
    transformers): each as the ufunc sequence numpy (or cupy) runs."""
    lib = xp.__name__
    f64 = np.float64
    n = s["numel"]
    x = _rand(rng, (n,), dt, 4.0)
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


def _conv(op, rng, dt, need, xp=np) -> Impl:
    s = op["shape"]
    N, C, H, W, K, R, S = (s[x] for x in ("N", "C", "H", "W", "K", "R", "S"))
    P, Q, g = s["P"], s["Q"], s["groups"]
    sh, sw, ph, pw = s["stride_h"], s["stride_w"], s["pad_h"], s["pad_w"]
    x = _rand(rng, (N, C, H, W), dt)
    w = _rand(rng, (K, C // g, R, S), dt, 1 / np.sqrt(C // g * R * S))
    if g != 1:
        raise NotImplementedError("grouped convolution is not implemented on the numpy path")
    wm = w.reshape(K, C * R * S)
    if R == S == 1 and sh == sw == 1 and ph == pw == 0:
        xm = x.reshape(N, C, H * W)
        y = xp.empty((N, K, H * W), dtype=dt)
        w2 = w.reshape(K, C)

        def run():
            xp.matmul(w2, xm, out=y)
            return y.reshape(N, K, P, Q)

        name, disp = "1x1 conv as one GEMM (BLAS)", 1
    else:
        xpad = xp.zeros((N, C, H + 2 * ph, W + 2 * pw), dtype=dt)
        cols = xp.empty((N, P, Q, C, R, S), dtype=dt)
        y = xp.empty((N, P * Q, K), dtype=dt)

        def run():
            xpad[:, :, ph : ph + H, pw : pw + W] = x
            xp.copyto(cols, windows(xp, xpad, R, S, sh, sw, P, Q).transpose(0, 2, 3, 1, 4, 5))
            xp.matmul(cols.reshape(N, P * Q, C * R * S), wm.T, out=y)
            return y.transpose(0, 2, 1).reshape(N, K, P, Q)

        name, disp = "im2col + GEMM (BLAS)", 3

    def ref():
        xp64 = xp.pad(x.astype(np.float64), ((0, 0), (0, 0), (ph, ph), (pw, pw)))
        return xp.einsum(
            "ncpqrs,kcrs->nkpq", windows(xp, xp64, R, S, sh, sw, P, Q), w.astype(np.float64), optimize=True
        )

    return Impl(name if xp is np else name.replace("BLAS", "cuBLAS"), run, ref, disp, need)


def _own(op, rng, dt) -> Impl | None:
    """rooflab's own kernel for this op, where one exists (elementwise add = triad with s=1)."""
    if op["kind"] != "add":
        return None
    from ..registry import get_variant

    v = get_variant("cpu.stream.triad")
    a, b, c = v.inputs(op["shape"]["numel"], dt)
    return Impl(
        "rooflab cpu.stream.triad (s=1)", lambda: v(a, b, c, s=1.0), lambda: b.astype(np.float64) + c, 1, 3 * a.nbytes
    )
