"""`rooflab llm`: bad input (one line, exit 2), the new op kinds executed and verified, and a tiny
config placed end to end (slow: it needs a real ceilings run)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rooflab import cli
from rooflab.models import measure
from rooflab.workloads import ops

TINY = {
    "model_type": "llama", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 128, "max_position_embeddings": 64,
    "tie_word_embeddings": True,
}  # fmt: skip


def _cfg(tmp_path, cfg=TINY, text=None):
    f = tmp_path / "config.json"
    f.write_text(text if text is not None else json.dumps(cfg))
    return str(f)


@pytest.mark.parametrize(
    "argv_extra, text, needle",
    [
        ([], "{oops", "not JSON"),
        ([], json.dumps({k: v for k, v in TINY.items() if k != "hidden_size"}), "'hidden_size' is missing"),
        ([], json.dumps(dict(TINY, num_hidden_layers=2.5)), "'num_hidden_layers' must be an integer"),
        ([], json.dumps(dict(TINY, num_attention_heads=5, num_key_value_heads=5)), "'num_attention_heads'"),
        ([], json.dumps(dict(TINY, num_key_value_heads=3)), "'num_key_value_heads'"),
        ([], json.dumps(dict(TINY, num_local_experts=4, num_experts_per_tok=5)), "'num_experts_per_tok'"),
        (["--batch", "0"], None, "--batch"),
        (["--batch", "x"], None, "--batch"),
        (["--batch", "100000000", "--context", "64", "--prompt", "8"], None, "--batch 100000000: its KV cache"),
        (["--dtype", "int3"], None, "--dtype"),
        (["--device", "tpu"], None, "unknown device"),
        (["--weights", "int3"], None, "--weights 'int3' is not a storage"),
        (["--weights", "int4", "--dtype", "bf16"], None, "keeps fp32 activations"),
        ([], json.dumps(dict(TINY, intermediate_size=100)), "not a multiple of the quantization block"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, argv_extra, text, needle):
    path = _cfg(tmp_path, text=text) if text is not None else _cfg(tmp_path)
    if "quantization block" in needle:
        argv_extra = [
            "--weights",
            "int4",
            "--prompt",
            "8",
            "--context",
            "32",
        ]  # a down_proj whose K = 100 cannot be cut into blocks of 32
    rc = cli.main(["llm", path, "--no-measure", "--out", str(tmp_path / "r"), *argv_extra])
    err = capsys.readouterr().err
    assert rc == 2 and needle in err and err.count("\n") == 1, err


def test_unknown_config_name_and_context_warning(tmp_path, capsys):
    assert cli.main(["llm", "no-such-model", "--no-measure"]) == 2
    assert "bundled name" in capsys.readouterr().err
    rc = cli.main(["llm", _cfg(tmp_path, dict(TINY, foo_field=1)), "--no-measure", "--context", "100",
                   "--out", str(tmp_path / "r")])  # fmt: skip
    err = capsys.readouterr().err
    assert rc == 0 and "above the model's max_position_embeddings (64)" in err and "foo_field" in err


def test_json_gives_total_and_active_parameters(capsys):
    assert cli.main(["llm", "mixtral-8x7b", "--no-measure", "--json", "--out", "/nonexistent-rooflab"]) == 0
    got = capsys.readouterr()
    d = json.loads(got.out)
    assert "nothing is written" in got.err  # counts only, said (issue 37: `--out /proc/x` said nothing)
    assert d["params"]["total"] == 46_702_792_704 and d["params"]["active"] == 12_879_925_248


@pytest.mark.parametrize(
    "raw",
    [
        {"kind": "rmsnorm", "shape": {"rows": 5, "cols": 48}},
        {"kind": "rope", "shape": {"tokens": 7, "heads": 3, "head_dim": 16}},
        {"kind": "rope", "shape": {"tokens": 7, "heads": 3, "head_dim": 16, "rot_dim": 4}},
    ],
    ids=["rmsnorm", "rope", "rope-partial"],
)
def test_llm_op_kinds_execute_and_verify(raw):
    from rooflab.cpu.backend import cpu_backend
    from rooflab.driver import Driver, Settings

    op = ops.normalize(raw)
    (lib,), own = measure.variants_for(op, "cpu")
    assert [v.name for v in own] == [f"cpu.llm.{op['kind']}.01-numba-fused"]  # a library and an own figure
    driver = Driver(cpu_backend(probe=False), Settings(budget_s=0.0, min_samples=1, max_attempts=1))
    for v in (lib, *own):
        for threads in (1, 2):
            rec = driver.measure(v, v.inputs(dict(op["shape"]), np.dtype("float32"), seed=1), reps=1, threads=threads)
            assert rec.status == "ok", rec.error
            assert rec.work["flops"] == ops.flops(op)


@pytest.mark.parametrize("kind", ["rmsnorm", "rope"])
def test_a_wrong_fused_llm_op_fails_verification(kind, monkeypatch):
    """The own kernels' checks can fail: a row normalized without its weight, a RoPE whose sin and
    cos are swapped, a tail not copied."""
    from rooflab.cpu.backend import cpu_backend
    from rooflab.driver import Driver, Settings
    from rooflab.families import llm_ops

    raw = {"rows": 5, "cols": 48} if kind == "rmsnorm" else {"tokens": 4, "heads": 2, "head_dim": 8, "rot_dim": 4}
    op = ops.normalize({"kind": kind, "shape": raw})
    _, (own,) = measure.variants_for(op, "cpu")
    if kind == "rmsnorm":
        wrong = lambda x, w, y, t, **k: llm_ops._rmsnorm_fused(x, np.ones_like(w), y, t, **k)  # noqa: E731
    else:
        wrong = lambda x, c, s, y, t, **k: llm_ops._rope_fused(x, s, c, y, t, **k)  # noqa: E731
    bad = own.__class__(**{**own.__dict__, "kernel": wrong})
    driver = Driver(cpu_backend(probe=False), Settings(budget_s=0.0, min_samples=1, max_attempts=1))
    rec = driver.measure(bad, bad.inputs(dict(op["shape"]), np.dtype("float32"), seed=1), reps=1)
    assert rec.status != "ok"


def test_a_wrong_rope_fails_verification(monkeypatch):
    from rooflab.cpu.backend import cpu_backend
    from rooflab.driver import Driver, Settings
    from rooflab.families import llm_ops

    op = ops.normalize({"kind": "rope", "shape": {"tokens": 4, "heads": 2, "head_dim": 8}})
    (lib,), _ = measure.variants_for(op, "cpu")
    bad = lib.__class__(**{**lib.__dict__, "kernel": lambda x, c, s, y, t, **_: llm_ops._rope(x, s, c, y, t)})
    driver = Driver(cpu_backend(probe=False), Settings(budget_s=0.0, min_samples=1, max_attempts=1))
    rec = driver.measure(bad, bad.inputs(dict(op["shape"]), np.dtype("float32"), seed=1), reps=1)
    assert rec.status != "ok"


@pytest.mark.slow  # a real quick run's ceilings, then the LLM placed on them
def test_tiny_llm_end_to_end(quick_result, tmp_path, capsys):
    cfg = _cfg(tmp_path)
    out = tmp_path / "r"
    rc = cli.main(["llm", cfg, "--ceilings", str(quick_result), "--quick", "--no-own", "--batch", "1,2",
                   "--context", "32", "--prompt", "8", "--out", str(out), "--json"])  # fmt: skip
    assert rc == 0
    d = json.loads(capsys.readouterr().out)
    rows = {(r["phase"], r["batch"]): r for r in d["rows"]}
    assert set(rows) == {("prefill", 1), ("prefill", 2), ("decode", 1), ("decode", 2)}
    for r in rows.values():
        assert r["seconds"] > 0 and r["tokens_per_s"] > 0 and not r["predicted_ops"]
        assert abs(sum(r["share_by_op_class"].values()) - 100) < 1e-6
    assert d["curves"]["vs_batch"] and any(f.endswith(".decode.png") for f in d["files"])
    saved = json.loads(open(d["files"][0]).read())
    assert saved["suite"] == "llm" and saved["llm"]["params"]["total"] == d["params"]["total"]
    from rooflab.report import build

    page = build([saved])
    assert f"LLM: {saved['llm']['config']}" in page and "tokens/s" in page


@pytest.mark.slow  # a real quick run's ceilings, then the LLM placed on them
def test_tiny_llm_with_int4_weights_runs_the_quantized_rungs(quick_result, tmp_path, capsys):
    cfg = _cfg(tmp_path)
    rc = cli.main(["llm", cfg, "--ceilings", str(quick_result), "--quick", "--weights", "int4", "--context", "32",
                   "--prompt", "8", "--out", str(tmp_path / "r"), "--json", "--no-plot"])  # fmt: skip
    assert rc == 0
    d = json.loads(capsys.readouterr().out)
    assert d["weights"].startswith("int4")
    assert d["curves"]["w4_gflops"] > 0  # decode's compute roof for the 4-bit GEMVs: the measured W4 roof
    saved = json.loads(open(d["files"][0]).read())
    for r in saved["llm"]["rows"]:
        assert not r["predicted_ops"]
        kinds = {o["kind"] for o in r["ops"]}
        assert "qgemm_nbits" in kinds and "gemm" in kinds  # the tied LM head stays fp32
        per = [o for o in r["ops"] if o["kind"] == "qgemm_nbits"]
        assert all(o["shape"]["bits"] == 4 for o in per)
    placed = {o["variant"] for o in saved["ops_placed"]}
    assert {"cpu.qgemm.00-ort-matmulnbits", "cpu.qgemm.01-dequant-in-registers"} <= placed


@pytest.mark.slow  # a real quick run's ceilings, then the LLM placed on them
def test_ops_that_do_not_fit_are_predicted_and_bf16_runs_as_fp32(quick_result, tmp_path, capsys, monkeypatch):
    from rooflab.models.llm import predict

    monkeypatch.setattr(predict, "available_bytes", lambda: 1)  # nothing fits: every op from the roofs
    rc = cli.main(["llm", _cfg(tmp_path), "--ceilings", str(quick_result), "--quick", "--no-own", "--prompt", "8",
                   "--context", "32", "--dtype", "bf16", "--out", str(tmp_path / "r"), "--json", "--no-plot"])  # fmt: skip
    assert rc == 0
    d = json.loads(capsys.readouterr().out)
    from rooflab.families import bgemm

    # the GEMMs run in bf16 where this CPU has a BF16 unit (test_llm_bf16.py holds the rule on both sides)
    assert d["dtype_requested"] == "bfloat16" and d["dtype_executed"] == ("bfloat16" if bgemm.unit() else "float32")
    assert d["dtype_note"]
    for r in d["rows"]:
        assert any("q_proj" in n for n in r["predicted_ops"]) and "embed_tokens" in r["predicted_ops"]
        assert r["roof_seconds_requested_dtype"] <= r["roof_seconds"]


def test_rotation_count_fills_the_llc_within_the_budget():
    mb = 1 << 20
    assert measure.rotation_count(mb, 32 * mb, None) == 4 * 32
    assert measure.rotation_count(3 * mb, 32 * mb, None) == -(-128 // 3)  # rounds up: >= 4x the LLC
    assert measure.rotation_count(mb, 32 * mb, 40 * mb) == 10  # a quarter of the free memory
    assert measure.rotation_count(512 * mb, 32 * mb, None) == 1  # one op already streams
    assert measure.rotation_count(1024, 32 * mb, None) == measure.ROTATION_MAX_COPIES


def _gemv_op():
    return ops.normalize({"kind": "gemm", "shape": {"M": 1, "N": 512, "K": 512}, "dtype": "float32"})


def test_streamed_cold_time_rotates_over_distinct_verified_copies(monkeypatch):
    """A weight GEMV charged cold in an LLM is timed over distinct copies of its operands (>= 4x
    the LLC together), each copy verified, with no flush between the calls."""
    from rooflab.cpu.backend import cpu_backend
    from rooflab.driver import Driver, Settings

    monkeypatch.setattr(measure.place, "place_op", lambda op, t, *a, **k: {"seconds": t})  # no roofs needed
    op = _gemv_op()
    (lib,), _ = measure.variants_for(op, "cpu")
    llc = 2 << 20  # a small "LLC" keeps the test quick: 1 MiB of weights, 8 copies
    made = []
    real = measure.rotation_inputs
    monkeypatch.setattr(measure, "rotation_inputs", lambda *a: made.extend(real(*a)) or made)
    seen = []
    spy = lib.__class__(**{**lib.__dict__, "reference": lambda *a, **k: seen.append(a[1]) or lib.reference(*a, **k)})
    flushes = []
    driver = Driver(cpu_backend(probe=False), Settings(budget_s=0.0, min_samples=2, max_attempts=1))
    rec = measure.measure_one(
        driver, spy, dict(op, count=1), threads=1, roofs=None,
        flush=lambda: flushes.append(1), cold_samples=2, stream_llc=llc,
    )  # fmt: skip
    A, W = lib.inputs(dict(op["shape"]), np.dtype("float32"), seed=0)
    assert rec["rotation_copies"] == len(made) + 1 == -(-4 * llc // W.nbytes)
    weights = [c[measure.STREAMED] for c in made]
    assert rec["rotation_bytes"] == A.nbytes + W.nbytes * rec["rotation_copies"]
    assert sum(w.nbytes for w in weights) + W.nbytes >= 4 * llc
    assert all(not np.shares_memory(a, b) for i, a in enumerate(weights) for b in weights[i + 1 :])
    assert len({id(c[0]) for c in made}) == 1  # the activation is shared: it stays in cache in a real step
    assert all(any(w is s for s in seen) for w in weights)  # every copy verified (checked against float64)
    assert len(seen) == 2 + len(made)  # the warm time's inputs, the cold time's first copy, then each other
    assert not flushes and rec["cold_seconds"] > 0


def test_a_wrong_result_on_one_rotation_copy_fails_the_op():
    from rooflab.cpu.backend import cpu_backend
    from rooflab.driver import Driver, Settings

    op = _gemv_op()
    (lib,), _ = measure.variants_for(op, "cpu")
    copies = [lib.inputs(dict(op["shape"]), np.dtype("float32"), seed=i) for i in range(3)]
    marked = copies[2][0]

    def kernel(*a, **k):
        out = lib.kernel(*a, **k)
        return out + 1.0 if a[0] is marked else out

    bad = lib.__class__(**{**lib.__dict__, "kernel": kernel})
    driver = Driver(cpu_backend(probe=False), Settings(budget_s=0.0, min_samples=1, max_attempts=1))
    assert driver.measure(bad, copies[0], reps=1, rotation=copies[1:2]).status == "ok"
    assert driver.measure(bad, copies[0], reps=1, rotation=copies[1:]).status == "failed"


@pytest.mark.filterwarnings("ignore:ceilings come from machine")
def test_ops_and_runtime_check_run_at_the_threads_of_their_roofs(tmp_path, capsys, monkeypatch):
    """Ceilings whose 2-thread roofs cannot be true: placement falls back to the 1-thread roofs and
    says so, and the ops and the runtime check run at 1 thread with them (issue 37: ops timed at 2
    threads and held to 1-thread roofs read as 118-183 % of their roofs)."""
    from rooflab.models.llm import predict
    from rooflab.models.runtimes import ort
    from tests.test_implausible import bad_two_threads

    ceil = tmp_path / "ceilings.json"
    ceil.write_text(json.dumps(bad_two_threads() | {"suite": "ceilings", "status": "complete"}))
    seen = {}

    def compare(config, rows, threads, prompt, context, runs=10, **_):
        seen["threads"], seen["config"] = threads, config.name  # the parsed config, not its path again
        return {"config": config.name, "threads": threads, "runtime": "stub", "phases": {}}

    real = predict.measure_distinct

    def predicted_only(*a, **k):  # the ops predicted, not executed: the test is the threads' plumbing
        seen["ops_threads"] = k["threads"]
        return real(*a, **{**k, "execute": False})

    monkeypatch.setattr(ort, "compare", compare)
    monkeypatch.setattr(predict, "measure_distinct", predicted_only)
    rc = cli.main(["llm", _cfg(tmp_path), "--ceilings", str(ceil), "--threads", "2", "--runtime",
                   "onnxruntime", "--prompt", "8", "--context", "32", "--out", str(tmp_path / "r"), "--json",
                   "--no-plot"])  # fmt: skip
    assert rc == 0
    cap = capsys.readouterr()
    d = json.loads(cap.out[cap.out.index("\n{") :])  # after the line that the ceilings are another machine's
    assert (
        seen == {"threads": 1, "ops_threads": 1, "config": tmp_path.name}
        and d["threads"] == 1
        and d["roofs_threads"] == 1
    )
    assert "2-thread ceilings hold roofs that cannot be true" in cap.err and "ops run at 1 thread(s)" in cap.err


def test_a_moe_model_states_the_distinct_experts_each_phase_reads():
    from rooflab.models import llm
    from rooflab.models.llm import predict

    arch = llm.load("mixtral-8x7b")
    summary = {
        "rows": [{"phase": "prefill", "batch": 1, "prompt": 128}, {"phase": "decode", "batch": 4, "context": 64}]
    }
    predict.state_experts(arch, summary)
    pre, dec = summary["rows"]
    assert pre["expected_experts"] == pytest.approx(llm.expected_experts(8, 2, 128)) and pre["expected_experts"] > 7.9
    assert dec["expected_experts"] == pytest.approx(8 * (1 - (1 - 2 / 8) ** 4))  # 4 tokens x 2 of 8
    assert summary["moe"] == {"experts": 8, "top_k": 2}
    dense = {"rows": [{"phase": "decode", "batch": 1, "context": 64}]}
    predict.state_experts(llm.load("smollm-135m"), dense)
    assert "moe" not in dense and "expected_experts" not in dense["rows"][0]


@pytest.mark.slow  # a real quick run's ceilings, then the grid: every cell and the decode sweep in onnxruntime
def test_tiny_grid_end_to_end_with_the_turn_to_compute_bound(quick_result, tmp_path, capsys):
    pytest.importorskip("onnxruntime")
    cfg = _cfg(tmp_path, dict(TINY, max_position_embeddings=256))
    rc = cli.main(["llm", cfg, "--ceilings", str(quick_result), "--quick", "--runtime", "onnxruntime", "--grid",
                   "small", "--out", str(tmp_path / "r"), "--json"])  # fmt: skip
    assert rc == 0
    d = json.loads(capsys.readouterr().out)
    g = d["grid"]
    assert len(g["cells"]) == 4 and all(c["measured_s"] > 0 and c["predicted_s"] > 0 for c in g["cells"])
    (t,) = g["turns"]
    batches = [p["batch"] for p in t["points"]]
    assert batches[0] == 1 and batches[-1] >= 8 and all(p["seconds"] > 0 for p in t["points"])
    assert t["predicted_knee"]["top_batch"] == batches[-1] and "ok" in t["check"]
    assert any(f.endswith(".turn.png") for f in d["files"]) and any(f.endswith(".grid.png") for f in d["files"])
    saved = json.loads(open(d["files"][0]).read())
    from rooflab.report import build

    assert "The runtime check over the grid" in build([saved])


def test_a_long_rotation_is_verified_on_its_first_last_and_spread_copies():
    """Up to VERIFY_COPIES copies are all checked; a longer rotation on the first, the last and
    evenly spaced ones, so a wrong last copy still fails the op."""
    from rooflab.cpu.backend import cpu_backend
    from rooflab.driver import VERIFY_COPIES, Driver, Settings, checked_copies

    assert checked_copies(list(range(5))) == list(range(5))
    picked = checked_copies(list(range(40)))
    assert len(picked) == VERIFY_COPIES and picked[0] == 0 and picked[-1] == 39 and picked == sorted(set(picked))
    op = _gemv_op()
    (lib,), _ = measure.variants_for(op, "cpu")
    copies = [lib.inputs(dict(op["shape"]), np.dtype("float32"), seed=i) for i in range(20)]
    seen = []

    def kernel(*a, **k):
        seen.append(a[0])
        out = lib.kernel(*a, **k)
        return out + 1.0 if a[0] is copies[-1][0] else out

    bad = lib.__class__(**{**lib.__dict__, "kernel": kernel})
    driver = Driver(cpu_backend(probe=False), Settings(budget_s=0.0, min_samples=1, max_attempts=1))
    assert driver.measure(bad, copies[0], reps=1, rotation=copies[1:]).status == "failed"
    assert len(seen) == VERIFY_COPIES
