"""The AVX-512 BF16 GEMM rung (kernels/cpu/bf16_gemm.py, `cpu.bgemm.02-avx512-dpbf16ps`): exact at
every edge shape and thread count, its packing pinned by its definition, a wrong twin rejected, its
micro-kernel in sync with the generator, and skipped with the reason where the CPU has no AVX-512
BF16 (never compiled there: LLVM's assembler would abort)."""

from __future__ import annotations

import dataclasses
import inspect

import numpy as np
import pytest
from rooflab.kernels.cpu import bf16_gemm as G

import rooflab
from rooflab.cpu.backend import cpu_backend
from rooflab.driver import Driver, Settings
from rooflab.families import bgemm
from rooflab.threads import max_threads

DRIVER = Driver(cpu_backend(), Settings(budget_s=0.0, min_samples=1, probe_clock=False, max_attempts=1))
THREADS = sorted({1, max_threads()})
SHAPES = [(12, 32, 2), (1, 7, 3), (13, 33, 5), (97, 130, 301)]  # one whole tile, then every edge
V = "cpu.bgemm.02-avx512-dpbf16ps"


def _need():
    why = G.available()
    if why:
        pytest.skip(why)


def test_the_micro_kernel_is_what_the_generator_writes():
    text = inspect.getsource(G)
    assert text.rstrip("\n").endswith(G.generated_source().rstrip("\n")), (
        "regenerate with: python -m rooflab.kernels.cpu.bf16_gemm"
    )


def test_b_and_a_are_packed_in_k_pairs():
    rng = np.random.default_rng(0)
    B = rng.integers(0, 2**16, (5, 40), dtype=np.uint16)
    Bp = G.pack(B)  # [panel][k pair][column] words: low half B[2g], high half B[2g + 1]
    kg, panels = 3, -(-40 // G.NR)  # NR columns a panel: 32 where numba's target has zmm, 16 on AVX2
    assert Bp.shape == (kg * panels * G.NR,)
    w = Bp.view(np.uint32).reshape(panels, kg, G.NR)
    for p, g, j in [(0, 0, 0), (0, 2, G.NR - 1), (1, 1, 7), (panels - 1, 2, 8)]:
        n = p * G.NR + j
        lo = int(B[2 * g, n]) if n < 40 else 0
        hi = int(B[2 * g + 1, n]) if (2 * g + 1 < 5 and n < 40) else 0
        assert w[p, g, j] == lo | (hi << 16)
    A = rng.integers(0, 2**16, (13, 5), dtype=np.uint16)
    Ap = np.zeros(24 * kg, np.int32)
    G.pack_a_words(A, Ap.view(np.uint16), 24)
    a = Ap.view(np.uint32).reshape(2, kg, G.MR)
    assert a[1, 2, 0] == A[12, 4] and a[0, 1, 3] == int(A[3, 2]) | (int(A[3, 3]) << 16) and a[1, 0, 1] == 0


def test_the_rung_is_refused_where_the_cpu_has_no_avx512_bf16():
    assert G.available("+avx2,+fma") == "the CPU (or numba's target) has no AVX-512 BF16"
    assert "narrower than 512" in G.available("+avx512f,+avx512bf16", bits=256)
    assert G.available("+avx512f,+avx512bf16", bits=512) is None


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("threads", THREADS)
def test_the_avx512_bf16_gemm_is_exact_at_every_edge(shape, threads):
    _need()
    M, N, K = shape
    v = rooflab.get_variant(V)
    rec = DRIVER.measure(v, v.inputs({"M": M, "N": N, "K": K}, seed=1), threads=threads, params={})
    assert rec.status == "ok" and rec.verified, rec.error
    A, B = v.inputs({"M": M, "N": N, "K": K}, seed=2)
    assert np.array_equal(v.kernel(A, B, threads=threads), bgemm.reference(A, B).astype(np.float32))


def test_a_wrong_avx512_bf16_gemm_is_rejected():
    _need()
    v = rooflab.get_variant(V)
    good = v.kernel

    def dropped_term(A, B, reps=1, threads=None):  # the last k pair never reaches the accumulators
        return good(np.ascontiguousarray(A[:, :-2]), np.ascontiguousarray(B[:-2]), reps=reps, threads=threads)

    def pairs_swapped(A, B, reps=1, threads=None):  # B's pair halves exchanged: a misread layout
        Bs = np.ascontiguousarray(B.reshape(-1, 2, B.shape[1])[:, ::-1].reshape(B.shape))
        return good(A, Bs, reps=reps, threads=threads)

    for wrong in (dropped_term, pairs_swapped):
        rec = DRIVER.measure(dataclasses.replace(v, kernel=wrong), v.inputs({"M": 30, "N": 40, "K": 64}, seed=3),
                             threads=1, params={})  # fmt: skip
        assert rec.status == "failed", wrong.__name__


def test_the_suite_runs_the_rung_and_its_unit_peak_only_where_the_cpu_has_it(monkeypatch):
    cases = bgemm.cases(quick=True, threads=[1])
    has = G.available() is None
    assert any(c.variant == V for c in cases) == has
    assert any(c.variant == "cpu.lowprec.bf16-avx512" for c in cases) == has
    assert all(c.meta.get("unit") == "bf16-avx512" for c in cases if c.variant == V)
    monkeypatch.setattr(G, "available", lambda *a, **k: "the CPU (or numba's target) has no AVX-512 BF16")
    assert not any("avx512" in c.variant for c in bgemm.cases(quick=True, threads=[1]))
    v = rooflab.get_variant(V)
    rec = DRIVER.measure(v, v.inputs({"M": 8, "N": 8, "K": 8}, seed=9), threads=1, params={})
    assert rec.status == "failed" and "has no AVX-512 BF16" in rec.error  # one line, never a SIGILL
