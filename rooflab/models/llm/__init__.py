"""Decoder LLMs from their Hugging Face config.json: every op of a prefill and of a decode step.

A config (a file, or the name of one bundled in configs/, written from the public model cards)
is read into an ``Arch``: widths, heads (GQA/MQA: num_key_value_heads; head_dim when given, as
Gemma's 256 != 3072/16), the MLP (gated SwiGLU/GeGLU or plain, fused gate_up as Phi-3), the norm
(RMSNorm or LayerNorm), biases (GPT-2/NeoX everywhere, Qwen2 on q/k/v only), fused QKV, rotary
share (GPT-NeoX's rotary_pct), parallel residual, sliding window (caps the KV read) and MoE
(num_local_experts, num_experts_per_tok). Fields rooflab does not read are listed, never silent.

Ops of one layer, T = batch x new tokens (prefill: S each; decode: 1), KV length L (decode:
min(context, window)), hd = head_dim, nq/nkv = query/KV heads, g = nq/nkv:
  norm (T x h) -> QKV GEMM(s) (T x (nq + 2 nkv) hd, K = h) -> RoPE (T, nq + nkv heads)
  -> KV append (T x 2 nkv hd written to the cache) -> QK^T bmm (B nkv x [g S] x L x hd: each KV head
  read once for its g query heads, the KV-bytes bug of head-count formulas avoided; causal pairs in
  prefill) -> softmax (B nq S x L) -> PV bmm -> o_proj GEMM -> residual add -> norm -> MLP
  (gated: gate and up GEMMs, act, mul, down; MoE: router GEMM + softmax, each expert touched)
  -> residual add. Then the final norm and the LM head (prefill: the last token only).
MoE, k of E experts per token, B tokens: E_t = E (1 - (1 - k/E)^B) distinct experts are read in
expectation (bytes), each serving B k / E_t tokens (FLOPs of the active experts only).
Napkin: Llama-2-7B decode, batch 1, fp32: 6.74 G params x 4 B = 27 GB per token; at ~20 GB/s DRAM
that is ~0.7 tokens/s, and 13.5 GFLOP per token is nowhere near the compute roof.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from ...errors import RooflabError
from ...workloads.ops import ITEMSIZE, normalize

BUNDLED = {
    "gpt2": "gpt2.json",
    "llama-2-7b": "llama-2-7b.json",
    "llama-3-8b": "llama-3-8b.json",
    "mistral-7b": "mistral-7b.json",
    "mixtral-8x7b": "mixtral-8x7b.json",
    "qwen2-0.5b": "qwen2-0.5b.json",
    "qwen2-7b": "qwen2-7b.json",
    "gemma-7b": "gemma-7b.json",
    "phi-3-mini": "phi-3-mini.json",
    "smollm-135m": "smollm-135m.json",
    "tinyllama-1.1b": "tinyllama-1.1b.json",
    "gpt-neox-20b": "gpt-neox-20b.json",
}
ALIASES = {"gpt2-small": "gpt2", "gpt-2": "gpt2", "smollm": "smollm-135m", "tinyllama": "tinyllama-1.1b"}

# Families whose HF modelling code fixes what the config does not say.
RMS_FAMILIES = ("llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "gemma", "phi3", "smollm")
GPT2_NAMES = {"n_embd": "hidden_size", "n_layer": "num_hidden_layers", "n_head": "num_attention_heads",
              "n_positions": "max_position_embeddings", "n_inner": "intermediate_size",
              "activation_function": "hidden_act", "layer_norm_epsilon": "layer_norm_eps"}  # fmt: skip
GATED_ACTS = {"silu": "silu", "swish": "silu", "gelu": "gelu", "gelu_pytorch_tanh": "gelu", "gelu_new": "gelu"}
PLAIN_ACTS = {"gelu": "gelu", "gelu_new": "gelu", "gelu_fast": "gelu", "gelu_pytorch_tanh": "gelu", "relu": "relu",
              "silu": "silu"}  # fmt: skip
# Read by the generator, or known not to change the ops or the parameter count.
READ = {"hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
        "head_dim", "vocab_size", "tie_word_embeddings", "hidden_act", "hidden_activation", "model_type",
        "attention_bias", "mlp_bias", "max_position_embeddings", "sliding_window", "use_sliding_window",
        "num_local_experts", "num_experts_per_tok", "rotary_pct", "partial_rotary_factor",
        "use_parallel_residual", "rms_norm_eps", "layer_norm_eps", "architectures", "max_window_layers",
        *GPT2_NAMES}  # fmt: skip
IGNORED = {"_name_or_path", "bos_token_id", "eos_token_id", "pad_token_id", "initializer_range", "torch_dtype",
           "transformers_version", "use_cache", "attention_dropout", "attn_pdrop", "embd_pdrop", "resid_pdrop",
           "hidden_dropout_prob", "attention_probs_dropout_prob", "hidden_dropout", "summary_activation",
           "summary_first_dropout", "summary_proj_to_labels", "summary_type", "summary_use_proj",
           "task_specific_params", "pretraining_tp", "rope_theta", "rope_scaling", "rotary_emb_base",
           "n_ctx", "output_router_logits", "router_aux_loss_coef", "original_max_position_embeddings",
           "router_jitter_noise", "scale_attn_weights", "reorder_and_upcast_attn", "scale_attn_by_inverse_layer_idx",
           "use_bfloat16", "classifier_dropout", "model_name"}  # fmt: skip


@dataclass
class Arch:
    name: str
    model_type: str
    hidden: int
    inter: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied: bool
    act: str
    gated: bool
    norm: str  # rmsnorm | layernorm
    qkv_bias: bool
    o_bias: bool
    mlp_bias: bool
    fused_qkv: bool
    fused_gate_up: bool
    rot_dim: int  # 0: no rotary (learned positions)
    parallel_residual: bool
    window: int | None
    experts: int
    top_k: int
    max_pos: int | None
    learned_pos: int = 0  # rows of a learned position table (GPT-2)
    embed_scale: bool = False  # Gemma multiplies embeddings by sqrt(hidden)
    unknown: list[str] = field(default_factory=list)
    config: dict = field(default_factory=dict, repr=False, compare=False)  # the config.json as read


def arch_of(config) -> Arch:
    """An Arch as given, or read from a bundled name or a config.json path: a parsed config is
    passed on (the LLM command reads it once), a path still works for callers that hold one."""
    return config if isinstance(config, Arch) else load(config)


def bundled_names() -> list[str]:
    return sorted(BUNDLED)


def load_config(source: str) -> tuple[dict, str]:
    """(config dict, name): a bundled name or a config.json path. Not JSON / not an object: refused."""
    key = ALIASES.get(str(source).lower(), str(source).lower())
    if key in BUNDLED:
        text = resources.files("rooflab.models.llm").joinpath("configs", BUNDLED[key]).read_text()
        return json.loads(text), key
    path = Path(source)
    if not path.exists():
        raise RooflabError(
            f"no such config: {source}", f"give a config.json path or a bundled name: {', '.join(bundled_names())}"
        )
    if path.is_dir():
        path = path / "config.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError) as e:
        raise RooflabError(f"cannot read {path}: {e}") from None
    except json.JSONDecodeError as e:
        raise RooflabError(f"{path} is not JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    if not isinstance(data, dict):
        raise RooflabError(f"{path}: a config.json is a JSON object, not a {type(data).__name__}")
    name = str(data.get("_name_or_path") or path.parent.name or path.stem).split("/")[-1].lower()
    return data, name


def _int(cfg: dict, key: str, *, required=True, default=None, minimum=1):
    v = cfg.get(key, default)
    if v is None:
        if required:
            raise RooflabError(f"config field {key!r} is missing", f"add {key!r} (an integer) to the config.json")
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise RooflabError(f"config field {key!r} must be an integer, got {v!r}")
    if v < minimum:
        raise RooflabError(f"config field {key!r} must be at least {minimum}, got {v}")
    return v


def _bool(cfg: dict, key: str, default: bool) -> bool:
    v = cfg.get(key, default)
    if v is None:
        return default
    if not isinstance(v, bool):
        raise RooflabError(f"config field {key!r} must be true or false, got {v!r}")
    return v


def _num(cfg: dict, key: str, default: float) -> float:
    v = cfg.get(key, default)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v <= 1:
        raise RooflabError(f"config field {key!r} must be a number in (0, 1], got {v!r}")
    return float(v)


# the model_types whose blocks parse() models feature by feature (norms, gating, fused projections,
# biases, parallel residual); any other is modelled as the generic decoder and says so
MODELLED_TYPES = ("llama", "mistral", "qwen2", "qwen2_moe", "gemma", "phi3", "mixtral", "gpt2", "gpt_neox")


def generic_note(arch) -> str | None:
    """One line when ``arch``'s model_type is not one rooflab models feature by feature."""
    if arch.model_type in MODELLED_TYPES:
        return None
    return (
        f"note: {arch.name}: model_type {arch.model_type!r} is not one rooflab models feature by feature "
        f"({', '.join(MODELLED_TYPES)}): placed as a generic decoder from the common fields"
    )


def parse(cfg: dict, name: str = "model") -> Arch:
    """An Arch from a config dict; one RooflabError naming the field for a missing, mistyped or
    inconsistent value."""
    mt = cfg.get("model_type", "llama")
    if not isinstance(mt, str):
        raise RooflabError(f"config field 'model_type' must be a string, got {mt!r}")
    mt = mt.lower()
    gpt2 = mt == "gpt2" or "n_embd" in cfg
    c = dict(cfg)
    if gpt2:
        for old, new in GPT2_NAMES.items():
            if old in c:
                c.setdefault(new, c[old])
    hidden = _int(c, "hidden_size")
    layers = _int(c, "num_hidden_layers")
    heads = _int(c, "num_attention_heads")
    kv = _int(c, "num_key_value_heads", required=False, default=heads)
    vocab = _int(c, "vocab_size")
    hd = _int(c, "head_dim", required=False)
    if hd is None:
        if hidden % heads:
            raise RooflabError(
                f"config field 'num_attention_heads' ({heads}) does not divide 'hidden_size' ({hidden})",
                "give 'head_dim' or fix the head count",
            )
        hd = hidden // heads
    if heads % kv:
        raise RooflabError(f"config field 'num_key_value_heads' ({kv}) does not divide 'num_attention_heads' ({heads})")
    inter = _int(c, "intermediate_size", required=not gpt2, default=4 * hidden if gpt2 else None)
    act = c.get("hidden_activation") or c.get("hidden_act") or ("gelu_new" if gpt2 else "silu")
    if not isinstance(act, str):
        raise RooflabError(f"config field 'hidden_act' must be a string, got {act!r}")
    plain = gpt2 or mt in ("gpt_neox", "gptj", "gpt_bigcode", "opt", "falcon", "phi")
    table = PLAIN_ACTS if plain else GATED_ACTS
    if act.lower() not in table:
        raise RooflabError(f"config field 'hidden_act' {act!r} is not one rooflab knows", f"use {', '.join(table)}")
    experts = _int(c, "num_local_experts", required=False, default=1)
    top_k = _int(c, "num_experts_per_tok", required=False, default=1 if experts == 1 else 2)
    if top_k > experts:
        raise RooflabError(f"config field 'num_experts_per_tok' ({top_k}) is above 'num_local_experts' ({experts})")
    rotary = 0.0 if gpt2 else _num(c, "partial_rotary_factor", _num(c, "rotary_pct", 1.0))
    rot = int(hd * rotary) // 2 * 2
    window = None
    if c.get("use_sliding_window", True) is not False and c.get("sliding_window") is not None:
        window = _int(c, "sliding_window")
    max_pos = _int(c, "max_position_embeddings", required=False)
    biased = gpt2 or mt == "gpt_neox"
    attn_bias = _bool(c, "attention_bias", False)
    unknown = sorted(k for k in cfg if k not in READ and k not in IGNORED)
    return Arch(
        name=name, model_type=mt, hidden=hidden, inter=inter, layers=layers, heads=heads, kv_heads=kv,
        head_dim=hd, vocab=vocab, tied=_bool(c, "tie_word_embeddings", gpt2 or mt == "gemma"),
        act=table[act.lower()], gated=not plain, norm="layernorm" if plain else "rmsnorm",
        qkv_bias=biased or attn_bias or mt in ("qwen2", "qwen2_moe"), o_bias=biased or attn_bias,
        mlp_bias=biased or _bool(c, "mlp_bias", False), fused_qkv=gpt2 or mt in ("gpt_neox", "phi3"),
        fused_gate_up=mt == "phi3", rot_dim=rot, parallel_residual=mt == "gpt_neox" and _bool(c, "use_parallel_residual", True),
        window=window, experts=experts, top_k=top_k, max_pos=max_pos,
        learned_pos=(max_pos or 1024) if gpt2 else 0, embed_scale=mt == "gemma", unknown=unknown,
        config=cfg,
    )  # fmt: skip


def load(source: str) -> Arch:
    cfg, name = load_config(source)
    return parse(cfg, name)


# ---- parameter counts ------------------------------------------------------------------------------


def param_counts(a: Arch) -> dict:
    """Total and active (per token: k of E experts) parameters, from the architecture alone."""
    h, hd = a.hidden, a.head_dim
    q_out, kv_out = a.heads * hd, a.kv_heads * hd
    attn = h * (q_out + 2 * kv_out) + q_out * h
    attn += (q_out + 2 * kv_out if a.qkv_bias else 0) + (h if a.o_bias else 0)
    if a.gated:
        expert = 3 * h * a.inter + ((2 * a.inter + h) if a.mlp_bias else 0)
    else:
        expert = 2 * h * a.inter + ((a.inter + h) if a.mlp_bias else 0)
    norm = (2 if a.norm == "layernorm" else 1) * h
    router = h * a.experts if a.experts > 1 else 0
    layer_fixed = attn + router + 2 * norm
    embed = a.vocab * h + a.learned_pos * h
    head = 0 if a.tied else a.vocab * h
    total = a.layers * (layer_fixed + a.experts * expert) + embed + head + norm
    active = a.layers * (layer_fixed + a.top_k * expert) + embed + head + norm
    return {"total": total, "active": active, "embedding": embed + head}


# ---- the ops -------------------------------------------------------------------------------------


def expected_experts(E: int, k: int, tokens: int) -> float:
    """Distinct experts B tokens touch in expectation, each choosing k of E uniformly."""
    return E * (1.0 - (1.0 - k / E) ** tokens)


def _gemm(name, cls, M, N, K, bias=False, weight=True, mult=1.0):
    return {"kind": "gemm", "name": name, "cls": cls, "mult": mult,
            "shape": {"M": M, "N": N, "K": K, "bias": bias, "weight": weight}}  # fmt: skip


def _op(kind, name, cls, mult=1.0, **shape):
    return {"kind": kind, "name": name, "cls": cls, "mult": mult, "shape": shape}


def layer_ops(a: Arch, batch: int, new: int, kv_len: int, phase: str) -> list[dict]:
    """One layer's ops (each counted num_hidden_layers times)."""
    T, h, hd = batch * new, a.hidden, a.head_dim
    nq, nkv = a.heads, a.kv_heads
    g = nq // nkv
    norm = lambda n: _op(a.norm, n, "norm", rows=T, cols=h)  # noqa: E731
    ops = [norm("input_norm")]
    if a.fused_qkv:
        ops.append(_gemm("qkv_proj", "attention-proj", T, (nq + 2 * nkv) * hd, h, a.qkv_bias))
    else:
        ops.append(_gemm("q_proj", "attention-proj", T, nq * hd, h, a.qkv_bias))
        ops += [_gemm(n, "attention-proj", T, nkv * hd, h, a.qkv_bias) for n in ("k_proj", "v_proj")]
    if a.rot_dim:
        ops.append(_op("rope", "rope (q, k)", "rope", tokens=T, heads=nq + nkv, head_dim=hd, rot_dim=a.rot_dim))
    ops.append(_op("concat", "kv cache append (k, v)", "attention", numel=T * 2 * nkv * hd, inputs=1))
    causal = {"causal_q": new} if phase == "prefill" else {}
    ops.append(_op("batched_gemm", "attention QK^T", "attention", batch=batch * nkv, M=g * new, N=kv_len, K=hd,
                   **causal))  # fmt: skip
    ops.append(_op("softmax", "attention softmax", "attention", rows=batch * nq * new, cols=kv_len))
    ops.append(_op("batched_gemm", "attention PV", "attention", batch=batch * nkv, M=g * new, N=hd, K=kv_len,
                   **({"causal_q": new, "causal_keys_k": True} if causal else {})))  # fmt: skip
    ops.append(_gemm("o_proj", "attention-proj", T, h, nq * hd, a.o_bias))
    if not a.parallel_residual:
        ops.append(_op("add", "residual add (attention)", "residual", numel=T * h))
    ops.append(norm("post_attention_norm"))
    ops += _mlp(a, T)
    ops.append(_op("add", "residual add (mlp)", "residual", numel=T * h))
    if a.parallel_residual:  # x + attn(ln1 x) + mlp(ln2 x): the second add of the three-way sum
        ops.append(_op("add", "residual add (attention)", "residual", numel=T * h))
    return ops


def _mlp(a: Arch, T: int) -> list[dict]:
    h = a.hidden
    if a.experts == 1:
        return _ffn(a, T, 1.0, "")
    E, k = a.experts, a.top_k
    touched = expected_experts(E, k, T)
    per = max(1, round(T * k / touched))
    ops = [_gemm("router", "moe-router", T, E, h), _op("softmax", "router softmax", "moe-router", rows=T, cols=E)]
    experts = _ffn(a, per, touched, "expert ")
    for o in experts:  # executed at a whole number of tokens per expert; FLOPs are the B k tokens'
        o["flop_scale"] = T * k / (per * touched)
    return ops + experts


def _ffn(a: Arch, T: int, mult: float, p: str) -> list[dict]:
    h, I, b = a.hidden, a.inter, a.mlp_bias
    if not a.gated:
        return [_gemm(f"{p}fc_in", "mlp", T, I, h, b, mult=mult), _op(a.act, f"{p}{a.act}", "mlp", mult, numel=T * I),
                _gemm(f"{p}fc_out", "mlp", T, h, I, b, mult=mult)]  # fmt: skip
    if a.fused_gate_up:
        up = [_gemm(f"{p}gate_up_proj", "mlp", T, 2 * I, h, b, mult=mult)]
    else:
        up = [_gemm(f"{p}{n}", "mlp", T, I, h, b, mult=mult) for n in ("gate_proj", "up_proj")]
    return up + [
        _op(a.act, f"{p}{a.act} (gate)", "mlp", mult, numel=T * I),
        _op("mul", f"{p}gate * up", "mlp", mult, numel=T * I),
        _gemm(f"{p}down_proj", "mlp", T, h, I, b, mult=mult),
    ]


def phase_ops(a: Arch, phase: str, batch: int = 1, prompt: int = 128, context: int = 1024,
              dtype: str = "float32", weights: int | None = None) -> list[dict]:  # fmt: skip
    """Every op of a prefill of ``prompt`` tokens or of one decode step at KV length ``context``
    (the new token included), normalized; each carries count (occurrences), mult (expected MoE
    experts, else 1) and cls (time-share class). ``weights`` (4 or 8): every linear layer's weights
    quantized (quantize_weights)."""
    if phase == "prefill":
        new, kv = prompt, prompt
    else:
        new, kv = 1, min(context, a.window) if a.window else context
    T = batch * new
    ops = [_op("embedding", "embed_tokens", "embedding", tokens=T, dim=a.hidden, vocab=a.vocab,
               tables=2 if a.learned_pos else 1)]  # fmt: skip
    if a.embed_scale:
        ops.append(_op("scale", "embedding * sqrt(hidden)", "embedding", numel=T * a.hidden))
    per_layer = layer_ops(a, batch, new, kv, phase)
    for o in per_layer:
        o["count"] = a.layers
    ops += per_layer
    ops.append(_op(a.norm, "final_norm", "norm", rows=T, cols=a.hidden))
    ops.append(_gemm("lm_head" + (" (tied)" if a.tied else ""), "lm-head", batch, a.vocab, a.hidden))
    if weights:
        ops = quantize_weights(ops, weights)
    model = f"{a.name}-{phase}-b{batch}-" + (f"s{prompt}" if phase == "prefill" else f"l{context}")
    model += f"-w{weights}" if weights else ""
    out = []
    for o in ops:
        extra = {"cls": o.pop("cls"), "mult": o.pop("mult"), "flop_scale": o.pop("flop_scale", 1.0)}
        n = normalize(dict(o, dtype=dtype))
        out.append(n | extra | {"model": model, "phase": phase})
    return out


WEIGHTS = {"fp32": None, "float32": None, "int8": 8, "int4": 4}


def weights_bits(text: str | None) -> int | None:
    """--weights: None (fp32), 8 or 4; anything else is one line naming the choices."""
    key = (text or "fp32").lower()
    if key not in WEIGHTS:
        raise RooflabError(f"--weights {text!r} is not a storage rooflab models", "use fp32, int8 or int4")
    return WEIGHTS[key]


def quantize_weights(ops: list[dict], bits: int) -> list[dict]:
    """Every linear layer (a GEMM with weights) as a weight-only quantized GEMM (``qgemm_nbits``:
    block 32, symmetric, fp32 scales, fp32 activations; rooflab/families/qgemm.py), its bias as a
    separate add, as onnxruntime's MatMulNBits quantizer leaves it. A tied LM head reads the
    embedding table, which a Gather shares: it stays fp32 (that quantizer leaves it too)."""
    out = []
    for o in ops:
        s = o["shape"]
        if o["kind"] != "gemm" or not s.get("weight", True) or o["name"].endswith("(tied)"):
            out.append(o)
            continue
        q = dict(o, kind="qgemm_nbits", shape={"M": s["M"], "N": s["N"], "K": s["K"], "bits": bits})
        out.append(q)
        if s.get("bias"):
            out.append(
                _op("add", f"{o['name']} bias", o["cls"], o["mult"], numel=s["M"] * s["N"], broadcast_numel=s["N"])
            )
    return out


def fold(ops_list: list[dict]) -> list[dict]:
    """Identical (kind, shape, dtype, mult) ops as one with the summed count: what is measured."""
    out: dict[tuple, dict] = {}
    for o in ops_list:
        key = (o["kind"], o["dtype"], o["mult"], o["phase"], tuple(sorted(o["shape"].items())))
        if key in out:
            out[key]["count"] += o["count"]
            out[key]["names"].append(o["name"])
        else:
            out[key] = dict(o, names=[o["name"]])
    for o in out.values():
        if len(o["names"]) > 1:
            o["name"] = " + ".join(o["names"])
    return list(out.values())


def totals(ops_list: list[dict], itemsize: int | None = None) -> dict:
    """FLOPs and minimum bytes of a whole phase (each op x count x mult), at the ops' dtype or at
    ``itemsize`` bytes per element (int64 token ids excepted)."""
    from ...workloads import ops as O

    F = B = W = WB = 0.0
    for o in ops_list:
        n = o["count"] * o["mult"]
        b = O.min_bytes(o)
        if itemsize:
            ids = 8 * o["shape"]["tokens"] if o["kind"] == "embedding" else 0
            b = ids + (b - ids) * itemsize / ITEMSIZE[o["dtype"]]
        F += O.flops(o) * n * o.get("flop_scale", 1.0)
        B += b * n
        if o["kind"] in ("gemm", *O.QGEMM) and o["shape"].get("weight", True):
            W += o["shape"]["K"] * o["shape"]["N"] * n
            WB += O.weight_bytes(o) * n
    return {"flops": F, "bytes": B, "weight_elems": W, "weight_bytes": WB}


def kv_cache_bytes(a: Arch, batch: int, context: int, itemsize: int) -> int:
    L = min(context, a.window) if a.window else context
    return a.layers * 2 * a.kv_heads * a.head_dim * L * batch * itemsize


def dtype_name(d: str) -> str:
    from ...workloads.ops import DTYPE_ALIASES

    name = DTYPE_ALIASES.get(d, d)
    if name not in ITEMSIZE or name == "int8":  # 8-bit weights: --weights int8
        raise RooflabError(
            f"--dtype {d!r} is not one rooflab knows for activations",
            "use float32, float16, bfloat16 or float64 (quantized weights: --weights int8|int4)",
        )
    return name


def describe(a: Arch) -> str:
    bits = [f"{a.layers} layers", f"hidden {a.hidden}", f"{a.heads} heads x {a.head_dim}"]
    if a.kv_heads != a.heads:
        bits.append(f"{a.kv_heads} KV heads ({'MQA' if a.kv_heads == 1 else 'GQA'})")
    bits.append(f"{'gated ' if a.gated else ''}{a.act} MLP {a.inter}")
    if a.experts > 1:
        bits.append(f"MoE {a.top_k} of {a.experts}")
    bits.append(a.norm)
    if a.rot_dim and a.rot_dim != a.head_dim:
        bits.append(f"rotary on {a.rot_dim} of {a.head_dim}")
    if a.window:
        bits.append(f"sliding window {a.window}")
    if a.parallel_residual:
        bits.append("parallel residual")
    if a.tied:
        bits.append("tied LM head")
    return ", ".join(bits)
