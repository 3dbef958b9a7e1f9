"""A fleet directory: one result file per node and a manifest of every node's outcome.

  DIR/fleet.json              the manifest: engine, settings, each node's status and reason, runs
  DIR/nodes/<node id>.json    a good result: the `rooflab run` result document (same schema, so
                              `rooflab plot/compare/report` read it) plus a ``fleet`` block
  DIR/failed/<node id>.json   the partial result of a failed run, where there was one
  DIR/reports/<node id>.json  a node's outcome, written as it arrives (Slurm: gathered from here);
                              the durable record the manifest is synced from

Every file is written atomically (rooflab.results.atomic_write_json) as each node's result arrives:
an interrupted fleet run keeps every node that finished. The manifest is rewritten at most once a
second (runner.py): rewriting it after every result is quadratic in the fleet (0.74 KB per node:
~370 MB written, each with an fsync, over 1,000 nodes). A node file is ~50 KB (probe suite) to
~1 MB (ceilings suite with its samples).
"""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import RooflabError
from ..results import KIND, atomic_write_json, load, utc_now

MANIFEST = "fleet.json"
FLEET_KIND = "rooflab-fleet"
FLEET_SCHEMA = 1
FLEET_KEYS = (
    "node_id",
    "hostname",
    "engine",
    "engine_node_id",
    "placed_on",
    "sku",
    "sku_key",
    "command",
    "started_unix",
    "finished_unix",
    "seconds",
)


def is_fleet_dir(path) -> bool:
    return (Path(path) / MANIFEST).is_file()


def new_manifest(engine: str, settings: dict, address: str | None = None) -> dict:
    return {
        "kind": FLEET_KIND,
        "schema_version": FLEET_SCHEMA,
        "engine": engine,
        "address": address,
        "settings": settings,
        "created": utc_now(),
        "updated": utc_now(),
        "runs": [],
        "nodes": {},
    }


def load_manifest(path) -> dict:
    f = Path(path) / MANIFEST
    try:
        m = json.loads(f.read_text())
    except FileNotFoundError:
        raise RooflabError(
            f"{path} is not a fleet directory (no {MANIFEST})", "give the -o DIR of a fleet run"
        ) from None
    except (OSError, ValueError) as e:
        raise RooflabError(f"cannot read {f}: {e}") from None
    if not isinstance(m, dict) or m.get("kind") != FLEET_KIND:
        raise RooflabError(f"{f} is not a rooflab fleet manifest", "give the -o DIR of a fleet run")
    if m.get("schema_version") != FLEET_SCHEMA:
        raise RooflabError(
            f"{f} has fleet schema_version {m.get('schema_version')!r}; this rooflab reads {FLEET_SCHEMA}",
            "use the rooflab that wrote it",
        )
    return m


def save_manifest(path, manifest: dict) -> None:
    manifest["updated"] = utc_now()
    atomic_write_json(Path(path) / MANIFEST, manifest)


def write_report(path, report: dict) -> dict:
    """File one node's report (as node.characterize returns it) and return its manifest entry."""
    path = Path(path)
    doc = report.get("result")
    node = report["node_id"]
    entry = {k: report.get(k) for k in FLEET_KEYS if k != "sku"}
    entry.update(status=report["status"], reason=report.get("reason"), file=None)
    if doc is not None:
        doc["fleet"] = {k: report.get(k) for k in FLEET_KEYS}
        sub = "nodes" if report["status"] == "ok" else "failed"
        atomic_write_json(path / sub / f"{node}.json", doc)
        entry["file"] = f"{sub}/{node}.json"
    if report["status"] != "ok":
        entry["log_tail"] = report.get("log_tail")
    atomic_write_json(path / "reports" / f"{node}.json", entry)
    return entry


def sync_reports(path, manifest: dict) -> int:
    """Take into the manifest every node report newer than its entry (the reports are written as
    each node finishes, the manifest at most once a second: a caller killed in between loses
    nothing). Returns how many entries changed."""
    changed = 0
    for f in sorted((Path(path) / "reports").glob("*.json")):
        try:
            entry = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        old = manifest["nodes"].get(entry.get("node_id"))
        if entry.get("node_id") and (
            old is None or (entry.get("finished_unix") or 0) > (old.get("finished_unix") or 0)
        ):
            manifest["nodes"][entry["node_id"]] = entry
            changed += 1
    return changed


def record(manifest: dict, entry: dict) -> None:
    manifest["nodes"][entry["node_id"]] = entry


def superseded(manifest: dict) -> list[str]:
    """Nodes that failed in an earlier run and that a later run (a --resume) did not run again: they
    had left the cluster (a dead node comes back under a new Ray id). The fleet's counts leave them
    out and say how many: a resumed fleet whose every node now has a result is whole."""
    runs = manifest.get("runs") or []
    last = runs[-1].get("nodes") if len(runs) >= 2 else None
    if not isinstance(last, list):  # one run, or an engine that records a count (Slurm: how many it ran)
        return []
    last = set(last)
    return sorted(n for n, e in manifest["nodes"].items() if e.get("status") != "ok" and n not in last)


def good_nodes(path, manifest: dict) -> dict:
    """Node id -> entry of every node whose result is good and still on disk."""
    sync_reports(path, manifest)
    return {
        n: e
        for n, e in manifest["nodes"].items()
        if e.get("status") == "ok" and e.get("file") and (Path(path) / e["file"]).is_file()
    }


def node_results(path) -> list[tuple[str, dict]]:
    """(node id, result document) of every node result under ``path``: a fleet directory's nodes/,
    else every rooflab result file in the folder and its subfolders (one per node)."""
    path = Path(path)
    if not path.is_dir():
        raise RooflabError(f"no such directory: {path}", "give a fleet directory (the -o DIR of `rooflab fleet run`)")
    files = sorted((path / "nodes").glob("*.json")) if is_fleet_dir(path) else _result_files(path)
    out = []
    for f in files:
        doc = load(f)
        fleet = doc.get("fleet") or {}
        out.append((fleet.get("node_id") or f"{doc['machine'].get('hostname', 'host')}-{f.stem}", doc))
    return out


def _result_files(path: Path) -> list[Path]:
    out = []
    for f in sorted([*path.glob("*.json"), *path.glob("*/*.json")]):
        try:
            head = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(head, dict) and head.get("kind") == KIND:
            out.append(f)
    return out
