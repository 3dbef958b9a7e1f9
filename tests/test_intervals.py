"""Each ceiling's interval: the run's spread and the history of earlier runs (rooflab/intervals.py),
used by `compare` and the end-of-run consistency line; and each FMA peak judged at its unit's clock."""

from __future__ import annotations

import copy
import json
import math
import statistics
from pathlib import Path

import pytest

from rooflab import cli
from rooflab.intervals import FLOOR, T95, inside, run_half_width, set_intervals

ROOT = Path(__file__).resolve().parent.parent


def _c(name, value, p20=None, p80=None, kind="bandwidth", **kw):
    stats = {"p20": p20 if p20 is not None else value, "p80": p80 if p80 is not None else value}
    return {"name": name, "kind": kind, "threads": 1, "value": value, "stats": stats, "unit": "GB/s", **kw}


def test_without_history_the_interval_is_the_run_s_own_spread_and_says_so():
    c = _c("DRAM read bandwidth, 1 thread", 20.0, 19.0, 20.4, pass_spread=0.02)
    set_intervals([c], [])
    iv = c["interval"]
    assert iv["half_width"] == pytest.approx(0.05) and iv["history_runs"] == 0 and "fewer than 2" in iv["how"]
    assert inside(c, 20.9) and not inside(c, 21.1)
    tight = _c("L1 read bandwidth, 1 thread", 200.0)  # one point, no spread: the floor
    set_intervals([tight], [])
    assert tight["interval"]["half_width"] == FLOOR


def test_history_gives_a_prediction_interval_for_the_next_run():
    runs = [{"ceilings": [_c("L3 triad bandwidth, 1 thread", v)]} for v in (90.0, 100.0, 95.0)]
    c = _c("L3 triad bandwidth, 1 thread", 97.0, 96.5, 97.5)
    set_intervals([c], runs)
    logs = [math.log(x) for x in (90.0, 100.0, 95.0, 97.0)]
    want = math.expm1(T95[2] * statistics.stdev(logs) * math.sqrt(1 + 1 / 4))
    assert c["interval"]["half_width"] == pytest.approx(want) and c["interval"]["history_runs"] == 3
    assert want > 0.1  # four runs 10 % apart: the next may well land 10 % away
    agree = [{"ceilings": [_c("L1 read bandwidth, 1 thread", v)]} for v in (200.0, 200.4)]
    one = _c("L1 read bandwidth, 1 thread", 200.2)
    set_intervals([one], agree)
    assert one["interval"]["half_width"] == FLOOR  # runs that happened to agree: never below the floor
    other = _c("L3 triad bandwidth, 1 thread", 97.0)
    other["threads"] = 2  # another thread count: no history
    set_intervals([other], runs)
    assert other["interval"]["history_runs"] == 0 and run_half_width(other) == 0


def _doc(quick_result):
    return json.loads(quick_result.read_text())


@pytest.mark.slow
def test_compare_calls_a_move_inside_a_s_interval_no_regression(quick_result, tmp_path, capsys):
    a, b = _doc(quick_result), _doc(quick_result)
    for c in a["ceilings"]:
        c["interval"] = {"lo": 0.85 * c["value"], "hi": 1.15 * c["value"], "half_width": 0.15, "how": "t"}
        c.pop("implausible", None)
    for c in b["ceilings"]:
        c["value"] *= 1.1 if c["kind"] == "latency" else 0.9  # 10 % worse: beyond 5 %, inside 15 %
    pa, pb = tmp_path / "a.json", tmp_path / "b.json"
    pa.write_text(json.dumps(a))
    pb.write_text(json.dumps(b))
    assert cli.main(["compare", str(pa), str(pb)]) == 0
    assert "inside A's interval" in capsys.readouterr().out
    narrow = copy.deepcopy(a)
    for c in narrow["ceilings"]:
        c["interval"] = {"lo": 0.98 * c["value"], "hi": 1.02 * c["value"], "half_width": 0.02, "how": "t"}
    pa.write_text(json.dumps(narrow))
    assert cli.main(["compare", str(pa), str(pb)]) == 1
    flagged = copy.deepcopy(narrow)
    for c in flagged["ceilings"]:
        c["implausible"] = "test: cannot be true"
    pa.write_text(json.dumps(flagged))
    assert cli.main(["compare", str(pa), str(pb)]) == 0
    assert "cannot be true" in capsys.readouterr().out


@pytest.mark.slow
def test_compare_says_when_the_machines_differ(quick_result, tmp_path, capsys):
    b = _doc(quick_result)
    b["machine"]["cpu"]["model"] = "Some Other CPU"
    pb = tmp_path / "b.json"
    pb.write_text(json.dumps(b))
    cli.main(["compare", str(quick_result), str(pb)])
    assert "different machines" in capsys.readouterr().err


def _fma_rec(dtype, threads, unit, value=100.0):
    return {
        "family": "ert", "kernel": "fma", "status": "ok", "dtype": dtype, "threads": threads,
        "clock_ghz": {"before": [4.0], "after": [4.0], "unit": unit},
    }  # fmt: skip


def test_peaks_are_judged_at_the_clock_their_unit_ran_at():
    from rooflab.cpu.machine import peaks_at_clocks
    from rooflab.suite_ceilings import set_unit_clocks

    units = {"pipes": 2, "width_bits": 512, "assumed": False}
    cpu = {"physical_cores": 2, "fma_units": units}
    cpu["theoretical"] = peaks_at_clocks(cpu, {1: 4.0, 2: 4.0})
    recs = [_fma_rec("float64", 1, [3.4]), _fma_rec("float64", 1, [3.1]), _fma_rec("float32", 2, [3.5, 3.45])]
    set_unit_clocks(cpu, recs)
    p = {(q["dtype"], q["threads"]): q for q in cpu["theoretical"]["peaks"]}
    assert p[("float64", 1)]["clock_ghz"] == 3.4  # the best unit probe: a neighbour only slows one
    assert p[("float64", 1)]["gflops"] == pytest.approx(3.4 * 32) and "3.400 GHz" in p[("float64", 1)]["formula"]
    assert p[("float32", 2)]["gflops"] == pytest.approx(2 * 3.45 * 64)  # the slowest thread's clock
    assert p[("float64", 1)]["scalar_clock_ghz"] == 4.0 and p[("float64", 1)]["clock_source"].startswith("FMA unit")
    assert p[("float64", 2)]["clock_ghz"] == 4.0 and "not probed" in p[("float64", 2)]["clock_source"]


def test_every_sample_of_a_peak_carries_the_clock_probed_right_after_it():
    from rooflab.cpu import clock
    from rooflab.cpu.timing import time_cpu

    if not clock.supported():
        pytest.skip("the clock probe needs Linux on x86-64")
    calls = []
    scalar = clock.probe_clock(1)["ghz"]
    got = time_cpu(lambda: calls.append(1), budget_s=0.0, min_samples=4, after=lambda: clock.chain_clock(1))
    assert len(got.after) == len(got.seconds) == 4 and len(calls) == 5  # warm-up untimed, no chain
    # an idle "unit" leaves the scalar clock: the chain is the one probe_clock times. A neighbour
    # (the other test worker, in CI) can only slow a 0.2 ms chain, never speed it up: no sample
    # reads high, and the best of them reads the clock
    assert all(0 < g[0] < 1.3 * scalar for g in got.after)
    assert 0.7 * scalar < max(g[0] for g in got.after)


def test_a_peak_is_judged_at_the_clock_its_own_best_samples_ran_at():
    from rooflab.suite_ceilings import best_unit_clock

    def rec(value, per_sample):
        return {"gflops": {"median": value}, "clock_ghz": {"unit": [max(per_sample)], "unit_per_sample": per_sample}}

    # the host's clock wandered: the best record ran at 3.0 GHz, a slower one's probe read 3.1 later
    recs = [rec(90.0, [3.0, 2.9, 3.05]), rec(80.0, [3.1, 3.1, 3.1])]
    assert best_unit_clock(recs) == pytest.approx(3.0)
    assert best_unit_clock([{"clock_ghz": {"unit": [3.2, 3.1]}}, {"clock_ghz": {"unit": [3.0]}}]) == 3.1  # older files
    assert best_unit_clock([{"clock_ghz": {"before": [3.0]}}]) is None


def test_the_consistency_line_holds_each_ceiling_against_the_previous_run_s_interval(tmp_path):
    from rooflab import agreement
    from rooflab.results import ResultWriter

    def result(values, stamp):
        w = ResultWriter(tmp_path, {"id": "m"}, "ceilings", "cpu", {"quick": True})
        w.path = w.path.with_name(f"rooflab-ceilings-cpu-{stamp}.json")
        w.data["ceilings"] = [_c(n, v, pass_spread=spread) for n, (v, spread) in values.items()]
        w.finish("complete")
        return w

    # the first run's DRAM passes lay 30 % apart: its interval says so, and a 20 % move is inside it
    first = result(
        {"DRAM read bandwidth, 1 thread": (30.0, 0.30), "L1 read bandwidth, 1 thread": (200.0, 0.0)}, "20260101T000000Z"
    )
    assert agreement.check(first, tmp_path).startswith("consistency: no earlier")  # it sets the intervals
    now = result(
        {"DRAM read bandwidth, 1 thread": (24.0, 0.0), "L1 read bandwidth, 1 thread": (180.0, 0.0)}, "20260101T000100Z"
    )
    line = agreement.check(now, tmp_path)
    assert line.startswith("noisy: 1 of 2 ceilings moved outside") and "L1 read bandwidth, 1 thread (-10%)" in line
    iv = {c["name"]: c["interval"] for c in now.data["ceilings"]}
    assert iv["L1 read bandwidth, 1 thread"]["half_width"] == FLOOR  # one earlier run: no prediction yet


def test_a_run_of_another_cpu_under_the_same_id_is_no_history(tmp_path):
    """A Zen 3 and a Zen 4 VM both read "AMD EPYC" (id amd-epyc-2c): the Zen 3's runs must not
    narrow or judge the Zen 4's figures."""
    from rooflab import agreement
    from rooflab.results import ResultWriter

    def result(model, value, stamp):
        machine = {"id": "amd-epyc-2c", "cpu": {"vendor": "AuthenticAMD", "family": 25, "model_number": model}}
        w = ResultWriter(tmp_path, machine, "ceilings", "cpu", {"quick": True})
        w.path = w.path.with_name(f"rooflab-ceilings-cpu-{stamp}.json")
        w.data["ceilings"] = [_c("L1 read bandwidth, 1 thread", value)]
        w.finish("complete")
        return w

    for i, v in enumerate((100.0, 101.0, 99.0)):  # three Zen 3 runs
        agreement.check(result(1, v, f"2026010{i + 1}T000000Z"), tmp_path)
    zen4 = result(17, 200.0, "20260105T000000Z")
    assert agreement.check(zen4, tmp_path).startswith("consistency: no earlier")
    assert zen4.data["ceilings"][0]["interval"]["history_runs"] == 0
    again = result(17, 203.0, "20260106T000000Z")
    assert agreement.check(again, tmp_path).startswith("consistent")  # its own CPU's run is


def test_asv_regression_view_takes_each_ceilings_interval(tmp_path):
    import re
    import subprocess
    import sys

    from rooflab.intervals import ASV_DEFAULT, asv_thresholds

    def ceil(name, kind, h, **kw):
        return {"name": name, "kind": kind, "value": 1.0, "interval": {"half_width": h}, **kw}

    doc = {
        "ceilings": [
            ceil("FP64 FMA peak, 1 thread", "compute", 0.08, dtype="float64", threads=1),
            ceil("INT8 peak (tdpbssd AMX tiles), 2 threads", "compute", 0.2, dtype="int8", threads=2, kernel="tdpbssd AMX tiles"),
            ceil("L2 triad bandwidth, 1 thread", "bandwidth", 0.01, threads=1, kernel="triad", window_bytes=[65536, 1048576]),
            ceil("DRAM read bandwidth, 2 threads", "bandwidth", 0.3, threads=2, kernel="read", window_bytes=[268435456, None]),
            ceil("dispatch: empty", "latency", 0.12, threads=1),
            ceil("FP32 FMA peak, 2 threads", "compute", 0.9, dtype="float32", threads=2, implausible="below"),
        ]
    }  # fmt: skip
    th = asv_thresholds([doc])

    def threshold(entry):  # as asv's regressions plugin picks it: the largest of the matching ones
        return max([h for rx, h in th.items() if re.match(rx, entry)] or [0.05])

    assert threshold("bench_compute_cpu.FmaPeakCPU.track_gflops('float64', 1)") == 0.08
    assert threshold("bench_compute_cpu.FmaPeakCPU.track_gflops('float64', 1)@main") == 0.08
    assert threshold("bench_compute_cpu.LowPrecPeakCPU.track_gops('amx-int8', 2)") == 0.2
    assert threshold("bench_stream_cpu.StreamCPU.track_gbps('triad', 1048576, 1)") == 0.05  # the floor
    assert threshold("bench_stream_cpu.StreamCPU.track_gbps('read', 536870912, 2)") == 0.3
    assert threshold("bench_stream_cpu.StreamCPU.track_gbps('read', 32768, 2)") == ASV_DEFAULT  # no ceiling
    assert threshold("bench_latency_cpu.Dispatch.track_empty_njit_seconds") == 0.12
    assert threshold("bench_compute_cpu.FmaPeakCPU.track_gflops('float32', 2)") == ASV_DEFAULT  # implausible
    assert threshold("bench_families.GemmFamily.track_rate('x')") == ASV_DEFAULT

    conf = tmp_path / "asv.conf.json"
    conf.write_text('{\n    // a comment\n    "version": 1,\n    "regressions_thresholds": {".*": 0.10}\n}\n')
    from rooflab.results import ResultWriter, load

    w = ResultWriter(tmp_path, {"id": "m"}, "ceilings", "cpu", {"quick": True})  # results/m/
    w.data["ceilings"] = copy.deepcopy(doc["ceilings"])
    w.finish("complete")
    folder = w.path.parent
    th = asv_thresholds([load(w.path)])
    script = [sys.executable, "scripts/asv_thresholds.py", str(folder), "--write", str(conf)]
    r = subprocess.run(script, capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    from asv import util

    got = util.load_json(str(conf), js_comments=True)
    assert got["version"] == 1 and "// a comment" in conf.read_text() and got["regressions_thresholds"] == th
    bad = subprocess.run(
        [sys.executable, "scripts/asv_thresholds.py", str(tmp_path / "none")], capture_output=True, text=True, cwd=ROOT
    )
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1


def test_compare_says_when_one_name_covers_two_cpus(tmp_path, capsys):
    from rooflab.results import ResultWriter

    paths = []
    for model, stamp in ((1, "20260101T000000Z"), (17, "20260102T000000Z")):
        cpu = {"vendor": "AuthenticAMD", "family": 25, "model_number": model, "model": "AMD EPYC"}
        w = ResultWriter(tmp_path, {"id": "amd-epyc-2c", "cpu": cpu}, "ceilings", "cpu", {"quick": True})
        w.path = w.path.with_name(f"rooflab-ceilings-cpu-{stamp}.json")
        w.data["ceilings"] = [_c("L1 read bandwidth, 1 thread", 100.0 + model)]
        w.finish("complete")
        paths.append(str(w.path))
    assert cli.main(["compare", *paths]) == 0
    err = capsys.readouterr().err
    assert "different CPUs under one name (family 25 model 1, family 25 model 17)" in err


def test_the_run_table_shows_each_ceilings_interval_not_one_points_spread(capsys, monkeypatch):
    from rooflab.commands import run_tables

    monkeypatch.setenv("COLUMNS", "200")  # one table row per line

    one_point = _c("DRAM read bandwidth, 1 thread", 16.82)
    one_point["stats"] = {"median": 16.82, "p20": 16.82, "p80": 16.82}  # a single sweep point
    one_point["interval"] = {"lo": 15.0, "hi": 18.9, "half_width": 0.12, "how": "x", "history_runs": 3}
    older = _c("L1 read bandwidth, 1 thread", 200.0)
    older["stats"] = {"median": 200.0, "p20": 198.0, "p80": 202.0}  # a file written before intervals
    run_tables.ceilings_table({"machine": {"id": "m"}, "device": "cpu", "ceilings": [one_point, older]})
    out = capsys.readouterr().out
    assert "interval" in out and "15-18.9" in out and "16.82-16.82" not in out
    assert "198-202" in out and "p20-p80, no interval" in out and "up to 3 earlier run(s)" in out
    run_tables.ceilings_table({"machine": {"id": "m"}, "device": "cpu", "ceilings": [older]})  # a family suite's
    out = capsys.readouterr().out
    assert "p20-p80" in out and "interval" not in out and "198-202" in out
