import numpy as np
import pytest

from rooflab import VerificationError
from rooflab.runner import Runner, Settings
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


def test_float32_tolerance_is_looser_than_float64():
    assert TOLERANCES["float32"]["rtol"] > TOLERANCES["float64"]["rtol"]
    exp = np.ones(4)
    check((exp * (1 + 1e-6)).astype(np.float32), exp, dtype=np.float32)
    with pytest.raises(VerificationError):
        check(exp * (1 + 1e-6), exp, dtype=np.float64)


@pytest.mark.parametrize("make", wrong_kernels.ALL, ids=lambda f: f.__name__)
def test_runner_refuses_to_time_wrong_kernels(make):
    v = make()
    n = 4096
    inputs = v.inputs(n, np.float64)
    params = {"block": n} if v.family == "ert" else {}
    rec = Runner(Settings(budget_s=0.01, probe_clock=False)).measure(
        v, inputs, threads=1, params=params, verify_params={"reps": 2} if v.family == "ert" else None
    )
    assert rec["status"] == "failed" and rec["verified"] is False
    assert "elements outside" in rec["error"]
    assert "gflops" not in rec and "gbps" not in rec and "time_s" not in rec


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
