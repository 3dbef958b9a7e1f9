import json
import subprocess
import sys

import pytest

from rooflab import cli
from rooflab.results import load

TINY = ["--quick", "--max-working-set", "256K", "--budget", "0.005"]


def _run(argv):
    return cli.main(argv)


def test_info_prints_machine_and_peaks(capsys):
    assert _run(["info"]) == 0
    out = capsys.readouterr().out
    assert "Theoretical peaks" in out and "GHz" in out and "L1" in out and "GPU" in out


@pytest.mark.slow
def test_run_quick_writes_result_with_ceilings_and_plots(quick_result):
    d = load(quick_result)
    assert d["status"] == "complete"
    kinds = {c["kind"] for c in d["ceilings"]}
    assert kinds == {"compute", "bandwidth", "latency"}
    for c in d["ceilings"]:
        for key in ("name", "kind", "level", "dtype", "threads", "value", "unit", "stats"):
            assert key in c, (c["name"], key)
        assert c["value"] > 0
    compute = [c for c in d["ceilings"] if c["kind"] == "compute"]
    from rooflab.cpu.machine import LOWPREC_DTYPE
    from rooflab.families.lowprec import available

    fma = {c["dtype"] for c in compute if c["name"].startswith(("FP64 FMA", "FP32 FMA"))}
    assert fma == {"float64", "float32"}
    units = [u for u, why in available().items() if why is None]  # the low-precision units this CPU runs
    assert {c["dtype"] for c in compute} - fma == {LOWPREC_DTYPE[u] for u in units}
    assert {c["level"] for c in d["ceilings"] if c["kind"] == "bandwidth"} >= {"L1"}
    assert len(d["sweeps"]["intensity"]) >= 7
    ints = [p["flops_per_byte"] for p in d["sweeps"]["intensity"]]
    assert min(ints) <= 1 / 8 and max(ints) >= 256
    assert all(r["verified"] for r in d["records"])
    assert d["machine"]["cpu"]["theoretical"]["peaks"]
    stem = str(quick_result)[:-5]
    for suffix in (".roofline.png", ".roofline.svg", ".bandwidth.png", ".bandwidth.svg"):
        with open(stem + suffix, "rb") as f:
            head = f.read(8)
        assert head.startswith(b"\x89PNG") or head.startswith(b"<?xml")


@pytest.mark.slow
def test_plot_command(quick_result, tmp_path, capsys):
    assert _run(["plot", str(quick_result), "-o", str(tmp_path / "fig.png")]) == 0
    assert (tmp_path / "fig.png").stat().st_size > 10_000 and (tmp_path / "fig.svg").exists()


@pytest.mark.slow
def test_compare_flags_regressions(quick_result, tmp_path, capsys):
    d = json.loads(quick_result.read_text())
    assert _run(["compare", str(quick_result), str(quick_result)]) == 0
    for c in d["ceilings"]:
        if c["kind"] == "compute":
            c["value"] *= 0.5
    worse = tmp_path / "worse.json"
    worse.write_text(json.dumps(d))
    assert _run(["compare", str(quick_result), str(worse)]) == 1
    assert "regressed" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["run", "--device", "tpu"], "unknown device 'tpu'"),
        (["run", "--threads", "999"], "more than the"),
        (["run", "--suite", "nope"], "unknown suite"),
        (["run", "--max-working-set", "64T", "--quick"], "of memory is free"),
        (["plot", "/nonexistent/r.json"], "no such result file"),
    ],
)
def test_bad_input_is_one_line_exit_2(argv, needle, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a run refused part-way must not leave files in the checkout's results/
    assert _run(argv) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and "\n" not in err and "Traceback" not in err


def test_foreign_and_broken_files(tmp_path, capsys):
    f = tmp_path / "notjson.json"
    f.write_text("nope")
    assert _run(["plot", str(f)]) == 2
    g = tmp_path / "other.json"
    g.write_text(json.dumps({"kind": "rooflab-result", "schema_version": 0}))
    assert _run(["compare", str(g), str(g)]) == 2
    assert "schema_version" in capsys.readouterr().err


def test_argparse_errors_are_one_line():
    p = subprocess.run([sys.executable, "-m", "rooflab", "run", "--bogus"], capture_output=True, text=True)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "unrecognized arguments" in p.stderr


@pytest.mark.slow
def test_interrupted_run_keeps_what_it_measured(tmp_path, monkeypatch):
    from rooflab.driver import Driver

    real = Driver.run_case

    def boom(self, case, inputs=None):  # Ctrl-C when the bandwidth sweep starts
        if case.variant.startswith("cpu.stream."):
            raise KeyboardInterrupt
        return real(self, case, inputs)

    monkeypatch.setattr(Driver, "run_case", boom)
    assert _run(["run", *TINY, "--out", str(tmp_path)]) == 130
    (f,) = tmp_path.glob("*/*.json")
    d = load(f)
    assert d["status"] == "interrupted"
    assert any(r["family"] == "ert" for r in d["records"])  # the peaks measured before are kept


@pytest.mark.slow
def test_no_ceiling_above_105_percent_of_theoretical_unless_flagged(quick_result):
    """A real run: every compute ceiling within 105 % of its theoretical peak at the run's best
    clock, or flagged as disturbed. The order of the memory levels is the run's own to flag (a busy
    neighbour can put L3 above L2 on a shared VM): every slower level measured above a faster one
    carries the run's flag on both and a note, whatever the figures came out as."""
    d = load(quick_result)
    compute = [c for c in d["ceilings"] if c["kind"] == "compute"]
    # every unit's peak has its theoretical rate; a kernel's roof (W4 dequantize-and-FMA) says it has none
    assert compute and all("theoretical" in c or "theoretical_unknown" in c for c in compute)
    assert all("theoretical" in c for c in compute if c["dtype"] != "w4")
    for c in compute:
        assert c.get("fraction_of_theoretical", 0) <= 1.05 or c["noisy"], c
    order = ("L1", "L2", "L3", "DRAM")
    bw = [c for c in d["ceilings"] if c["kind"] == "bandwidth" and c["level"] in order]
    assert {c["level"] for c in bw} >= {"L1"}
    for c in bw:
        for o in bw:
            same = o.get("kernel") == c.get("kernel") and o["threads"] == c["threads"]
            if same and order.index(o["level"]) > order.index(c["level"]) and o["value"] > c["value"] * 1.02:
                assert c.get("order_violation") and c["noisy"], (
                    c["name"],
                    o["name"],
                )
                assert any(o["name"] in n and c["name"] in n for n in d["notes"]), (c["name"], o["name"])


def test_unwritable_out_and_impossible_working_set_are_refused_before_anything_is_written(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    p = subprocess.run(
        [sys.executable, "-m", "rooflab", "run", "--quick", "--out", str(blocker)], capture_output=True, text=True
    )
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "cannot write results" in p.stderr
    out = tmp_path / "out"
    p = subprocess.run(
        [sys.executable, "-m", "rooflab", "run", "--max-working-set", "64T", "--out", str(out)],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 2 and "64T" in p.stderr and p.stderr.count("\n") == 1
    assert not list(out.rglob("*.json"))  # nothing written


@pytest.mark.slow
@pytest.mark.parametrize("cmd", ["report", "plot", "publish"])
def test_an_unwritable_output_is_one_line_and_exit_2(quick_result, cmd, capsys):
    src = str(quick_result.parent.parent) if cmd == "publish" else str(quick_result)
    assert _run([cmd, src, "-o", "/proc/rooflab-cannot/out.html"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("rooflab: error: cannot write /proc/rooflab-cannot"), err


@pytest.mark.parametrize("budget", ["-1", "0", "soon"])
def test_a_budget_that_is_not_positive_seconds_is_refused(budget, capsys):
    with pytest.raises(SystemExit) as e:
        _run(["run", "--budget", budget])
    assert e.value.code == 2 and "--budget" in capsys.readouterr().err


def test_result_files_are_readable_like_any_other_file(tmp_path):
    import os

    from rooflab.results import atomic_write_json

    old = os.umask(0o022)
    try:
        atomic_write_json(tmp_path / "r.json", {"a": 1})
    finally:
        os.umask(old)
    assert (tmp_path / "r.json").stat().st_mode & 0o777 == 0o644  # mkstemp alone leaves 0600
