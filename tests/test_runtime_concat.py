"""The runtimes' own KV-cache copies (rooflab/families/runtime_concat.py): onnxruntime's Concat and
torch's cat verified against the float64 concatenation (the Concat also over a rotation: one
session, a Concat per copy), a wrong order or a swapped rotation output fails, and the LLM checks
charge the decode step's copies with the runtime's own."""

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


def _variant(name):
    if name == rc.TORCH_KV_CAT:
        pytest.importorskip("torch", reason="the torch extra is not installed (CI does not install it)")
    return get_variant(name)


BOTH = [rc.ORT_KV_CONCAT, rc.TORCH_KV_CAT]


@pytest.mark.parametrize("name", BOTH)
def test_the_concat_is_the_cache_then_the_new_position_and_verified(name):
    v = _variant(name)
    new, past = v.inputs(SIZE, seed=0)
    assert past.shape == (2, 3, 8, 8) and new.shape == (2, 3, 1, 8)
    y = v(new, past, threads=1)
    assert y.shape == (2, 3, 9, 8)
    assert np.array_equal(y[:, :, :8], past) and np.array_equal(y[:, :, 8:], new)
    assert np.array_equal(v(new, past, reps=3, threads=1), y)  # again: torch's cache kept between calls
    rec = _driver().measure(v, (new, past), reps=1, threads=1)
    assert rec.status == "ok" and rec.work["bytes_written"] == new.nbytes + past.nbytes
    if name == rc.TORCH_KV_CAT:  # the kept cache goes with its past
        key = id(past)
        assert key in rc._torch_caches
        del past, y, rec
        import gc

        gc.collect()
        assert key not in rc._torch_caches


@pytest.mark.parametrize("name", BOTH)
def test_a_concat_in_the_wrong_order_fails_verification(name):
    v = _variant(name)
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


@pytest.mark.parametrize("runtime, name", [("onnxruntime", rc.ORT_KV_CONCAT), ("torch", rc.TORCH_KV_CAT)])
def test_the_llm_check_charges_the_steps_copies_with_the_runtimes_own(monkeypatch, runtime, name):
    """graph_kv_copy_s times the runtime's variant at the decode step's shape, 2 per layer; cold over
    a rotation of pasts (stream_llc set), warm without."""
    _variant(name)
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
    cold = predict.graph_kv_copy_s(arch, 128, 1, None, None, True, True, batch=2, runtime=runtime)
    warm = predict.graph_kv_copy_s(arch, 128, 1, None, None, True, False, batch=2, runtime=runtime)
    assert cold == pytest.approx(2e-6 * 2 * arch.layers) and warm == pytest.approx(1e-6 * 2 * arch.layers)
    (timed, shape, llc, samples), (_, _, llc_warm, samples_warm) = seen
    assert timed == name and llc == 32 << 20 and samples == 3
    assert llc_warm is None and samples_warm == 0
    assert shape["context"] == 128 and shape["batch"] == 2 and shape["heads"] == arch.kv_heads
    assert shape["numel"] == 2 * arch.kv_heads * arch.head_dim * 128
