"""What a new user meets (issue 27), command by command, on the committed schema-1 results of
results/intel-xeon-2c (a ceilings run and a models run): compare names every regressed ceiling and
refuses a file without ceilings; the help texts and hints name only flags and models that exist;
bad ops are named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rooflab import cli

RESULTS = Path(__file__).resolve().parent.parent / "results" / "intel-xeon-2c"
CEILINGS = RESULTS / "rooflab-ceilings-cpu-20261202T190544Z.json"
MODELS = RESULTS / "rooflab-models-cpu-20261202T191910Z.json"


def gemm_result(tmp_path: Path) -> Path:
    d = json.loads(CEILINGS.read_text())
    d.update(suite="gemm", ceilings=[], sweeps={}, records=[])
    p = tmp_path / "rooflab-gemm-cpu-20261202T200000Z.json"
    p.write_text(json.dumps(d))
    return p


def test_compare_names_every_regressed_ceiling(tmp_path, capsys):
    d = json.loads(CEILINGS.read_text())
    for c in d["ceilings"]:
        c["value"] = c["value"] * (2.0 if c["kind"] == "latency" else 0.5)
    worse = tmp_path / "worse.json"
    worse.write_text(json.dumps(d))
    assert cli.main(["compare", str(CEILINGS), str(worse)]) == 1
    out = capsys.readouterr().out
    assert len(d["ceilings"]) > 8
    assert f"{len(d['ceilings'])} ceiling(s)" in out
    tail = out.split("regressed beyond")[1]
    for c in d["ceilings"]:
        assert c["name"] in tail


def test_compare_refuses_a_file_without_ceilings(tmp_path, capsys):
    g = gemm_result(tmp_path)
    assert cli.main(["compare", str(CEILINGS), str(g)]) == 2
    cap = capsys.readouterr()
    assert "has no ceilings" in cap.err and "'gemm'" in cap.err
    assert "no ceiling regressed" not in cap.out


def _array_bytes(case) -> int:
    import math

    import numpy as np

    s = case.size
    if isinstance(s, dict):
        dims = [v for k, v in s.items() if k in ("numel", "rows", "cols", "N", "C", "H", "W") and isinstance(v, int)]
        n = math.prod(dims)
    else:
        n = int(s)
    return n * np.dtype(case.dtype).itemsize


@pytest.fixture
def big_llc(monkeypatch):
    """The issue's VM: the OS reports a 480 MiB L3 (4x = 1.9 GiB per array); plenty of free memory."""
    from rooflab import memory
    from rooflab.cpu.caches import CacheMap
    from rooflab.families import elementwise

    llc = {"name": "L3", "level": 3, "size_bytes": 480 << 20, "private": False, "instances": 1}
    monkeypatch.setattr(elementwise, "_caches", lambda: CacheMap([llc]))  # no probe: 4x the OS LLC
    monkeypatch.setattr(memory, "available_bytes", lambda: 64 << 30)
    yield
    memory.set_working_set_limit(None)


def test_a_quick_elementwise_run_fits_in_4_gb(big_llc):
    from rooflab.families import elementwise

    cases = elementwise.cases(quick=True, threads=[1, 2])
    biggest = max(_array_bytes(c) for c in cases)
    assert elementwise.LIVE_ARRAYS * biggest <= 3.1 * (1 << 30)  # (shapes round up rows) + interpreter < 4 GB
    assert biggest >= 256 << 20  # still far beyond any real cache slice of such a VM


def test_every_suite_honours_max_working_set(big_llc):
    from rooflab import memory
    from rooflab.families import chase, elementwise

    memory.set_working_set_limit(512 << 20)
    assert max(_array_bytes(c) for c in elementwise.cases(quick=True, threads=[2])) <= 512 << 20
    assert max(c.size for c in chase.cases(quick=True, llc=480 << 20)) <= 512 << 20


def test_elementwise_checks_free_memory_before_it_allocates(big_llc, monkeypatch):
    from rooflab import memory
    from rooflab.errors import RooflabError
    from rooflab.families import elementwise

    monkeypatch.setattr(memory, "available_bytes", lambda: 4 << 20)  # nothing free
    with pytest.raises(RooflabError, match="memory is free"):
        elementwise.cases(quick=False, threads=[1])


def test_a_max_working_set_too_small_for_dram_is_refused_in_one_line(big_llc):
    from rooflab import memory
    from rooflab.errors import RooflabError
    from rooflab.families import elementwise

    memory.set_working_set_limit(100 << 20)
    with pytest.raises(RooflabError, match="max-working-set") as e:
        elementwise.cases(quick=True, threads=[2])
    assert "256M or more" in e.value.fix


def _help_of(parser, command: str, flag: str) -> str | None:
    sub = next(a for a in parser._actions if a.dest == "command").choices[command]
    return next(a.help for a in sub._actions if flag in a.option_strings)


def test_run_help_lists_only_models_that_exist():
    from rooflab.workloads.catalog import MODELS

    text = _help_of(cli.build_parser(), "run", "--model")
    listed = text.split(":", 1)[1].split("(")[0].replace(",", " ").split()
    assert listed == list(MODELS)  # `gpt2` was listed; the catalog has gpt2-decode and gpt2-prefill


def test_place_help_describes_every_flag_and_its_hints_name_flags_it_accepts():
    from rooflab.models import measure

    p = cli.build_parser()
    for flag in ("--device", "--threads", "--out", "--quick", "--ceilings"):
        assert _help_of(p, "place", flag), flag
    src = Path(measure.__file__).read_text()
    assert "max-working-set" not in src  # place rejects it: never its hint
    assert _help_of(p, "place", "--batch")  # the flag the too-big hint names


def test_bad_ops_are_reported_by_name():
    from rooflab.models.userops import parse_ops

    ok, bad = parse_ops([{"name": "my_conv", "kind": "conv2d", "shape": {}}, {"kind": "warp"}, {"kind": "relu"}])
    assert [b["op"] for b in bad] == ["my_conv", "op 1 (warp)", "op 2 (relu)"]


def test_info_shows_the_clock_of_the_newest_run_and_says_so(tmp_path):
    from rooflab.commands import info

    d = json.loads(CEILINGS.read_text())
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / CEILINGS.name).write_text(json.dumps(d))
    probed = []
    ghz, which = info.clock_shown("m", tmp_path, lambda t: probed.append(t) or [3.692])
    assert ghz == pytest.approx(d["machine"]["cpu"]["measured_ghz"]) and CEILINGS.name in which
    assert not probed  # one clock: the run's, not a second one probed now
    ghz, which = info.clock_shown("other", tmp_path, lambda t: [3.5, 3.692])
    assert ghz == 3.692 and "probed now" in which


@pytest.mark.slow  # draws three charts (~5 s)
def test_plot_with_a_png_name_writes_roofline_and_staircase(tmp_path, capsys):
    assert cli.main(["plot", str(CEILINGS), "-o", str(tmp_path / "x.png")]) == 0
    assert (tmp_path / "x.png").exists() and (tmp_path / "x.bandwidth.png").exists()
    assert cli.main(["plot", str(MODELS), "-o", str(tmp_path / "m.png")]) == 0  # ops placed: a roofline
    assert (tmp_path / "m.png").exists()


def test_the_readme_setup_line_ends_in_the_quick_run_and_its_times_match_the_help():
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    setup = readme.split("```bash\n", 1)[1].split("```", 1)[0].strip()
    assert setup.endswith("rooflab run --quick")  # not a full run of many minutes
    prose = " ".join(readme.split("## The CLI")[0].split())
    help_ = _help_of(cli.build_parser(), "run", "--quick")
    for said in ("about 60-100 s", "about 9 min"):
        assert said in prose and said in help_


class _Errors:
    """The part of a result writer the driver reports a refused case to."""

    def __init__(self):
        self.errors = []

    def add_error(self, where, what):
        self.errors.append((where, what))

    def add_record(self, *a, **k):
        raise AssertionError("a refused case must not be measured")


def _fixed_shape_cases():
    from rooflab.families import conv, gemm

    big_gemm = max(gemm.cases(quick=False, threads=[1]), key=lambda c: c.footprint)
    big_conv = max(conv.cases(False, [1]), key=lambda c: c.footprint)
    return [big_gemm, big_conv]


def test_fixed_shape_suites_honour_max_working_set_before_they_allocate(big_llc, monkeypatch):
    """gemm and conv have fixed shapes: the driver refuses a case over --max-working-set (or free
    memory) from its declared footprint, before its inputs exist, and goes on with the next."""
    from rooflab import memory
    from rooflab.cpu.backend import cpu_backend
    from rooflab.driver import Driver, Settings

    driver = Driver(cpu_backend(), Settings(budget_s=0.0, min_samples=1, probe_clock=False, max_attempts=1))
    built = []
    monkeypatch.setattr(Driver, "inputs", staticmethod(lambda case: built.append(case) or ()))
    cases = _fixed_shape_cases()
    assert all(c.footprint > 64 << 20 for c in cases)
    memory.set_working_set_limit(64 << 20)
    w = _Errors()
    assert driver.run(cases, w) == [] and built == []
    assert len(w.errors) == 2 and all("over --max-working-set 64 MiB" in e for _, e in w.errors)
    memory.set_working_set_limit(None)
    monkeypatch.setattr(memory, "available_bytes", lambda: 16 << 20)  # nothing free
    w = _Errors()
    assert driver.run(cases, w) == [] and built == []
    assert all("memory is free" in e for _, e in w.errors)


def test_a_footprint_counts_every_array_the_case_holds():
    """The declared footprint is at least what the inputs really take (so the check cannot pass a
    case that then does not fit): gemm's A and B, conv's x and w, built at a small shape."""
    from rooflab.driver import Driver
    from rooflab.families import conv, gemm

    for c in (min(gemm.cases(quick=True, threads=[1]), key=lambda c: c.footprint),
              min(conv.cases(True, [1]), key=lambda c: c.footprint)):  # fmt: skip
        held = sum(a.nbytes for a in Driver.inputs(c) if hasattr(a, "nbytes"))
        assert c.footprint >= 2 * held, (c.label, c.footprint, held)


def test_a_users_runs_never_land_in_the_repositorys_committed_results():
    """A user's `rooflab run` on an Intel VM wrote into results/intel-xeon-2c/, the repository's
    committed folder of another machine: compare, "newest" and the site then mixed them."""
    import subprocess

    from rooflab.results import RUNS_DIR

    root = Path(__file__).resolve().parent.parent
    parser = cli.build_parser()
    for argv in (["run", "--quick"], ["place", "ops.json"], ["llm", "smollm-135m"]):
        assert parser.parse_args(argv).out == RUNS_DIR
    files = subprocess.run(["git", "ls-files", "results"], cwd=root, capture_output=True, text=True).stdout.split()
    committed = {Path(f).parts[1] for f in files if len(Path(f).parts) > 2}
    assert Path(RUNS_DIR).name not in committed and Path(RUNS_DIR).parent.name == "results"
    probe = root / RUNS_DIR / "some-machine-2c" / "rooflab-ceilings-cpu-x.json"
    ignored = subprocess.run(["git", "check-ignore", "-q", str(probe)], cwd=root)
    assert ignored.returncode == 0  # git never offers a user's run for a commit
