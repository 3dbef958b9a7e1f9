"""Every CPU variant is checked against its numpy reference on random data, at sizes that hit the
remainder loops and at 1 and all threads; and the compiled code is the code we think it is."""

import numpy as np
import pytest
from rooflab.kernels.cpu import clock, ert, stream

import rooflab
from rooflab.cpu.backend import cpu_backend
from rooflab.driver import Driver, Settings
from rooflab.threads import max_threads
from rooflab.verify import check

THREADS = sorted({1, max_threads()})
DRIVER = Driver(cpu_backend(), Settings(budget_s=0.0, min_samples=1, probe_clock=False, max_attempts=1))


def test_registry_lists_families_and_devices():
    names = [v.name for v in rooflab.list_variants(device="cpu")]
    for n in (
        "cpu.stream.read",
        "cpu.stream.copy",
        "cpu.stream.triad",
        "cpu.ert.fma",
        "cpu.latency.empty",
        "cpu.latency.ufunc",
        "cpu.latency.fork_join",
        "cpu.clock.add_chain",
    ):
        assert n in names
    assert [v.name for v in rooflab.list_variants(family="stream", device="cpu")] == [
        "cpu.stream.read",
        "cpu.stream.copy",
        "cpu.stream.triad",
        "cpu.stream.update",
    ]
    assert "stream" in rooflab.list_families("cpu")
    assert {v.device for v in rooflab.list_variants(family="stream")} == {"cpu", "cuda"}
    with pytest.raises(rooflab.RooflabError, match="unknown kernel variant"):
        rooflab.get_variant("cpu.nope")


@pytest.mark.parametrize("name", ["cpu.stream.read", "cpu.stream.copy", "cpu.stream.triad", "cpu.stream.update"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("n", [1, 37, 4096 + 13, 100_003])
@pytest.mark.parametrize("threads", THREADS)
def test_stream_variants_match_reference(name, dtype, n, threads):
    v = rooflab.get_variant(name)
    inputs = v.inputs(n, dtype, seed=n)
    params = v.params(reps=3) if name.endswith(("read", "update")) else v.params()
    if name.endswith("update"):
        params["s"] = 2.0  # s=1 (the timed setting) would let a do-nothing kernel pass
    rep = DRIVER.verify(v, inputs, params, threads)
    assert rep["elements"] >= 1


def test_public_call_runs_on_user_arrays():
    v = rooflab.get_variant("cpu.stream.triad")
    a, b, c = np.zeros(1000), np.arange(1000.0), np.ones(1000)
    out = v(a, b, c, s=2.0)
    np.testing.assert_allclose(out, b + 2.0)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("K", [8, pytest.param(1, marks=pytest.mark.slow), pytest.param(32, marks=pytest.mark.slow)])
@pytest.mark.parametrize("threads", THREADS)
def test_ert_matches_closed_form(dtype, K, threads):
    v = rooflab.get_variant("cpu.ert.fma")
    block = ert.block_elements(32 << 10, np.dtype(dtype).itemsize)
    (a,) = v.inputs(block * threads * 3, dtype)
    DRIVER.verify(v, (a,), v.params(K=K, block=block, reps=3), threads)


def test_ert_rejects_ragged_arrays():
    v = rooflab.get_variant("cpu.ert.fma")
    with pytest.raises(ValueError, match="whole number"):
        v(np.ones(1000), block=64, threads=1)


def test_latency_variants_verify():
    for name, inputs in (
        ("cpu.latency.empty", ()),
        ("cpu.latency.ufunc", rooflab.get_variant("cpu.latency.ufunc").inputs(8)),
        ("cpu.latency.fork_join", (np.zeros(THREADS[-1]),)),
    ):
        v = rooflab.get_variant(name)
        DRIVER.verify(v, inputs, v.params(), THREADS[-1] if name.endswith("join") else 1)


def test_empty_call_check_counts_the_calls():
    """The dispatch-latency check can fail: a kernel that makes fewer calls than asked is caught."""
    v = rooflab.get_variant("cpu.latency.empty")
    assert v.kernel(reps=7) == v.reference(reps=7) == 7
    with pytest.raises(rooflab.VerificationError):
        check(v.kernel(reps=6), v.reference(reps=7), dtype=np.int64, what="skipped a call")


@pytest.mark.skipif(not clock.SUPPORTED, reason="the clock probe is x86-64 inline assembly")
def test_clock_probe_counts_and_is_plausible():
    r = Driver(cpu_backend(), Settings())
    ghz = r.probe_clock(1)
    assert 0.3 < ghz[0] < 7.0  # a dependent add per cycle: anything else is a broken chain
    out = rooflab.get_variant("cpu.clock.add_chain")(blocks=10, threads=THREADS[-1])
    np.testing.assert_array_equal(out, np.arange(THREADS[-1]) + 1000)


def _asm(dispatcher, dtype=None):
    sigs = [s for s in dispatcher.signatures if dtype is None or f"array({np.dtype(dtype).name}" in str(s[0])]
    return dispatcher.overloads[sigs[0]].library.get_asm_str()


def _fresh(pyfunc):
    """A non-cached copy of a kernel, so its assembly can be inspected."""
    from numba import njit

    return njit(parallel=True, fastmath=pyfunc.targetoptions.get("fastmath", False))(pyfunc.py_func)


def _timed_ert_configs():
    """The (K, S) configurations the ceilings suite times: the FMA peak's and the intensity sweep's."""
    from rooflab.suite_ceilings import INTENSITIES_FP64, PEAK_CONFIGS, intensity_configs

    sweep = {(K, S) for K, _ in INTENSITIES_FP64 for S, _ in intensity_configs(32 << 10, 1 << 20)}
    configs = sorted(set(PEAK_CONFIGS) | {c for c in sweep if c[0] == max(k for k, _ in sweep)})
    # the cheapest to compile in the fast loop (each compile takes 1-8 s, growing with K x S); CI checks all
    cheapest = min(configs, key=lambda c: c[0] * c[1])
    return [pytest.param(*c, marks=() if c == cheapest else pytest.mark.slow) for c in configs]


@pytest.mark.skipif(not clock.SUPPORTED, reason="x86-64 assembly checks")
@pytest.mark.parametrize("dtype,suffix", [(np.float64, "pd"), pytest.param(np.float32, "ps", marks=pytest.mark.slow)])
@pytest.mark.parametrize("K,S", _timed_ert_configs())
def test_fma_kernel_uses_vector_fma(dtype, suffix, K, S):
    """Every configuration that is timed compiles its K x S chains to packed (ymm/zmm) FMAs (a fresh,
    uncached compile: a kernel loaded from numba's disk cache carries no assembly)."""
    k = _fresh(ert.ert_kernel(K, S))
    a = np.ones(S * 64, dtype=dtype)
    k(a, a.size, 1, dtype(0.5), dtype(0.5), 1)
    asm = _asm(k, dtype)
    vec = [ln for ln in asm.splitlines() if "vfmadd" in ln and suffix in ln and ("%ymm" in ln or "%zmm" in ln)]
    assert len(vec) >= K * S, f"K={K} S={S}: {len(vec)} packed FMAs"


@pytest.mark.skipif(not clock.SUPPORTED, reason="x86-64 assembly checks")
def test_copy_is_a_load_store_loop_not_memcpy():
    k = _fresh(stream.copy)
    a = np.ones(1024)
    k(a, a, 1, 1, 0.0)
    asm = _asm(k)
    assert "memcpy" not in asm and "memmove" not in asm
    assert any(
        ("vmovup" in ln or "vmovap" in ln or "vadd" in ln) and ("%ymm" in ln or "%zmm" in ln) for ln in asm.splitlines()
    )


@pytest.mark.slow  # compiles the read kernel at every accumulator count: ~4.5 s
@pytest.mark.skipif(not clock.SUPPORTED, reason="x86-64 assembly checks")
def test_read_kernel_keeps_several_vector_accumulators():
    k = _fresh(stream.read_sum)
    k(np.ones(4096), 1, 1)
    adds = [ln for ln in _asm(k).splitlines() if "vaddpd" in ln and "(" in ln and ("%ymm" in ln or "%zmm" in ln)]
    assert len(adds) >= 4


def test_intensity_sweep_is_declared_per_thread_count_and_each_point_verifies():
    """The CPU intensity sweep is data (one Case per point and thread count); a point run through
    the driver processes the slice its reference was computed on, and moves on to the next one."""
    from rooflab import suite_ceilings as sc
    from rooflab.cpu.backend import cpu_backend
    from rooflab.driver import Driver, Settings

    plan = sc.Plan(threads_all=2, quick=True)
    cases = sc.intensity_cases(plan, 32 << 10, 16 << 20, 1 << 20)
    points, configs = sc.intensity_points(plan), sc.intensity_configs(32 << 10, 1 << 20)
    n = len(points) * len(configs)
    assert [c.threads for c in cases] == [2] * n + [1] * n
    assert [c.meta["intensity"] for c in cases[:n:2]] == [K * p / 8 for K, p in points]
    assert {(c.params["S"], c.params["block"]) for c in cases} == set(configs)
    case = cases[n + 5]  # 1 thread, a middle point, 8 streams
    driver = Driver(cpu_backend(probe=False), Settings(budget_s=0.02, min_samples=2, probe_clock=False))
    a, rot = driver.inputs(case)
    rec = driver.run_case(case, (a, rot))
    assert rec.status == "ok" and rec.verified, rec.error
    assert rec.work["flops"] == 2.0 * case.params["K"] * rec.reps * rot.n
    assert 0 < rot.n <= a.size and rot.offset > 0  # the timed calls walked on through the array


@pytest.mark.slow
def test_intensity_point_whose_kernel_skips_the_slice_fails_verification():
    from rooflab.errors import VerificationError
    from rooflab.families import intensity
    from rooflab.verify import check

    a, rot = intensity._rotating_inputs(64 << 20, threads=1)  # 8 slices of the 8 MiB minimum
    params = {"K": 4, "S": 8, "block": 512, "reps": 2, "threads": 1, "target_s": 0.001}
    expected = intensity._ert_rotating_reference(a, rot, **params)
    rot.advance()  # a kernel that works on the next slice, not the one it was asked for
    got = intensity._ert_rotating(a, rot, **params)
    assert rot.n < a.size and got.shape == expected.shape
    with pytest.raises(VerificationError):
        check(got, expected, dtype=np.float64, what="skipping kernel")


def test_the_sweep_keeps_the_fastest_configuration_of_each_point():
    from rooflab.suite_ceilings import best_sweep_points

    pts = [
        {"threads": 1, "intensity": 0.5, "gflops": {"median": 3.0}, "label": "S=1"},
        {"threads": 1, "intensity": 0.5, "gflops": {"median": 2.0}, "label": "S=8"},
        {"threads": 1, "intensity": 8, "gflops": {"median": 9.0}, "label": "S=1", "status": "failed"},
        {"threads": 1, "intensity": 8, "gflops": {"median": 7.0}, "label": "S=8"},
        {"threads": 2, "intensity": 0.5, "gflops": {"median": 5.0}, "label": "S=8"},
    ]
    kept = {(p["threads"], p["intensity"]): p["label"] for p in best_sweep_points(pts)}
    assert kept == {(1, 0.5): "S=1", (1, 8): "S=8", (2, 0.5): "S=8"}


@pytest.mark.slow
def test_intensity_point_on_a_small_array_uses_shorter_blocks():
    """--max-working-set 256K gives the sweep a 32 Ki-element array: smaller than 2 threads x an
    L2-sized block; the point still runs (shorter blocks) and verifies."""
    from rooflab import suite_ceilings as sc

    plan = sc.Plan(threads_all=2, quick=True)
    driver = Driver(cpu_backend(probe=False), Settings(budget_s=0.01, min_samples=2, probe_clock=False))
    for case in sc.intensity_cases(plan, 32 << 10, 256 << 10, 1 << 20)[:2]:
        rec = driver.run_case(case)
        assert rec.status == "ok" and rec.verified, rec.error


def test_shipped_ert_kernels_are_checked_in_and_in_sync():
    """Every shipped (K, S) is an ordinary module-level function of kernels/cpu/ert.py (numba caches
    it on disk), generated by ert_source; any other (K, S) is refused with the way to add it."""
    import inspect
    from pathlib import Path

    from rooflab.suite_ceilings import INTENSITIES_FP64, PEAK_CONFIGS, intensity_configs
    from rooflab.suite_probe import PROBE_PEAK

    timed = set(PEAK_CONFIGS) | {PROBE_PEAK}
    timed |= {(K, S) for K, _ in INTENSITIES_FP64 for S, _ in intensity_configs(32 << 10, 1 << 20)}
    assert timed <= set(ert.SHIPPED)
    for K, S in ert.SHIPPED:
        k = ert.ert_kernel(K, S)
        assert Path(inspect.getsourcefile(k.py_func)) == Path(ert.__file__)
        assert k._cache.__class__.__name__ != "NullCache", f"K={K} S={S} is not cached on disk"
    text = inspect.getsource(ert)
    assert text.rstrip("\n").endswith(ert.generated_source().rstrip("\n")), (
        "regenerate with: python -m rooflab.kernels.cpu.ert"
    )
    with pytest.raises(ValueError, match="SHIPPED"):
        ert.ert_kernel(3, 5)
