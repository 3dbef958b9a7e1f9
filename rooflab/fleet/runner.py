"""`rooflab fleet run`: settings, which nodes to run, the manifest kept current, the summary.

The engine adapters (ray.py, slurm.py) only place runs and hand back each node's report; this
module files each report as it arrives (store.py), so Ctrl-C or a caller crash keeps every node
that finished, and `--resume DIR` runs only the alive nodes without a good result.

Exit status: 0 every node asked for has a good result; 1 some node failed, died, timed out or was
interrupted (each recorded with its reason, the others kept); 2 bad input (no cluster at the
address, more nodes asked than alive, a fleet directory that already holds a run); 130 Ctrl-C.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from pathlib import Path

from ..errors import RooflabError
from ..results import require_writable, utc_now
from . import store
from .outcome import line as _line
from .outcome import run_args, summary

DEFAULT_SUITE = "probe"
DEFAULT_TIMEOUT_S = 3600.0
MANIFEST_EVERY_S = 1.0  # the manifest's rewrites at most this often; the node reports are the record


def parse_nodes(text: str | None):
    """'all' -> None, 'N' -> N (>= 1)."""
    if text is None or str(text).lower() == "all":
        return None
    if not str(text).isdigit() or int(text) < 1:
        raise RooflabError(f"--nodes {text!r} is not 'all' or a positive number", "e.g. --nodes all or --nodes 4")
    return int(text)


def node_settings(*, suite=None, device=None, quick=False, threads=None, budget=None, timeout=None, nodes=None) -> dict:
    """The `rooflab run` every node runs, checked once here rather than on every node."""
    from ..choices import devices as _devices
    from ..choices import suites as _suites

    suite = suite or DEFAULT_SUITE
    _suites(suite)  # an unknown suite is refused here, not on every node
    device = (device or "cpu").lower()
    if device not in ("cpu", "cuda"):
        _devices(device)
        raise RooflabError("--device all is per node: run the fleet once per device", "use --device cpu or cuda")
    if timeout is not None and timeout <= 0:
        raise RooflabError(f"--timeout must be positive, got {timeout:g}")
    if threads is not None and threads < 1:
        raise RooflabError(f"--threads must be at least 1, got {threads}")
    return {
        "suite": suite,
        "device": device,
        "quick": bool(quick),
        "threads": threads,
        "budget": budget,
        "timeout": timeout if timeout is not None else DEFAULT_TIMEOUT_S,
        "nodes": nodes or "all",
    }


def choose(usable: list[dict], want: int | None, done: dict, where: str) -> tuple[list[dict], list[dict]]:
    """(targets, skipped as already good) among the usable nodes. A node is done when its fleet id
    has a good result, or, where host names are unique both in the cluster and among the good
    results, when its host has one (a node restarted under a new engine id)."""
    if not usable:
        raise RooflabError(
            f"the cluster {where} has no alive node with CPUs", "start worker nodes (ray start --address)"
        )
    if want is not None and want > len(usable):
        raise RooflabError(
            f"--nodes {want} asked, the cluster {where} has {len(usable)} alive node(s) with CPUs",
            f"pass --nodes {len(usable)} or fewer, or --nodes all",
        )
    hosts = Counter(n["hostname"] for n in usable)
    good_hosts = Counter(e.get("hostname") for e in done.values())
    skipped, todo = [], []
    for n in usable:
        by_host = hosts[n["hostname"]] == 1 and good_hosts.get(n["hostname"]) == 1
        (skipped if n["node_id"] in done or by_host else todo).append(n)
    room = len(todo) if want is None else max(0, want - len(skipped))
    return todo[:room], skipped


def run_fleet(
    output: str | None,
    *,
    resume: str | None = None,
    engine: str = "ray",
    address: str | None = None,
    options: dict | None = None,
    slurm_options: dict | None = None,
) -> int:
    """`rooflab fleet run`: one `rooflab run` per node into the fleet folder ``output`` (or the
    nodes of ``resume`` without a good result); ``options`` are `node_settings`' keywords,
    ``slurm_options`` slurm.run_fleet's (partition, time_limit, dry_run)."""
    if resume:
        out = Path(resume)
        manifest = store.load_manifest(out)
        settings = manifest["settings"]
        engine = manifest["engine"]
        address = address or manifest.get("address")
        print(f"resuming {out}: {settings['suite']} on {engine}, nodes without a good result", file=sys.stderr)
    else:
        if not output:
            raise RooflabError("fleet run needs -o DIR (or --resume DIR)", "e.g. rooflab fleet run -o fleet/")
        out = Path(output)
        if store.is_fleet_dir(out):
            raise RooflabError(
                f"{out} already holds a fleet run", f"pass --resume {out} to finish it, or another -o DIR"
            )
        settings = node_settings(**(options or {}))
        manifest = None
    want = parse_nodes(settings["nodes"])
    if engine == "slurm":
        from . import slurm

        return slurm.run_fleet(out, settings, want, manifest, **(slurm_options or {}))
    if engine != "ray":
        raise RooflabError(f"unknown engine {engine!r}", "use --engine ray or --engine slurm")
    from . import ray as engine_ray

    ray, address = engine_ray.connect(address)
    try:
        usable, idle = engine_ray.cluster_nodes(ray)
        if manifest is None:
            manifest = store.new_manifest("ray", settings, address)
        done = store.good_nodes(out, manifest)
        targets, skipped = choose(usable, want, done, f"at {address}")
        require_writable(out)
        if idle:
            print(f"note: {len(idle)} alive node(s) without CPUs left out (a head with --num-cpus 0?)", file=sys.stderr)
        if skipped:
            print(f"{len(skipped)} node(s) already have a good result in {out}: skipped", file=sys.stderr)
        run = {"started": utc_now(), "finished": None, "status": "running", "nodes": [t["node_id"] for t in targets]}
        manifest["runs"].append(run)
        store.save_manifest(out, manifest)
        print(f"running `rooflab run {' '.join(run_args(settings))}` on {len(targets)} node(s)", file=sys.stderr)
        entries = []
        saved = [time.monotonic()]

        def on_report(report: dict) -> None:
            entry = store.write_report(out, report)
            store.record(manifest, entry)
            if time.monotonic() - saved[0] > MANIFEST_EVERY_S:
                store.save_manifest(out, manifest)
                saved[0] = time.monotonic()
            entries.append(entry)
            print(_line(entry), flush=True)

        t0 = time.monotonic()
        stats: dict = {}
        status = engine_ray.run(ray, targets, run_args(settings), settings["timeout"], on_report, stats)
        run.update(finished=utc_now(), status=status, seconds=time.monotonic() - t0, caller=caller_cost(stats))
        store.save_manifest(out, manifest)
    finally:
        ray.shutdown()
    return summary(out, manifest, entries, status, {n["node_id"] for n in usable})


def caller_cost(stats: dict) -> dict:
    """What the fleet cost the caller: its peak memory, and per result the time from the object
    store to the file (ray.get, JSON, atomic write, manifest rewrite) -- the 1,000-node estimate's
    inputs."""
    import resource

    n = stats.get("collected") or 0
    return {
        "max_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "results": n,
        "seconds_per_result": stats.get("collect_seconds", 0.0) / n if n else None,
    }
