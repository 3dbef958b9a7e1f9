"""Do the intervals tell the truth? Consecutive ceilings runs in one folder, each next value held
against the previous run's interval.

For every pair of consecutive finished runs (same suite and --quick, sorted by start time): the
share of ceilings whose next value falls inside the previous run's ``interval``; per run, the
median interval width (compute and L1/L2; L3 and DRAM; latency) and how many ceilings are flagged
noisy. The issue's targets: >= 90 % held, median width <= 10 % for compute and L1/L2.

    python scripts/interval_check.py results/amd-epyc-2c
"""

from __future__ import annotations

import sys
from pathlib import Path
from statistics import median

from rooflab.results import load


def group(c: dict) -> str:
    if c["kind"] == "compute" or c.get("level") in ("L1", "L2"):
        return "compute+L1/L2"
    return "L3/DRAM" if c["kind"] == "bandwidth" else "latency"


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or not Path(argv[0]).is_dir():
        print("usage: interval_check.py RESULTS_FOLDER", file=sys.stderr)
        return 2
    runs = []
    for p in sorted(Path(argv[0]).glob("rooflab-ceilings-cpu-*.json")):
        d = load(p)
        if d.get("status", "").startswith("complete") and d.get("ceilings"):
            runs.append((p.name, d))
    for name, d in runs:
        widths: dict[str, list[float]] = {}
        for c in d["ceilings"]:
            if c.get("interval"):
                widths.setdefault(group(c), []).append(2 * c["interval"]["half_width"])
        noisy = sum(bool(c.get("noisy")) for c in d["ceilings"])
        w = ", ".join(f"{k} {median(v):.1%}" for k, v in sorted(widths.items()))
        print(f"{name}: median interval width {w}; noisy {noisy} of {len(d['ceilings'])}")
    for (a, da), (b, db) in zip(runs, runs[1:]):
        prev = {(c["name"], c["threads"]): c for c in da["ceilings"] if c.get("interval")}
        held, out = 0, []
        for c in db["ceilings"]:
            p = prev.get((c["name"], c["threads"]))
            if p is None:
                continue
            if p["interval"]["lo"] <= c["value"] <= p["interval"]["hi"]:
                held += 1
            else:
                out.append(f"{c['name']} ({c['value'] / p['value'] - 1:+.0%})")
        n = held + len(out)
        print(f"{a} -> {b}: {held} of {n} held ({held / n:.0%})" + (f"; outside: {', '.join(out)}" if out else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
