"""`rooflab fleet baseline DIR... --group-by sku -o FILE`: what a healthy node of each SKU measures.

Per SKU (identity.py: CPU model, cores, memory, GPUs) and ceiling: the median over the nodes (one
slow node cannot move it: half the fleet would have to be slow), the node count, and the spread
(min, p20, p80, max, MAD, (p80 - p20) / median). A baseline is built from one suite on one device;
nodes of one SKU that ran different suites are refused (their ceilings are not comparable: the
probe's FMA peak is K=16, the ceilings suite keeps the best of K=32 and K=64).

File: {"kind": "rooflab-fleet-baseline", "schema_version": 1, "group_by": "sku",
       "skus": {KEY: {"sku", "suite", "device", "nodes": [...], "ceilings": {NAME: {...}}}}}
"""

from __future__ import annotations

from pathlib import Path
from statistics import median

import numpy as np

from ..errors import RooflabError
from ..results import utc_now
from .identity import sku_of_result

KIND = "rooflab-fleet-baseline"
SCHEMA = 1
GROUPINGS = ("sku",)


def stats(values: list[float]) -> dict:
    m = float(median(values))
    mad = float(median(abs(v - m) for v in values))
    p20, p80 = (float(q) for q in np.quantile(values, [0.2, 0.8]))
    return {
        "median": m,
        "n": len(values),
        "min": float(min(values)),
        "max": float(max(values)),
        "p20": p20,
        "p80": p80,
        "mad": mad,
        "spread": (p80 - p20) / m if m else None,
    }


def build(nodes: list[tuple[str, dict]], group_by: str = "sku", sources: list[str] | None = None) -> dict:
    if group_by not in GROUPINGS:
        raise RooflabError(f"--group-by {group_by!r} is not supported", f"use --group-by {' or '.join(GROUPINGS)}")
    if not nodes:
        raise RooflabError("no node results found", "give the -o DIR of a `rooflab fleet run`")
    groups: dict = {}
    for node, doc in nodes:
        key, sku = sku_of_result(doc)
        g = groups.setdefault(key, {"sku": sku, "suite": doc.get("suite"), "device": doc.get("device"), "docs": []})
        if (doc.get("suite"), doc.get("device")) != (g["suite"], g["device"]):
            raise RooflabError(
                f"SKU {key} mixes suites: node {node} ran {doc.get('suite')} on {doc.get('device')}, others "
                f"{g['suite']} on {g['device']}",
                "baseline one suite at a time (separate fleet directories)",
            )
        g["docs"].append((node, doc))
    skus = {}
    for key, g in sorted(groups.items()):
        values: dict = {}
        for _, doc in g["docs"]:
            for c in doc.get("ceilings", []):
                if c.get("value") is not None:
                    values.setdefault(c["name"], (c, []))[1].append(float(c["value"]))
        skus[key] = {
            "sku": g["sku"],
            "suite": g["suite"],
            "device": g["device"],
            "nodes": [n for n, _ in g["docs"]],
            "ceilings": {name: {"kind": c["kind"], "unit": c["unit"], **stats(vs)} for name, (c, vs) in values.items()},
        }
    return {
        "kind": KIND,
        "schema_version": SCHEMA,
        "group_by": group_by,
        "created": utc_now(),
        "sources": sources or [],
        "skus": skus,
    }


def load(path) -> dict:
    import json

    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise RooflabError(f"no such baseline: {path}", "write one with `rooflab fleet baseline DIR -o FILE`") from None
    except (OSError, ValueError) as e:
        raise RooflabError(f"cannot read baseline {path}: {e}") from None
    if not isinstance(data, dict) or data.get("kind") != KIND:
        raise RooflabError(f"{path} is not a rooflab fleet baseline", "write one with `rooflab fleet baseline`")
    if data.get("schema_version") != SCHEMA:
        raise RooflabError(
            f"{path} has baseline schema_version {data.get('schema_version')!r}; this rooflab reads {SCHEMA}",
            "rebuild it with this rooflab's `rooflab fleet baseline`",
        )
    return data
