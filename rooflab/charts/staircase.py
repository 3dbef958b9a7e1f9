"""The staircases: bandwidth (GB/s against working-set size per STREAM kernel, with the OS cache
sizes, each level's window and where its plateau really ends) and, with pointer-chase records,
the latency staircase under it (same x axis, same cache lines and level shading): ns per load by
working set, each level's latency ceiling drawn across its window. Read from a result's records
and sweeps by field name only; bandwidth_figure returns the Figure (tests inspect it), bandwidth()
saves it.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.ticker
import numpy as np

from ..memory import fmt_bytes
from ..roofline import capacity, level_windows
from .labels import LabelPlacer, enough_log_ticks, geom
from .style import KERNEL_STYLE, LEVEL_COLORS, fmt_ns, plt, save, title


def chase_points(result: dict) -> list[dict]:
    """The latency staircase of a result: one point per pointer-chase working set (bytes, ns per
    load, cycles, variant, level), from its records."""
    from ..families.chase import staircase

    return staircase([r for r in result.get("records", []) if r.get("family") == "chase"])


def _staircase_caches(result: dict) -> list[dict]:
    if result.get("device") == "cuda":  # the GPU's L2 is the level that matters on a device sweep
        gpu = result["machine"].get("gpu", {})
        return (
            [{"name": "L2", "size_bytes": gpu["l2_bytes"], "private": False, "instances": 1, "shared_by_cpus": 1}]
            if gpu.get("l2_bytes")
            else []
        )
    return result["machine"].get("cpu", {}).get("caches", [])


def _level_spans(result: dict, caches: list[dict], threads: int, kind: str) -> list[tuple[str, float, float | None]]:
    """(level, lo, hi) windows to shade: the OS caches' windows on the CPU; on the GPU, where the
    ceilings of ``kind`` took their points."""
    if result.get("device") != "cuda":
        return [(w["level"], w["lo"], w["hi"]) for w in level_windows(caches, max(threads, 1))]
    out = []
    for c in result.get("ceilings", []):
        if c["kind"] == kind and c.get("level") and c.get("points_bytes"):
            out.append((c["level"], min(c["points_bytes"]) / 1.2, max(c["points_bytes"]) * 1.2))
    return out


def _shade_levels(ax, spans) -> None:
    """Light level-coloured bands behind the data (limits frozen first: bands never move them)."""
    xlo, xhi = ax.get_xlim()
    for level, lo, hi in spans:
        a, b = max(lo or xlo, xlo), min(hi or xhi, xhi)
        if b > a:
            ax.axvspan(a, b, color=LEVEL_COLORS.get(level, "#999999"), alpha=0.07, lw=0, zorder=0)
    ax.set_xlim(xlo, xhi)


def _latency_panel(ax, result: dict, pts: list[dict]) -> list:
    """ns per load against working set, one line per chase variant, each level's latency ceiling
    drawn across its points; returns the (ceiling, y) marks to label once the layout is final."""
    styles = ["-o", "--s", ":^"]
    for i, variant in enumerate(sorted({p["variant"] for p in pts}, key=lambda v: (not v.endswith("hugepages"), v))):
        sel = [p for p in pts if p["variant"] == variant]
        ax.plot([p["bytes"] for p in sel], [p["ns"] for p in sel], styles[i % 3], ms=3.5, lw=1.2,
                color="#333333" if i == 0 else "#888888", label=variant.split(".")[-1])  # fmt: skip
        noisy = [p for p in sel if p["noisy"]]
        if noisy:
            ax.scatter([p["bytes"] for p in noisy], [p["ns"] for p in noisy], facecolors="none", edgecolors="red",
                       s=40, zorder=5)  # fmt: skip
    marks = []
    for c in result.get("ceilings", []):
        if c["kind"] == "latency" and c.get("level") in LEVEL_COLORS and c.get("points_bytes"):
            lo, hi = min(c["points_bytes"]), max(c["points_bytes"])
            ax.plot([lo / 1.15, hi * 1.15], [c["value"]] * 2, color=LEVEL_COLORS[c["level"]], lw=3, alpha=0.8,
                    solid_capstyle="butt", zorder=4)  # fmt: skip
            marks.append(c)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ys = [p["ns"] for p in pts]
    ax.set_ylim(min(ys) / 1.8, max(ys) * 1.8)
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: fmt_bytes(v) if v >= 1 else ""))
    ax.tick_params(axis="x", labelrotation=45, labelsize=7.5)
    ax.set_xlabel("working set")
    ax.set_ylabel("latency [ns per load]")
    enough_log_ticks(ax, "y")
    who = "one thread on the GPU" if result.get("device") == "cuda" else "1 thread"
    ax.set_title(f"memory latency, dependent pointer chase ({who}; red ring = noisy)", fontsize=9)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=7.5, loc="upper left")
    return marks


def _label_latency_panel(ax, marks: list[dict], pts: list[dict]) -> LabelPlacer:
    placer = LabelPlacer(ax)
    placer.avoid_points([p["bytes"] for p in pts], [p["ns"] for p in pts], radius_pt=2.5)
    box = {"fc": "white", "ec": "none", "alpha": 0.8, "pad": 0.5}
    for c in marks:
        lo, hi = min(c["points_bytes"]), max(c["points_bytes"])
        cyc = f", {c['cycles']:.3g} cycles" if c.get("cycles") else ""
        xs = geom(lo, hi, 4)
        cands = [(x, c["value"], 0, dy, "center", "bottom" if dy > 0 else "top") for dy in (3, -3, 10, -10)
                 for x in xs]  # fmt: skip
        for dy in (3, -3, 10, -10):  # a window at the edge of the chart: the label beside it, inwards
            va = "bottom" if dy > 0 else "top"
            cands += [(hi * 1.15, c["value"], 0, dy, "right", va), (lo / 1.15, c["value"], 0, dy, "left", va)]
        placer.place(f"{c['level']} {fmt_ns(c['value'])}{cyc}", cands, required=True, fontsize=7,
                     color=LEVEL_COLORS[c["level"]], bbox=box)  # fmt: skip
    return placer


def _cache_lines(ax, placer, caches, threads, lo, hi) -> None:
    xlo, xhi = ax.get_xlim()
    for c in caches:
        cap = capacity(c, threads)
        if not xlo < cap < xhi:
            continue
        ax.axvline(cap, color="#888888", ls=":", lw=1)
        ys = list(np.geomspace(lo * 1.05, hi / 1.5, 8))
        cands = [(cap, y, -2, 0, "right", "bottom") for y in ys] + [(cap, y, 2, 0, "left", "bottom") for y in ys]
        placer.place(
            f"{c['name']} {fmt_bytes(cap)} (OS)", cands, required=True, rotation=90, fontsize=7, color="#555555"
        )


OUTLIER = 0.2  # a sweep point below this share of both neighbours' medians cannot be true (a level is ~2-4x)


def _cannot_be_true(sel: list[dict]) -> list[dict]:
    """Points of one kernel's sweep (by working set) far below both neighbours: a point between two
    of its own level's is never 5x below both, so such a point is a broken sample (a stolen core for
    the whole burst, a timer fault), not a level. The ends have one neighbour and are kept (a single
    DRAM point after a server's L3, 5-10x above it, is real)."""
    m = [p["gbps"]["median"] for p in sel]
    return [sel[i] for i in range(1, len(m) - 1) if m[i] < OUTLIER * m[i - 1] and m[i] < OUTLIER * m[i + 1]]


def bandwidth_figure(result: dict):
    """Staircase Figure, one panel per thread count with sweep points; with pointer-chase points,
    the latency staircase under the 1-thread (GPU: the device's) panel, sharing its x axis."""
    pts = [p for p in result.get("sweeps", {}).get("bandwidth", []) if p.get("gbps") and p.get("status", "ok") == "ok"]
    chase = chase_points(result)
    counts = sorted({p["threads"] for p in pts}) or ([] if chase else [1])
    rows = (1 if counts else 0) + (1 if chase else 0)
    cols = max(len(counts), 1)
    fig, axes = plt.subplots(rows, cols, figsize=(7.5 * cols, 4.8 * rows), squeeze=False)
    caches = _staircase_caches(result)
    ceilings = result.get("ceilings", [])
    lat_ax = None
    if chase:  # under the 1-thread panel (the chase is one thread), the other cells of the row removed
        col = counts.index(min(counts)) if counts else 0
        lat_ax = axes[-1][col]
        for i, ax in enumerate(axes[-1]):
            if i != col:
                fig.delaxes(ax)
        if counts:
            lat_ax.sharex(axes[0][col])
    later = []
    for ax, t in zip(axes[0] if counts else [], counts):
        ys_all, flagged = [], []
        for kernel in sorted({p["kernel"] for p in pts}):
            sel = sorted(
                (p for p in pts if p["threads"] == t and p["kernel"] == kernel), key=lambda p: p["working_set_bytes"]
            )
            if not sel:
                continue
            bad = _cannot_be_true(sel)
            flagged += bad
            sel = [p for p in sel if p not in bad]
            xs = [p["working_set_bytes"] for p in sel]
            ys = [p["gbps"]["median"] for p in sel]
            ys_all += [p["gbps"]["p20"] for p in sel] + [p["gbps"]["p80"] for p in sel]
            ax.plot(xs, ys, KERNEL_STYLE.get(kernel, "-o"), ms=3.5, lw=1.2, label=kernel)
            ax.fill_between(xs, [p["gbps"]["p20"] for p in sel], [p["gbps"]["p80"] for p in sel], alpha=0.2)
            noisy = [p for p in sel if p.get("noisy")]
            if noisy:
                ax.scatter(
                    [p["working_set_bytes"] for p in noisy],
                    [p["gbps"]["median"] for p in noisy],
                    facecolors="none",
                    edgecolors="red",
                    s=40,
                    zorder=5,
                )
        marks = []
        for c in ceilings:
            if c["kind"] == "bandwidth" and c["threads"] == t and c["kernel"] == "read" and c.get("plateau_end_bytes"):
                y = next(
                    (
                        p["gbps"]["median"]
                        for p in pts
                        if p["threads"] == t
                        and p["kernel"] == "read"
                        and p["working_set_bytes"] == c["plateau_end_bytes"]
                    ),
                    c["value"],
                )
                ax.plot(c["plateau_end_bytes"], y, marker="v", color="red", ms=6, zorder=6)
                marks.append((c, y))
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        if ys_all:
            ax.set_ylim(min(ys_all) / 1.6, max(ys_all) * 1.6)
        if flagged:  # at the panel's foot, grey, named: never drawn as a figure on the staircase
            lo = ax.get_ylim()[0] * 1.15
            ax.scatter([p["working_set_bytes"] for p in flagged], [lo] * len(flagged), marker="x", color="#999999")
            names = ", ".join(f"{p['kernel']} {fmt_bytes(p['working_set_bytes'])} {p['gbps']['median']:.3g} GB/s"
                              for p in flagged[:4])  # fmt: skip
            ax.annotate(f"cannot be true, not drawn to scale (under 1/{1 / OUTLIER:.0f} of both neighbours): {names}",
                        (0.01, 0.01), xycoords="axes fraction", fontsize=6.5, color="#777777")  # fmt: skip
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: fmt_bytes(v) if v >= 1 else ""))
        ax.tick_params(axis="x", labelrotation=45, labelsize=7.5)
        ax.set_xlabel("working set")
        enough_log_ticks(ax, "y")
        ax.set_ylabel("bandwidth [GB/s]")
        who = "whole GPU" if result.get("device") == "cuda" else f"{t} thread{'s' if t > 1 else ''}"
        ax.set_title(f"{who} (median, p20-p80 band; red ring = noisy)", fontsize=9)
        ax.grid(True, which="major", alpha=0.3)
        ax.grid(True, which="minor", alpha=0.1)
        ax.legend(fontsize=8, loc="upper right")
        later.append((ax, t, marks, pts))
    lat_marks = _latency_panel(lat_ax, result, chase) if lat_ax is not None else []
    if lat_ax is not None and counts:  # one x range for both panels of the column
        top = lat_ax.get_shared_x_axes().get_siblings(lat_ax)
        xs = [p["bytes"] for p in chase] + [p["working_set_bytes"] for p in pts if p["threads"] == min(counts)]
        for a in top:
            a.set_xlim(min(xs) / 1.4, max(xs) * 1.4)
    for ax, t, _, _ in later:
        _shade_levels(ax, _level_spans(result, caches, t, "bandwidth"))
    if lat_ax is not None:
        _shade_levels(lat_ax, _level_spans(result, caches, 1, "latency"))
    what = "Bandwidth by working set" if counts else "Memory latency by working set"
    fig.suptitle(title(result, what + (" (and latency)" if counts and chase else "")), fontsize=11)
    fig.tight_layout()
    fig.canvas.draw()
    if lat_ax is not None:
        placer = _label_latency_panel(lat_ax, lat_marks, chase)
        lo, hi = lat_ax.get_ylim()
        _cache_lines(lat_ax, placer, caches, 1 if result.get("device") != "cuda" else 0, lo, hi)
        placer.flush_notes()
    for ax, t, marks, pts_ in later:
        placer = LabelPlacer(ax)
        sel = [p for p in pts_ if p["threads"] == t]
        placer.avoid_points([p["working_set_bytes"] for p in sel], [p["gbps"]["median"] for p in sel], radius_pt=2.5)
        lo, hi = ax.get_ylim()
        _cache_lines(ax, placer, caches, t, lo, hi)
        for c, y in marks:
            cands = [
                (c["plateau_end_bytes"], y, dx, dy, ha, va)
                for dx, dy in ((4, 6), (-4, 6), (4, -8), (-4, -8), (10, 18), (-10, 18), (10, -20), (-10, -20))
                for ha, va in (("left" if dx > 0 else "right", "bottom" if dy > 0 else "top"),)
            ]
            placer.place(
                f"{c['level']} plateau ends {fmt_bytes(c['plateau_end_bytes'])}",
                cands,
                required=True,
                fontsize=6.5,
                color="red",
                bbox={"fc": "white", "ec": "none", "alpha": 0.8, "pad": 0.5},
            )
        placer.flush_notes()
    return fig


def bandwidth(result: dict, out: Path) -> list[Path]:
    """Staircase chart, saved as PNG and SVG next to ``out``."""
    return save(bandwidth_figure(result), out)
