"""A kernel family's chart: every rung's rate against problem size (FLOPs per call, else bytes),
one panel per unit, variant 0 (the library) drawn black, and the cases with both FLOPs and bytes
on this machine's measured roofline; the latency suites (latency, chase) get the latency chart and
the latency staircase instead. A family with charts of its own (conv) gets them beside these
(FAMILY_CHARTS). The figures come from family_report's rate(), the same figure the table shows.
"""

from __future__ import annotations

from pathlib import Path

from ..family_report import rate
from ..roofline import Roofline
from .labels import LabelPlacer, geom
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
    fig = chart_figure(result, ceilings)
    if fig is None:
        return []
    files = []
    for ext in ("png", "svg"):
        path = Path(f"{out}.{ext}")
        fig.savefig(path, dpi=130)
        files.append(path)
    plt.close(fig)
    return files + family_charts(result, out, ceilings)


def _roofs(ceilings: dict | None) -> list[dict]:
    """The ceilings that are roofs (those that cannot be true, roofline.implausible, are not)."""
    return Roofline(ceilings).ceilings if ceilings else []


def chart_figure(result: dict, ceilings: dict | None = None):
    """The Figure of chart() for a rate family (None without an ok record). Peak and roof labels
    are placed by charts.labels once the layout is final: the 1- and 2-thread peaks of a dtype sit
    close together and their labels must not overlap."""
    recs = [r for r in result.get("records", []) if r.get("status") == "ok" and rate(r)[0]]
    units = sorted({rate(r)[1] for r in recs})
    if not recs:
        return None
    pending: list = []  # (ax, text, flat value, slope, side): placed after the layout
    on_roof = [r for r in recs if (r.get("work") or {}).get("flops") and (r.get("work") or {}).get("bytes")]
    panels = len(units) + (1 if on_roof else 0)
    fig, axes = plt.subplots(1, panels, figsize=(6.5 * panels, 4.8), squeeze=False)
    if on_roof:
        pending += _roofline_panel(axes[0][-1], on_roof, ceilings)
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
        for c in _roofs(ceilings):
            kind = {"GFLOP/s": "compute", "GB/s": "bandwidth"}.get(unit)
            if c["kind"] == kind and c["threads"] in threads and (kind == "compute" or c.get("level") == "DRAM"):
                ax.axhline(c["value"], color="0.5", lw=0.8, ls=":")
                pending.append((ax, c["name"], c["value"], None, "right"))
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
    fig.canvas.draw()
    placers: dict = {}
    for ax, text, value, slope, side in pending:
        placer = placers.setdefault(ax, LabelPlacer(ax))
        lo, hi = ax.get_xlim()
        xs = geom(lo * 1.3, hi / 1.05, 10)
        xs = xs[::-1] if side == "right" else xs
        cands = []
        for dy in (1.5, -1.5, 8, -8, 15, -15):
            for x in xs:
                y = x * slope if slope else value
                cands.append((x, y, 0, dy, side if not slope else "left", "bottom" if dy > 0 else "top"))
        placer.place(text, cands, required=True, fontsize=6, color="0.3")
    for placer in placers.values():
        placer.flush_notes()
    return fig


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


def _roofline_panel(ax, recs: list[dict], ceilings: dict | None) -> list:
    """Every case as a point at (declared FLOP per minimum byte, GFLOP/s), under this machine's
    measured roofs when a ceilings result is at hand: the ladder on the roofline. Returns the roof
    labels to place once the layout is final."""
    import numpy as np

    threads = {r.get("threads") for r in recs}
    xs = [r["work"]["flops"] / r["work"]["bytes"] for r in recs]
    lo, hi = min(xs) / 4, max(xs) * 4
    grid = np.geomspace(lo, hi, 200)
    pending = []
    roofs = [c for c in _roofs(ceilings) if c["threads"] in threads]
    # a memory roof stops at the highest FP32/FP64 peak of its thread count (never above what can be true)
    top = {
        t: max((c["value"] for c in roofs if c["kind"] == "compute" and c["threads"] == t
                and c.get("dtype") in ("float32", "float64")), default=None)
        for t in threads
    }  # fmt: skip
    for c in roofs:
        if c["kind"] == "compute":
            ax.axhline(c["value"], color="0.4", lw=0.8)
            pending.append((ax, c["name"], c["value"], None, "left"))
        elif c["kind"] == "bandwidth" and c.get("level") == "DRAM" and c.get("kernel") == "triad":
            cap = top.get(c["threads"])
            xs_roof = grid[grid * c["value"] <= cap] if cap else grid
            ax.plot(xs_roof, xs_roof * c["value"], color="0.4", lw=0.8, ls="--")
            pending.append((ax, c["name"], None, c["value"], "left"))
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
    return pending
