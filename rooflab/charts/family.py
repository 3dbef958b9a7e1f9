"""A kernel family's chart: every rung's rate against problem size (FLOPs per call, else bytes),
one panel per unit, variant 0 (the library) drawn black, and the cases with both FLOPs and bytes
on this machine's measured roofline; the latency suites (latency, chase) get the latency chart and
the latency staircase instead. A family with charts of its own (conv) gets them beside these
(FAMILY_CHARTS). The figures come from family_report's rate(), the same figure the table shows.
"""

from __future__ import annotations

from pathlib import Path

from ..family_report import rate
from .style import plt

FAMILY_CHARTS = {"conv": "conv"}  # suite -> module of rooflab.charts with a charts(result, out, ceilings)


def _size(rec: dict) -> float:
    w = rec.get("work") or {}
    reps = max(rec.get("reps") or 1, 1)
    return (w.get("flops") or w.get("bytes") or rec.get("working_set_bytes") or 0) / reps


LATENCY_SUITES = ("latency", "chase")


def chart(result: dict, out: Path, ceilings: dict | None = None) -> list[Path]:
    """A latency suite (latency, chase): the latency chart (charts.latency: a row per path,
    the tiny chains against N) and, with chase records, the latency staircase. Any other family:
    rate versus problem size (FLOPs per call, else bytes) per variant, one panel per unit;
    variant 0 drawn black. Points are not joined: a family's cases mix shapes (square, skinny,
    GEMV) whose rates do not lie on one curve. With a ceilings result of this machine, its compute
    peaks (GFLOP/s panel) and memory roofs (GB/s panel) at the run's thread counts are drawn
    across. PNG and SVG."""
    if result.get("suite") in LATENCY_SUITES:
        from .latency import latency
        from .staircase import bandwidth, chase_points

        files = latency(result, Path(f"{out}.latency"))
        if chase_points(result):
            files += bandwidth(result, Path(f"{out}.staircase"))
        return files
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
    """A family's own charts beside the common one: ``rooflab.charts.<module>.charts``
    where the family has such a module (FAMILY_CHARTS) (conv: time per layer, crossover, both-rates roofline)."""
    import importlib

    suite = str(result.get("suite") or "")
    if suite not in FAMILY_CHARTS:
        return []
    try:
        mod = importlib.import_module(f"rooflab.charts.{FAMILY_CHARTS[suite]}")
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
