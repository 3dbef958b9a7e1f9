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
    with pytest.raises(VerificationError, match="non-finite"):
        check(np.array([1.0, np.nan]), np.array([1.0, np.inf]))
    with pytest.raises(VerificationError, match="shape"):
        check(np.zeros(3), np.zeros(4))


# Each tolerance pinned, rtol and atol separately: a result off by just more than the entry fails,
# just less passes. Loosening or tightening any entry of the table (e.g. float32 1e-4 -> 1e-1) makes
# one of the two cases go the wrong way. The list is the table itself: a new entry is pinned too.
ENTRIES = [(dtype, kind) for dtype, kinds in TOLERANCES.items() for kind in kinds]


@pytest.mark.parametrize("dtype, kind", ENTRIES, ids=lambda x: str(x))
def test_every_tolerance_is_pinned(dtype, kind):
    rtol, atol = TOLERANCES[dtype][kind]
    # atol: the expected value is 0, so the bound is atol alone
    zero = np.zeros(101)
    if atol:
        check(zero + 0.9 * atol, zero, dtype=dtype, kind=kind)
        with pytest.raises(VerificationError, match="outside"):
            check(zero + 1.1 * atol, zero, dtype=dtype, kind=kind)
    else:  # exact: the smallest difference fails
        check(zero, zero, dtype=dtype, kind=kind)
        with pytest.raises(VerificationError, match="outside"):
            check(zero + 1.0, zero, dtype=dtype, kind=kind)
    # rtol: values large enough that atol is < 0.1 % of the bound
    big = np.linspace(1.0, 2.0, 101) * max(1.0, 1000.0 * atol / rtol if rtol else 1000.0)
    if rtol:
        check(big + 0.9 * rtol * big, big, dtype=dtype, kind=kind)
        with pytest.raises(VerificationError, match="outside"):
            check(big + 1.1 * rtol * big + atol, big, dtype=dtype, kind=kind)
    else:  # no relative part: large values get atol alone (uint8 codes: one step)
        with pytest.raises(VerificationError, match="outside"):
            check(big + max(1.0, 1.1 * atol), big, dtype=dtype, kind=kind)


def test_special_values_must_match():
    """NaN expected: only NaN passes; an infinity expected: only the same infinity (before issue 25 a
    finite value where NaN was expected, and -inf where +inf was, both passed)."""
    exp = np.array([1.0, np.nan, np.inf, -np.inf])
    check(exp.copy(), exp)  # NaN == NaN, inf == inf where expected so
    for i, wrong in ((1, 0.0), (2, -np.inf), (2, 1e308), (3, np.inf), (3, np.nan), (0, np.inf)):
        got = exp.copy()
        got[i] = wrong
        with pytest.raises(VerificationError, match="non-finite mismatch"):
            check(got, exp)
    with pytest.raises(VerificationError, match="non-finite mismatch"):
        check(np.array([0.0, 1.0]), np.nan)  # a scalar closed form too


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


def test_interleaved_rounds_keep_every_sample_and_ratio_per_round():
    """Driver.interleaved: each entry verified, then timed once per round; per-round ratios against
    the group's base; a wrong kernel gets a failed record and the others still run."""
    from rooflab import get_variant
    from rooflab.driver import Entry

    triad, copy = get_variant("cpu.stream.triad"), get_variant("cpu.stream.copy")
    n = 1 << 14
    d = Driver(cpu_backend(), Settings(target_s=0.001, probe_clock=False))
    wrong = wrong_kernels.ALL[0]()
    entries = [
        Entry(copy, copy.inputs(n, np.float64), label="copy", group="g"),
        Entry(triad, triad.inputs(n, np.float64), label="triad", group="g"),
        Entry(
            wrong,
            wrong.inputs(4096, np.float64),
            label="wrong",
            group="g",
            params={"block": 4096} if wrong.family == "ert" else {},
        ),
    ]
    recs = d.interleaved(entries, rounds=4)
    ok = {r.label: r for r in recs if r.status == "ok"}
    assert set(ok) == {"copy", "triad"} and [r.label for r in recs if r.status == "failed"] == ["wrong"]
    for r in ok.values():
        assert len(r.samples_s) == 4 and r.verified and r.gbps["median"] > 0
        assert len(r.meta["round_ratios"]) == 4 and r.meta["base"] == "copy"
    assert ok["copy"].meta["ratio"] == 1.0
    assert ok["triad"].meta["ratio"] > 0


def test_interleaved_carries_other_families_in_their_groups_with_per_round_clocks():
    """The FMA peak (fma family's ERT kernel) and a stream roof ride in the same rounds as the
    compared entries, each in its own group (ratios stay within groups); the backend's clock is
    probed before every round and after the last, and a round that began below CLOCK_DROP of the
    best clock makes the records noisy with the reason (issue 26: scripts' own loops go)."""
    from dataclasses import replace

    from rooflab import get_variant
    from rooflab.driver import CLOCK_DROP, Entry
    from rooflab.suite_ceilings import peak_case

    calls = []

    def clock(threads):  # a fake probe: the third probe finds the core taken by a neighbour
        calls.append(threads)
        return [3.0 * (CLOCK_DROP - 0.2 if len(calls) == 3 else 1.0)] * threads

    d = Driver(replace(cpu_backend(), clock=clock), Settings(target_s=0.001))
    copy, triad = get_variant("cpu.stream.copy"), get_variant("cpu.stream.triad")
    peak = peak_case("float64", 1, 32 << 10, 32, 8)
    n = 1 << 12
    entries = [
        Entry(copy, copy.inputs(n, np.float64), label="copy", group="op", meta={"role": "roof"}),
        Entry(triad, triad.inputs(n, np.float64), label="triad", group="op"),
        Entry(
            peak.variant,
            Driver.inputs(peak),
            params=peak.params,
            verify_params=peak.verify_params,
            label="peak",
            group="peak",
        ),  # fmt: skip
        Entry(copy, copy.inputs(n, np.float64), label="no group", meta={"group": "from the case"}),
    ]
    recs = {r.label: r for r in d.interleaved(entries, rounds=3)}
    assert all(r.status == "ok" and r.verified for r in recs.values())
    assert recs["peak"].family == "ert" and recs["peak"].gflops["median"] > 0
    assert recs["peak"].meta["base"] == "peak" and recs["peak"].meta["ratio"] == 1.0
    assert recs["triad"].meta["base"] == "copy" and recs["copy"].meta["role"] == "roof"
    assert recs["no group"].meta["group"] == "from the case"  # an entry without a group keeps its meta's
    assert calls == [1] * 4  # one probe per thread count before each of 3 rounds, one after the last
    for r in recs.values():
        assert len(r.meta["round_clock_ghz"]) == 3 and r.clock_ghz["after"] == [3.0]
        assert r.noisy and "before round i" in r.noise_reasons[0] and "[2]" in r.noise_reasons[0]


def test_interleaved_cpu_time_per_sample_for_one_thread_entries_only():
    """``cpu_time``: the calling thread's CPU time of each 1-thread sample beside its wall time and
    a per-group ``cpu_ratio``; a 2-thread entry (its CPU time is spread over threads) gets none;
    without a clock probe no clock fields."""
    from rooflab import get_variant
    from rooflab.driver import Entry

    copy = get_variant("cpu.stream.copy")
    d = Driver(cpu_backend(probe=False), Settings(target_s=0.002))
    n = 1 << 14
    entries = [
        Entry(copy, copy.inputs(n, np.float64), label="a", group="g"),
        Entry(copy, copy.inputs(2 * n, np.float64), label="b", group="g"),
        Entry(copy, copy.inputs(n, np.float64, threads=2), label="2T", group="t", threads=2),
    ]
    recs = {r.label: r for r in d.interleaved(entries, rounds=4, cpu_time=True)}
    for label in ("a", "b"):
        cpu, wall = recs[label].meta["cpu_samples_s"], recs[label].samples_s
        assert len(cpu) == 4 and all(0 < c <= w * 1.05 + 1e-4 for c, w in zip(cpu, wall))
        assert len(recs[label].meta["round_cpu_ratios"]) == 4
    assert recs["a"].meta["cpu_ratio"] == 1.0 and recs["b"].meta["cpu_ratio"] > 0
    assert "cpu_samples_s" not in recs["2T"].meta and "cpu_ratio" not in recs["2T"].meta
    assert "round_clock_ghz" not in recs["a"].meta and recs["a"].clock_ghz is None
    assert "cpu_samples_s" not in d.interleaved(entries[:1], rounds=2)[0].meta  # off by default


@pytest.mark.parametrize(
    "case",
    ["match", "one-off", "many-off", "nan-expected", "nan-got", "inf-sign", "scalar", "int", "f32-vs-f64"],
)
def test_one_pass_check_reports_and_fails_as_the_numpy_path(case, monkeypatch):
    """kernels/cpu/compare.py (large host arrays) and the chunked numpy path give the same report and
    the same error on the same inputs: a wrong element, NaN/inf rules, a scalar reference, integers."""
    from rooflab import verify

    rng = np.random.default_rng(7)
    n = 3000
    exp = rng.standard_normal(n)
    got = exp * (1 + 1e-9)
    dtype = None
    if case == "one-off":
        got[1234] += 1e-3
    elif case == "many-off":
        got[::7] *= 1.01
        got[2000] *= 1.5
    elif case == "nan-expected":
        exp[10] = np.nan
        got[10] = np.nan
        got[11] = np.nan
    elif case == "nan-got":
        got[500] = np.nan
    elif case == "inf-sign":
        exp[3] = np.inf
        got[3] = -np.inf
    elif case == "scalar":
        got = np.full(n, 0.625)
        got[2999] = 0.626
        exp = np.float64(0.625)
    elif case == "int":
        exp = rng.integers(-1000, 1000, n)
        got = exp.copy()
        got[42] += 1
    elif case == "f32-vs-f64":
        got = exp.astype(np.float32)
        got[77] += np.float32(0.01)

    def outcome(min_elems):
        monkeypatch.setattr(verify, "ONE_PASS_MIN", min_elems)
        try:
            return verify.check(got, exp, dtype=dtype, what="r")
        except verify.VerificationError as e:
            return str(e)

    numpy_path, one_pass = outcome(1 << 62), outcome(0)
    assert verify._one_pass(np, np.asarray(got).reshape(-1), None)
    if isinstance(numpy_path, dict):
        assert isinstance(one_pass, dict), one_pass
        assert numpy_path.keys() == one_pass.keys()
        for k, v in numpy_path.items():
            assert one_pass[k] == (pytest.approx(v, rel=1e-12, abs=0) if isinstance(v, float) else v), k
    else:
        assert one_pass == numpy_path
    if case in ("one-off", "many-off", "nan-got", "inf-sign", "scalar", "int", "f32-vs-f64"):
        assert isinstance(one_pass, str), f"{case}: a wrong result passed"
