"""The Ray adapter: one `rooflab run` per alive node of an existing Ray cluster, each holding its
node alone, results brought back through Ray's object store as data.

Placement: one task per node with hard node affinity (NodeAffinitySchedulingStrategy, soft=False)
asking for all of that node's CPUs and GPUs, so Ray places nothing else there while it runs and
two runs never share a node. (A STRICT_SPREAD placement group gives the same spread but not which
node gets which bundle; with nodes of different sizes the bundles would not fit.) Nodes with no
CPU resource (a head started with --num-cpus 0, as clusters often do) are left out and said so.

Faults: a task whose node dies, whose worker crashes or whose run fails is recorded with Ray's
reason; a node that leaves the cluster is noticed within ~2 s (ray.nodes() polled) even before
Ray fails its task; a run past --timeout is killed on the node (node.py), and a task with no
answer --timeout + GRACE_S after it was submitted is cancelled. Ctrl-C cancels what is running and
keeps what finished. Every other node's result is kept either way.

An address with nothing behind it would make ray.init retry forever, so the address is tried first
in a child process that must answer within PROBE_S (a refused TCP connection fails at once).

Napkin math: the caller holds one node's result at a time (~50 KB probe, ~1 MB ceilings) between
ray.get and the file write; the object store holds the results not yet fetched.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

from ..errors import RooflabError, first_line

GRACE_S = 60.0  # beyond --timeout: the worker's start, the child's imports, the result's way back
PROBE_S = 30.0  # an address must answer within this
POLL_S = 2.0  # liveness poll of the nodes still running
INSTALL = "pip install 'rooflab[fleet]' (Ray >= 2.9)"


def import_ray():
    try:
        import ray
    except ImportError:
        raise RooflabError("--engine ray needs Ray, which is not installed here", INSTALL) from None
    return ray


def _host_port(address: str) -> tuple[str, int] | None:
    addr = address.split("://", 1)[-1]
    host, _, port = addr.rpartition(":")
    return (host, int(port)) if host and port.isdigit() else None


def probe(address: str, timeout: float = PROBE_S) -> int:
    """Fail with one line unless a Ray cluster answers at ``address``; returns its node count."""
    hp = _host_port(address) if address != "auto" else None
    if hp:
        try:
            socket.create_connection(hp, timeout=5).close()
        except OSError as e:
            raise RooflabError(
                f"no Ray cluster at {address}: {e.strerror or e}",
                "start one with `ray start --head` and pass its address (HOST:6379)",
            ) from None
    code = (
        "import json, ray\n"
        f"ray.init(address={address!r}, log_to_driver=False, logging_level='ERROR')\n"
        "print(json.dumps(len(ray.nodes())))\n"
    )
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise RooflabError(
            f"no Ray cluster answers at {address} within {timeout:g} s", "check the address (ray status on the head)"
        ) from None
    if out.returncode != 0:
        lines = [ln for ln in out.stderr.strip().splitlines() if ln.strip() and not ln.startswith("[")]
        why = next((ln for ln in reversed(lines) if "Error" in ln), lines[-1] if lines else f"exit {out.returncode}")
        raise RooflabError(f"no Ray cluster at {address}: {why.strip()[:300]}", "start one with `ray start --head`")
    return int(json.loads(out.stdout.strip().splitlines()[-1]))


def connect(address: str | None):
    """ray.init on an existing cluster only (never starts one)."""
    import os

    ray = import_ray()
    address = address or os.environ.get("RAY_ADDRESS") or "auto"
    probe(address)
    ray.init(address=address, log_to_driver=False, logging_level="ERROR")
    _one_line_cluster_errors()
    return ray, address


def _one_line_cluster_errors() -> None:
    """Ray prints the cluster's error messages on the caller's stdout, a dead raylet's with the last
    20 lines of its log; rooflab's own line per node already says what died. Each such message is
    said once, as its first sentence, on stderr. (Ray's printer is private API: where it has moved,
    Ray's own output stays as it is.)"""
    try:
        from ray._private import worker as ray_worker
    except ImportError:
        return
    original = getattr(ray_worker, "print_to_stdstream", None)
    if original is None or getattr(original, "_rooflab", False):
        return
    said: set = set()

    def printer(data, *args, **kwargs):
        if data.get("pid") != "raylet":
            return original(data, *args, **kwargs)
        for msg in data.get("lines") or []:
            first = first_line(Exception(str(msg).replace("\n", " ")), 160)
            if first not in said:
                said.add(first)
                print(f"ray: {first} (the node's log: /tmp/ray/session_latest/logs)", file=sys.stderr)
        return None

    printer._rooflab = True
    ray_worker.print_to_stdstream = printer


def cluster_nodes(ray) -> tuple[list[dict], list[dict]]:
    """(alive nodes with CPUs, alive nodes without), each {ray_id, hostname, cpus, gpus, node_id}."""
    from .identity import node_id

    usable, idle = [], []
    for n in ray.nodes():
        if not n.get("Alive"):
            continue
        res = n.get("Resources") or {}
        host = n.get("NodeManagerHostname") or n.get("NodeManagerAddress") or "host"
        d = {
            "ray_id": n["NodeID"],
            "hostname": host,
            "address": n.get("NodeManagerAddress"),
            "cpus": res.get("CPU", 0.0),
            "gpus": res.get("GPU", 0.0),
            "node_id": node_id(host, n["NodeID"]),
        }
        (usable if d["cpus"] >= 1 else idle).append(d)
    usable.sort(key=lambda d: (d["hostname"], d["ray_id"]))
    return usable, idle


def characterize_here(run_args: list[str], timeout: float | None, target: dict) -> dict:
    """The Ray task: this node's identity and its `rooflab run` report."""
    import ray

    from .identity import identity
    from .node import characterize

    ident = identity("ray", target["ray_id"])
    ident["node_id"] = target["node_id"]  # the caller's name for it (the same host name and Ray id)
    ident["placed_on"] = ray.get_runtime_context().get_node_id()
    return characterize(run_args, timeout, ident)


def _failure(target: dict, status: str, reason: str, t0: float) -> dict:
    return {
        "node_id": target["node_id"],
        "hostname": target["hostname"],
        "engine": "ray",
        "engine_node_id": target["ray_id"],
        "status": status,
        "reason": reason,
        "started_unix": t0,
        "finished_unix": time.time(),
        "result": None,
    }


def _reason(e: BaseException) -> tuple[str, str]:
    name = type(e).__name__
    died = ("NodeDied", "WorkerCrashed", "ActorDied", "OwnerDied", "LocalRayletDied", "ObjectLost")
    status = "died" if any(d in name for d in died) else "failed"
    return status, f"{name}: {first_line(e, 300)}"


def run(ray, targets: list[dict], run_args: list[str], timeout: float | None, on_report, stats=None) -> str:
    """Run on every target node; ``on_report(report)`` files each as it arrives. Returns
    "complete" or "interrupted" (Ctrl-C: what is running is cancelled and reported as such).
    ``stats`` (a dict) gets the caller's cost: seconds in ray.get + filing, results collected."""
    stats = stats if stats is not None else {}
    stats.update(collect_seconds=0.0, collected=0)
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    task = ray.remote(characterize_here)
    pending: dict = {}
    for t in targets:
        ref = task.options(
            num_cpus=t["cpus"],
            num_gpus=t["gpus"],
            max_retries=0,
            name=f"rooflab-fleet-{t['node_id']}",
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=t["ray_id"], soft=False),
        ).remote(run_args, timeout, t)
        deadline = time.monotonic() + (timeout + GRACE_S if timeout else float("inf"))
        pending[ref] = (t, time.time(), deadline)
    last_poll = time.monotonic()
    try:
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=1.0)
            for ref in ready:
                t, t0, _ = pending.pop(ref)
                tc = time.perf_counter()
                try:
                    report = ray.get(ref)
                except Exception as e:  # RayError subclasses: the node, the worker or the task failed
                    status, why = _reason(e)
                    report = _failure(t, status, why, t0)
                else:
                    report["node_id"] = t["node_id"]
                on_report(report)
                stats["collect_seconds"] += time.perf_counter() - tc
                stats["collected"] += 1
            now = time.monotonic()
            for ref, (t, t0, deadline) in list(pending.items()):
                if now > deadline:
                    ray.cancel(ref, force=True)
                    pending.pop(ref)
                    why = f"no result {timeout:g} s + {GRACE_S:g} s after submission (hung, or the node was busy)"
                    on_report(_failure(t, "timeout", why, t0))
            if pending and now - last_poll > POLL_S:
                last_poll = now
                alive = {n["NodeID"] for n in ray.nodes() if n.get("Alive")}
                for ref, (t, t0, _) in list(pending.items()):
                    if t["ray_id"] not in alive:
                        ray.cancel(ref, force=True)
                        pending.pop(ref)
                        on_report(_failure(t, "died", "the Ray node left the cluster during the run (dead)", t0))
    except KeyboardInterrupt:
        for ref, (t, t0, _) in pending.items():
            try:
                ray.cancel(ref, force=True)
            except Exception:  # the cluster may be gone too; the record below still holds
                pass
            on_report(_failure(t, "interrupted", "Ctrl-C in the caller: the run was cancelled", t0))
        return "interrupted"
    return "complete"
