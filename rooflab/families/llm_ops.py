"""Family `llm`: the two op kinds decoder LLMs add to the catalog's, RMSNorm and rotary position
embedding (RoPE), as the framework runs them. Variant 0 of each is the array-library path
(numpy on the CPU, cupy on the GPU), written as Hugging Face's LlamaRMSNorm and apply_rotary_pos_emb
are: one ufunc per step, each a pass over memory. Variant 1 on the CPU is rooflab's own fused
kernel (kernels/cpu/llm_ops.py: one pass, one call), so placement has a library and an own figure
for these ops as for every other op kind.

Napkin math: Llama-2-7B decode at batch 1 normalizes one 4096-wide row (16 KB fp32, 16 K FLOP):
dispatch-bound (~6 calls); its RoPE turns 32 + 32 heads of 128 (32 KB): ~3 FLOP per element,
memory- or dispatch-bound. At a 128-token prefill both are 2 MB streams, memory-bound.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..registry import Variant, register
from ..threads import resolve_threads
from ..work import Work
from ._xp import XP_NAME, rand, xp_for

EPS = 1e-6


def _xp_of(a):
    return xp_for("cuda" if type(a).__module__.startswith("cupy") else "cpu")


# ---- RMSNorm: y = x / sqrt(mean(x^2) + eps) * w ---------------------------------------------------


def _rms_inputs(device):
    def inputs(shape, dtype=np.float32, seed=0, threads=None):
        xp = xp_for(device)
        rng = xp.random.default_rng(seed)
        rows, cols = shape["rows"], shape["cols"]
        x, w = rand(xp, rng, (rows, cols), dtype), 1.0 + 0.1 * rand(xp, rng, (cols,), dtype)
        return x, w.astype(dtype), xp.empty((rows, cols), dtype), xp.empty((rows, cols), dtype)

    return inputs


def _rmsnorm(x, w, y, tmp, reps=1, threads=None, eps=EPS):
    xp = _xp_of(x)
    for _ in range(int(reps)):
        xp.square(x, out=tmp)
        r = xp.mean(tmp, axis=-1, keepdims=True)
        r += eps
        xp.sqrt(r, out=r)
        xp.divide(x, r, out=y)
        xp.multiply(y, w, out=y)
    return y


def _rms_reference(x, w, y, tmp, eps=EPS, **_):
    x64 = np.asarray(x.get() if hasattr(x, "get") else x, np.float64)
    w64 = np.asarray(w.get() if hasattr(w, "get") else w, np.float64)
    return x64 / np.sqrt((x64 * x64).mean(-1, keepdims=True) + eps) * w64


def _rms_work(x, w, y, tmp, reps=1, **_):
    return Work(
        flops=4.0 * x.size * reps,
        bytes_read=(x.nbytes + w.nbytes) * reps,
        bytes_written=y.nbytes * reps,
        launches=6 * int(reps),
    )


# ---- RoPE: y[..., :r] = x * cos + rotate_half(x) * sin; the rest of each head passes through -----


def _rope_inputs(device):
    def inputs(shape, dtype=np.float32, seed=0, threads=None):
        xp = xp_for(device)
        rng = xp.random.default_rng(seed)
        T, H, D, R = shape["tokens"], shape["heads"], shape["head_dim"], shape.get("rot_dim", shape["head_dim"])
        x = rand(xp, rng, (T, H, D), dtype)
        angle = xp.arange(T, dtype=np.float64)[:, None] / 10000.0 ** (xp.arange(R // 2) * 2.0 / R)[None, :]
        cos, sin = xp.cos(angle).astype(dtype), xp.sin(angle).astype(dtype)
        return x, cos, sin, xp.empty_like(x), xp.empty((T, H, R // 2), dtype)

    return inputs


def _rope(x, cos, sin, y, tmp, reps=1, threads=None):
    xp = _xp_of(x)
    h = cos.shape[1]
    c, s = cos[:, None, :], sin[:, None, :]
    x1, x2 = x[..., :h], x[..., h : 2 * h]
    for _ in range(int(reps)):
        xp.multiply(x1, c, out=y[..., :h])
        xp.multiply(x2, s, out=tmp)
        xp.subtract(y[..., :h], tmp, out=y[..., :h])
        xp.multiply(x2, c, out=y[..., h : 2 * h])
        xp.multiply(x1, s, out=tmp)
        xp.add(y[..., h : 2 * h], tmp, out=y[..., h : 2 * h])
        if 2 * h < x.shape[-1]:
            y[..., 2 * h :] = x[..., 2 * h :]
    return y


def _rope_reference(x, cos, sin, y, tmp, **_):
    get = lambda a: np.asarray(a.get() if hasattr(a, "get") else a, np.float64)  # noqa: E731
    x64, c, s = get(x), get(cos)[:, None, :], get(sin)[:, None, :]
    h = c.shape[-1]
    out = x64.copy()
    out[..., :h] = x64[..., :h] * c - x64[..., h : 2 * h] * s
    out[..., h : 2 * h] = x64[..., h : 2 * h] * c + x64[..., :h] * s
    return out


def _rope_work(x, cos, sin, y, tmp, reps=1, **_):
    T, H, _ = x.shape
    R = 2 * cos.shape[1]
    return Work(
        flops=3.0 * T * H * R * reps,
        bytes_read=(x.nbytes + cos.nbytes + sin.nbytes) * reps,
        bytes_written=y.nbytes * reps,
        launches=(6 + (R < x.shape[-1])) * int(reps),
    )


def _rmsnorm_fused(x, w, y, tmp, reps=1, threads=None, eps=EPS):
    from ..kernels.cpu import llm_ops as k

    for _ in range(int(reps)):
        k.rmsnorm_rows(x, w, y, x.dtype.type(eps), resolve_threads(threads))
    return y


def _rope_fused(x, cos, sin, y, tmp, reps=1, threads=None):
    from ..kernels.cpu import llm_ops as k

    for _ in range(int(reps)):
        k.rope_heads(x, cos, sin, y, resolve_threads(threads))
    return y


def _one_call(work):
    """The fused kernel's work: the same FLOPs and bytes, one launch per call."""
    return lambda *a, reps=1, **k: replace(work(*a, reps=reps, **k), launches=int(reps))


for device in ("cpu", "cuda"):
    lib = XP_NAME[device]
    register(
        Variant(
            name=f"{device}.llm.rmsnorm.00-{lib}",
            family="llm",
            device=device,
            number=0,
            op="rmsnorm",
            description=f"{lib}: square, mean, +eps, sqrt, divide, *weight (HF LlamaRMSNorm, 6 passes)",
            kernel=_rmsnorm,
            reference=_rms_reference,
            work=_rms_work,
            inputs=_rms_inputs(device),
            result_dtype=lambda x, *_, **__: x.dtype,
            dtypes=("float32", "float64"),
        )
    )
    register(
        Variant(
            name=f"{device}.llm.rope.00-{lib}",
            family="llm",
            device=device,
            number=0,
            op="rope",
            description=f"{lib}: x*cos, rotate_half(x)*sin, add (HF apply_rotary_pos_emb, 6 passes)",
            kernel=_rope,
            reference=_rope_reference,
            work=_rope_work,
            inputs=_rope_inputs(device),
            result_dtype=lambda x, *_, **__: x.dtype,
            dtypes=("float32", "float64"),
        )
    )

register(
    Variant(
        name="cpu.llm.rmsnorm.01-numba-fused",
        family="llm",
        device="cpu",
        number=1,
        op="rmsnorm",
        description="numba: per row, sum of squares then scale by 1/rms and the weight (1 pass, 1 call)",
        kernel=_rmsnorm_fused,
        reference=_rms_reference,
        work=_one_call(_rms_work),
        inputs=_rms_inputs("cpu"),
        result_dtype=lambda x, *_, **__: x.dtype,
        dtypes=("float32", "float64"),
    )
)
register(
    Variant(
        name="cpu.llm.rope.01-numba-fused",
        family="llm",
        device="cpu",
        number=1,
        op="rope",
        description="numba: per (token, head) both rotated halves and the pass-through tail (1 pass, 1 call)",
        kernel=_rope_fused,
        reference=_rope_reference,
        work=_one_call(_rope_work),
        inputs=_rope_inputs("cpu"),
        result_dtype=lambda x, *_, **__: x.dtype,
        dtypes=("float32", "float64"),
    )
)
