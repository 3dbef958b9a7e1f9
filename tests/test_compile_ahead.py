"""Compiling a cold cache's slow kernels ahead, on every core, before a run times anything."""

from __future__ import annotations

import pytest

from rooflab import compile_ahead as ca
from rooflab.registry import Case


def _cases():
    ert = Case("cpu.ert.fma", size=64, dtype="float32", threads=1, params={"K": 32, "S": 8, "block": 64})
    same = Case("cpu.ert.fma", size=128, dtype="float32", threads=2, params={"K": 32, "S": 8, "block": 64})
    sweep = Case("cpu.intensity.ert-rotating", size=1 << 20, dtype="float64", threads=1, params={"K": 4, "S": 1})
    unit = Case("cpu.lowprec.int8-avx2", size=1, threads=1)
    other = Case("cpu.stream.triad", size=1024, threads=1)
    return [ert, same, sweep, unit, other]


def test_one_job_per_kernel_and_dtype_and_none_for_quick_compiles():
    assert ca.jobs_for(_cases()) == [("ert", 32, 8, "float32"), ("ert", 4, 1, "float64"), ("lowprec", "int8-avx2")]


def test_a_compiled_kernel_is_seen_in_the_cache_per_dtype():
    job = ("ert", 1, 1, "float64")
    ca._warm(job)  # this process compiles (or loads) it into numba's cache
    assert ca.cached(job)
    assert ca._warm(("lowprec", "w4-dequant-fma")) >= 0 and ca.cached(("lowprec", "w4-dequant-fma"))


def test_a_warm_cache_starts_no_worker(monkeypatch):
    monkeypatch.setattr(ca, "cached", lambda job: True)
    monkeypatch.setattr(ca.cf, "ProcessPoolExecutor", None)  # a pool started here would fail the test
    assert ca.compile_ahead(_cases(), 2) is None


@pytest.mark.slow
def test_a_cold_kernel_is_compiled_in_a_worker_process(monkeypatch):
    monkeypatch.setattr(ca, "cached", lambda job: job == ("lowprec", "int8-avx2"))
    got = ca.compile_ahead(_cases()[:3], 2)
    assert (
        got["workers"] == 2
        and got["compiled"] == 2
        and got["jobs"] == [["ert", 32, 8, "float32"], ["ert", 4, 1, "float64"]]
    )


def test_a_worker_warming_an_amx_unit_asks_for_the_tile_state_first():
    """A spawned worker that ran an AMX kernel without Linux's permission died of SIGILL (on a host
    without torch, whose import asks for it), and the cold run with it."""
    import subprocess
    import sys

    from rooflab.kernels.cpu import amx

    if amx.available("bf16"):
        pytest.skip(amx.available("bf16"))
    code = 'import sys; sys.modules["torch"] = None\nfrom rooflab import compile_ahead as ca\nprint(ca._warm(("lowprec", "amx-bf16")))'
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-500:]
