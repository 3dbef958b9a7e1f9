"""The Slurm adapter: the fleet's runs as one batch job, `srun -N N --ntasks-per-node=1 --exclusive`,
each task `python -m rooflab.fleet.node` (node.py) writing its node's report into the fleet
directory, gathered from there when the job ends. Slurm's own exclusivity holds each node alone.

The fleet directory must be on a filesystem every node shares (Slurm's usual $HOME or scratch):
Slurm has no channel for data back to the caller. `--dry-run` prints the batch script and runs
nothing; without `sbatch` on PATH a real run is refused with one line.

  rooflab fleet run --engine slurm --nodes 16 --partition cpu -o /scratch/fleet --dry-run
"""

from __future__ import annotations

import json
import math
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

from ..errors import RooflabError
from ..results import require_writable, utc_now
from . import store

MARGIN_MIN = 10  # job time limit beyond the per-node --timeout: allocation, imports, the last report


def count_nodes(partition: str | None) -> int:
    """Nodes of the partition (or of the cluster) that are up, for --nodes all."""
    sinfo = shutil.which("sinfo")
    if not sinfo:
        raise RooflabError("--engine slurm with --nodes all needs sinfo to count the nodes", "pass --nodes N")
    cmd = [sinfo, "-h", "-N", "-t", "idle,mixed,allocated,completing", "-o", "%N"]
    if partition:
        cmd += ["-p", partition]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    names = {ln.strip() for ln in out.stdout.splitlines() if ln.strip()}
    if out.returncode != 0 or not names:
        raise RooflabError(f"sinfo finds no node that is up{f' in {partition}' if partition else ''}", "pass --nodes N")
    return len(names)


def script(
    out: Path,
    run_args: list[str],
    nodes: int,
    timeout: float | None,
    partition: str | None = None,
    time_limit: str | None = None,
    exclude: list[str] | None = None,
    python: str | None = None,
) -> str:
    """The batch script: one task per node, each node exclusive, each task one `rooflab run`."""
    out = Path(out).resolve()
    minutes = time_limit or (str(math.ceil((timeout or 3600) / 60) + MARGIN_MIN))
    head = [
        "#!/bin/bash",
        "# rooflab fleet: one `rooflab run` per node, each node held alone (--exclusive)",
        "#SBATCH --job-name=rooflab-fleet",
        f"#SBATCH --nodes={nodes}",
        "#SBATCH --ntasks-per-node=1",
        "#SBATCH --exclusive",
        f"#SBATCH --time={minutes}",
        f"#SBATCH --output={out}/slurm-%j.out",
    ]
    if partition:
        head.append(f"#SBATCH --partition={partition}")
    if exclude:
        head.append(f"#SBATCH --exclude={','.join(exclude)}")
    task = [
        python or sys.executable,
        "-m",
        "rooflab.fleet.node",
        "--engine",
        "slurm",
        "--out",
        str(Path(out).resolve()),
    ]
    if timeout:
        task += ["--timeout", f"{timeout:g}"]
    # --chdir: every task starts in a folder of its own, never the submit folder (a rooflab clone there
    # would be imported as the package by `python -m`)
    srun = ["srun", "-N", str(nodes), "--ntasks-per-node=1", "--exclusive", "--kill-on-bad-exit=0", "--chdir=/tmp"]
    body = [
        "",
        "# a node whose run fails still writes its report; srun's status says how many did",
        " ".join(shlex.quote(a) for a in [*srun, *task, "--", *run_args]),
        "",
    ]
    return "\n".join(head + body)


def run_fleet(
    out: Path,
    settings: dict,
    want: int | None,
    manifest: dict | None,
    *,
    partition: str | None = None,
    time_limit: str | None = None,
    dry_run: bool = False,
) -> int:
    from .outcome import run_args, summary

    done = store.good_nodes(out, manifest) if manifest else {}
    nodes = want if want is not None else count_nodes(partition)
    todo = nodes - len(done)
    if todo <= 0:
        print(f"all {nodes} node(s) already have a good result in {out}")
        return 0
    exclude = sorted({e["hostname"] for e in done.values() if e.get("hostname")})
    text = script(out, run_args(settings), todo, settings["timeout"], partition, time_limit, exclude)
    if dry_run:
        print(text, end="")
        return 0
    sbatch = shutil.which("sbatch")
    if not sbatch:
        raise RooflabError("--engine slurm needs Slurm's sbatch on PATH", "run on a Slurm login node, or --dry-run")
    require_writable(out)
    manifest = manifest or store.new_manifest("slurm", settings)
    path = out / "fleet.sbatch"
    path.write_text(text)
    run = {"started": utc_now(), "finished": None, "status": "running", "nodes": todo}
    manifest["runs"].append(run)
    store.save_manifest(out, manifest)
    t0 = time.time()
    print(f"sbatch --wait {path}: {todo} node(s), `rooflab run {' '.join(run_args(settings))}`", file=sys.stderr)
    proc = subprocess.Popen([sbatch, "--parsable", "--wait", str(path)], stdout=subprocess.PIPE, text=True)
    job = None
    status = "complete"
    try:
        job = (proc.stdout.readline() or "").strip().split(";")[0] or None
        run["job"] = job
        store.save_manifest(out, manifest)
        proc.wait()
    except KeyboardInterrupt:
        status = "interrupted"
        if job:
            subprocess.run(["scancel", job], capture_output=True)
        proc.wait()
    entries = gather(out, manifest, t0, todo, job)
    run.update(finished=utc_now(), status=status)
    store.save_manifest(out, manifest)
    return summary(out, manifest, entries, status, {e["node_id"] for e in entries})


def gather(out: Path, manifest: dict, since: float, expected: int, job) -> list[dict]:
    """The reports the job's nodes wrote (reports/ newer than ``since``) into the manifest; the
    nodes that wrote none as one failed entry."""
    from .outcome import line as _line

    entries = []
    for f in sorted((out / "reports").glob("*.json")) if (out / "reports").is_dir() else []:
        if f.stat().st_mtime < since - 1:  # a report of an earlier job
            continue
        entry = json.loads(f.read_text())
        store.record(manifest, entry)
        entries.append(entry)
        print(_line(entry))
    missing = expected - len(entries)
    if missing > 0:
        why = f"no report from {missing} node(s) of job {job} (see {out}/slurm-{job}.out)"
        entry = {"node_id": f"slurm-job-{job}", "status": "failed", "reason": why}
        store.record(manifest, entry)
        entries.append(entry)
        print(_line(entry))
    return entries
