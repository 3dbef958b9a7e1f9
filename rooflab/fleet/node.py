"""What runs on one fleet node: the same `rooflab run` a user types, in a child process, its result
file read back and returned as data (no shared filesystem assumed), with the node's identity.

The child runs in a folder of its own (the raylet's folder may hold a clone of rooflab, which
`python -m rooflab` would import instead of the installed package). It is killed when it runs past
the timeout (its whole process group) and when the process that started it dies (PR_SET_PDEATHSIG on
Linux: a Ray worker killed with its node, or cancelled, takes its `rooflab run` with it instead of
leaving it measuring on a node the fleet has given back). Outcomes: ``ok`` (a complete result with
ceilings), ``failed`` (a non-zero exit, errors in the result, no result), ``timeout``. A failed
run's partial result comes back too, for the record.

Slurm runs this module on every node (`python -m rooflab.fleet.node --out DIR -- RUN ARGS`): it
writes the node's report into DIR (a filesystem the nodes share), where the caller gathers it."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LOG_TAIL = 4000  # characters of the run's output kept with a failure


def _die_with_parent() -> None:  # runs in the child between fork and exec
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the timeout still holds
        pass


def run_command(run_args: list[str], out_dir: str) -> list[str]:
    return [sys.executable, "-m", "rooflab", "run", *run_args, "--out", out_dir, "--no-plot"]


def characterize(run_args: list[str], timeout: float | None, ident: dict) -> dict:
    """Run `rooflab run RUN_ARGS` here and return the node's report (result document included)."""
    report = dict(ident)
    with tempfile.TemporaryDirectory(prefix="rooflab-fleet-") as tmp:
        cmd = run_command(run_args, tmp)
        report.update(command=" ".join(["rooflab", "run", *run_args]), started_unix=time.time())
        proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            errors="replace",
            start_new_session=True,  # its own process group: a timeout kills the run and its children
            # a folder of its own: `python -m rooflab` from a worker whose folder holds a rooflab clone
            # imported the clone's folders (results/, ...) as the package and failed on every node
            cwd=tmp,
            preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        timed_out = False
        try:
            log, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            log, _ = proc.communicate()
        report.update(finished_unix=time.time(), returncode=proc.returncode)
        report["seconds"] = report["finished_unix"] - report["started_unix"]
        files = sorted(Path(tmp).glob("*/rooflab-*.json"), key=lambda p: p.stat().st_mtime)
        doc = None
        if files:
            try:
                doc = json.loads(files[-1].read_text())
            except (OSError, ValueError):
                doc = None
    report["status"], report["reason"] = verdict(proc.returncode, doc, timed_out, timeout, log or "")
    report["log_tail"] = (log or "")[-LOG_TAIL:] if report["status"] != "ok" else ""
    report["result"] = doc
    return report


def verdict(returncode: int, doc: dict | None, timed_out: bool, timeout, log: str) -> tuple[str, str | None]:
    if timed_out:
        return "timeout", f"rooflab run did not finish within --timeout {timeout:g} s (killed)"
    if doc is None:
        last = next((ln for ln in reversed(log.strip().splitlines()) if ln.strip()), "no output")
        return "failed", f"rooflab run exited {returncode} without a result: {last[:300]}"
    if returncode != 0 or doc.get("status") != "complete":
        errors = doc.get("errors") or []
        first = f": {errors[0].get('label')}: {errors[0].get('error')}" if errors else ""
        return "failed", f"rooflab run exited {returncode}, result {doc.get('status')!r}, {len(errors)} error(s){first}"
    if not doc.get("ceilings"):
        return "failed", "the result has no ceilings (a suite that derives none cannot be compared)"
    return "ok", None


def main(argv: list[str] | None = None) -> int:
    """Slurm's task: characterize this node and write its report into --out (shared)."""
    p = argparse.ArgumentParser(prog="python -m rooflab.fleet.node")
    p.add_argument("--out", required=True)
    p.add_argument("--engine", default="slurm")
    p.add_argument("--timeout", type=float, default=None)
    p.add_argument("run_args", nargs=argparse.REMAINDER)
    a = p.parse_args(argv)
    run_args = a.run_args[1:] if a.run_args[:1] == ["--"] else a.run_args
    from .identity import identity
    from .store import write_report

    engine_node = os.environ.get("SLURMD_NODENAME") or os.environ.get("SLURM_NODEID") or "node"
    report = characterize(run_args, a.timeout, identity(a.engine, engine_node))
    write_report(Path(a.out), report)
    print(f"{report['node_id']}: {report['status']}" + (f" ({report['reason']})" if report["reason"] else ""))
    return 0 if report["status"] == "ok" else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
