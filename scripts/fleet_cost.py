"""What a fleet run costs its caller, measured on a real Ray cluster of N nodes on this machine,
and scaled to 1,000 nodes (the closing note's estimate).

    python scripts/fleet_cost.py [--nodes 4] [--suite probe] [--out DIR]

Starts ray.cluster_utils.Cluster (a head and N-1 worker raylets, 1 CPU each), runs
`rooflab fleet run` on it as a child process, and reports: the caller's peak RSS (the child's
ru_maxrss), the caller's seconds per result (ray.get + JSON + atomic writes, from the manifest),
the node file and manifest sizes, one ray.nodes() poll and one ray.get of a result-sized object.
The cluster is shut down at the end, whatever happens.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--nodes", type=int, default=4)
    p.add_argument("--suite", default="probe")
    p.add_argument("--out", help="keep the fleet directory here (default: a temporary folder)")
    a = p.parse_args()
    import ray
    from ray.cluster_utils import Cluster

    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    try:
        for _ in range(a.nodes - 1):
            c.add_node(num_cpus=1)
        c.wait_for_nodes()
        out = Path(a.out) if a.out else Path(tempfile.mkdtemp(prefix="rooflab-fleet-cost-")) / "fleet"
        t0 = time.monotonic()
        cmd = [sys.executable, "-m", "rooflab", "fleet", "run", "--address", c.address, "--suite", a.suite,
               "--threads", "1", "--budget", "0.02", "-o", str(out)]  # fmt: skip
        r = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.monotonic() - t0
        child_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        m = json.loads((out / "fleet.json").read_text())
        files = sorted((out / "nodes").glob("*.json"))
        sizes = [f.stat().st_size for f in files]
        ray.init(address=c.address, log_to_driver=False, logging_level="ERROR")
        t = time.perf_counter()
        for _ in range(10):
            ray.nodes()
        poll = (time.perf_counter() - t) / 10
        doc = json.loads(files[0].read_text()) if files else {}
        ref = ray.put(doc)
        t = time.perf_counter()
        for _ in range(10):
            ray.get(ref)
        get = (time.perf_counter() - t) / 10
        ray.shutdown()
        caller = m["runs"][-1].get("caller", {})
        node_s = [e["seconds"] for e in m["nodes"].values() if e.get("seconds")]
        res = {
            "nodes": a.nodes,
            "exit": r.returncode,
            "wall_s": wall,
            "node_run_s": {"min": min(node_s, default=None), "max": max(node_s, default=None)},
            "caller_max_rss_mib": caller.get("max_rss_mib"),
            "child_max_rss_mib_incl_ray_probe": child_rss,
            "caller_s_per_result": caller.get("seconds_per_result"),
            "node_file_bytes": {"min": min(sizes, default=0), "max": max(sizes, default=0)},
            "manifest_bytes": (out / "fleet.json").stat().st_size,
            "ray_nodes_poll_s": poll,
            "ray_get_result_s": get,
        }
        k = 1000 / a.nodes
        per_entry = res["manifest_bytes"] / max(len(m["nodes"]), 1)
        res["at_1000_nodes"] = {
            "results_bytes": 1000 * res["node_file_bytes"]["max"],
            "manifest_bytes": 1000 * per_entry,
            "manifest_rewrites_bytes": sum(i * per_entry for i in range(1, 1001)),
            "caller_collect_s": 1000 * (res["caller_s_per_result"] or 0),
            "ray_nodes_poll_s_linear": poll * k,
        }
        print(json.dumps(res, indent=1))
        if r.returncode != 0:
            print(r.stdout[-2000:], r.stderr[-2000:], file=sys.stderr)
        return r.returncode
    finally:
        c.shutdown()


if __name__ == "__main__":
    sys.exit(main())
