import json

import pytest

from rooflab import RooflabError, machine
from rooflab.results import SCHEMA_VERSION, ResultWriter, load


def _writer(tmp_path):
    return ResultWriter(tmp_path, machine.describe(), "ceilings", "cpu", {"quick": True})


def test_round_trip_and_incremental_saves(tmp_path):
    w = _writer(tmp_path)
    w.save()
    rec = {
        "variant": "cpu.stream.read",
        "label": "read 8 KiB",
        "threads": 1,
        "kernel": "read",
        "working_set_bytes": 8192,
        "status": "ok",
        "gbps": {"median": 10.0},
        "work": {"flops": 1.0, "bytes": 8.0},
    }
    w.add_record(rec, sweep="bandwidth")
    on_disk = load(w.path)
    assert on_disk["status"] == "running" and on_disk["records"][0]["label"] == "read 8 KiB"
    assert on_disk["sweeps"]["bandwidth"][0]["gbps"]["median"] == 10.0
    w.add_record({"variant": "x", "label": "bad", "status": "failed", "error": "wrong"})
    w.finish()
    d = load(w.path)
    assert d["schema_version"] == SCHEMA_VERSION and d["status"] == "complete"
    assert d["errors"][0]["error"] == "wrong"
    for key in ("machine", "ceilings", "sweeps", "records", "config", "started", "finished"):
        assert key in d
    assert not list(w.path.parent.glob(".*.tmp"))  # atomic writes leave no temporaries


def test_refuses_foreign_files(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text("{not json")
    with pytest.raises(RooflabError, match="is not JSON"):
        load(bad)
    bad.write_text(json.dumps({"hello": 1}))
    with pytest.raises(RooflabError, match="not a rooflab result"):
        load(bad)
    bad.write_text(json.dumps({"kind": "rooflab-result", "schema_version": 999}))
    with pytest.raises(RooflabError, match="schema_version 999"):
        load(bad)
    with pytest.raises(RooflabError, match="no such result file"):
        load(tmp_path / "missing.json")


@pytest.mark.slow  # three commands over two result files, plots included (~6 s)
def test_previous_schema_version_is_read_by_plot_compare_report(tmp_path):
    """Result files of schema 1 (rooflab 0.1, committed under results/) still load, plot and compare."""
    from pathlib import Path

    from rooflab import cli

    old = sorted(Path(__file__).parent.parent.glob("results/intel-xeon-2c/rooflab-ceilings-cpu-*.json"))
    assert old, "the committed schema-1 results are the fixture"
    d = load(old[-1])
    assert d["schema_version"] == 1
    assert cli.main(["plot", str(old[-1]), "-o", str(tmp_path / "p")]) == 0
    assert cli.main(["compare", str(old[0]), str(old[-1]), "--threshold", "1000"]) == 0
    assert cli.main(["report", str(old[-1]), "-o", str(tmp_path / "r.html")]) == 0


def test_binary_file_is_one_clear_line(tmp_path, capsys):
    from rooflab import cli

    png = tmp_path / "figure.json"
    png.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)))
    with pytest.raises(RooflabError, match="is not a text file") as e:
        load(png)
    assert "\n" not in str(e.value)
    assert cli.main(["plot", str(png)]) == 2
    err = capsys.readouterr().err.strip()
    assert "is not a text file" in err and "\n" not in err and "Traceback" not in err
    (tmp_path / "dir.json").mkdir()
    with pytest.raises(RooflabError, match="cannot read"):
        load(tmp_path / "dir.json")


def _running_file(tmp_path, **fields):
    import json
    import subprocess
    import sys

    from rooflab.results import ResultWriter

    w = ResultWriter(tmp_path, {"id": "m"}, "elementwise", "cpu", {})
    w.save()
    d = json.loads(w.path.read_text())
    assert d["status"] == "running" and d["pid"] and d["host"] and d["heartbeat"]
    if fields.pop("dead_pid", False):
        p = subprocess.Popen([sys.executable, "-c", "pass"])
        p.wait()
        d["pid"] = p.pid  # a process that has exited: what the OOM killer leaves behind
    d.update(fields)
    w.path.write_text(json.dumps(d))
    return w.path


def test_a_run_that_died_is_reported_as_died(tmp_path, capsys):
    """A run killed outright (out of memory) left "status": "running" for ever."""
    assert load(_running_file(tmp_path / "a"))["status"] == "running"  # this process: alive
    d = load(_running_file(tmp_path / "b", dead_pid=True))
    assert d["status"] == "died" and "is gone" in d["died"]
    assert "died" in capsys.readouterr().err
    stale = load(_running_file(tmp_path / "c", host="another-host", heartbeat="2026-01-01T00:00:00Z"))
    assert stale["status"] == "died" and "no heartbeat" in stale["died"]
    fresh = load(_running_file(tmp_path / "d", host="another-host"))
    assert fresh["status"] == "running"
