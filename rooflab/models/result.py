"""What a placement writes into its result file, shared by `rooflab place`, `run --suite models` and
`place --runtime`: the ceilings it was placed on, the roofs' note when another thread count's roofs
stand in, the warning for an op faster than its roof allows, one summary line per model and the
ops tables (.ops.csv, .ops.md) beside the result.
"""

from __future__ import annotations

import sys
from pathlib import Path

from . import place


def roofs_for(writer, ceil: dict, threads: int, device: str) -> place.Roofs:
    """The roofs ops are placed on; when those of ``threads`` cannot be true and another thread
    count's are used, the one-line note is printed and kept in the result's notes."""
    roofs = place.Roofs(ceil, threads, device)
    if roofs.note:
        print(f"note: {roofs.note}")
        writer.data.setdefault("notes", []).append(roofs.note)
    return roofs


def warn_above_roof(writer, placed: list[dict], name: str = "name") -> None:
    line = place.above_roof_warning(placed, name)
    if line:
        print(line, file=sys.stderr)
        writer.data.setdefault("notes", []).append(line.removeprefix("warning: "))
        writer.save()


def use_ceilings(writer, ceil: dict, src: str) -> None:
    writer.data.update(ceilings=ceil["ceilings"], ceilings_source=src, classification_rule=place.RULE)
    for part in ("cpu", "gpu"):
        if ceil["machine"].get(part):
            writer.data["machine"].setdefault(part, {})
            writer.data["machine"][part]["theoretical"] = ceil["machine"][part].get("theoretical", {})
    writer.data["machine"]["gpu"] = ceil["machine"].get("gpu") or writer.data["machine"].get("gpu")


def device_name(machine: dict, device: str) -> str:
    return machine["gpu"]["name"] if device == "cuda" and machine.get("gpu") else machine["cpu"]["model"]


def write_tables(writer, placed, summaries):
    stem = str(writer.path)[:-5]
    Path(stem + ".ops.csv").write_text(place.to_csv(placed))
    md = ["# Model ops placed on the measured roofline", "", f"Rule: {place.RULE}", ""]
    for s in summaries:
        md += [f"- {s['line']}"]
    md += ["", place.to_markdown(placed)]
    Path(stem + ".ops.md").write_text("\n".join(md))
    return [Path(stem + ".ops.csv"), Path(stem + ".ops.md")]


def model_summary(name: str, placed: list[dict], errors: list[dict], device_name: str) -> dict:
    framework = [p for p in placed if not p["own_kernel"]]
    s = place.summarize_model(framework) if framework else {"total_time_s": 0.0, "share_pct": {}, "ops": 0}
    s.setdefault("achieved_gflops", 0.0)
    s["model"] = name
    s["not_placed"] = sorted({e["op"] for e in errors})
    s["line"] = place.summary_line(name, device_name, s, s["not_placed"])
    return s
