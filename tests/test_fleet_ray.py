"""`rooflab fleet run --engine ray` on a real Ray cluster of 4 nodes started on this machine
(ray.cluster_utils.Cluster: a head and 3 worker raylets, each its own node with 1 CPU, the way
Ray's own tests run multi-node clusters), running the real `probe` suite on every node.

Slow (the cluster takes ~25 s to start on 2 busy cores, a probe run ~30-40 s per node); skipped
without Ray (pip install 'rooflab[fleet]')."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="Ray not installed (pip install 'rooflab[fleet]')")
pytestmark = pytest.mark.slow

RUN = ["--threads", "1", "--budget", "0.02"]  # 1 thread per 1-CPU node; the probe's budgets, shorter


@pytest.fixture(scope="module")
def cluster(probe_compiled):
    from ray.cluster_utils import Cluster

    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    try:
        workers = [c.add_node(num_cpus=1) for _ in range(3)]
        c.wait_for_nodes()
        c.workers = workers
        yield c
    finally:
        c.shutdown()


def fleet(*args, timeout=600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rooflab", "fleet", "run", *args], capture_output=True, text=True, timeout=timeout
    )


def start(*args) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "rooflab", "fleet", "run", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # pytest-xdist workers ignore SIGINT and a child inherits that: give the caller Ctrl-C back
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def wait_running(proc: subprocess.Popen) -> None:
    """Until the caller has submitted every run (its 'running `rooflab run ...`' line)."""
    for line in proc.stderr:
        if line.startswith("running `rooflab run"):
            return
    raise AssertionError(f"fleet run ended before running: {proc.wait()}")


def manifest(out: Path) -> dict:
    return json.loads((out / "fleet.json").read_text())


def alive_ids(c) -> set:
    ray.init(address=c.address, log_to_driver=False, logging_level="ERROR")
    try:
        return {n["NodeID"] for n in ray.nodes() if n["Alive"]}
    finally:
        ray.shutdown()


def orphan_runs(within: float = 30.0) -> list:
    """`rooflab run` children of fleet tasks still alive ``within`` seconds from now (a cancelled
    task or a killed node takes its run along; Ray cancels asynchronously, so allow it time)."""
    deadline = time.monotonic() + within
    while True:
        found = _fleet_runs()
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(1)


def _fleet_runs() -> list:
    out = []
    for pid in os.listdir("/proc"):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError):
            continue
        if b"rooflab" in cmd and any(a.startswith(b"/tmp/rooflab-fleet-") for a in cmd):
            out.append(int(pid))
    return out


def test_one_result_per_node_each_node_alone(cluster, tmp_path):
    out = tmp_path / "fleet"
    r = fleet("--address", cluster.address, *RUN, "-o", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    files = sorted((out / "nodes").glob("*.json"))
    assert len(files) == 4
    docs = [json.loads(f.read_text()) for f in files]
    blocks = [d["fleet"] for d in docs]
    assert len({b["node_id"] for b in blocks}) == 4  # unique although all share one host name
    assert {b["engine_node_id"] for b in blocks} == alive_ids(cluster)
    for d, b in zip(docs, blocks):
        assert b["placed_on"] == b["engine_node_id"]  # ran where it was placed
        assert b["sku_key"] and b["sku"]["physical_cores"] >= 1
        assert d["kind"] == "rooflab-result" and d["suite"] == "probe" and d["status"] == "complete"
        kinds = {c["kind"] for c in d["ceilings"]}
        assert {"compute", "bandwidth", "latency"} <= kinds
    # no two runs on one node at a time: group the recorded intervals by the node each ran on
    by_node: dict = {}
    for b in blocks:
        by_node.setdefault(b["placed_on"], []).append((b["started_unix"], b["finished_unix"]))
    for spans in by_node.values():
        spans.sort()
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
    m = manifest(out)
    assert {e["status"] for e in m["nodes"].values()} == {"ok"} and m["runs"][0]["status"] == "complete"
    assert "4 of 4 node(s) run now characterized" in r.stdout


def test_more_nodes_than_the_cluster_and_a_timeout(cluster, tmp_path):
    t0 = time.monotonic()
    r = fleet("--address", cluster.address, "--nodes", "9", "-o", str(tmp_path / "nine"), timeout=120)
    assert r.returncode == 2 and "--nodes 9 asked" in r.stderr and "has 4 alive node(s)" in r.stderr
    assert time.monotonic() - t0 < 60 and not (tmp_path / "nine").exists()

    out = tmp_path / "slow"
    t0 = time.monotonic()
    r = fleet("--address", cluster.address, "--nodes", "1", "--timeout", "3", *RUN, "-o", str(out), timeout=300)
    took = time.monotonic() - t0
    assert r.returncode == 1, r.stdout + r.stderr
    (entry,) = manifest(out)["nodes"].values()
    assert entry["status"] == "timeout" and "--timeout 3 s" in entry["reason"]
    assert took < 60, took
    assert "failed: 1 timeout" in r.stdout and "--resume" in r.stdout


def test_ctrl_c_keeps_what_finished(cluster, tmp_path):
    out = tmp_path / "int"
    # a suite that lasts a minute per node: the probe now takes seconds with numba's cache warm, and
    # once finished before the interrupt came (exit 0)
    proc = start("--address", cluster.address, "--nodes", "2", *RUN, "--suite", "ceilings", "--quick", "-o", str(out))
    wait_running(proc)
    time.sleep(3)
    proc.send_signal(signal.SIGINT)
    rc = proc.wait(timeout=120)
    assert rc == 130
    m = manifest(out)
    assert m["runs"][-1]["status"] == "interrupted"
    assert {e["status"] for e in m["nodes"].values()} == {"interrupted"}
    assert orphan_runs() == []


def test_a_node_killed_mid_run_then_resume_finishes_it(cluster, tmp_path):
    out = tmp_path / "kill"
    proc = start("--address", cluster.address, *RUN, "-o", str(out))
    wait_running(proc)
    time.sleep(8)  # the runs are compiling and measuring (~30 s each here)
    victim = cluster.workers[-1]
    victim_id = victim.node_id
    cluster.remove_node(victim, allow_graceful=False)
    stdout, _ = proc.communicate(timeout=600)
    assert proc.returncode == 1, stdout
    m = manifest(out)
    statuses = {e["engine_node_id"]: e["status"] for e in m["nodes"].values()}
    assert statuses.pop(victim_id) == "died"
    assert set(statuses.values()) == {"ok"} and len(statuses) == 3
    dead = next(e for e in m["nodes"].values() if e["engine_node_id"] == victim_id)
    assert dead["reason"] and dead["file"] is None
    assert dead["reason"].endswith((".", " ...")), dead["reason"]  # whole sentences (it was cut mid-word)
    assert "[state-dump]" not in stdout and "Raylet is terminated" not in stdout  # Ray's 20-line log dump
    assert len(list((out / "nodes").glob("*.json"))) == 3
    assert orphan_runs() == []  # the killed node's `rooflab run` went with it

    cluster.workers[-1] = cluster.add_node(num_cpus=1)  # the node comes back (a new Ray node id)
    cluster.wait_for_nodes()
    r = fleet("--resume", str(out), "--address", cluster.address)
    assert r.returncode == 0, r.stdout + r.stderr
    m = manifest(out)
    assert len(m["runs"]) == 2 and len(m["runs"][-1]["nodes"]) == 1  # only the node without a result
    assert len(list((out / "nodes").glob("*.json"))) == 4
    assert "3 node(s) already have a good result" in r.stderr
    assert "1 earlier failed node(s) are no longer in the cluster" in r.stdout
