"""The roofline chart: log-log GFLOP/s against FLOP/byte, one panel per thread count that has
something to show (ops when ops are given, else ceilings): measured memory roofs per level
(slanted, each labelled with the kernel that set it, stopping at the peak of the dtype they are
drawn for and continued dotted up to higher peaks), measured compute peaks per dtype (flat, with
their kernel), theoretical peaks dashed, intensity-sweep points, and placed model ops (marker =
model, colour = class, size = share of its model's time) and, in a boxed note, the dispatch (CPU)
or launch (GPU) latency floor: below a few times that per call, an op's time is overhead, whatever
its intensity. Ceilings that cannot be true (roofline.implausible) are drawn grey and dashed,
never as roofs, and named with the reason under the panel. Labels are placed by charts.labels (peaks, then roofs, theoretical peaks, then
ops, heaviest first). roofline_figure returns the Figure (tests inspect it); roofline() saves it
as PNG and SVG.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from pathlib import Path

import numpy as np
from matplotlib.lines import Line2D

from ..roofline import Roofline, unit_of
from .labels import LabelPlacer, enough_log_ticks, geom
from .style import (
    CLASS_COLORS,
    DTYPE_COLORS,
    DTYPE_SHORT,
    FLAGGED_COLOR,
    LEVEL_COLORS,
    MODEL_MARKERS,
    fmt_ns,
    plt,
    save,
    title,
)


def _op_threads(o: dict, default: int) -> int:
    if o.get("threads") is not None:
        return int(o["threads"])
    m = re.search(r",\s*(\d+) threads?\b", str(o.get("peak_used") or ""))
    return int(m.group(1)) if m else default


def _panel_counts(result: dict, rf: Roofline, threads, ops) -> tuple[list[int], dict]:
    """Thread counts to draw (only those with something to show) and the ops of each."""
    ceiling_counts = rf.thread_counts()
    default = max(ceiling_counts) if ceiling_counts else (0 if result.get("device") == "cuda" else 1)
    by: dict[int, list[dict]] = {}
    for o in ops or []:
        if o.get("achieved_gflops") and o.get("intensity"):
            by.setdefault(_op_threads(o, default), []).append(o)
    counts = sorted(by) if by else ceiling_counts
    if threads:
        counts = [t for t in counts if t in set(threads)]
    return counts or [default], by


def _primary_dtype(peaks: list[dict], ops: list[dict], sweep: list[dict]) -> str | None:
    have = {c["dtype"] for c in peaks}
    if ops:
        common = [d for d, _ in Counter(o.get("dtype") for o in ops).most_common() if d in have]
        if common:
            return common[0]
    if sweep and any(c["dtype"] == "float64" for c in peaks):
        return "float64"
    if "float64" in have:
        return "float64"
    return min(peaks, key=lambda c: c["value"])["dtype"] if peaks else None


def roofline_figure(result: dict, threads: list[int] | None = None, ops: list[dict] | None = None, label_top: int = 8):
    """The roofline Figure: one panel per thread count that has ops (or ceilings, without ops)."""
    rf = Roofline(result)
    counts, ops_by = _panel_counts(result, rf, threads, ops)
    fig, axes = plt.subplots(1, len(counts), figsize=(7.5 * len(counts), 5.8), squeeze=False)
    models = sorted({o.get("model") or "ops" for group in ops_by.values() for o in group})
    markers = {m: MODEL_MARKERS[i % len(MODEL_MARKERS)] for i, m in enumerate(models)}
    panels = []
    for ax, t in zip(axes[0], counts):
        panels.append(_panel(ax, result, rf, t, ops_by.get(t, []), markers))
    fig.suptitle(title(result, "Empirical roofline"), fontsize=11)
    fig.tight_layout()
    fig.canvas.draw()
    for ax, panel in zip(axes[0], panels):
        _place_labels(ax, panel, label_top)
    return fig


def roofline(
    result: dict, out: Path, threads: list[int] | None = None, ops: list[dict] | None = None, label_top: int = 8
) -> list[Path]:
    """Roofline chart, saved as PNG and SVG next to ``out``."""
    return save(roofline_figure(result, threads, ops, label_top), out)


def _panel(ax, result, rf: Roofline, threads, ops, markers) -> dict:
    """Draw lines and points of one panel, fix its limits; returns what the labels need."""
    xmin, xmax = 1 / 16, 1024
    peaks = sorted(
        (c for c in rf.ceilings if c["kind"] == "compute" and c["threads"] == threads), key=lambda c: c["value"]
    )
    roofs = rf.memory_roofs(threads)
    sweep = [
        p
        for p in result.get("sweeps", {}).get("intensity", [])
        if p.get("threads") == threads and p.get("gflops") and p.get("status", "ok") == "ok"
    ]
    primary = _primary_dtype(peaks, ops, sweep)
    top_of = {d: max(c["value"] for c in peaks if c["dtype"] == d) for d in {c["dtype"] for c in peaks}}
    cap = top_of.get(primary) if primary else None
    theo = [p for p in _theoretical(result) if p["threads"] == threads]
    fp = [p["gflops"] for p in theo if p.get("dtype") in ("float32", "float64")]  # not tensor cores' 10-100x
    theory_cap = cap is None and bool(fp)  # no measured peak that can be true: the datasheet's stops the roofs
    if theory_cap:
        cap = max(fp)
    # continued dotted up to the higher FP32/FP64 peak (not to tensor-core peaks, 10-100x above)
    above = sorted({v for d, v in top_of.items() if cap and v > cap * 1.001 and d in ("float32", "float64")})
    lows = []
    handles = []
    roof_info = []
    for c in roofs:
        color = LEVEL_COLORS.get(c["level"], "#444444")
        bw = c["value"]
        x_end = min(xmax, cap / bw) if cap else xmax
        xs = np.geomspace(xmin, x_end, 64)
        ax.plot(xs, xs * bw, color=color, lw=1.6, solid_capstyle="butt")
        if above:  # the same roof for the dtypes with higher peaks, dotted, stopping at the highest
            xd = np.geomspace(x_end, min(xmax, above[-1] / bw), 32)
            ax.plot(xd, np.minimum(xd * bw, above[-1]), color=color, lw=0.9, ls=":", alpha=0.8)
        lows.append(xmin * bw)
        roof_info.append({"c": c, "color": color, "x_end": x_end})
    fastest = max((c["value"] for c in roofs), default=None)
    peak_info = []
    for c in peaks:  # the best kernel of a dtype is its roof; slower kernels' peaks drawn thin
        color = DTYPE_COLORS.get(c["dtype"], "#222222")
        x0 = max(xmin, c["value"] / fastest) if fastest else xmin
        roof = c["value"] >= top_of[c["dtype"]]
        ax.plot([x0, xmax], [c["value"]] * 2, color=color, lw=2 if roof else 0.9, alpha=1 if roof else 0.8)
        peak_info.append(dict(c, _x0=x0, _roof=roof))
    flagged = rf.flagged_ceilings(threads)  # cannot be true: grey, dashed, named with the reason
    for c in flagged:
        if c["kind"] == "bandwidth":  # stops where the roofs stop: never drawn above what can be true
            xs = np.geomspace(xmin, min(xmax, cap / c["value"]) if cap else xmax, 64)
            ax.plot(xs, xs * c["value"], color=FLAGGED_COLOR, lw=0.9, ls=(0, (4, 3)), alpha=0.8)
        elif c["kind"] == "compute":
            ax.plot([xmin, xmax], [c["value"]] * 2, color=FLAGGED_COLOR, lw=0.9, ls=(0, (4, 3)), alpha=0.8)
    if flagged:
        handles.append(Line2D([], [], color=FLAGGED_COLOR, lw=0.9, ls=(0, (4, 3)), label="cannot be true: not a roof"))
    for p in theo:
        ax.axhline(p["gflops"], color=DTYPE_COLORS.get(p["dtype"], "#222222"), ls="--", lw=0.9, alpha=0.7)
    if sweep:
        xs = [p["flops_per_byte"] for p in sweep]
        ys = [p["gflops"]["median"] for p in sweep]
        ax.scatter(xs, ys, marker="x", color="black", s=28, zorder=5)
        for p in sweep:
            ax.plot([p["flops_per_byte"]] * 2, [p["gflops"]["p20"], p["gflops"]["p80"]], color="black", lw=0.8)
        dt = DTYPE_SHORT.get(sweep[0].get("dtype") or "float64", "fp64")
        handles.append(
            Line2D([], [], ls="", marker="x", color="black", label=f"intensity sweep ({dt}, median, p20-p80)")
        )
        lows += ys
    op_pts = []
    if ops:
        by_model: dict[str, list[dict]] = {}
        for o in ops:
            by_model.setdefault(o.get("model") or "ops", []).append(o)
        for model, sel in by_model.items():
            total = sum(o.get("total_time_s", 0) for o in sel) or 1.0
            sizes = [18 + 260 * o.get("total_time_s", 0) / total for o in sel]
            ax.scatter(
                [o["intensity"] for o in sel],
                [o["achieved_gflops"] for o in sel],
                s=sizes,
                marker=markers.get(model, "o"),
                c=[CLASS_COLORS.get(o.get("class"), "#bbbbbb") for o in sel],
                alpha=0.7,
                edgecolors="black",
                linewidths=0.4,
                zorder=6,
            )
            op_pts += [(o, s) for o, s in zip(sel, sizes)]
        own = [o for o in ops if o.get("attainable_gflops")]
        for o in own:  # the roof this op is judged against (its level, its read/write mix's kernel, its dtype's peak)
            ax.plot(
                [o["intensity"]] * 2, [o["achieved_gflops"], o["attainable_gflops"]], color="#999999", lw=0.5, ls=":"
            )
        if own:
            ax.scatter([o["intensity"] for o in own], [o["attainable_gflops"] for o in own], marker="_", s=70,
                       color="#333333", linewidths=1.3, zorder=6)  # fmt: skip
            handles.append(Line2D([], [], ls="", marker="_", ms=9, mew=1.3, color="#333333",
                                  label="its own roof (% of roof = the gap)"))  # fmt: skip
        lows += [o["achieved_gflops"] for o in ops]
        for model in by_model:
            handles.append(
                Line2D(
                    [], [], ls="", marker=markers.get(model, "o"), color="#666666", mec="black", mew=0.4, label=model
                )
            )
        for cls in sorted({o.get("class") for o in ops if o.get("class")}):
            handles.append(Line2D([], [], ls="", marker="o", color=CLASS_COLORS.get(cls, "#bbbbbb"), label=cls))
    if theory_cap and roofs:
        handles.append(
            Line2D([], [], color="#666666", lw=1.6, label="no measured peak can be true: roofs stop at the theoretical")
        )
    if above and roofs:
        handles.append(
            Line2D(
                [],
                [],
                color="#666666",
                ls=":",
                lw=0.9,
                label=f"memory roofs continued up to the {_dt_names(top_of, above)} peak",
            )
        )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlim(xmin, xmax)
    tops = [c["value"] for c in peaks] + [p["gflops"] for p in theo] + [o["achieved_gflops"] for o in ops or []]
    tops += [o["attainable_gflops"] for o in ops or [] if o.get("attainable_gflops")]
    ymin = max(min(lows or [1.0]) / 3, 1e-3)
    ymax = max(tops or [max(lows or [1.0])]) * 3.0
    ax.set_ylim(ymin, ymax)
    ax.set_xlabel("arithmetic intensity [FLOP/byte]")
    ax.set_ylabel("performance [GFLOP/s]")
    enough_log_ticks(ax, "y")
    ax.set_title(
        "GPU" if result.get("device") == "cuda" else f"{threads} thread{'s' if threads != 1 else ''}", fontsize=10
    )
    ax.grid(True, which="major", alpha=0.3)
    if handles:
        ax.legend(handles=handles, loc="lower right", fontsize=7, framealpha=0.9)
    return {
        "peaks": peak_info,
        "roofs": roof_info,
        "theo": theo,
        "ops": op_pts,
        "sweep": sweep,
        "xlim": (xmin, xmax),
        "ylim": (ymin, ymax),
        "floor": overhead_floor(result),
        "flagged": flagged,
    }


def overhead_floor(result: dict) -> str | None:
    """The boxed note of a roofline panel: the per-call latency floor (dispatch paths on the CPU,
    launch paths on the GPU; not memory latency, which no call pays as a whole), or None."""
    lat = [c for c in result.get("ceilings", []) if c["kind"] == "latency" and not c.get("level")]
    if not lat:
        return None
    parts = []
    for c in lat:
        what = c["name"].split(":", 1)[-1].strip().replace("_", "/")
        if c.get("threads", 0) > 1 and " thread" not in what:  # unless its name says its threads
            what += f" ({c['threads']}T)"
        parts.append(f"{what} {fmt_ns(c['value'])}")
    head = "launch" if result.get("device") == "cuda" else "dispatch"
    import textwrap

    # wrapped: with the runtimes' floors (torch, onnxruntime) one line ran across the next panel
    body = textwrap.fill(f"{head} latency per call: " + ", ".join(parts), width=95)
    return body + "\nops within ~2x of it are overhead-bound"


def _dt_names(top_of: dict, values: list[float]) -> str:
    names = [DTYPE_SHORT.get(d, d) for d, v in top_of.items() if v in values]
    return "/".join(sorted(names)) or "higher"


def _place_labels(ax, panel: dict, label_top: int) -> None:
    xmin, xmax = panel["xlim"]
    placer = LabelPlacer(ax)
    if panel["ops"]:
        for o, s in panel["ops"]:
            placer.avoid_points([o["intensity"]], [o["achieved_gflops"]], radius_pt=max(3.0, math.sqrt(s) / 2))
    if panel["sweep"]:
        placer.avoid_points(
            [p["flops_per_byte"] for p in panel["sweep"]], [p["gflops"]["median"] for p in panel["sweep"]]
        )
    for c in panel["peaks"]:
        placer.avoid_hline(c["value"], c["_x0"], xmax)
    for p in panel["theo"]:
        placer.avoid_hline(p["gflops"], xmin, xmax)
    box = {"fc": "white", "ec": "none", "alpha": 0.8, "pad": 0.6}
    # compute peaks: right end of the flat line, below it, then above, then further left
    for c in sorted(panel["peaks"], key=lambda c: -c["value"]):
        v = c["value"]
        frac = f" ({c['fraction_of_theoretical']:.0%} of theor.)" if c.get("fraction_of_theoretical") else ""
        kernel = f", {c['kernel']}" if c.get("kernel") else ""
        text = f"{DTYPE_SHORT.get(c['dtype'], c['dtype'])} peak {v:.4g} {c.get('unit') or 'GFLOP/s'}{frac}{kernel}"
        if not c.get("_roof", True):  # a slower kernel of the same dtype: a short label
            text = f"{c.get('kernel') or DTYPE_SHORT.get(c['dtype'], c['dtype'])} {v:.4g}"
        xs = geom(max(xmin, c.get("_x0", xmin)) * 1.5, xmax / 1.04, 12)[::-1]
        cands = [
            (x, v, 0, dy, "right", "top" if dy < 0 else "bottom")
            for dy in (-2.5, 2.5, -14, 14, -26, 26, -40, 40, -55, 55)  # beyond 2.5 pt a leader ties it to its line
            for x in xs
        ]
        x0 = c.get("_x0", xmin)
        if x0 > xmin * 1.5:  # left of where the flat line starts, level with it
            cands[2:2] = [(x0, v, -3, 0, "right", "center")]
        color = DTYPE_COLORS.get(c["dtype"], "#222222")
        placer.place(text, cands, required=True, avoid_lines=True, color=color, fontsize=8, bbox=box)
    # memory roofs: along the slanted line, above-left or below-right of it (never across it)
    notes = []
    for r in sorted(panel["roofs"], key=lambda r: -r["c"]["value"]):
        c = r["c"]
        bw = c["value"]
        text = f"{c['level']} {bw:.3g} GB/s ({c.get('kernel') or '?'})"
        if r["x_end"] <= xmin * 1.05:
            notes.append(f"{text}: above the peak at every intensity shown")
            continue
        xs = geom(xmin * 1.3, r["x_end"] / 1.1, 14)
        cands = []
        for x in xs:
            cands += [(x, x * bw, -1.5, 1.5, "right", "bottom"), (x, x * bw, 1.5, -1.5, "left", "top")]
        placer.place(text, cands, required=True, avoid_lines=True, color=r["color"], bbox=box)
    for p in panel["theo"]:  # a short label on the dashed line, the formula in the note under the panel
        g = p["gflops"]
        dt = DTYPE_SHORT.get(p["dtype"], p["dtype"])
        xs = geom(xmin * 1.05, xmax / 3, 16)
        cands = [(x, g, 0, 1.5, "left", "bottom") for x in xs] + [(x, g, 0, -1.5, "left", "top") for x in xs]
        color = DTYPE_COLORS.get(p["dtype"], "#222222")
        placer.place(
            f"theoretical {dt} {g:.4g}", cands, required=True, avoid_lines=True, color=color, fontsize=6.5, bbox=box
        )
        notes.append(f"theoretical {dt}: {p['formula']}" + (" (FMA units assumed)" if p.get("assumed_units") else ""))
    if panel.get("floor"):  # the latency floor, boxed, in a free corner (else named under the panel)
        ylo, yhi = panel["ylim"]
        cands = [
            (x, y, dx, dy, ha, va)
            for x, dx, ha in ((xmin, 4, "left"), (xmax, -4, "right"))
            for y, dy, va in ((yhi, -4, "top"), (ylo, 4, "bottom"))
        ]
        cands += [(x, yhi, 0, -4, "center", "top") for x in geom(xmin * 4, xmax / 4, 6)]
        placer.place(
            panel["floor"],
            cands,
            required=True,
            arrow_beyond_pt=1e9,
            avoid_lines=True,
            fontsize=6.5,
            color="#555555",
            bbox={"fc": "#f4f4f4", "ec": CLASS_COLORS["latency-bound"], "lw": 0.6, "alpha": 0.9, "pad": 2.0},
        )
    # ops: the heaviest first, around the marker, further out with a leader line
    heavy = sorted(panel["ops"], key=lambda os_: -os_[0].get("total_time_s", 0))[:label_top]
    for o, s in heavy:
        x, y = o["intensity"], o["achieved_gflops"]
        r = max(3.0, math.sqrt(s) / 2) + 1.5
        name = o.get("name", "?")
        if o.get("count", 1) > 1 and "(x" not in name:
            name += f" (x{o['count']})"
        cands = []
        for d in (r, r + 12, r + 26, r + 45, r + 70):  # out of a dense cloud, with a leader line
            cands += [
                (x, y, d, d, "left", "bottom"),
                (x, y, -d, d, "right", "bottom"),
                (x, y, d, -d, "left", "top"),
                (x, y, -d, -d, "right", "top"),
                (x, y, 0, d * 1.2, "center", "bottom"),
                (x, y, 0, -d * 1.2, "center", "top"),
            ]
        placer.place(name, cands, required=False, fontsize=6.5, color="#222222", bbox={**box, "alpha": 0.7})
    for c in panel.get("flagged", []):
        notes.append(f"not a roof, cannot be true: {c['name']} {c['value']:.3g} {unit_of(c)} ({c['why']})")
    placer.flush_notes(notes)


def _theoretical(result: dict) -> list[dict]:
    """Theoretical peaks to draw, one line per distinct value (a GPU's FP16 and BF16 tensor peaks
    coincide)."""
    if result.get("device") == "cuda":
        peaks = result["machine"].get("gpu", {}).get("theoretical", {}).get("peaks", [])
    else:
        peaks = result["machine"]["cpu"].get("theoretical", {}).get("peaks", [])
    seen, out = set(), []
    for p in peaks:
        if (p["threads"], round(p["gflops"], 6)) not in seen:
            seen.add((p["threads"], round(p["gflops"], 6)))
            out.append(p)
    return out
