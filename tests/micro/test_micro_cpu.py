"""Micro-benchmarks (pytest-benchmark): the quick check a kernel author runs before committing.

    pytest tests/micro --benchmark-enable --benchmark-only       # time them (stats table)
    pytest tests/micro --benchmark-enable --benchmark-only --benchmark-autosave   # keep a baseline
    pytest tests/micro --benchmark-enable --benchmark-only --benchmark-compare --benchmark-compare-fail=median:10%

What is timed: dispatch (empty @njit call, np.add on 8 elements, a parallel region's fork/join),
N tiny ops op by op vs fused, the two fused chains against their unfused versions at small
(cache-resident) sizes, and one variant of each family at a small size. Every benchmarked call is
verified against its float64 reference first, so in the plain test run (pyproject's addopts has
--benchmark-disable: each body runs once, untimed) these are correctness tests that take a second.
A shared 2-core VM swings by 10-30 % between runs: compare on a quiet machine, never gate CI on it.
"""

import numpy as np
import pytest
from rooflab.kernels.cpu import latency

import rooflab
from rooflab import verify
from rooflab.threads import use_threads


def _checked(v, inputs, threads=1, **params):
    """Verify once, then return the call pytest-benchmark times (``threads`` fixed for the run)."""
    params = v.params(**params)
    expected = v.reference(*inputs, **params)
    with use_threads(threads):
        got = v.kernel(*inputs, threads=threads, **params)
    dtype = v.result_dtype(*inputs, **params) if v.result_dtype else inputs[0].dtype
    verify.check(got, expected, dtype=dtype, what=v.name)
    return lambda: v.kernel(*inputs, threads=threads, **params)


@pytest.mark.benchmark(group="dispatch")
def test_empty_njit_call(benchmark):
    latency.empty()
    assert benchmark(latency.empty) == 1


@pytest.mark.benchmark(group="dispatch")
def test_tiny_ufunc(benchmark):
    a, b, c = np.ones(8), np.full(8, 2.0), np.empty(8)
    benchmark(np.add, a, b, out=c)
    assert np.all(c == 3.0)


@pytest.mark.benchmark(group="dispatch")
def test_parallel_region_fork_join(benchmark):
    from rooflab.threads import max_threads

    out = np.zeros(max_threads())
    with use_threads(out.size):
        latency.fork_join(out)
        benchmark(latency.fork_join, out)
    assert np.array_equal(out, np.arange(1, out.size + 1))


@pytest.mark.parametrize("n_ops", [1, 4, 16])
@pytest.mark.parametrize(
    "name", ["cpu.elementwise.tiny_chain.00-numpy-op-by-op", "cpu.elementwise.tiny_chain.01-numba-fused"]
)
def test_tiny_chain(benchmark, name, n_ops):
    """Timed without the variant's argument checks (~3 us): the chain's own dispatch cost."""
    from rooflab.families.elementwise.cpu import tiny_chain_step

    benchmark.group = f"tiny chain N={n_ops}"
    v = rooflab.get_variant(name)
    x, out = v.inputs({"numel": 8}, np.float64)
    _checked(v, (x, out), n_ops=n_ops)
    benchmark(tiny_chain_step(x, out, n_ops, fused=v.number == 1))
    np.testing.assert_allclose(out, v.reference(x, out, n_ops=n_ops), rtol=1e-12)


CHAINS = {
    "bias_gelu_add": {"rows": 64, "cols": 768},  # 49k elements, 192 KiB per f32 array: L2
    "bn_add_relu": {"N": 1, "C": 64, "H": 28, "W": 28},
}


@pytest.mark.parametrize("chain", list(CHAINS))
@pytest.mark.parametrize("rung", ["00-numpy-unfused", "01-numba-unfused", "02-numba-fused"])
def test_chain_fused_vs_unfused(benchmark, chain, rung):
    benchmark.group = f"chain {chain}"
    v = rooflab.get_variant(f"cpu.elementwise.{chain}.{rung}")
    ins = v.inputs(CHAINS[chain], np.float32)
    benchmark.extra_info["bytes"] = v.work(*ins).bytes
    benchmark(_checked(v, ins))


FAMILIES = {  # one variant per family at a small size: (variant, size, dtype)
    "stream": ("cpu.stream.triad", 1 << 14, np.float64),
    "elementwise": ("cpu.elementwise.gelu.01-numba", {"numel": 1 << 14}, np.float32),
    "elementwise-rows": ("cpu.elementwise.layernorm.01-numba", {"rows": 32, "cols": 768}, np.float32),
    "chase": ("cpu.chase.02-random-cycle-hugepages", 16 << 10, None),
}


@pytest.mark.parametrize("family", list(FAMILIES))
def test_one_variant_per_family(benchmark, family):
    benchmark.group = "families"
    name, size, dtype = FAMILIES[family]
    v = rooflab.get_variant(name)
    ins = v.inputs(size, dtype) if dtype is not None else v.inputs(size)
    benchmark.extra_info["variant"] = name
    benchmark(_checked(v, ins))


@pytest.mark.parametrize("name", ["cpu.gemm.00-numpy-blas", "cpu.gemm.05-multithreaded"])
def test_decode_gemv_call(benchmark, name):
    """A gemm variant at M = 1 on a cache-resident 1 x 8 x 64: the per-call cost every decode GEMV of
    `rooflab llm` pays beyond its weight stream (211 calls a SmolLM-135M token). The argument check
    once read dtype.name (~3.5 us each, twice a call): 9.1 us a call, now 3.6 us (numpy alone 1.3 us)."""
    benchmark.group = "dispatch"
    v = rooflab.get_variant(name)
    benchmark(_checked(v, v.inputs({"M": 1, "N": 8, "K": 64}, np.float32)))


@pytest.mark.benchmark(group="dispatch")
def test_use_threads_enter_and_exit(benchmark):
    """What every verified and timed call pays to set numba's and the BLAS pool (threadpoolctl
    rescanning the loaded libraries on each call made this ~0.3 ms)."""

    def enter_exit():
        with use_threads(1) as n:
            return n

    assert benchmark(enter_exit) == 1
