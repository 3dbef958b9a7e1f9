"""A ceilings run says where its time went (one line per phase, also in the result), compares
itself with the previous run and flags every mover, and keeps the finished phases when
interrupted in any phase. The driver is a stand-in that records nothing: these check the run's
bookkeeping, the measurements are checked by the kernel and suite tests."""

from __future__ import annotations

import pytest

from rooflab import agreement, cli, compile_ahead
from rooflab.commands import run as run_command
from rooflab.cpu import dram_probe
from rooflab.families import latency
from rooflab.families.lowprec import available
from rooflab.results import ResultWriter, load

TINY = ["--quick", "--max-working-set", "256K", "--budget", "0.005", "--no-plot"]
# the low-precision peaks run where this CPU has one of their units (AVX2, AVX-512 VNNI or BF16)
LOWPREC = ["low-precision peaks"] if any(why is None for why in available().values()) else []
# the runtimes' call floors run where torch or onnxruntime is installed (CI installs neither)
RUNTIMES = ["runtime call floors"] if latency.runtime_cases(2) else []
PHASES = ["clock probe", "DRAM sizing probe", "dispatch latency", "FMA peaks", *LOWPREC, "bandwidth sweep",
          "memory latency (chase)", "intensity sweep", *RUNTIMES]  # fmt: skip
PREFIX = {"dispatch latency": "cpu.latency.", "FMA peaks": "cpu.ert.", "low-precision peaks": "cpu.lowprec.",
          "runtime call floors": "cpu.latency.torch_aten" if latency.torch_installed() else "cpu.latency.ort_chain",
          "bandwidth sweep": "cpu.stream.", "memory latency (chase)": "cpu.chase.",
          "intensity sweep": "cpu.intensity."}  # fmt: skip


class FakeDriver:
    def __init__(self, stop_in=None):
        self.best_clock = {}
        self.stop_in = stop_in

    def probe_clock(self, threads):
        if self.stop_in == "clock probe":
            raise KeyboardInterrupt
        return None

    def run(self, cases, writer=None, progress=None):
        prefix = PREFIX.get(self.stop_in)
        if prefix and any(c.variant.startswith(prefix) for c in cases):
            raise KeyboardInterrupt
        return []


@pytest.fixture
def fake(monkeypatch):
    def use(stop_in=None):
        monkeypatch.setattr(run_command, "_driver", lambda device, settings: FakeDriver(stop_in))
        monkeypatch.setattr(compile_ahead, "cached", lambda job: True)  # a warm cache: no compile phase

        def measure(nbytes, threads):
            if stop_in == "DRAM sizing probe":
                raise KeyboardInterrupt
            return 50.0

        monkeypatch.setattr(dram_probe, "read_gbps", measure)

    return use


def test_phases_are_timed_and_printed(fake, tmp_path, capsys):
    fake()
    assert cli.main(["run", *TINY, "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    (f,) = tmp_path.glob("*/*.json")
    ph = load(f)["phases"]
    assert [p["name"] for p in ph["items"]] == [*PHASES, "ceilings"]
    assert all(p["seconds"] >= 0 for p in ph["items"]) and ph["total_s"] >= sum(p["seconds"] for p in ph["items"])
    lines = [ln for ln in out.splitlines() if ln.startswith("phase ")]
    assert len(lines) == len(PHASES) + 2  # one per phase and the rest
    assert all(ln.rstrip().split()[-1].endswith("s") or "%" in ln for ln in lines)
    assert sum(ln.startswith("consistency:") for ln in out.splitlines()) == 1  # always said


def test_a_cold_cache_compiles_ahead_in_its_own_phase_before_anything_is_timed(fake, tmp_path, monkeypatch):
    fake()
    monkeypatch.setattr(compile_ahead, "cached", lambda job: job[0] != "ert")
    jobs = []
    monkeypatch.setattr(compile_ahead, "compile_ahead", lambda cases, cores: jobs.append(cores) or {"workers": cores})
    assert cli.main(["run", *TINY, "--out", str(tmp_path)]) == 0
    (f,) = tmp_path.glob("*/*.json")
    d = load(f)
    names = [p["name"] for p in d["phases"]["items"]]
    assert names[names.index("DRAM sizing probe") + 1] == "compile ahead" and names.index(
        "compile ahead"
    ) < names.index("dispatch latency")
    assert d["config"]["compile_ahead"] == {"workers": jobs[0]} and jobs[0] >= 1


@pytest.mark.parametrize("phase", PHASES)
def test_interrupted_in_any_phase_keeps_the_phases_done(fake, tmp_path, capsys, phase):
    fake(stop_in=phase)
    argv = ["run", *TINY, "--out", str(tmp_path)]
    if phase == "DRAM sizing probe":  # a working set beyond the LLC, so the probe runs
        argv[argv.index("256K")] = "1G"
    assert cli.main(argv) == 130
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("rooflab: interrupted")]
    assert len(err) == 1 and f"in phase {phase!r}" in err[0]
    (f,) = tmp_path.glob("*/*.json")
    d = load(f)
    assert d["status"] == "interrupted"
    items = d["phases"]["items"]
    done = PHASES[: PHASES.index(phase)]
    assert [p["name"] for p in items if not p.get("interrupted")] == done
    assert [p["name"] for p in items if p.get("interrupted")] == [phase]


def test_no_caches_and_no_dram_are_said_once(fake, tmp_path, capsys, monkeypatch):
    from rooflab import machine

    real = machine.describe

    def no_caches(*a, **k):
        d = real(*a, **k)
        d["cpu"]["caches"] = []
        return d

    monkeypatch.setattr(machine, "describe", no_caches)
    fake()
    assert cli.main(["run", *TINY, "--out", str(tmp_path)]) == 0
    err = capsys.readouterr().err.splitlines()
    assert sum("no cache sizes" in ln for ln in err) == 1
    assert sum("no DRAM roof" in ln for ln in err) == 1
    (f,) = tmp_path.glob("*/*.json")
    d = load(f)
    assert d["config"]["dram_sizing"]["dram_from_bytes"] is None


def _result(tmp_path, values, quick=True, status="complete", stamp=None):
    w = ResultWriter(tmp_path, {"id": "m"}, "ceilings", "cpu", {"quick": quick})
    if stamp:
        w.path = w.path.with_name(f"rooflab-ceilings-cpu-{stamp}.json")
    w.data["ceilings"] = [
        {"name": n, "kind": "latency" if "dispatch" in n else "bandwidth", "level": None, "dtype": None,
         "threads": 1, "value": v, "unit": "x", "stats": {"p20": v, "p80": v}}
        for n, v in values.items()
    ]  # fmt: skip
    w.finish(status)
    return w


def test_every_mover_is_flagged(tmp_path):
    base = {"L1 update bandwidth, 2 threads": 100.0, "dispatch: fork_join": 2.0, "dispatch: empty": 50.0, "x": 1.0}
    _result(tmp_path, base, stamp="20260101T000000Z")
    _result(tmp_path, {k: v * 3 for k, v in base.items()}, quick=False, stamp="20260101T000100Z")  # a full run
    _result(tmp_path, {k: v * 3 for k, v in base.items()}, status="interrupted", stamp="20260101T000200Z")
    now = _result(
        tmp_path,
        {"L1 update bandwidth, 2 threads": 88.0, "dispatch: fork_join": 2.32, "dispatch: empty": 53.0, "x": 1.02},
        stamp="20260101T000300Z",
    )
    line = agreement.check(now, tmp_path)
    assert line.startswith("noisy: 3 of 4 ceilings moved")
    for name in ("L1 update bandwidth, 2 threads (-12%)", "dispatch: fork_join (+16%)", "dispatch: empty (+6%)"):
        assert name in line
    moved = {c["name"]: c.get("moved") for c in now.data["ceilings"]}
    assert moved["x"] is None and all(moved[k] for k in base if k != "x")
    assert load(now.path)["agreement"]["previous"].endswith("20260101T000000Z.json")


class RecordingDriver(FakeDriver):
    def __init__(self):
        super().__init__()
        self.calls = []

    def run(self, cases, writer=None, progress=None):
        self.calls.append(list(cases))
        return []


def test_dram_cases_get_two_more_passes_spread_through_the_intensity_sweep(tmp_path, monkeypatch):
    drv = RecordingDriver()
    monkeypatch.setattr(run_command, "_driver", lambda device, settings: drv)
    # the cache plateau up to 8 MiB, DRAM's from 16 MiB: DRAM points start at 32 MiB
    monkeypatch.setattr(dram_probe, "read_gbps", lambda nbytes, threads: 50.0 if nbytes <= 8 << 20 else 10.0)
    argv = ["run", *TINY, "--out", str(tmp_path)]
    argv[argv.index("256K")] = "64M"
    assert cli.main(argv) == 0
    d = load(next(tmp_path.glob("*/*.json")))
    dram_from = d["config"]["dram_sizing"]["dram_from_bytes"]
    assert dram_from and dram_from <= 64 << 20

    from rooflab.kernels.cpu import stream

    def is_dram(c):
        return c.variant.startswith("cpu.stream.") and c.size * 8 * stream.ARRAYS[c.meta["kernel"]] >= dram_from

    def kind(call):
        fams = {c.variant.split(".")[1] for c in call}
        return "dram" if call and all(is_dram(c) for c in call) else "/".join(sorted(fams))

    kinds = [kind(call) for call in drv.calls if call]
    if RUNTIMES:  # the runtimes' call floors, once, last
        assert kinds.pop() == "latency"
    # the 2 passes of everything, then: intensity half, DRAM, intensity half, DRAM
    assert kinds[-4:] == ["intensity", "dram", "intensity", "dram"]
    assert kinds.count("stream") == 2 and kinds.count("dram") == 2
    later = [call for call in drv.calls if call and kind(call) == "dram"]
    points = [b for b in d["config"]["sweep_bytes"] if b >= dram_from]
    assert points and len(later[0]) == 8 * len(points)  # 4 kernels x 1 and 2 threads at DRAM's points
    in_sweep = [c.label for call in drv.calls if kind(call) == "stream" for c in call if is_dram(c)]
    assert sorted(in_sweep) == sorted([c.label for c in later[0]] * 2)
    halves = [len(call) for call in drv.calls if kind(call) == "intensity"]
    assert len(halves) == 2 and abs(halves[0] - halves[1]) <= 1
    names = [p["name"] for p in d["phases"]["items"]]
    assert names.count("DRAM bandwidth, later passes") == 1
    assert next(p for p in d["phases"]["items"] if p["name"] == "DRAM bandwidth, later passes")["entered"] == 2


def test_a_full_run_adds_one_dram_pass_after_the_sweep_and_quick_two():
    from rooflab import suite_ceilings as sc

    sweep, dram = list(range(14)), ["d"]
    assert sc.intensity_parts(sc.Plan(threads_all=2, quick=False), sweep, dram) == [sweep]  # then 1 DRAM pass
    assert sc.intensity_parts(sc.Plan(threads_all=2, quick=True), sweep, dram) == [sweep[:7], sweep[7:]]
    assert sc.Plan(threads_all=2, quick=True).extra_dram_count() == 2
    assert sc.Plan(threads_all=2, quick=False).extra_dram_count() == 1
    assert sc.Plan(threads_all=2, quick=True, dram_extra_passes=0).extra_dram_count() == 0
    assert sc.intensity_parts(sc.Plan(threads_all=2, quick=True), sweep, []) == [sweep]  # no DRAM in this run
