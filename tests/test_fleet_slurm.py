"""`rooflab fleet run --engine slurm`: the batch script it generates, the task each node runs (run
here as Slurm would start it on one node) and the gathering of the nodes' reports."""

import json
import os
import shlex
import shutil
import subprocess
import sys

import pytest

from rooflab import cli
from rooflab.fleet import slurm, store


def dry_run(capsys, tmp_path, *extra) -> str:
    out = tmp_path / "fleet"
    rc = cli.main(["fleet", "run", "--engine", "slurm", "--nodes", "4", "--dry-run", "-o", str(out), *extra])
    assert rc == 0
    assert not out.exists()  # a dry run writes nothing
    return capsys.readouterr().out


def test_dry_run_prints_the_batch_script(tmp_path, capsys):
    text = dry_run(capsys, tmp_path, "--partition", "cpu", "--timeout", "600", "--quick")
    lines = text.splitlines()
    assert lines[0] == "#!/bin/bash"
    for want in (
        "#SBATCH --nodes=4",
        "#SBATCH --ntasks-per-node=1",
        "#SBATCH --exclusive",
        "#SBATCH --partition=cpu",
        "#SBATCH --time=20",  # 600 s per node + 10 min
        f"#SBATCH --output={(tmp_path / 'fleet').resolve()}/slurm-%j.out",
    ):
        assert want in lines, want
    (srun,) = [ln for ln in lines if ln.startswith("srun ")]
    argv = shlex.split(srun)
    assert argv[:5] == ["srun", "-N", "4", "--ntasks-per-node=1", "--exclusive"]
    task = argv[argv.index(sys.executable) :]
    assert task[1:3] == ["-m", "rooflab.fleet.node"]
    assert task[task.index("--out") + 1] == str((tmp_path / "fleet").resolve())
    assert task[task.index("--timeout") + 1] == "600"
    assert task[task.index("--") + 1 :] == ["--suite", "probe", "--device", "cpu", "--quick"]


def test_the_node_task_writes_its_report_and_the_caller_gathers_it(tmp_path, capsys):
    """The script's task line, run as srun would on node n7 (a suite that fails at once)."""
    out = tmp_path / "fleet"
    text = slurm.script(out, ["--suite", "nosuch"], 1, 120)
    argv = shlex.split(next(ln for ln in text.splitlines() if ln.startswith("srun ")))
    task = argv[argv.index(sys.executable) :]
    env = {**os.environ, "SLURMD_NODENAME": "n7"}
    t0 = __import__("time").time()
    r = subprocess.run(task, capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 1 and "failed" in r.stdout
    (report,) = (out / "reports").glob("*.json")
    entry = json.loads(report.read_text())
    assert entry["node_id"].endswith("-n7") and entry["engine"] == "slurm" and entry["status"] == "failed"
    assert "unknown suite 'nosuch'" in entry["reason"]
    m = store.new_manifest("slurm", {"suite": "nosuch"})
    entries = slurm.gather(out, m, t0, 2, "42")  # 2 nodes asked, 1 reported
    assert [e["status"] for e in entries] == ["failed", "failed"]
    assert "no report from 1 node(s) of job 42" in entries[-1]["reason"]
    assert set(m["nodes"]) == {entry["node_id"], "slurm-job-42"}


def test_resume_excludes_the_hosts_with_a_good_result(tmp_path, capsys):
    out = tmp_path / "fleet"
    m = store.new_manifest("slurm", {"suite": "probe", "device": "cpu", "quick": False, "timeout": 60, "nodes": "3"})
    doc = {"kind": "rooflab-result", "schema_version": 2, "status": "complete", "ceilings": [{"name": "c"}]}
    store.record(m, store.write_report(out, {"node_id": "n1-n1", "hostname": "n1", "status": "ok", "result": doc}))
    store.save_manifest(out, m)
    assert cli.main(["fleet", "run", "--resume", str(out), "--dry-run"]) == 0
    text = capsys.readouterr().out
    assert "#SBATCH --nodes=2" in text and "#SBATCH --exclude=n1" in text


@pytest.mark.skipif(shutil.which("sbatch") is not None, reason="Slurm is installed here")
def test_without_slurm_one_line(tmp_path, capsys):
    assert cli.main(["fleet", "run", "--engine", "slurm", "--nodes", "2", "-o", str(tmp_path / "f")]) == 2
    assert "needs Slurm's sbatch on PATH" in capsys.readouterr().err
    assert not (tmp_path / "f").exists()
