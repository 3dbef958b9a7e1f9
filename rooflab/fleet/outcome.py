"""What every engine adapter shares once its nodes have run: the `rooflab run` arguments a node gets,
one line per node, and the fleet's summary with its exit status (0 all good, 1 a node failed, 130
interrupted). A leaf beside store.py, so runner.py and slurm.py both import it without a circle."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

from . import store


def run_args(settings: dict) -> list[str]:
    """The `rooflab run` arguments every node gets (the caller adds --out and --no-plot)."""
    out = ["--suite", settings["suite"], "--device", settings["device"]]
    if settings["quick"]:
        out.append("--quick")
    if settings.get("threads"):
        out += ["--threads", str(settings["threads"])]
    if settings.get("budget"):
        out += ["--budget", f"{settings['budget']:g}"]
    return out


def line(entry: dict) -> str:
    secs = entry.get("seconds")
    if secs is None and entry.get("finished_unix") and entry.get("started_unix"):
        secs = entry["finished_unix"] - entry["started_unix"]
    t = f"{secs:7.1f} s" if secs is not None else "      - s"
    why = f"  {entry['reason']}" if entry.get("reason") else ""
    return f"{entry['status']:<11} {entry['node_id']:<40} {t}{why}"


def summary(out: Path, manifest: dict, entries: list[dict], status: str, alive: set) -> int:
    bad = [e for e in entries if e["status"] != "ok"]
    good = store.good_nodes(out, manifest)
    print(
        f"fleet: {len(entries) - len(bad)} of {len(entries)} node(s) run now characterized; "
        f"{len(good)} good result(s) in {out / 'nodes'}"
    )
    if bad:
        kinds = Counter(e["status"] for e in bad)
        print("failed: " + ", ".join(f"{n} {k}" for k, n in kinds.items()) + f"; see {out / store.MANIFEST}")
        print(f"run only those again: rooflab fleet run --resume {out}")
    gone = [n for n, e in manifest["nodes"].items() if e["status"] != "ok" and n not in alive]
    if gone:
        print(f"note: {len(gone)} earlier failed node(s) are no longer in the cluster: {', '.join(gone[:5])}")
    if status == "interrupted":
        print(f"interrupted: kept {len(good)} result(s) in {out}", file=sys.stderr)
        return 130
    return 1 if bad else 0
