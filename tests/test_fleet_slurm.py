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


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def slurm_cluster(tmp_path_factory):
    """A real Slurm controller and one slurmd (this machine as node) from Debian's packages,
    started here with their own config, ports and state; munged must be running (or startable)."""
    import socket
    import time

    need = [shutil.which(x) for x in ("slurmctld", "slurmd", "sbatch", "srun", "sinfo", "munge")]
    if not all(need) or os.geteuid() != 0:
        pytest.skip("needs root and Debian's slurmctld, slurmd, slurm-client and munge")
    if subprocess.run(["munge", "-n"], capture_output=True).returncode != 0:
        subprocess.run(["runuser", "-u", "munge", "--", "/usr/sbin/munged"], capture_output=True)
        if subprocess.run(["munge", "-n"], capture_output=True).returncode != 0:
            pytest.skip("munged is not running and could not be started")
    d = tmp_path_factory.mktemp("slurm")
    for sub in ("state", "spool"):
        (d / sub).mkdir()
    host = socket.gethostname()
    mem_mib = int(open("/proc/meminfo").read().split()[1]) // 1024 // 2
    conf = d / "slurm.conf"
    conf.write_text(
        f"""ClusterName=rooflabtest
SlurmctldHost={host}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
AuthType=auth/munge
CryptoType=crypto/munge
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
NodeName={host} NodeAddr=127.0.0.1 CPUs={os.cpu_count()} RealMemory={mem_mib} State=UNKNOWN
PartitionName=rooflab Nodes={host} Default=YES MaxTime=INFINITE State=UP
"""
    )
    env = {**os.environ, "SLURM_CONF": str(conf)}
    daemons = [
        subprocess.Popen([exe, "-D", "-f", str(conf)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for exe in ("slurmctld", "slurmd")
    ]
    try:
        for _ in range(60):
            out = subprocess.run(["sinfo", "-h", "-o", "%t"], env=env, capture_output=True, text=True).stdout
            if "idle" in out:
                break
            time.sleep(1)
        else:
            pytest.skip(f"slurmd did not register: {(d / 'slurmctld.log').read_text()[-500:]}")
        yield env
    finally:
        for p in daemons:
            p.terminate()
        for p in daemons:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()


def fleet_cli(env, *args, timeout=600):
    return subprocess.run(
        [sys.executable, "-m", "rooflab", "fleet", "run", "--engine", "slurm", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.slow
def test_a_real_slurm_cluster_runs_gathers_and_resumes(slurm_cluster, tmp_path):
    import socket

    out = tmp_path / "fleet"
    r = fleet_cli(
        slurm_cluster, "--nodes", "1", "--threads", "1", "--budget", "0.02", "--timeout", "300", "-o", str(out)
    )
    assert r.returncode == 0, r.stdout + r.stderr
    (f,) = (out / "nodes").glob("*.json")
    doc = json.loads(f.read_text())
    assert doc["fleet"]["engine"] == "slurm" and doc["fleet"]["node_id"].endswith("-" + socket.gethostname())
    assert doc["suite"] == "probe" and doc["status"] == "complete" and doc["ceilings"]
    m = json.loads((out / "fleet.json").read_text())
    assert m["runs"][0]["job"] and (out / f"slurm-{m['runs'][0]['job']}.out").is_file()
    r = fleet_cli(slurm_cluster, "--resume", str(out))
    assert r.returncode == 0 and "already have a good result" in r.stdout

    slow = tmp_path / "slow"
    r = fleet_cli(slurm_cluster, "--nodes", "1", "--timeout", "2", "-o", str(slow), timeout=300)
    assert r.returncode == 1, r.stdout + r.stderr
    (entry,) = json.loads((slow / "fleet.json").read_text())["nodes"].values()
    assert entry["status"] == "timeout" and "--timeout 2 s" in entry["reason"]
