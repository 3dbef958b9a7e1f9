"""The AMX GEMM rungs (kernels/cpu/amx_gemm.py): bf16 in `bgemm`, u8 x s8 in `qgemm` beside
MatMulInteger; exact at every edge shape, the packing pinned by its definition, a wrong twin
rejected, skipped with the reason where the CPU has no AMX (run only where it has)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from rooflab.kernels.cpu import amx as X
from rooflab.kernels.cpu import amx_gemm as G

import rooflab
from rooflab.cpu.backend import cpu_backend
from rooflab.driver import Driver, Settings
from rooflab.families import bgemm
from rooflab.threads import max_threads

DRIVER = Driver(cpu_backend(), Settings(budget_s=0.0, min_samples=1, probe_clock=False, max_attempts=1))
THREADS = sorted({1, max_threads()})
SHAPES = [(32, 32, 32), (1, 70, 100), (50, 33, 65), (97, 130, 300)]  # whole blocks, then every edge


def _need(kind):
    why = X.available(kind)
    if why:
        pytest.skip(why)


def test_b_is_packed_in_the_vnni_layout_and_a_in_row_tiles():
    rng = np.random.default_rng(0)
    B = rng.integers(-128, 128, (70, 20), dtype=np.int8)
    Bp = G.pack_weights(B, "int8")  # [column tile][k step][row][per * column + e]
    assert Bp.shape == (2, 2, 16, 64)
    for jb, kb, r, c, e in [(0, 0, 0, 0, 0), (0, 1, 1, 3, 2), (1, 0, 5, 3, 1), (1, 1, 0, 2, 1)]:
        k, n = kb * 64 + 4 * r + e, jb * 16 + c
        assert Bp[jb, kb, r, 4 * c + e] == (B[k, n] if (k < 70 and n < 20) else 0)
    A = rng.integers(0, 256, (20, 70), dtype=np.uint8)
    Ap = np.empty((2, 2, 16, 64), np.uint8)
    G.pack_a(A, Ap, 64, 1)
    assert Ap[1, 1, 3, 5] == A[19, 69] and Ap[1, 1, 4, 0] == 0 and Ap[0, 1, 0, 6] == 0


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("threads", THREADS)
def test_amx_bf16_gemm_is_exact_at_every_edge(shape, threads):
    _need("bf16")
    M, N, K = shape
    v = rooflab.get_variant("cpu.bgemm.01-amx-tdpbf16ps")
    rec = DRIVER.measure(v, v.inputs({"M": M, "N": N, "K": K}, seed=1), threads=threads, params={})
    assert rec.status == "ok" and rec.verified, rec.error
    A, B = v.inputs({"M": M, "N": N, "K": K}, seed=2)
    assert np.array_equal(v.kernel(A, B, threads=threads), bgemm.reference(A, B).astype(np.float32))


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("threads", THREADS)
def test_amx_int8_gemm_matches_matmulinteger_exactly(shape, threads):
    _need("int8")
    M, N, K = shape
    v = rooflab.get_variant("cpu.qgemm.02-amx-tdpbusd")
    rec = DRIVER.measure(v, v.inputs({"M": M, "N": N, "K": K}, seed=1), threads=threads, params={})
    assert rec.status == "ok" and rec.verified, rec.error


def test_a_wrong_amx_gemm_is_rejected():
    _need("bf16")
    v = rooflab.get_variant("cpu.bgemm.01-amx-tdpbf16ps")
    good = v.kernel

    def short_k(A, B, reps=1, threads=None):  # the last k step never reaches the tiles
        return good(np.ascontiguousarray(A[:, :-32]), np.ascontiguousarray(B[:-32]), reps=reps, threads=threads)

    def transposed(A, B, reps=1, threads=None):  # B's VNNI pairs misread as a plain row-major tile
        return good(A, np.ascontiguousarray(B.reshape(-1, 2, B.shape[1]).swapaxes(1, 2).reshape(B.shape)), reps=reps,
                    threads=threads)  # fmt: skip

    for wrong in (short_k, transposed):
        rec = DRIVER.measure(dataclasses.replace(v, kernel=wrong), v.inputs({"M": 64, "N": 64, "K": 128}, seed=3),
                             threads=1, params={})  # fmt: skip
        assert rec.status == "failed", wrong.__name__


def test_variant_0_is_torch_when_installed_else_numpy_fp32_said_so():
    name = bgemm.library()
    v = rooflab.get_variant(f"cpu.bgemm.{name}")
    assert v.number == 0 and v.description.startswith("torch.nn.functional.linear") == (name == "00-torch-bf16")
    if name == "00-numpy-fp32":
        assert "torch is not installed" in v.description
    rec = DRIVER.measure(v, v.inputs({"M": 40, "N": 24, "K": 96}, seed=1), threads=1, params={})
    assert rec.status == "ok", rec.error


def test_the_suites_time_the_amx_rungs_only_where_the_cpu_runs_them(monkeypatch):
    from rooflab.families import qgemm

    cases = bgemm.cases(quick=True, threads=[1])
    assert any(c.variant.endswith("01-amx-tdpbf16ps") for c in cases) == (X.available("bf16") is None)
    monkeypatch.setattr(X, "available", lambda kind, *a: "the CPU (or numba's target) has no AMX BF16 (tdpbf16ps)")
    assert not any(
        "amx" in c.variant for c in bgemm.cases(quick=True, threads=[1]) + qgemm.cases(quick=True, threads=[1])
    )
    v = rooflab.get_variant("cpu.bgemm.01-amx-tdpbf16ps")
    rec = DRIVER.measure(v, v.inputs({"M": 32, "N": 32, "K": 32}), threads=1, params={})
    assert rec.status == "failed" and "has no AMX BF16" in rec.error  # one line, never a SIGILL


def test_the_tiles_and_c_start_on_a_cache_line_and_an_unaligned_out_is_still_right():
    """A tile row is one 64-byte line only on a 64-byte boundary: numpy's 16-byte offset split every
    row load over two lines (the rung ran 0.2 of the AMX peak); packing works on every host."""
    rng = np.random.default_rng(1)
    for shape in ((130, 64), (200, 96), (70, 40), (2048, 256)):  # numpy would land one on a line by chance
        W = rng.integers(-128, 128, shape, dtype=np.int8)
        assert G.pack_weights(W, "int8").ctypes.data % 64 == 0
        assert G.pack_weights(W.astype(np.uint16), "bf16").ctypes.data % 64 == 0
    B = rng.integers(-128, 128, (130, 64), dtype=np.int8)
    _need("int8")
    A = rng.integers(0, 256, (64, 130), dtype=np.uint8)
    raw = np.empty(64 * 64 * 4 + 64, np.uint8)
    off = (16 - raw.ctypes.data) % 64 or 16  # 16 bytes into a line, as numpy places its arrays
    out = raw[off : off + 64 * 64 * 4].view(np.int32).reshape(64, 64)
    assert out.ctypes.data % 64 != 0
    G.matmul(A, G.pack_weights(B, "int8"), 64, "int8", out=out)
    np.testing.assert_array_equal(out, A.astype(np.int64) @ B.astype(np.int64))
