"""The runtime's own cost per call as a latency roof (issue 40): eager torch's aten call measured
through the driver at 1 thread and all (where torch is installed, in fresh processes), named
"dispatch: torch aten call, T threads", and charged by `rooflab llm --runtime torch` once per aten
call that torch's own profile counts."""

from __future__ import annotations

import pytest

from rooflab.families import latency
from rooflab.models import place
from rooflab.models.llm import predict
from tests.test_plots import synthetic


@pytest.mark.parametrize("torch", [False, True])
@pytest.mark.parametrize("ort", [False, True])
def test_each_runtime_floor_is_measured_only_where_its_runtime_is_once_at_the_end(torch, ort, monkeypatch):
    monkeypatch.setattr(latency, "torch_installed", lambda: torch)
    monkeypatch.setattr(latency, "ort_installed", lambda: ort)
    cases = latency.runtime_cases(4)
    aten = [c for c in cases if c.variant.endswith("torch_aten")]
    chains = [c for c in cases if c.variant.endswith("ort_chain")]
    assert bool(aten) == torch and bool(chains) == ort
    assert all(c.threads in (1, 4) for c in cases)
    if ort:
        assert sorted((c.threads, c.params["nodes"]) for c in chains) == [(1, 1), (1, 65), (4, 1), (4, 65)]
    assert not any(c.variant.endswith(("torch_aten", "ort_chain")) for c in latency.dispatch_cases(4, True))
    suite = latency.cases(quick=True, threads=[4], device="cpu")
    assert suite[len(suite) - len(cases) :] == cases  # last in the latency suite


def _rec(variant, threads, ns):
    return {
        "status": "ok", "family": "latency", "variant": variant, "threads": threads, "noisy": False,
        "ns_per_launch": {"median": ns, "p20": ns, "p80": ns},
    }  # fmt: skip


def test_the_ceilings_name_the_call_and_its_threads_and_keep_the_fastest_pass():
    recs = [_rec("cpu.latency.torch_aten", 1, 3100.0), _rec("cpu.latency.torch_aten", 1, 2900.0),
            _rec("cpu.latency.torch_aten", 2, 3300.0), _rec("cpu.latency.ufunc", 1, 300.0)]  # fmt: skip
    cs = {c["name"]: c for c in latency.dispatch_ceilings(recs)}
    assert cs["dispatch: torch aten call, 1 thread"]["value"] == 2900.0
    assert cs["dispatch: torch aten call, 2 threads"]["threads"] == 2
    assert "dispatch: ufunc" in cs


def test_the_llm_check_takes_the_floor_at_its_own_threads():
    doc = synthetic()
    recs = [_rec("cpu.latency.torch_aten", 1, 2900.0), _rec("cpu.latency.torch_aten", 2, 3300.0)]
    doc["ceilings"] += latency.dispatch_ceilings(recs)
    roofs = place.Roofs(doc, 2)
    assert predict.runtime_call_floor(roofs, "torch aten call", 2)["value"] == 3300.0
    assert predict.runtime_call_floor(roofs, "torch aten call", 1)["value"] == 2900.0
    assert predict.runtime_call_floor(roofs, "onnxruntime node", 2) is None


def test_the_torch_call_verifies_and_times_where_torch_is_installed():
    pytest.importorskip("torch", reason="the torch extra is not installed (CI does not install it)")
    import rooflab
    from rooflab.cpu.backend import cpu_backend
    from rooflab.driver import Driver, Settings

    v = rooflab.get_variant("cpu.latency.torch_aten")
    rec = Driver(cpu_backend(probe=False), Settings(budget_s=0.02, max_attempts=1)).measure(
        v, v.inputs(8, seed=1), threads=1, params={}, reps=200
    )
    assert rec.status == "ok", rec.error
    assert 50 < rec.ns_per_launch["median"] < 1e6  # a real call: tens of ns at least, under a millisecond


def _chain(threads, nodes, ns):
    return dict(_rec("cpu.latency.ort_chain", threads, ns), params={"nodes": nodes})


def test_onnxruntime_per_node_is_the_chains_slope_and_per_run_its_intercept():
    recs = [_chain(1, 1, 9000.0), _chain(1, 1, 8000.0), _chain(1, 65, 8000.0 + 64 * 1500.0), _chain(1, 65, 2e5)]
    cs = {c["name"]: c for c in latency.dispatch_ceilings(recs)}
    node, run = cs["dispatch: onnxruntime node, 1 thread"], cs["dispatch: onnxruntime run, 1 thread"]
    assert node["value"] == pytest.approx(1500.0) and run["value"] == pytest.approx(6500.0)
    assert node["noisy"]  # the long chain's passes differ by > 10 %
    assert not any("ort_chain" in n for n in cs)  # no "dispatch: ort_chain" of its own
    only_short = [_chain(2, 1, 8000.0)]
    assert latency.ort_ceilings(only_short) == []  # one chain length: no slope


def test_a_runtime_overhead_is_calls_times_the_floor_said_so():
    from rooflab.models.runtimes.llm_check import overhead

    node = {"name": "dispatch: onnxruntime node, 1 thread", "value": 1500.0}
    run = {"name": "dispatch: onnxruntime run, 1 thread", "value": 6500.0}
    s, how = overhead(1000, {"node": node, "run": run})
    assert s == pytest.approx(1000 * 1.5e-6 + 6.5e-6)
    assert "1000 calls" in how and "onnxruntime node" in how
    s, how = overhead(1000, {"node": None, "run": None})
    assert s == 0.0 and "no call floor" in how


def test_the_onnxruntime_chain_verifies_and_its_slope_is_positive():
    pytest.importorskip("onnxruntime")
    import rooflab
    from rooflab.cpu.backend import cpu_backend
    from rooflab.driver import Driver, Settings

    v = rooflab.get_variant("cpu.latency.ort_chain")
    d = Driver(cpu_backend(probe=False), Settings(budget_s=0.02, max_attempts=1))
    t = {}
    for n in (1, 33):
        rec = d.measure(v, v.inputs(8, seed=1), threads=1, params={"nodes": n}, reps=50)
        assert rec.status == "ok", rec.error
        t[n] = rec.ns_per_launch["median"]
    assert t[33] > t[1]  # 32 more nodes cost something
