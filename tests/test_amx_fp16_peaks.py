"""The AVX-512 FP16 and AMX peaks (kernels/cpu/fp16.py, kernels/cpu/amx.py): exact on small
integers, a wrong twin rejected, the tile layout pinned by Intel's own definition of a tile
product, AMX skipped with the reason when the kernel refuses its tile state, and every unit gated
on the CPU's flags (run only where this CPU has them)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from rooflab.kernels.cpu import amx as X
from rooflab.kernels.cpu import fp16 as H

import rooflab
from rooflab.cpu.backend import cpu_backend
from rooflab.driver import Driver, Settings
from rooflab.families import lowprec
from rooflab.threads import max_threads

DRIVER = Driver(cpu_backend(), Settings(budget_s=0.0, min_samples=1, probe_clock=False, max_attempts=1))
UNITS = lowprec.available()
THREADS = sorted({1, max_threads()})


def _need(unit):
    if UNITS[unit]:
        pytest.skip(UNITS[unit])


def _tile_product(kind, a, b):
    """Intel's pseudo-code of TDPBF16PS / TDPBSSD for one A tile (16 x 64 bytes) and one B tile in
    the VNNI layout, element by element: C[m][n] += sum over k and j of A[m][per*k+j] * B[k][per*n+j]."""
    per = 2 if kind == "bf16" else 4
    c = np.zeros((16, 16), np.float64 if kind == "bf16" else np.int64)
    for m in range(16):
        for n in range(16):
            for k in range(16):
                for j in range(per):
                    c[m, n] += (
                        float(a[m, per * k + j]) * float(b[k, per * n + j])
                        if kind == "bf16"
                        else int(a[m, per * k + j]) * int(b[k, per * n + j])
                    )
    return c


@pytest.mark.parametrize("kind", ["bf16", "int8"])
def test_the_reference_is_intels_tile_product(kind):
    _, a, b, _ = X.inputs(kind, 1, seed=2)
    if kind == "bf16":
        from rooflab.kernels.cpu.bf16 import from_bf16

        a, b = from_bf16(a), from_bf16(b)
    want = 2 * 3 * (_tile_product(kind, a[0, 0], b[0, 0]) + _tile_product(kind, a[0, 1], b[0, 1]))
    got = X.reference(kind, *X.inputs(kind, 1, seed=2)[1:3], 3)
    assert np.array_equal(got[0], want.astype(got.dtype))
    assert not np.array_equal(X.unpack_vnni(b[0, 0], 2 if kind == "bf16" else 4), b[0, 0].reshape(-1, 16))


@pytest.mark.parametrize("kind", ["bf16", "int8"])
@pytest.mark.parametrize("threads", THREADS)
def test_amx_tiles_are_exact_and_a_wrong_twin_is_rejected(kind, threads):
    _need(f"amx-{kind}")
    v = rooflab.get_variant(f"cpu.lowprec.amx-{kind}")
    rec = DRIVER.measure(v, v.inputs(threads, seed=3), threads=threads, params={}, verify_params={"reps": 5})
    assert rec.status == "ok" and rec.verified, rec.error
    cfg, a, b, out = v.inputs(threads, seed=4)
    assert np.array_equal(v.kernel(cfg, a, b, out, reps=1 << 10, threads=threads), X.reference(kind, a, b, 1 << 10))
    good = v.kernel

    def swapped(cfg, a, b, out, reps=1, threads=None):  # A and B exchanged: the layout misread
        return good(cfg, b, a, out, reps=reps, threads=threads)

    def short(cfg, a, b, out, reps=1, threads=None):  # one step short
        return good(cfg, a, b, out, reps=max(int(reps) - 1, 0), threads=threads)

    def one_pair(cfg, a, b, out, reps=1, threads=None):  # the second tile pair never read
        a = a.copy()
        a[:, 1] = a[:, 0]
        return good(cfg, a, b, out, reps=reps, threads=threads)

    for wrong in (swapped, short, one_pair):
        rec = DRIVER.measure(dataclasses.replace(v, kernel=wrong), v.inputs(1, seed=5), threads=1, params={},
                             verify_params={"reps": 3})  # fmt: skip
        assert rec.status == "failed", wrong.__name__


@pytest.mark.parametrize("threads", THREADS)
def test_fp16_fma_is_exact_and_catches_a_dropped_lane(threads):
    _need("fp16-avx512")
    v = rooflab.get_variant("cpu.lowprec.fp16-avx512")
    rec = DRIVER.measure(v, v.inputs(threads, seed=3), threads=threads, params={}, verify_params={"reps": 7})
    assert rec.status == "ok" and rec.verified, rec.error
    a, b, out = v.inputs(threads, seed=4)
    got = v.kernel(a, b, out, reps=9, threads=threads)
    assert got.dtype == np.float16 and np.array_equal(got, H.reference(a, b, 9))
    good = v.kernel

    def dropped(a, b, out, reps=1, threads=None):  # the last lane of every stream read as 0
        b = b.copy()
        b[..., -1] = 0
        return good(a, b, out, reps=reps, threads=threads)

    a, b, out = v.inputs(1, seed=6)
    a[-1], b[..., -1] = np.float16([2.0, 1.0]).view(np.uint16)
    rec = DRIVER.measure(
        dataclasses.replace(v, kernel=dropped), (a, b, out), threads=1, params={}, verify_params={"reps": 3}
    )
    assert rec.status == "failed"


def test_a_refused_tile_state_skips_the_amx_peaks_with_the_reason(monkeypatch):
    from rooflab.suite_ceilings import lowprec_cases

    if X.available("bf16", "+amx-tile,+amx-bf16", "x86_64"):
        pytest.skip("numba's AMX gate")
    monkeypatch.setattr(X, "missing", lambda *a, **k: None)  # as on an AMX CPU, whatever this host is
    monkeypatch.setattr(X, "permission", lambda: "the kernel refused the AMX tile state (errno 1)")
    monkeypatch.setattr("sys.platform", "linux")
    assert X.available("bf16") == "the kernel refused the AMX tile state (errno 1)"

    class Plan:
        def thread_counts(self):
            return [1]

    monkeypatch.setattr(
        lowprec, "available", lambda: {"amx-bf16": X.available("bf16"), "amx-int8": X.available("int8")}
    )
    cases, skipped = lowprec_cases(Plan())
    assert cases == [] and len(skipped) == 2 and all("refused the AMX tile state" in s for s in skipped)


def test_units_follow_the_flags_of_a_described_cpu():
    zen4 = "+avx2,+avx512f,+avx512vnni,+avx512bf16"
    emr = zen4 + ",+avx512fp16,+amx-tile,+amx-bf16,+amx-int8"
    for kind in ("bf16", "int8"):
        assert X.available(kind, emr, "x86_64") is None
        assert "AMX" in X.available(kind, zen4, "x86_64")
        assert "not an x86-64" in X.available(kind, emr, "aarch64")
    assert H.available(emr, "x86_64") is None and "FP16" in H.available(zen4, "x86_64")


def test_the_tile_config_is_palette_1_with_16_rows_of_64_bytes():
    cfg = X.tile_config()
    assert cfg.size == 64 and cfg[0] == 1 and cfg[1] == 0
    assert list(cfg[16:32].view(np.uint16)) == [64] * 8 and list(cfg[48:56]) == [16] * 8
