"""What a kernel-family run shows: every rung against the library (variant 0) on the same case,
as a table and as a chart of rate versus problem size per variant.

"% of library" divides a rung's rate by variant 0's on the same shape, dtype and thread count in
the same run (ratios measured in one run survive a shared machine; absolute times across runs do
not). The rate is GFLOP/s where the case does arithmetic, GB/s where it only moves data, and the
time per call (lower is better) for latency cases (ns per load for a pointer chase, ns per chain
for the tiny-op chains). The latency suites (`latency`, `chase`) are drawn as the latency chart and
the latency staircase (rooflab.plots) instead of rate against size.
"""

from __future__ import annotations

import json
from pathlib import Path

from .memory import fmt_bytes


def _group(rec: dict) -> tuple:
    """Records that compute the same thing: the variant name without its rung, and the op."""
    from .registry import get_variant

    try:
        v = get_variant(rec["variant"])
        op = v.op or ""
    except Exception:  # a result file from another version: fall back to the name
        op = ""
    prefix = rec["variant"].rsplit(".", 1)[0]
    return prefix, op


def _case_key(rec: dict) -> tuple:
    """Shape, dtype and thread count: what a rung and the library must share to be compared."""
    return json.dumps(rec.get("shape") or {}, sort_keys=True), rec.get("dtype"), rec.get("threads")


def _same_params(a: dict, b: dict) -> bool:
    """The parameters both records carry agree (layout, n_ops, eps, ...); a tuning knob only one
    rung has (softmax's ``block``, ``stream``) and ``reps`` do not make another case."""
    pa, pb = a.get("params") or {}, b.get("params") or {}
    return all(pa[k] == pb[k] for k in pa.keys() & pb.keys() if k != "reps")


def rate(rec: dict) -> tuple[float | None, str]:
    """The figure a record is judged by: (value, unit); higher is better except for 'ns'. A pointer
    chase is judged by its ns per load, a tiny-op chain by its ns per chain (latency cases)."""
    if rec.get("family") == "chase" and rec.get("time_s"):
        from .families.chase import ns_per_hop

        return ns_per_hop(rec), "ns"
    if rec.get("family") in ("latency", "launch") and rec.get("ns_per_launch"):
        return rec["ns_per_launch"]["median"], "ns"
    if rec.get("group") == "tiny_chain" and rec.get("time_s"):
        return rec["time_s"]["median"] / max(int(rec.get("reps") or 1), 1) * 1e9, "ns"
    if rec.get("gflops") and rec["gflops"].get("median"):
        return rec["gflops"]["median"], "GFLOP/s"
    if rec.get("gbps") and rec["gbps"].get("median"):
        return rec["gbps"]["median"], "GB/s"
    if rec.get("ns_per_launch"):
        return rec["ns_per_launch"]["median"], "ns"
    return None, ""


def add_pct_of_library(records: list[dict]) -> list[dict]:
    """Set ``pct_of_library`` on every ok record whose variant 0 ran the same case."""
    ok = [r for r in records if r.get("status") == "ok"]
    library: dict = {}
    for r in ok:
        if r.get("library"):
            library.setdefault((_group(r), _case_key(r)), []).append(r)
    for r in ok:
        lib = next((b for b in library.get((_group(r), _case_key(r)), []) if _same_params(r, b)), None)
        value, unit = rate(r)
        base, _ = rate(lib) if lib else (None, "")
        if value and base:
            r["pct_of_library"] = 100 * (base / value if unit == "ns" else value / base)
    return records


def table(records: list[dict]) -> list[tuple]:
    """Rows (variant, case, figure, unit, % of library, status) in run order; the case label
    without the variant's name, which the labels repeat at their start or end."""
    rows = []
    for r in records:
        value, unit = rate(r)
        pct = r.get("pct_of_library")
        label = (r.get("label") or r["variant"]).removeprefix(r["variant"]).removesuffix(r["variant"]).strip() or "-"
        if r.get("status") != "ok":
            rows.append((r["variant"], label, None, "", None, f"failed: {r.get('error', '')[:80]}"))
        else:
            rows.append((r["variant"], label, value, unit, pct, "noisy" if r.get("noisy") else "ok"))
    return rows


def _size(rec: dict) -> float:
    w = rec.get("work") or {}
    reps = max(rec.get("reps") or 1, 1)
    return (w.get("flops") or w.get("bytes") or rec.get("working_set_bytes") or 0) / reps


LATENCY_SUITES = ("latency", "chase")


def chart(result: dict, out: Path, ceilings: dict | None = None) -> list[Path]:
    """A latency suite (latency, chase): the latency chart (rooflab.plots.latency: a row per path,
    the tiny chains against N) and, with chase records, the latency staircase. Any other family:
    rate versus problem size (FLOPs per call, else bytes) per variant, one panel per unit;
    variant 0 drawn black. Points are not joined: a family's cases mix shapes (square, skinny,
    GEMV) whose rates do not lie on one curve. With a ceilings result of this machine, its compute
    peaks (GFLOP/s panel) and memory roofs (GB/s panel) at the run's thread counts are drawn
    across. PNG and SVG."""
    if result.get("suite") in LATENCY_SUITES:
        from . import plots

        files = plots.latency(result, Path(f"{out}.latency"))
        if plots.chase_points(result):
            files += plots.bandwidth(result, Path(f"{out}.staircase"))
        return files
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    recs = [r for r in result.get("records", []) if r.get("status") == "ok" and rate(r)[0]]
    units = sorted({rate(r)[1] for r in recs})
    if not recs:
        return []
    on_roof = [r for r in recs if (r.get("work") or {}).get("flops") and (r.get("work") or {}).get("bytes")]
    panels = len(units) + (1 if on_roof else 0)
    fig, axes = plt.subplots(1, panels, figsize=(6.5 * panels, 4.8), squeeze=False)
    if on_roof:
        _roofline_panel(axes[0][-1], on_roof, ceilings)
    for ax, unit in zip(axes[0], units):
        by_variant: dict = {}
        for r in recs:
            if rate(r)[1] == unit:
                by_variant.setdefault(r["variant"], []).append(r)
        for name, rs in sorted(by_variant.items()):
            rs = sorted(rs, key=_size)
            lib = rs[0].get("library")
            ax.plot(
                [_size(r) for r in rs],
                [rate(r)[0] for r in rs],
                "ks" if lib else "o",
                ms=5 if lib else 4,
                alpha=0.85,
                label=name + (" (library)" if lib else ""),
            )
        threads = {r.get("threads") for r in recs}
        for c in (ceilings or {}).get("ceilings", []):
            kind = {"GFLOP/s": "compute", "GB/s": "bandwidth"}.get(unit)
            if c["kind"] == kind and c["threads"] in threads and (kind == "compute" or c.get("level") == "DRAM"):
                ax.axhline(c["value"], color="0.5", lw=0.8, ls=":")
                ax.annotate(c["name"], (1.0, c["value"]), xycoords=("axes fraction", "data"), ha="right",
                            va="bottom", fontsize=6, color="0.35")  # fmt: skip
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("work per call (FLOP, or bytes where the case does no arithmetic)")
        ax.set_ylabel(unit + (" (lower is better)" if unit == "ns" else ""))
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="best")
    machine = result.get("machine", {})
    where = (
        machine.get("gpu", {}).get("name") if result.get("device") == "cuda" else machine.get("cpu", {}).get("model")
    )
    fig.suptitle(f"rooflab {result.get('suite')} on {where}", fontsize=11)
    fig.tight_layout()
    files = []
    for ext in ("png", "svg"):
        path = Path(f"{out}.{ext}")
        fig.savefig(path, dpi=130)
        files.append(path)
    plt.close(fig)
    return files + family_charts(result, out, ceilings)


def family_charts(result: dict, out: Path, ceilings: dict | None = None) -> list[Path]:
    """A family's own charts beside the common one: ``rooflab.families.<suite>.charts.charts``
    where the family has such a module (conv: time per layer, crossover, both-rates roofline)."""
    import importlib

    suite = str(result.get("suite") or "")
    if not suite.isidentifier():
        return []
    try:
        mod = importlib.import_module(f"rooflab.families.{suite}.charts")
    except ModuleNotFoundError:
        return []
    return mod.charts(result, out, ceilings)


def _roofline_panel(ax, recs: list[dict], ceilings: dict | None) -> None:
    """Every case as a point at (declared FLOP per minimum byte, GFLOP/s), under this machine's
    measured roofs when a ceilings result is at hand: the ladder on the roofline."""
    import numpy as np

    threads = {r.get("threads") for r in recs}
    xs = [r["work"]["flops"] / r["work"]["bytes"] for r in recs]
    lo, hi = min(xs) / 4, max(xs) * 4
    grid = np.geomspace(lo, hi, 200)
    for c in (ceilings or {}).get("ceilings", []):
        if c["threads"] not in threads:
            continue
        if c["kind"] == "compute":
            ax.axhline(c["value"], color="0.4", lw=0.8)
            ax.annotate(c["name"], (lo, c["value"]), fontsize=6, va="bottom", color="0.3")
        elif c["kind"] == "bandwidth" and c.get("level") == "DRAM" and c.get("kernel") == "triad":
            ax.plot(grid, grid * c["value"], color="0.4", lw=0.8, ls="--")
            ax.annotate(c["name"], (grid[0], grid[0] * c["value"]), fontsize=6, color="0.3", rotation=30)
    by_variant: dict = {}
    for r, x in zip(recs, xs):
        by_variant.setdefault(r["variant"], []).append((x, r["gflops"]["median"], r.get("library")))
    for name, pts in sorted(by_variant.items()):
        lib = pts[0][2]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "ks" if lib else "o", ms=5 if lib else 4, alpha=0.85,
                label=name)  # fmt: skip
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP per minimum byte)")
    ax.set_ylabel("GFLOP/s")
    ax.set_title("on the measured roofline" if ceilings else "intensity (no ceilings result of this machine)")
    ax.grid(True, which="both", alpha=0.3)


def describe_size(rec: dict) -> str:
    return fmt_bytes(rec.get("working_set_bytes") or 0)
