import numpy as np
import pytest

from rooflab import VerificationError
from rooflab.cpu.backend import cpu_backend
from rooflab.driver import Driver, Settings
from rooflab.verify import TOLERANCES, check

from . import wrong_kernels


def test_check_accepts_within_tolerance():
    exp = np.linspace(1, 2, 100)
    rep = check(exp * (1 + 1e-12), exp, dtype=np.float64)
    assert rep["max_rel_err"] < 1e-11


def test_check_reports_index_got_expected():
    exp = np.arange(10.0)
    got = exp.copy()
    got[7] = 99.0
    with pytest.raises(VerificationError) as e:
        check(got, exp, dtype=np.float64, what="demo")
    msg = str(e.value)
    assert "1 of 10 elements" in msg and "(7,)" in msg and "99.0" in msg and "7.0" in msg


def test_check_rejects_nan_and_shape():
    with pytest.raises(VerificationError, match="non-finite"):
        check(np.array([1.0, np.nan]), np.array([1.0, 2.0]))
    with pytest.raises(VerificationError, match="shape"):
        check(np.zeros(3), np.zeros(4))


# Each tolerance pinned: a result off by just more than it fails, just less passes. Loosening an
# entry of the table (e.g. float32 1e-4 -> 1e-1) makes the "just more" case pass and fails here.
PINNED = [  # dtype, kind, relative error that must fail, relative error that must pass
    ("float64", "default", 2e-9, 5e-10),
    ("float64", "reduction", 2e-9, 5e-10),
    ("float32", "default", 2e-4, 5e-5),
    ("float32", "reduction", 4e-3, 1e-3),
    ("float32", "winograd4", 1e-2, 2e-3),
    ("float32", "conv", 2e-4, 5e-5),
    ("float32", "conv-winograd-f4x4", 2e-3, 5e-4),
    ("float64", "conv", 2e-9, 5e-10),
    ("float16", "default", 2e-2, 5e-3),
    ("bfloat16", "default", 6e-2, 1.5e-2),
]


@pytest.mark.parametrize("dtype, kind, fails, passes", PINNED)
def test_every_tolerance_is_pinned(dtype, kind, fails, passes):
    expected = np.linspace(1.0, 2.0, 101)  # |x| >= 1: the relative term dominates atol
    check(expected * (1 + passes), expected, dtype=dtype, kind=kind)
    with pytest.raises(VerificationError, match="outside"):
        check(expected * (1 + fails), expected, dtype=dtype, kind=kind)
    assert set(TOLERANCES[dtype]) >= {kind}


def test_integers_are_exact():
    with pytest.raises(VerificationError):
        check(np.array([3], dtype=np.int64), np.array([4], dtype=np.int64))


@pytest.mark.parametrize("make", wrong_kernels.ALL, ids=lambda f: f.__name__)
def test_driver_refuses_to_time_wrong_kernels(make):
    v = make()
    n = 4096
    inputs = v.inputs(n, np.float64)
    params = {"block": n} if v.family == "ert" else {}
    rec = Driver(cpu_backend(), Settings(budget_s=0.01, probe_clock=False)).measure(
        v, inputs, threads=1, params=params, verify_params={"reps": 2} if v.family == "ert" else None
    )
    assert rec.status == "failed" and rec.verified is False
    assert "elements outside" in rec.error
    assert rec.gflops is None and rec.gbps is None and rec.time_s is None and not rec.samples_s


def test_check_in_chunks_finds_the_worst_element_and_accepts_scalars(monkeypatch):
    import rooflab.verify as v

    monkeypatch.setattr(v, "CHUNK", 1000)
    exp = np.ones(10_000)
    got = exp.copy()
    got[2500] = 1.5
    got[7777] = 3.0  # the worst, in another chunk
    with pytest.raises(VerificationError) as e:
        check(got, 1.0, dtype=np.float64)  # closed form: every element should be 1
    assert "2 of 10000 elements" in str(e.value) and "(7777,)" in str(e.value) and "3.0" in str(e.value)
    assert check(exp, exp)["elements"] == 10_000
