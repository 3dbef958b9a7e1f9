"""LLM op generator: published parameter counts, FLOPs and bytes of each op kind by hand on a tiny
config, MoE expectation, and refusals of bad config.json files."""

from __future__ import annotations

import json

import pytest

from rooflab.errors import RooflabError
from rooflab.models import llm

# The published figures (model cards / HF `num_parameters()`); total, active.
from rooflab.workloads import ops

# The published figures (model cards / HF `num_parameters()`); total, active.
PUBLISHED = {
    "gpt2": (124_439_808, 124_439_808),
    "llama-2-7b": (6_738_415_616, 6_738_415_616),
    "llama-3-8b": (8_030_261_248, 8_030_261_248),
    "mistral-7b": (7_241_732_096, 7_241_732_096),
    "mixtral-8x7b": (46_702_792_704, 12_879_925_248),
    "qwen2-0.5b": (494_032_768, 494_032_768),
    "qwen2-7b": (7_615_616_512, 7_615_616_512),
    "gemma-7b": (8_537_680_896, 8_537_680_896),
    "phi-3-mini": (3_821_079_552, 3_821_079_552),
    "smollm-135m": (134_515_008, 134_515_008),
    "tinyllama-1.1b": (1_100_048_384, 1_100_048_384),
    "gpt-neox-20b": (20_554_567_680, 20_554_567_680),
}

TINY = {
    "model_type": "llama", "hidden_size": 8, "intermediate_size": 12, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 10, "tie_word_embeddings": False,
}  # fmt: skip


def test_every_bundled_config_is_pinned():
    assert set(PUBLISHED) == set(llm.bundled_names())


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_param_counts_match_the_published_figures(name):
    a = llm.load(name)
    p = llm.param_counts(a)
    assert (p["total"], p["active"]) == PUBLISHED[name]
    assert a.unknown == []


@pytest.mark.parametrize("name", sorted(set(PUBLISHED) - {"mixtral-8x7b"}))
def test_ops_own_exactly_the_parameters(name):
    """The ops of a decode step, weighted by count, hold every parameter once (dense models)."""
    a = llm.load(name)
    got = 0
    for o in llm.phase_ops(a, "decode", context=16):
        n = ops.params(o) * o["count"]
        if o["kind"] == "gemm" and a.tied and o["name"].startswith("lm_head"):
            n = 0  # tied: the embedding table holds it
        if o["kind"] == "embedding" and a.learned_pos:
            n += a.learned_pos * a.hidden
        got += n
    assert got == llm.param_counts(a)["total"]


def test_config_file_counts_like_the_bundled_one(tmp_path):
    cfg, _ = llm.load_config("qwen2-0.5b")
    f = tmp_path / "config.json"
    f.write_text(json.dumps(cfg))
    assert llm.param_counts(llm.load(str(f)))["total"] == 494_032_768
    assert llm.param_counts(llm.load(str(tmp_path)))["total"] == 494_032_768  # a directory holding it


def _by_name(ops_list):
    return {o["name"]: o for o in ops_list}


def test_tiny_decode_flops_and_bytes_by_hand():
    """h=8, 4 heads of 2, 2 KV heads (g=2), I=12, context 5, batch 3, fp32."""
    a = llm.parse(TINY, "tiny")
    d = _by_name(llm.phase_ops(a, "decode", batch=3, context=5))
    q = d["q_proj"]
    assert ops.flops(q) == 2 * 3 * 8 * 8 and ops.min_bytes(q) == 4 * (3 * 8 + 8 * 8 + 3 * 8)
    k = d["k_proj"]
    assert (k["shape"]["N"], ops.flops(k)) == (4, 2 * 3 * 4 * 8)
    s = d["attention QK^T"]  # batch x KV heads, the g query heads stacked on M: K read once per KV head
    assert (s["shape"]["batch"], s["shape"]["M"], s["shape"]["N"], s["shape"]["K"]) == (6, 2, 5, 2)
    assert ops.flops(s) == 2 * 3 * 4 * 5 * 2
    assert ops.min_bytes(s) == 4 * 6 * (2 * 2 + 2 * 5 + 2 * 5)
    pv = d["attention PV"]
    assert ops.flops(pv) == ops.flops(s) and pv["shape"]["K"] == 5
    assert d["attention softmax"]["shape"] == {"rows": 12, "cols": 5}
    kv = d["kv cache append (k, v)"]
    assert ops.min_bytes(kv) == 4 * 2 * (3 * 2 * 2 * 2)
    r = d["rope (q, k)"]
    assert ops.flops(r) == 3 * 3 * 6 * 2 and ops.min_bytes(r) == 4 * (2 * 3 * 6 * 2 + 3 * 2)
    n = d["input_norm"]
    assert n["kind"] == "rmsnorm" and ops.flops(n) == 4 * 3 * 8 and ops.min_bytes(n) == 4 * (2 * 24 + 8)
    assert n["count"] == 2
    assert ops.flops(d["gate_proj"]) == 2 * 3 * 12 * 8 and d["up_proj"]["shape"] == d["gate_proj"]["shape"]
    assert d["silu (gate)"]["shape"]["numel"] == 36 and d["gate * up"]["shape"]["numel"] == 36
    assert d["lm_head"]["shape"] == {"M": 3, "N": 10, "K": 8, "bias": False, "weight": True, "batch": 1}
    assert d["embed_tokens"]["shape"]["tokens"] == 3


def test_tiny_prefill_is_causal_and_lm_head_takes_the_last_token():
    a = llm.parse(TINY, "tiny")
    d = _by_name(llm.phase_ops(a, "prefill", batch=2, prompt=4))
    s = d["attention QK^T"]
    assert (s["shape"]["M"], s["shape"]["N"]) == (2 * 4, 4)
    # each of 4 positions sees 1..4 keys: 10 of 16 pairs, per batch x KV head x g query heads x hd
    assert ops.flops(s) == 2 * (2 * 2) * 2 * 10 * 2
    assert ops.flops(d["attention PV"]) == ops.flops(s)
    assert d["lm_head"]["shape"]["M"] == 2
    assert d["q_proj"]["shape"]["M"] == 8


def test_sliding_window_caps_the_kv_read():
    a = llm.parse(dict(TINY, sliding_window=3), "tiny")
    d = _by_name(llm.phase_ops(a, "decode", context=100))
    assert d["attention QK^T"]["shape"]["N"] == 3


def test_moe_reads_the_expected_distinct_experts():
    assert llm.expected_experts(8, 2, 1) == pytest.approx(2.0)
    assert llm.expected_experts(8, 2, 4) == pytest.approx(8 * (1 - 0.75**4))
    a = llm.load("mixtral-8x7b")
    for B in (1, 4, 64):
        ol = llm.phase_ops(a, "decode", batch=B, context=16)
        down = _by_name(ol)["expert down_proj"]
        assert down["mult"] == pytest.approx(llm.expected_experts(8, 2, B))
        t = llm.totals([down])
        assert t["flops"] == pytest.approx(2 * B * 2 * 14336 * 4096 * 32)  # active FLOPs: B tokens x k experts
        assert t["weight_elems"] == pytest.approx(down["mult"] * 14336 * 4096 * 32)


def test_gqa_gemma_head_dim_fused_and_biases():
    g = _by_name(llm.phase_ops(llm.load("gemma-7b"), "decode", context=8))
    assert g["q_proj"]["shape"]["N"] == 16 * 256  # head_dim 256, not 3072 / 16
    assert "embedding * sqrt(hidden)" in g
    p = _by_name(llm.phase_ops(llm.load("phi-3-mini"), "decode", context=8))
    assert p["qkv_proj"]["shape"]["N"] == 3 * 3072 and p["gate_up_proj"]["shape"]["N"] == 2 * 8192
    q = _by_name(llm.phase_ops(llm.load("qwen2-0.5b"), "decode", context=8))
    assert q["q_proj"]["shape"]["bias"] and not q["o_proj"]["shape"]["bias"]
    n = llm.phase_ops(llm.load("gpt-neox-20b"), "decode", context=8)
    nd = _by_name(n)
    assert nd["rope (q, k)"]["shape"]["rot_dim"] == 24 and nd["input_norm"]["kind"] == "layernorm"
    assert sum(o["kind"] == "add" for o in n) == 2  # parallel residual: still two adds per layer


def test_fold_sums_counts_and_keeps_totals():
    ol = llm.phase_ops(llm.parse(TINY, "tiny"), "decode", context=4)
    f = llm.fold(ol)
    assert len(f) < len(ol)
    assert llm.totals(f) == llm.totals(ol)


@pytest.mark.parametrize(
    "change, field",
    [
        ({"hidden_size": None}, "hidden_size"),
        ({"num_hidden_layers": "32"}, "num_hidden_layers"),
        ({"num_attention_heads": 3}, "num_attention_heads"),
        ({"num_key_value_heads": 3, "num_attention_heads": 4}, "num_key_value_heads"),
        ({"num_local_experts": 2, "num_experts_per_tok": 3}, "num_experts_per_tok"),
        ({"tie_word_embeddings": "yes"}, "tie_word_embeddings"),
        ({"hidden_act": "mish"}, "hidden_act"),
        ({"rotary_pct": 2}, "rotary_pct"),
    ],
)
def test_bad_configs_name_the_field(change, field):
    cfg = dict(TINY)
    for k, v in change.items():
        if v is None:
            cfg.pop(k)
        else:
            cfg[k] = v
    with pytest.raises(RooflabError, match=field):
        llm.parse(cfg)


def test_head_dim_rescues_heads_that_do_not_divide():
    a = llm.parse(dict(TINY, num_attention_heads=3, num_key_value_heads=1, head_dim=5))
    assert a.head_dim == 5


def test_not_json_and_unknown_fields(tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    with pytest.raises(RooflabError, match="not JSON"):
        llm.load(str(bad))
    bad.write_text("[1, 2]")
    with pytest.raises(RooflabError, match="JSON object"):
        llm.load(str(bad))
    bad.write_text(json.dumps(dict(TINY, quantization_config={"bits": 4})))
    assert llm.load(str(bad)).unknown == ["quantization_config"]


def test_a_model_type_rooflab_does_not_model_says_so():
    import json
    from pathlib import Path

    from rooflab.models import llm as L

    cfg = json.loads((Path(L.__file__).parent / "configs" / "qwen2-0.5b.json").read_text())
    assert L.generic_note(L.parse(cfg, "qwen2")) is None
    cfg["model_type"] = "falcon"
    note = L.generic_note(L.parse(cfg, "f"))
    assert note.startswith("note: f: model_type 'falcon' is not one rooflab models") and "generic decoder" in note


def test_quantized_weights_count_stored_bytes_and_keep_the_tied_head():
    a = llm.load("smollm-135m")  # tied LM head
    fp = llm.phase_ops(a, "decode", 1, context=64)
    q4 = llm.phase_ops(a, "decode", 1, context=64, weights=4)
    q8 = llm.phase_ops(a, "decode", 1, context=64, weights=8)
    t, t4, t8 = llm.totals(fp), llm.totals(q4), llm.totals(q8)
    assert t4["weight_elems"] == t["weight_elems"] == t8["weight_elems"] and t4["flops"] == t["flops"]
    head = [o for o in q4 if o["name"].startswith("lm_head")]
    assert head[0]["kind"] == "gemm"  # the tied LM head reads the fp32 embedding table
    head_elems = head[0]["shape"]["K"] * head[0]["shape"]["N"]
    linear = t["weight_elems"] - head_elems
    assert t4["weight_bytes"] == pytest.approx(linear * 0.625 + head_elems * 4)
    assert t8["weight_bytes"] == pytest.approx(linear * 1.125 + head_elems * 4)
    assert t4["bytes"] < t8["bytes"] < t["bytes"]


def test_quantized_bias_is_its_own_add():
    a = llm.load("qwen2-0.5b")  # q/k/v carry biases
    q = llm.phase_ops(a, "decode", 1, context=16, weights=4)
    adds = [o for o in q if o["name"].endswith(" bias")]
    assert {o["name"] for o in adds} == {"q_proj bias", "k_proj bias", "v_proj bias"}
    assert all(o["shape"]["broadcast_numel"] * 1 == o["shape"]["numel"] for o in adds)  # one token: one row
    assert not any(o["kind"] == "qgemm_nbits" and o["shape"].get("bias") for o in q)


def test_weights_option_names_its_choices():
    assert llm.weights_bits(None) is None and llm.weights_bits("INT4") == 4 and llm.weights_bits("int8") == 8
    with pytest.raises(RooflabError, match="fp32, int8 or int4"):
        llm.weights_bits("int3")
