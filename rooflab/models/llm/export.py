"""Llama-family decoders (llama, mistral, qwen2; SmolLM, TinyLlama) as ONNX graphs with random
weights: `rooflab export CONFIG -o MODEL.onnx [--seq S | --cache L] [--batch B]`.

The graph is the one rooflab.models.llm predicts, node for node, as a PyTorch export writes it:
  Gather (embed) -> per layer: RMSNorm (Mul x x, ReduceMean, Add eps, Sqrt, Div, Mul w);
  q/k/v MatMul (+ Add bias: Qwen2); Reshape/Transpose to heads; RoPE (Slice, Neg, Concat, Mul, Mul,
  Add) on q and k; the KV cache in and out (decode: inputs past_key_i/past_value_i of L - 1
  positions, Concat with the new k, v -> outputs present_*; prefill: present_* = the new k, v);
  GQA as the g query heads of a KV head stacked on the rows (Reshape, no repeat_kv copy of the
  cache); MatMul q K^T, Mul 1/sqrt(hd), Add causal mask (prefill), Softmax, MatMul V, back to
  tokens, o_proj MatMul, residual Add; RMSNorm; gate and up MatMul, SiLU (Sigmoid, Mul), Mul,
  down MatMul, Add; final RMSNorm; LM head on the last token (Gemm against the embedding when tied).
Weights are a fixed pool of N(0, 0.02) numbers tiled over each tensor and written as ONNX external
data next to the model (MODEL.onnx.data), streamed: Qwen2-0.5B's 2 GB of fp32 never sits in memory
twice, and the 2 GB protobuf limit does not apply.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np

from ...errors import RooflabError
from .. import llm
from ..export import _POOL, _Graph

FAMILIES = ("llama", "mistral", "qwen2")


def exportable(name: str) -> bool:
    """A bundled LLM name or a config.json path (what `rooflab export` hands here)."""
    key = llm.ALIASES.get(str(name).lower(), str(name).lower())
    return key in llm.BUNDLED or Path(name).suffix == ".json" or (Path(name) / "config.json").exists()


def check(arch: llm.Arch, batch: int, seq: int | None, cache: int | None) -> None:
    if arch.model_type not in FAMILIES or arch.experts > 1 or not arch.gated or arch.rot_dim != arch.head_dim:
        raise RooflabError(
            f"{arch.name} ({arch.model_type}) is not a dense Llama-family model",
            f"ONNX export covers {', '.join(FAMILIES)} configs (full RoPE, gated MLP, no MoE)",
        )
    if seq is not None and cache is not None:
        raise RooflabError("give --seq (a prefill) or --cache (a decode step), not both")
    for what, v in (("--batch", batch), ("--seq", seq), ("--cache", cache)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise RooflabError(f"{what} must be a positive integer, got {v!r}")
    if cache is not None and cache < 2:
        raise RooflabError("--cache must be at least 2 (the new token and one past position)")


class _ExternalGraph(_Graph):
    """Initializers as external data, written to ``data_path`` as they are made."""

    def __init__(self, data_path: Path):
        super().__init__()
        self.data_path = data_path
        self.f = open(data_path, "wb")  # noqa: SIM115 - closed by close()

    def weight(self, name: str, shape, positive: bool = False) -> str:
        n = math.prod(shape)
        start = self._offset % _POOL.size
        self._offset += 7919
        pool = np.roll(_POOL, -start)
        if positive:
            pool = 1.0 + np.abs(pool)
        offset = self.f.tell()
        left = n
        while left:
            k = min(left, pool.size)
            self.f.write(pool[:k].tobytes())
            left -= k
        t = self.onnx.TensorProto()
        t.name, t.data_type = name, self.TP.FLOAT
        t.dims.extend(int(d) for d in shape)
        t.data_location = self.TP.EXTERNAL
        for k, v in (("location", self.data_path.name), ("offset", str(offset)), ("length", str(4 * n))):
            e = t.external_data.add()
            e.key, e.value = k, v
        self.inits.append(t)
        return name

    def close(self):
        self.f.close()


def _rms(g: _Graph, x: str, name: str, h: int, eps: float) -> str:
    sq = g.node("Mul", [x, x], f"{name}/square")
    m = g.node("ReduceMean", [sq], f"{name}/mean", axes=[-1], keepdims=1)
    m = g.node("Add", [m, g.const(eps)], f"{name}/add_eps")
    m = g.node("Sqrt", [m], f"{name}/sqrt")
    y = g.node("Div", [x, m], f"{name}/div")
    return g.node("Mul", [y, g.weight(f"{name}.weight", [h], positive=True)], name)


def _rope(g: _Graph, x: str, name: str, cos: str, sin: str, hd: int) -> str:
    h = hd // 2
    x1 = g.node("Slice", [x, g.const([0], np.int64), g.const([h], np.int64), g.const([3], np.int64)], f"{name}/x1")
    x2 = g.node("Slice", [x, g.const([h], np.int64), g.const([hd], np.int64), g.const([3], np.int64)], f"{name}/x2")
    rot = g.node("Concat", [g.node("Neg", [x2], f"{name}/neg"), x1], f"{name}/rotate_half", axis=3)
    a = g.node("Mul", [x, cos], f"{name}/mul_cos")
    b = g.node("Mul", [rot, sin], f"{name}/mul_sin")
    return g.node("Add", [a, b], name)


def _linear(g: _Graph, x: str, name: str, k: int, n: int, bias: bool) -> str:
    y = g.node("MatMul", [x, g.weight(f"{name}.weight", [k, n])], name)
    if bias:
        y = g.node("Add", [y, g.weight(f"{name}.bias", [n])], f"{name}.bias_add")
    return y


def build(arch: llm.Arch, path: Path, batch: int = 1, seq: int | None = None, cache: int | None = None):
    """The ModelProto (weights written to ``path``.data)."""
    check(arch, batch, seq, cache)
    decode = cache is not None
    B, T = batch, 1 if decode else (seq or 128)
    P = cache - 1 if decode else 0
    L = P + T
    h, hd, nq, nkv, V = arch.hidden, arch.head_dim, arch.heads, arch.kv_heads, arch.vocab
    gq = nq // nkv
    eps = 1e-6
    g = _ExternalGraph(Path(str(path) + ".data"))
    TP = g.TP
    try:
        ids = g.input("input_ids", [B, T], TP.INT64)
        embed = g.weight("embed_tokens.weight", [V, h])
        x = g.node("Gather", [embed, ids], "embed_tokens")
        pos = np.arange(P, L, dtype=np.float64)
        inv = 1.0 / (10000.0 ** (np.arange(0, hd, 2) / hd))
        ang = np.concatenate([np.outer(pos, inv)] * 2, axis=1)  # HF duplicates the halves
        cos, sin = g.const(np.cos(ang).reshape(1, 1, T, hd)), g.const(np.sin(ang).reshape(1, 1, T, hd))
        mask = None
        if not decode:
            q_pos = np.tile(np.arange(T), gq)  # the g heads of a KV head stacked on the rows
            m = np.where(np.arange(L)[None, :] > q_pos[:, None], -1e9, 0.0)
            mask = g.const(m.astype(np.float32))
        for i in range(arch.layers):
            p = f"layers.{i}"
            hN = _rms(g, x, f"{p}.input_layernorm", h, eps)
            q = _linear(g, hN, f"{p}.q_proj", h, nq * hd, arch.qkv_bias)
            k = _linear(g, hN, f"{p}.k_proj", h, nkv * hd, arch.qkv_bias)
            v = _linear(g, hN, f"{p}.v_proj", h, nkv * hd, arch.qkv_bias)
            q = g.heads(q, f"{p}.q", B, T, nq, hd, (0, 2, 1, 3))
            k = g.heads(k, f"{p}.k", B, T, nkv, hd, (0, 2, 1, 3))
            v = g.heads(v, f"{p}.v", B, T, nkv, hd, (0, 2, 1, 3))
            q = _rope(g, q, f"{p}.rope_q", cos, sin, hd)
            k = _rope(g, k, f"{p}.rope_k", cos, sin, hd)
            if decode:
                pk = g.input(f"past_key_{i}", [B, nkv, P, hd])
                pv = g.input(f"past_value_{i}", [B, nkv, P, hd])
                k = g.node("Concat", [pk, k], f"present_key_{i}", axis=2)
                v = g.node("Concat", [pv, v], f"present_value_{i}", axis=2)
            else:
                k = g.node("Identity", [k], f"present_key_{i}")
                v = g.node("Identity", [v], f"present_value_{i}")
            g.output(k)
            g.output(v)
            qs = g.node("Reshape", [q, g.const([B, nkv, gq * T, hd], np.int64)], f"{p}.q_gqa")
            kt = g.node("Transpose", [k], f"{p}.k_t", perm=[0, 1, 3, 2])
            s = g.node("MatMul", [qs, kt], f"{p}.attention_qk")
            s = g.node("Mul", [s, g.const(1.0 / math.sqrt(hd))], f"{p}.attention_scale")
            if mask is not None:
                s = g.node("Add", [s, mask], f"{p}.attention_mask")
            s = g.node("Softmax", [s], f"{p}.attention_softmax", axis=-1)
            c = g.node("MatMul", [s, v], f"{p}.attention_pv")
            c = g.node("Reshape", [c, g.const([B, nq, T, hd], np.int64)], f"{p}.context_heads")
            c = g.merge(c, f"{p}.context", B, T, nq * hd)
            a = _linear(g, c, f"{p}.o_proj", nq * hd, h, arch.o_bias)
            x = g.node("Add", [x, a], f"{p}.residual_attention")
            hN = _rms(g, x, f"{p}.post_attention_layernorm", h, eps)
            gate = _linear(g, hN, f"{p}.gate_proj", h, arch.inter, False)
            up = _linear(g, hN, f"{p}.up_proj", h, arch.inter, False)
            act = g.node("Mul", [gate, g.node("Sigmoid", [gate], f"{p}.sigmoid")], f"{p}.silu")
            f = g.node("Mul", [act, up], f"{p}.gate_up")
            f = _linear(g, f, f"{p}.down_proj", arch.inter, h, False)
            x = g.node("Add", [x, f], f"{p}.residual_mlp")
        x = _rms(g, x, "norm", h, eps)
        last = g.node("Gather", [x, g.const(T - 1, np.int64)], "last_token", axis=1)  # [B, h]
        if arch.tied:
            logits = g.node("Gemm", [last, embed], "lm_head", transB=1)
        else:
            logits = g.node("MatMul", [last, g.weight("lm_head.weight", [h, V])], "lm_head")
        g.outputs.insert(0, g.helper.make_tensor_value_info(logits, TP.FLOAT, [B, V]))
    finally:
        g.close()
    what = f"decode step, KV cache {cache}" if decode else f"prefill of {T} tokens"
    return g.model(
        f"{arch.name}-{'decode' if decode else 'prefill'}", f"{arch.name} {what}, batch {B} (random weights)"
    )


def export(config, path, batch: int | None = None, seq: int | None = None, cache: int | None = None) -> Path:
    """Write MODEL.onnx and MODEL.onnx.data whole, or neither."""
    import onnx

    arch = llm.arch_of(config)  # an Arch, a bundled name or a config.json
    check(arch, batch or 1, seq, cache)
    path = Path(path)
    if path.suffix.lower() != ".onnx":
        raise RooflabError(f"{path}: the output must be an .onnx file", f"use -o {path.with_suffix('.onnx').name}")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        model = build(arch, tmp, batch or 1, seq, cache)
        for t in model.graph.initializer:  # point the external data at its final name
            for e in t.external_data:
                if e.key == "location":
                    e.value = path.name + ".data"
        onnx.save(model, str(tmp))
        os.replace(str(tmp) + ".data", str(path) + ".data")
        os.replace(tmp, path)
    finally:
        for f in (tmp, Path(str(tmp) + ".data")):
            if f.exists():
                f.unlink()
    return path
