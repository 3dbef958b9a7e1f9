"""`rooflab fleet diagnose DIR --baseline FILE [--rules FILE]`: which nodes are slow, and where.

Two tests per node and ceiling, each able to fail a node:

  rule      the node against its SKU's baseline median: bandwidth and FLOP/s fail more than 5 %
            below, latency more than 5 % above (rules file: per ceiling, kind or glob)
  outlier   the node against the other nodes of its SKU in this run (at least 5 of them): the
            modified z-score z = 0.6745 (x - median) / MAD (Iglewicz and Hoaglin) below -3.5 (above
            +3.5 for latency); with MAD = 0, the mean absolute deviation x 1.2533 stands in

Why both: a rule catches a node 7 % slow even when half the fleet is; the z-score catches a node
4 % slow in a fleet whose healthy nodes agree within 0.5 %, which a fixed 5 % would miss. A ceiling
a node should have but lacks fails too (its measurement failed).

Rules file (JSON), applied over the defaults, the last rule matching a ceiling decides:
  {"rules": [{"ceiling": "kind:bandwidth", "op": "below", "pct": 3},
             {"ceiling": "dispatch: fork_join", "op": "ignore"}],
   "zscore": {"threshold": 3.5, "min_nodes": 5}}
``ceiling``: a ceiling's name, a glob over names (``DRAM * bandwidth, *``) or ``kind:KIND``; it
must match a ceiling of the baseline. ``op``: below, above (or < and >), ignore.

Exit status: 0 no node flagged, 1 some node flagged (a cron job or CI gate), 2 bad input.
"""

from __future__ import annotations

import json
import sys
from fnmatch import fnmatchcase
from pathlib import Path
from statistics import mean, median

from ..errors import RooflabError
from .identity import sku_of_result

DEFAULT_PCT = 5.0
Z_THRESHOLD = 3.5
Z_MIN_NODES = 5
Z_SCALE = 0.6745  # the standard normal's MAD: makes z comparable to a standard score
MEAN_AD_SCALE = 1.253314  # sqrt(pi/2): the mean absolute deviation's stand-in when MAD = 0
OPS = {"below": "below", "<": "below", "above": "above", ">": "above", "ignore": "ignore"}
RULE_KEYS = {"ceiling", "op", "pct"}
DEFAULT_RULES = [
    {"ceiling": "kind:bandwidth", "op": "below", "pct": DEFAULT_PCT},
    {"ceiling": "kind:compute", "op": "below", "pct": DEFAULT_PCT},
    {"ceiling": "kind:latency", "op": "above", "pct": DEFAULT_PCT},
]


def lower_is_better(kind: str | None, unit: str | None = None) -> bool:
    return kind == "latency" or unit in ("ns", "us", "ms", "s")


def matches(selector: str, name: str, kind: str | None) -> bool:
    if selector.startswith("kind:"):
        return kind == selector[5:]
    return selector == name or fnmatchcase(name, selector)


def load_rules(path, base: dict) -> dict:
    """The defaults with the file's rules after them, checked against the baseline's ceilings."""
    rules = {"rules": [dict(r) for r in DEFAULT_RULES], "zscore": {"threshold": Z_THRESHOLD, "min_nodes": Z_MIN_NODES}}
    if path is None:
        return rules
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise RooflabError(f"no such rules file: {path}") from None
    except (OSError, ValueError) as e:
        raise RooflabError(f"cannot read rules {path}: {e}") from None
    if not isinstance(data, dict) or not set(data) <= {"rules", "zscore"}:
        raise RooflabError(
            f"{path}: a rules file is an object with 'rules' and/or 'zscore'", "see `rooflab fleet diagnose --help`"
        )
    names = {(n, c.get("kind")) for g in base["skus"].values() for n, c in g["ceilings"].items()}
    for i, r in enumerate(data.get("rules", [])):
        where = f"{path}: rule {i + 1}"
        if not isinstance(r, dict) or "ceiling" not in r or "op" not in r or set(r) - RULE_KEYS:
            raise RooflabError(f"{where} needs 'ceiling' and 'op' (and 'pct'), nothing else: {json.dumps(r)[:120]}")
        if r["op"] not in OPS:
            raise RooflabError(f"{where}: unknown operator {r['op']!r}", f"use one of {', '.join(OPS)}")
        if not any(matches(str(r["ceiling"]), n, k) for n, k in names):
            raise RooflabError(
                f"{where}: unknown ceiling {r['ceiling']!r} (no ceiling of the baseline matches)",
                "use a ceiling's name, a glob over names, or kind:bandwidth|compute|latency",
            )
        op = OPS[r["op"]]
        pct = r.get("pct", DEFAULT_PCT)
        if op != "ignore" and (not isinstance(pct, (int, float)) or isinstance(pct, bool) or pct < 0):
            raise RooflabError(f"{where}: 'pct' must be a number >= 0, got {pct!r}")
        rules["rules"].append({"ceiling": str(r["ceiling"]), "op": op, "pct": float(pct) if op != "ignore" else None})
    z = data.get("zscore", {})
    if not isinstance(z, dict) or set(z) - {"threshold", "min_nodes"}:
        raise RooflabError(f"{path}: 'zscore' takes 'threshold' and 'min_nodes' only")
    rules["zscore"].update(z)
    return rules


def rule_for(rules: dict, name: str, kind: str | None) -> dict | None:
    found = None
    for r in rules["rules"]:
        if matches(r["ceiling"], name, kind):
            found = r
    return found


def modified_z(values: list[float]) -> list[float]:
    """0.6745 (x - median) / MAD for each value (MAD = 0: the mean absolute deviation stands in)."""
    m = median(values)
    mad = median(abs(v - m) for v in values)
    if mad > 0:
        return [Z_SCALE * (v - m) / mad for v in values]
    mean_ad = mean(abs(v - m) for v in values)
    if mean_ad > 0:
        return [(v - m) / (MEAN_AD_SCALE * mean_ad) for v in values]
    return [0.0 for _ in values]


def diagnose(nodes: list[tuple[str, dict]], base: dict, rules: dict) -> list[dict]:
    """One row per node and baseline ceiling, with the verdicts (``failed`` True when any fails)."""
    if not nodes:
        raise RooflabError("no node results found", "give the -o DIR of a `rooflab fleet run`")
    by_sku: dict = {}
    for node, doc in nodes:
        key, _ = sku_of_result(doc)
        g = base["skus"].get(key)
        if g is None:
            have = ", ".join(sorted(base["skus"])) or "none"
            raise RooflabError(
                f"node {node} is SKU {key}; the baseline has {have}",
                "build a baseline of this SKU (rooflab fleet baseline)",
            )
        if (doc.get("suite"), doc.get("device")) != (g.get("suite"), g.get("device")):
            raise RooflabError(
                f"node {node} ran {doc.get('suite')} on {doc.get('device')}; the baseline of {key} is "
                f"{g.get('suite')} on {g.get('device')}",
                "compare results of the suite the baseline was built from",
            )
        by_sku.setdefault(key, []).append((node, {c["name"]: c for c in doc.get("ceilings", [])}))
    rows = []
    zcfg = rules["zscore"]
    for key, members in by_sku.items():
        for name, ref in base["skus"][key]["ceilings"].items():
            kind, unit = ref.get("kind"), ref.get("unit")
            rule = rule_for(rules, name, kind)
            if rule and rule["op"] == "ignore":
                continue
            present = [(n, cs[name]["value"]) for n, cs in members if name in cs and cs[name].get("value") is not None]
            zs = {}
            if len(present) >= zcfg["min_nodes"]:
                zs = dict(zip((n for n, _ in present), modified_z([v for _, v in present])))
            for node, cs in members:
                value = cs[name]["value"] if name in cs else None
                rows.append(_row(node, key, name, kind, unit, value, ref["median"], rule, zs.get(node), zcfg))
    return rows


def _row(node, key, name, kind, unit, value, base_value, rule, z, zcfg) -> dict:
    verdicts = []
    delta = None
    if value is None:
        verdicts.append("missing: the node has no such ceiling")
    else:
        delta = (value / base_value - 1) * 100 if base_value else None
        if rule and delta is not None:
            if rule["op"] == "below" and delta < -rule["pct"]:
                verdicts.append(f"{-delta:.1f} % below baseline (rule: {rule['pct']:g} %)")
            elif rule["op"] == "above" and delta > rule["pct"]:
                verdicts.append(f"{delta:.1f} % above baseline (rule: {rule['pct']:g} %)")
        if z is not None:
            slow = z > zcfg["threshold"] if lower_is_better(kind, unit) else z < -zcfg["threshold"]
            if slow:
                verdicts.append(f"outlier in its SKU: modified z = {z:+.1f}")
    return {
        "node": node,
        "sku": key,
        "ceiling": name,
        "kind": kind,
        "unit": unit,
        "value": value,
        "baseline": base_value,
        "delta_pct": delta,
        "z": z,
        "failed": bool(verdicts),
        "verdicts": verdicts,
    }


def undecidable(rows: list[dict], base: dict) -> list[str]:
    """SKUs whose baseline is the median of exactly the two nodes diagnosed: each node then sits as
    far above it as the other below, and a flag on both says only that they differ, not which one
    is off. One line per such SKU with flags, naming the way out."""
    out = []
    for key, g in (base or {}).get("skus", {}).items():
        here = {r["node"] for r in rows if r["sku"] == key}
        if len(here) == 2 and set(g.get("nodes") or []) == here and any(r["failed"] for r in rows if r["sku"] == key):
            out.append(
                f"note: SKU {key}: the baseline is the median of these 2 nodes, so a node below it is mirrored by "
                "the other above it: the two differ, and 2 nodes cannot tell which one is off (a baseline from 3 or "
                "more nodes, or from an earlier good run: --baseline FILE)"
            )
    return out


def render(rows: list[dict], fmt: str, show_all: bool, notes: list[str] | tuple = ()) -> str:
    shown = rows if show_all else [r for r in rows if r["failed"]]
    flagged = sorted({r["node"] for r in rows if r["failed"]})
    nodes = sorted({r["node"] for r in rows})
    if fmt == "json":
        return json.dumps({"nodes": len(nodes), "flagged": flagged, "notes": list(notes), "rows": shown}, indent=1)
    head = ["node", "SKU", "ceiling", "value", "baseline", "delta", "z", "verdict"]
    cells = [
        [
            r["node"],
            r["sku"],
            r["ceiling"],
            "-" if r["value"] is None else f"{r['value']:.4g} {r['unit']}",
            f"{r['baseline']:.4g}",
            "-" if r["delta_pct"] is None else f"{r['delta_pct']:+.1f} %",
            "-" if r["z"] is None else f"{r['z']:+.1f}",
            "; ".join(r["verdicts"]) or "ok",
        ]
        for r in shown
    ]
    tail = f"{len(flagged)} of {len(nodes)} node(s) flagged" + (f": {', '.join(flagged)}" if flagged else "")
    if fmt == "markdown":
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in cells]
        return "\n".join(([*lines, ""] if cells else []) + [tail, *notes])
    from io import StringIO

    from rich.console import Console
    from rich.table import Table

    buf = StringIO()
    console = Console(file=buf, width=160, force_terminal=sys.stdout.isatty())
    if cells:
        t = Table(title="fleet diagnosis" + ("" if show_all else ": flagged ceilings"))
        for h in head:
            t.add_column(h, justify="right" if h in ("value", "baseline", "delta", "z") else "left", overflow="fold")
        for row in cells:
            t.add_row(*row, style="red" if row[-1] != "ok" else None)
        console.print(t)
    console.print(tail, markup=False)
    for n in notes:
        console.print(n, markup=False)
    return buf.getvalue().rstrip("\n")
