"""`rooflab llm CONFIG --runtime torch`: without torch/transformers one line and exit 2; with them
(skipped otherwise: CI does not install the torch extra) the from_config model holds exactly the
counted parameters, decode after prefill is verified and a cache fed wrong is caught, the decode
step keeps its context, and (slow) the check runs end to end beside the prediction."""

from __future__ import annotations

import builtins
import json
import sys
import types

import pytest

from rooflab import cli
from rooflab.errors import RooflabError
from rooflab.models import llm

TINY = {
    "model_type": "qwen2", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 128, "max_position_embeddings": 64,
    "tie_word_embeddings": False,
}  # fmt: skip


@pytest.fixture
def tiny(tmp_path):
    f = tmp_path / "config.json"
    f.write_text(json.dumps(TINY))
    return str(f)


@pytest.mark.parametrize("missing", ["torch", "transformers"])
def test_without_torch_the_runtime_is_one_line_and_exit_2(missing, tiny, tmp_path, monkeypatch, capsys):
    real = builtins.__import__

    def fake(name, *a, **k):
        if name == missing or name.startswith(missing + "."):
            raise ImportError(f"No module named {missing!r}", name=missing)
        return real(name, *a, **k)

    if missing == "transformers":  # torch present: the real one, or a stand-in where it is not installed (CI)
        try:
            import torch  # noqa: F401
        except ImportError:
            monkeypatch.setitem(sys.modules, "torch", types.ModuleType("torch"))
    monkeypatch.setattr(builtins, "__import__", fake)
    out = tmp_path / "r"
    assert cli.main(["llm", tiny, "--prompt", "8", "--context", "16", "--runtime", "torch", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--runtime torch needs torch and transformers" in err
    assert f"{missing} is not installed" in err and "rooflab[torch]" in err
    assert not out.exists()


def test_unknown_runtime_names_both(tiny, tmp_path, capsys):
    assert cli.main(["llm", tiny, "--runtime", "tvm", "--out", str(tmp_path / "r")]) == 2
    assert "onnxruntime or torch" in capsys.readouterr().err


def _torch():
    pytest.importorskip("torch", reason="the torch extra is not installed (CI does not install it)")
    pytest.importorskip("transformers", reason="the torch extra is not installed (CI does not install it)")
    from rooflab.models.runtimes import pytorch

    pytorch.modules()
    return pytorch


@pytest.mark.parametrize("cfg", [TINY, dict(TINY, model_type="llama", tie_word_embeddings=True)])
def test_from_config_model_holds_the_counted_parameters(cfg, tmp_path):
    pytorch = _torch()
    f = tmp_path / "config.json"
    f.write_text(json.dumps(cfg))
    model = pytorch.build(str(f))
    assert sum(p.numel() for p in model.parameters()) == llm.param_counts(llm.load(str(f)))["total"]
    assert not model.training and next(model.parameters()).dtype.is_floating_point


def test_the_checkout_kernels_folder_does_not_shadow_hub_kernels():
    """From a source checkout (pytest puts its root on sys.path) `kernels` is rooflab's folder; the
    `kernels` transformers imports must be the distribution's."""
    pytorch = _torch()
    import sys
    from pathlib import Path

    k = sys.modules.get("kernels")
    root = Path(pytorch.__file__).resolve().parents[3]
    assert k is None or Path(k.__file__).resolve() != root / "kernels" / "__init__.py"


def test_a_model_too_big_for_memory_is_refused_before_measuring(tiny, tmp_path, monkeypatch, capsys):
    pytorch = _torch()
    monkeypatch.setattr(pytorch, "available_bytes", lambda: 1 << 16)  # 64 KiB free
    out = tmp_path / "r"
    assert cli.main(["llm", tiny, "--prompt", "8", "--context", "16", "--runtime", "torch", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "fp32 weights are" in err and "64 KiB free" in err
    assert not out.exists()


def _swap_kv(cache):
    for layer in cache.layers:
        layer.keys, layer.values = layer.values, layer.keys


def _drop_first(cache):
    for layer in cache.layers:
        layer.keys, layer.values = layer.keys[:, :, 1:], layer.values[:, :, 1:]


def test_decode_after_prefill_is_verified_and_a_wrong_cache_is_caught(tiny):
    pytorch = _torch()
    model = pytorch.build(tiny)
    assert pytorch.verify(model, TINY["vocab_size"]) < 1e-5
    for mangle in (_swap_kv, _drop_first):
        with pytest.raises(RooflabError, match="decode after prefill differs"):
            pytorch.verify(model, TINY["vocab_size"], mangle=mangle)


def test_decode_steps_keep_their_context_and_are_profiled(tiny):
    pytorch = _torch()
    import torch

    model = pytorch.build(tiny)
    run, after = pytorch._phase(model, "decode", 9, TINY["vocab_size"])
    for _ in range(3):
        logits, cache = run()
        assert cache.get_seq_length() == 9 and logits.shape == (1, TINY["vocab_size"])
        after()
        assert cache.get_seq_length() == 8
    torch.set_num_threads(1)
    m = pytorch.timed(model, "decode", 9, TINY["vocab_size"], runs=3, warmup=1)
    assert m["median_s"] > 0 and m["aten_calls"] > 0
    assert "aten::mm" in m["by_op_type_s"] or "aten::addmm" in m["by_op_type_s"]
    assert abs(sum(m["by_op_type_s"].values()) - m["profiled_s"]) < 1e-3 * m["profiled_s"] + 1e-6


def test_the_decode_check_charges_dynamiccaches_cat(tiny):
    """transformers' DynamicCache grows every layer's keys and values with torch.cat each decode step
    where rooflab's decode appends in place: the check swaps the append for the copy (kv_copy), the
    attention that reads the copy just written charged warm, the in-place figure kept and said."""
    pytorch = _torch()
    from rooflab.models.runtimes import llm_check

    def row(phase, **k):
        ops = [{"kind": kind, "total_s": t, "seconds": t, "library_seconds": t, "count": 1, "mult": 1}
               for kind, t in (("batched_gemm", 0.004), ("concat", 0.001))]  # fmt: skip
        if phase == "decode":
            ops[0].update(cold=True, warm_seconds=0.0015)
        return {"phase": phase, "batch": 1, "seconds": 0.005, "library_seconds": 0.005, "roof_seconds": 0.002,
                "ops": ops, **k}  # fmt: skip

    asked = []

    def cat(context, batch=1):
        asked.append((context, batch))
        return 0.003

    rows = [row("prefill", prompt=4), row("decode", context=8)]
    c = pytorch.compare(tiny, rows, threads=1, prompt=4, context=8, runs=3, kv_copy=cat)
    d, p = c["decode"], c["prefill"]
    assert asked == [(8, 1)]
    assert d["predicted_s"] == pytest.approx(0.005 - 0.001 + 0.003 - 0.0025) and d["predicted_in_place_s"] == 0.005
    assert d["predicted_by_kind_s"][llm_check.KIND_TO_ORT["concat"]] == pytest.approx(0.003)
    assert "graph_kv_copy_s" not in p and p["predicted_s"] == 0.005
    assert any("DynamicCache's torch.cat copies the whole cache" in line for line in llm_check.lines(c))
    plain = pytorch.compare(tiny, rows, threads=1, prompt=4, context=8, runs=3, phases=("decode",))
    assert plain["decode"]["predicted_s"] == 0.005 and "graph_kv_copy_s" not in plain["decode"]


@pytest.mark.slow  # a real quick run's ceilings, then the LLM placed and checked against torch
def test_torch_check_end_to_end(quick_result, tiny, tmp_path, capsys):
    _torch()
    rc = cli.main(["llm", tiny, "--ceilings", str(quick_result), "--quick", "--no-own", "--prompt", "8",
                   "--context", "16", "--threads", "1", "--runtime", "torch", "--out", str(tmp_path / "r"),
                   "--json", "--no-plot"])  # fmt: skip
    assert rc == 0
    d = json.loads(capsys.readouterr().out)
    c = d["runtime_check"]
    assert c["check_name"] == "torch" and c["verified_rel_err"] < 1e-3 and c["threads"] == 1
    for phase in ("prefill", "decode"):
        p = c[phase]
        assert p["measured_s"] > 0 and p["predicted_s"] > 0 and p["aten_calls"] > 0
    assert c["decode"]["graph_kv_copy_s"] > 0  # DynamicCache's cat, timed with torch's own
    from rooflab.models.runtimes.llm_check import lines

    text = "\n".join(lines(c))
    assert "torch check" in text and "torch self time by aten op" in text
    from rooflab.report import build

    page = build([json.loads(open(d["files"][0]).read())])
    assert "Against torch" in page


def test_a_bf16_model_is_built_in_bf16_verified_and_a_wrong_cache_is_caught(tiny):
    pytorch = _torch()
    import torch

    model = pytorch.build(tiny, dtype="bfloat16")
    assert next(model.parameters()).dtype == torch.bfloat16
    before = {n: t.clone() for n, t in model.state_dict().items()}
    assert pytorch.verify(model, TINY["vocab_size"]) < pytorch.VERIFY_TOL  # checked in float32 ...
    after = model.state_dict()  # ... and the timed model is the one built, bit for bit
    assert all(after[n].dtype == t.dtype and torch.equal(after[n], t) for n, t in before.items())
    assert next(model.parameters()).dtype == torch.bfloat16
    for mangle in (_swap_kv, _drop_first):
        with pytest.raises(RooflabError, match="decode after prefill differs"):
            pytorch.verify(model, TINY["vocab_size"], mangle=mangle)


def test_a_dtype_the_check_does_not_build_is_one_line(tiny, tmp_path, capsys):
    _torch()
    out = tmp_path / "r"
    rc = cli.main(
        ["llm", tiny, "--prompt", "8", "--context", "16", "--dtype", "float16", "--runtime", "torch", "--out", str(out)]
    )
    assert rc == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "float32 or bfloat16" in err
    assert not out.exists()


def test_the_runtime_prediction_takes_torchs_own_kernels_where_they_were_timed():
    from rooflab.models.runtimes.pytorch import runtime_prediction

    ops = [
        {"library_variant": "cpu.bgemm.00-torch-bf16", "seconds": 1.0, "library_seconds": 1.6, "count": 24, "mult": 1},
        {"library_variant": "cpu.llm.rmsnorm.00-numpy", "seconds": 0.1, "library_seconds": 0.3, "count": 49, "mult": 1},
        {"library_variant": None, "seconds": 0.5, "library_seconds": 0.5, "count": 1, "mult": 1},  # predicted
    ]
    t, n = runtime_prediction({"ops": ops})
    assert n == 1 and t == pytest.approx(1.6 * 24 + 0.1 * 49 + 0.5)


def test_the_runtime_prediction_prefers_the_runtimes_own_kernel_where_it_was_timed():
    from rooflab.models.runtimes.pytorch import runtime_prediction

    ops = [
        {"library_variant": "cpu.gemm.00-numpy-blas", "seconds": 1.0, "library_seconds": 1.1, "runtime_seconds": 1.8,
         "count": 30, "mult": 1},
        {"library_variant": "cpu.gemm.00-numpy-blas", "seconds": 1.0, "library_seconds": 1.1, "runtime_seconds": None,
         "count": 1, "mult": 1},
    ]  # fmt: skip
    t, n = runtime_prediction({"ops": ops})
    assert n == 1 and t == pytest.approx(1.8 * 30 + 1.0)
    # the per-kind breakdown printed beside the runtime's profile is the prediction checked, not rooflab's best
    from rooflab.models.runtimes.llm_check import KIND_TO_ORT, predicted_by_kind

    row = {"ops": [{**o, "kind": "gemm", "total_s": o["seconds"] * o["count"]} for o in ops]}
    assert predicted_by_kind(row, "torch")[KIND_TO_ORT["gemm"]] == pytest.approx(t)
    assert predicted_by_kind(row)[KIND_TO_ORT["gemm"]] == pytest.approx(1.0 * 31)


def test_torchs_fp32_linear_is_verified_and_timed_as_the_runtimes_gemm(tiny):
    _torch()
    import numpy as np

    import rooflab
    from rooflab.models.llm import predict
    from rooflab.models.place import Roofs
    from rooflab.workloads import ops
    from tests.test_plots import synthetic

    v = rooflab.get_variant("cpu.runtime_gemm.torch-linear")
    A, B, bias = v.inputs({"M": 3, "N": 17, "K": 29, "bias": True}, seed=4)
    assert np.allclose(v(A, B, bias, threads=1), v.reference(A, B, bias), rtol=1e-5)
    op = ops.normalize({"kind": "gemm", "shape": {"M": 1, "N": 64, "K": 48, "bias": True}, "name": "q_proj"})
    op = dict(op, count=1, mult=1, phase="decode", cls="attention-proj")
    from rooflab import machine

    got = predict.measure_distinct(
        [op], Roofs(synthetic(), 1), device="cpu", threads=1, quick=True, machine=machine.describe(), own=False,
        execute=True, runtime={"gemm": "cpu.runtime_gemm.torch-linear"},
    )  # fmt: skip
    (entry,) = got.values()
    assert entry["runtime"]["variant"] == "cpu.runtime_gemm.torch-linear" and entry["runtime"]["verification"]
    assert entry["library"]["variant"] != entry["runtime"]["variant"]


def test_torchs_decode_sweep_times_every_batch_verified_and_gives_the_threads_back(tiny):
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from rooflab.models.runtimes import pytorch

    before = torch.get_num_threads()
    got = pytorch.decode_sweep(tiny, 1, 16, [1, 2, 4], runs=3)
    assert sorted(got) == [1, 2, 4] and all(v["median_s"] > 0 and v["verified_rel_err"] < 1e-3 for v in got.values())
    assert torch.get_num_threads() == before
