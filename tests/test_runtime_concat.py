"""onnxruntime's own KV-cache Concat (rooflab/families/runtime_concat.py): verified against the float64
concatenation alone and over a rotation (one session, a Concat per copy), a wrong order or a
swapped rotation output fails, and the LLM check charges the decode graph's Concats with it."""

import numpy as np
import pytest

pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (pip install 'rooflab[onnx]')")

from rooflab.cpu.backend import cpu_backend  # noqa: E402
from rooflab.driver import Driver, Settings  # noqa: E402
from rooflab.families import runtime_concat as rc  # noqa: E402
from rooflab.registry import get_variant  # noqa: E402

SIZE = rc.kv_shape(batch=2, heads=3, context=9, head_dim=8)


def _driver():
    return Driver(cpu_backend(probe=False), Settings(budget_s=0.0, min_samples=1, max_attempts=1))


def _copies(v, n):
    first = v.inputs(SIZE, seed=0)
    return [first] + [(first[0], v.inputs(SIZE, seed=i)[1]) for i in range(1, n)]


def test_the_concat_is_the_cache_then_the_new_position_and_verified():
    v = get_variant(rc.ORT_KV_CONCAT)
    new, past = v.inputs(SIZE, seed=0)
    assert past.shape == (2, 3, 8, 8) and new.shape == (2, 3, 1, 8)
    y = v(new, past, threads=1)
    assert y.shape == (2, 3, 9, 8)
    assert np.array_equal(y[:, :, :8], past) and np.array_equal(y[:, :, 8:], new)
    rec = _driver().measure(v, (new, past), reps=1, threads=1)
    assert rec.status == "ok" and rec.work["bytes_written"] == new.nbytes + past.nbytes


def test_a_concat_in_the_wrong_order_fails_verification():
    v = get_variant(rc.ORT_KV_CONCAT)
    wrong = v.__class__(**{**v.__dict__, "kernel": lambda new, past, **k: np.concatenate([new, past], axis=2)})
    assert _driver().measure(wrong, v.inputs(SIZE, seed=0), reps=1, threads=1).status == "failed"


def test_a_rotation_runs_one_session_of_a_concat_per_copy_each_output_checked():
    v = get_variant(rc.ORT_KV_CONCAT)
    copies = _copies(v, 5)
    run_all = v.rotate(copies, threads=1)
    outs = run_all()
    assert len(outs) == 5
    for (new, past), y in zip(copies, outs):
        assert np.array_equal(y, np.concatenate([past, new], axis=2))
    rec = _driver().measure(v, copies[0], reps=1, threads=1, rotation=copies[1:])
    assert rec.status == "ok" and rec.meta["rotation_copies"] == 5

    class Swapped:  # the rotation's outputs of copies 1 and 2 exchanged: the check must see it
        def __call__(self, copies, threads=None, **_):
            run = v.rotate(copies, threads=threads)
            return lambda: (lambda o: [o[0], o[2], o[1], *o[3:]])(list(run()))

    bad = v.__class__(**{**v.__dict__, "rotate": Swapped()})
    assert _driver().measure(bad, copies[0], reps=1, threads=1, rotation=copies[1:]).status == "failed"


def test_copies_that_do_not_share_the_new_position_are_left_to_the_driver():
    v = get_variant(rc.ORT_KV_CONCAT)
    assert v.rotate([v.inputs(SIZE, seed=0), v.inputs(SIZE, seed=1)], threads=1) is None


@pytest.mark.parametrize("bad", [dict(SIZE, context=1)])
def test_a_cache_without_a_past_position_is_refused(bad):
    with pytest.raises(ValueError, match="context 1"):
        rc.inputs(bad)


def test_the_llm_check_charges_the_graphs_concats_with_onnxruntimes_own(monkeypatch):
    """graph_kv_copy_s times this variant at the decode graph's shape, 2 per layer; cold over a
    rotation of pasts (stream_llc set), warm without."""
    from rooflab.models import llm, measure
    from rooflab.models.llm import predict

    arch = llm.arch_of(llm.load("smollm-135m"))
    seen = []

    def fake(driver, variant, op, **kw):
        seen.append((variant.name, dict(op["shape"]), kw.get("stream_llc"), kw["cold_samples"]))
        return {"seconds": 1e-6, **({"cold_seconds": 2e-6} if kw["cold_samples"] else {})}  # as measure_one

    monkeypatch.setattr(measure, "measure_one", fake)
    monkeypatch.setattr(predict, "llc_bytes", lambda machine, device: 32 << 20)
    monkeypatch.setattr(predict, "flusher", lambda device, machine: lambda: None)
    cold = predict.graph_kv_copy_s(arch, 128, 1, None, None, True, True, batch=2)
    warm = predict.graph_kv_copy_s(arch, 128, 1, None, None, True, False, batch=2)
    assert cold == pytest.approx(2e-6 * 2 * arch.layers) and warm == pytest.approx(1e-6 * 2 * arch.layers)
    (name, shape, llc, samples), (_, _, llc_warm, samples_warm) = seen
    assert name == rc.ORT_KV_CONCAT and llc == 32 << 20 and samples == 3
    assert llc_warm is None and samples_warm == 0
    assert shape["context"] == 128 and shape["batch"] == 2 and shape["heads"] == arch.kv_heads
    assert shape["numel"] == 2 * arch.kv_heads * arch.head_dim * 128
