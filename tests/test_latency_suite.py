"""`rooflab run --suite latency` and memory latency in the CPU ceilings suite: what the suites
declare (dispatch paths, tiny chains N = 1..32, the chase; on CUDA launch, transfer and the GPU
chase), the ceilings they derive (dispatch ones unchanged, memory latency per level added), a small
end-to-end run with its table, ceilings, charts, `rooflab plot` and the HTML report."""

import json

import pytest

from rooflab import cli, report, suite_ceilings
from rooflab.families import chase, latency
from rooflab.registry import family_cases, family_suites
from tests.test_plots import synthetic
from tests.test_plots_latency import _chase_records, _dispatch_records, with_latency

CACHES = synthetic()["machine"]["cpu"]["caches"]  # 32 KiB L1, 1 MiB L2 per core, 32 MiB L3


def test_latency_is_a_suite_with_every_cpu_path():
    assert "latency" in family_suites()
    cases = family_cases("latency", "cpu", quick=True, threads=[1, 2])
    by = {}
    for c in cases:
        by.setdefault(c.variant, []).append(c)
    assert {c.threads for c in by["cpu.latency.fork_join"]} == {2}
    assert all(len(by[f"cpu.latency.{p}"]) == 3 for p in ("empty", "ufunc", "fork_join"))  # 3 passes each
    assert [c.variant for c in cases].index("cpu.elementwise.tiny_chain.00-numpy-op-by-op") < [
        i for i, c in enumerate(cases) if c.variant == "cpu.latency.empty"
    ][1]  # spread over the suite, not back to back
    assert by["cpu.latency.empty"][0].threads == by["cpu.latency.ufunc"][0].threads == 1
    for name in ("cpu.elementwise.tiny_chain.00-numpy-op-by-op", "cpu.elementwise.tiny_chain.01-numba-fused"):
        assert [c.params["n_ops"] for c in by[name]] == list(latency.CHAIN_LENGTHS_QUICK)
    assert [c.size for c in by["cpu.chase.02-random-cycle-hugepages"]][0] == 8 << 10
    assert all(c.variant.startswith("cpu.") for c in cases)
    full = family_cases("latency", "cpu", quick=False, threads=[1])
    ops = sorted(c.params["n_ops"] for c in full if c.variant.endswith("op-by-op"))
    assert ops == [1, 2, 4, 8, 16, 32] and any(c.variant == "cpu.chase.01-random-cycle" for c in full)


def test_latency_suite_on_cuda_is_launch_transfer_and_chase():
    cases = family_cases("latency", "cuda", quick=True, threads=[1])
    families = {c.variant.split(".")[1] for c in cases}
    assert families == {"launch", "transfer", "chase"} and all(c.variant.startswith("cuda.") for c in cases)
    assert min(c.size["bytes"] for c in cases if ".transfer." in c.variant) == 4096


def test_the_ceilings_suite_runs_the_chase_once_from_8k_to_4x_the_llc():
    plan = suite_ceilings.Plan(threads_all=2, quick=True)
    cases = suite_ceilings.chase_cases(plan, CACHES, 1 << 30)
    sizes = [c.size for c in cases]
    assert sizes[0] == 8 << 10 and sizes[-1] == 128 << 20 and all(b == 2 * a for a, b in zip(sizes, sizes[1:]))
    assert {c.variant for c in cases} == {"cpu.chase.02-random-cycle-hugepages"} and {c.threads for c in cases} == {1}
    big = [c for c in cases if c.size > 32 << 20]
    assert big and all(c.timing["min_samples"] == 3 and c.timing["max_attempts"] == 1 for c in big)
    assert all("min_samples" not in c.timing for c in cases if c.size <= 32 << 20)
    capped = suite_ceilings.chase_cases(plan, CACHES, 256 << 10)  # --max-working-set caps it too
    assert [c.size for c in capped][-1] == 256 << 10
    full = suite_ceilings.chase_cases(suite_ceilings.Plan(threads_all=2, quick=False), CACHES, 1 << 30)
    assert {c.variant for c in full} == {"cpu.chase.01-random-cycle", "cpu.chase.02-random-cycle-hugepages"}
    assert all("max_attempts" not in c.timing for c in full)


def _derive(records):
    data = synthetic(op_threads=())
    data["records"] = records
    data["sweeps"]["bandwidth"] = []
    data["machine"]["cpu"]["theoretical"] = {"peaks": []}
    return suite_ceilings.derive_ceilings(data)


def test_derive_adds_memory_latency_and_keeps_the_dispatch_ceilings():
    before = [c for c in _derive(_dispatch_records()) if c["kind"] == "latency"]
    assert [c["name"] for c in before] == ["dispatch: empty", "dispatch: ufunc", "dispatch: fork_join"]
    slower = [dict(r, ns_per_launch={k: v * 1.5 for k, v in r["ns_per_launch"].items()}) for r in _dispatch_records()]
    after = [c for c in _derive(_dispatch_records() + slower + _chase_records(CACHES)) if c["kind"] == "latency"]
    assert [c for c in after if c["name"].startswith("dispatch")] == [
        dict(c, passes=2, pass_spread=pytest.approx(1 / 3), noisy=True) for c in before
    ]  # the fastest pass, as before; two passes 50 % apart are flagged
    mem = [c for c in after if c["name"].startswith("memory latency")]
    assert [(c["level"], round(c["value"], 9)) for c in mem] == [("L1", 1.2), ("L2", 4.0), ("L3", 15.0), ("DRAM", 95.0)]
    assert all(c["threads"] == 1 and c["unit"] == "ns" and c["cycles"] > c["value"] for c in mem)


def test_latency_family_ceilings_name_every_path():
    recs = _dispatch_records() + _chase_records(CACHES)
    recs += [
        {"family": "launch", "variant": "cuda.launch.01-enqueue", "status": "ok", "path": "enqueue",
         "ns_per_launch": {"median": 2500.0}},
        {"family": "transfer", "variant": "cuda.transfer.01-h2d-pinned", "status": "ok", "shape": {"bytes": 4096},
         "direction": "h2d", "pinned": True, "ns_per_launch": {"median": 9000.0}},
        {"family": "transfer", "variant": "cuda.transfer.00-d2h-pageable", "status": "ok",
         "shape": {"bytes": 1 << 30}, "ns_per_launch": {"median": 9e7}},
    ]  # fmt: skip
    data = {"device": "cpu", "records": recs, "machine": {"cpu": {"caches": CACHES}}}
    names = [c["name"] for c in latency.ceilings(data)]
    assert names[:3] == ["dispatch: empty", "dispatch: ufunc", "dispatch: fork_join"]
    assert "memory latency DRAM (pointer chase)" in names
    assert "launch: enqueue" in names and "transfer: H2D pinned 4 KiB" in names
    assert not any("1 GiB" in n for n in names)  # a large copy is a bandwidth, not a latency


def test_gpu_chase_ceilings_use_the_on_chip_timing_per_level():
    recs = []
    for level, nbytes, ns in (
        ("L1", 16 << 10, 30.0),
        ("L1", 64 << 10, 32.0),
        ("L2", 1 << 20, 150.0),
        ("HBM", 1 << 28, 600.0),
    ):
        recs.append(
            {"family": "chase", "variant": chase.GPU_VARIANT, "status": "ok", "level": level, "chase_bytes": nbytes,
             "time_s": {"median": 1.0}, "reps": 1, "params": {},  # the launch time: not what is read
             "chase_latency": {"ns_per_hop": ns, "cycles_per_hop": ns * 1.98, "sm_clock_ghz": 1.98}}
        )  # fmt: skip
    out = chase.ceilings({"device": "cuda", "records": recs})
    assert [(c["level"], c["value"]) for c in out] == [("L1", 31.0), ("L2", 150.0), ("HBM", 600.0)]
    assert out[0]["cycles"] == pytest.approx(31.0 * 1.98) and out[0]["threads"] == 0


@pytest.fixture
def small_chase(monkeypatch):
    """The chase suite at 8 and 16 KiB only (the end-to-end run stays a few seconds)."""
    monkeypatch.setattr(chase, "sizes", lambda llc, quick, lo=chase.MIN_BYTES: [8 << 10, 16 << 10])


@pytest.mark.slow  # ~6 s: numba compiles, every case verified and timed
def test_run_suite_latency_end_to_end(tmp_path, small_chase, capsys):
    out = tmp_path / "res"
    assert cli.main(["run", "--suite", "latency", "--quick", "--budget", "0.005", "--out", str(out)]) == 0
    (f,) = out.glob("*/rooflab-latency-cpu-*.json")
    d = json.loads(f.read_text())
    assert d["status"] == "complete" and all(r["verified"] for r in d["records"])
    names = {c["name"] for c in d["ceilings"]}
    assert {"dispatch: empty", "dispatch: ufunc", "dispatch: fork_join", "memory latency L1 (pointer chase)"} <= names
    printed = capsys.readouterr().out
    # a narrow table folds a long name ("(pointer" / "chase)") when a noisy flag widens another column
    assert "tiny chain N=32" in printed and "memory latency L1" in printed
    for suffix in (".latency.png", ".latency.svg", ".staircase.png", ".staircase.svg"):
        assert f.with_suffix(suffix).stat().st_size > 5000, suffix
    assert cli.main(["plot", str(f), "-o", str(tmp_path / "again")]) == 0
    assert (tmp_path / "again.latency.png").exists() and not (tmp_path / "again.roofline.png").exists()
    page = tmp_path / "r.html"
    assert cli.main(["report", str(f), "-o", str(page)]) == 0
    text = page.read_text()
    assert 'alt="latency chart"' in text and 'alt="bandwidth chart"' in text and "<th>cycles</th>" in text


@pytest.mark.slow
def test_report_shows_the_latency_chart_and_cycles():
    data = with_latency(synthetic(op_threads=()))
    for c in data["ceilings"]:
        c.setdefault("stats", {"median": c["value"], "p20": c["value"], "p80": c["value"]})
        c.setdefault("unit", "GFLOP/s" if c["kind"] == "compute" else "GB/s")
    html = report.build([data])
    assert 'alt="latency chart"' in html and "<th>cycles</th>" in html
    assert "memory latency L3 (pointer chase)" in html


def test_latency_suite_on_a_missing_gpu_is_one_line_exit_2(tmp_path, capsys):
    from rooflab.cuda import backend

    if backend.probe()[0]:
        pytest.skip("a GPU is present")
    assert cli.main(["run", "--suite", "latency", "--device", "cuda", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("rooflab:")


def test_asv_latency_benchmarks_verify_in_setup(monkeypatch):
    import dataclasses
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import rooflab.registry as reg
    from benchmarks import _common, bench_families
    from rooflab import VerificationError

    labels = bench_families.LatencyCPU.params[0]
    assert {"latency empty", "latency ufunc", "latency fork_join"} <= set(labels)
    assert any("tiny chain N=32" in lab for lab in labels) and not any("chase" in lab for lab in labels)
    monkeypatch.setattr(_common, "_PREPARED", {})
    bench = bench_families.LatencyCPU()
    bench.setup("latency ufunc")
    bench.time_case("latency ufunc")
    name = "cpu.elementwise.tiny_chain.01-numba-fused"
    base = reg.get_variant(name)
    wrong = dataclasses.replace(base, kernel=lambda x, out, n_ops=1, reps=1, threads=None: base.kernel(x, out, n_ops=1))
    monkeypatch.setitem(reg._REGISTRY, name, wrong)  # runs one op of N: must fail verification, not time
    with pytest.raises(VerificationError):
        bench.setup(f"tiny chain N=4 {name}")


def test_dispatch_paths_fixed_per_process_are_measured_in_fresh_processes():
    by = {c.variant: c for c in latency.dispatch_cases(2)}
    assert by["cpu.latency.empty"].timing["processes"] == latency.DISPATCH_PROCESSES["cpu.latency.empty"] >= 5
    assert by["cpu.latency.fork_join"].timing["processes"] == 1
    quick = {c.variant: c for c in latency.dispatch_cases(2, quick=True)}
    assert quick["cpu.latency.empty"].timing["processes"] == latency.DISPATCH_PROCESSES_QUICK
    assert {c.variant: c.timing["processes"] for c in suite_ceilings.latency_cases(2, True)} == {
        k: c.timing["processes"] for k, c in quick.items()
    }


@pytest.mark.slow  # ~4 s: three interpreters start and measure
def test_a_case_in_three_processes_keeps_the_fastest_process_and_every_draw():
    from dataclasses import replace

    from rooflab.cpu.backend import cpu_backend
    from rooflab.driver import Driver, Settings

    case = replace(latency.dispatch_cases(1)[0], timing={"reps": 200, "processes": 3})
    rec = Driver(cpu_backend(probe=False), Settings(budget_s=0.01, probe_clock=False)).run_case(case)
    assert rec.status == "ok" and rec.verified
    p = rec.meta["processes"]
    assert p["n"] == 3 and len(p["medians"]) == 3 and len(p["samples_s"]) == 3
    assert rec.ns_per_launch["median"] == min(p["medians"])  # the fastest process's own record
    assert p["spread"] == pytest.approx((max(p["medians"]) - min(p["medians"])) / min(p["medians"]))


def test_a_process_that_cannot_measure_is_one_error_not_a_figure():
    from rooflab.cpu.backend import cpu_backend
    from rooflab.driver import Driver
    from rooflab.errors import RooflabError
    from rooflab.registry import Case

    with pytest.raises(RooflabError, match="a measuring process failed"):
        Driver(cpu_backend(probe=False)).run_case(Case("cpu.latency.nope", size=8, timing={"processes": 2}))


def test_a_process_that_hangs_is_one_error(monkeypatch):
    from rooflab import processes
    from rooflab.cpu.backend import cpu_backend
    from rooflab.driver import Driver
    from rooflab.errors import RooflabError

    monkeypatch.setattr(processes, "TIMEOUT_S", 0.001)
    case = latency.dispatch_cases(1)[0]
    with pytest.raises(RooflabError, match="ran past"):
        Driver(cpu_backend(probe=False)).run_case(case)


@pytest.mark.slow  # ~3 s: three interpreters start and measure
def test_the_processes_prepare_together_and_measure_one_at_a_time(tmp_path, monkeypatch):
    from dataclasses import replace

    from rooflab import processes
    from rooflab.cpu.backend import cpu_backend
    from rooflab.driver import Driver, Settings

    log = tmp_path / "timeline"
    monkeypatch.setenv("ROOFLAB_TEST_TIMELINE", str(log))
    case = replace(latency.dispatch_cases(1)[0], timing={"reps": 200})
    driver = Driver(cpu_backend(probe=False), Settings(budget_s=0.01, probe_clock=False))
    rec = processes.measure_in_processes(driver, case, 3, child="tests.timeline_child")
    assert rec.status == "ok" and rec.meta["processes"]["n"] == 3
    rows = [ln.split() for ln in log.read_text().splitlines()]
    prepared = {pid: float(t1) for pid, what, _, t1 in rows if what == "prepare"}
    measured = sorted((float(t0), float(t1), pid) for pid, what, t0, t1 in rows if what == "measure")
    assert len(prepared) == 3 and len(measured) == 3 and {p for *_, p in measured} == set(prepared)
    assert max(prepared.values()) <= measured[0][0]  # every process ready before the first measures
    assert all(a[1] <= b[0] for a, b in zip(measured, measured[1:]))  # one at a time


@pytest.mark.slow  # ~3 s: two interpreters start and measure
def test_a_child_that_writes_much_to_stderr_does_not_stall(monkeypatch):
    from dataclasses import replace

    from rooflab import processes
    from rooflab.cpu.backend import cpu_backend
    from rooflab.driver import Driver, Settings

    monkeypatch.setattr(processes, "TIMEOUT_S", 60)  # a stalled pipe: killed, and the test fails
    case = replace(latency.dispatch_cases(1)[0], timing={"reps": 200})
    driver = Driver(cpu_backend(probe=False), Settings(budget_s=0.01, probe_clock=False))
    rec = processes.measure_in_processes(driver, case, 2, child="tests.noisy_child")
    assert rec.status == "ok" and rec.meta["processes"]["n"] == 2
