"""Charts from result records only (read by field name, never from stdout).

  roofline   log-log GFLOP/s against FLOP/byte, one panel per thread count that has something to
             show (ops when ops are given, else ceilings): measured memory roofs per level
             (slanted, each labelled with the kernel that set it, stopping at the peak of the dtype
             they are drawn for and continued dotted up to higher peaks), measured compute peaks per
             dtype (flat, with their kernel), theoretical peaks dashed, intensity-sweep points, and
             placed model ops (marker = model, colour = class, size = share of its model's time)
             and, in a boxed note, the dispatch (CPU) or launch (GPU) latency floor: below a few
             times that per call, an op's time is overhead, whatever its intensity
  bandwidth  the staircase: GB/s against working-set size per kernel, with the OS cache sizes,
             each level's window and where its plateau really ends; with pointer-chase records a
             second panel under it (same x axis, same cache lines and level shading): ns per load
             by working set, each level's latency ceiling drawn across its window
  latency    the latency chart: one row per latency path (dispatch empty / ufunc / fork-join,
             memory L1 .. DRAM, launch enqueue / round trip / graph node, small host<->device
             copies), median, p20-p80 bar, min-max whisker and the samples (or the per-size points
             of a memory level) on a log ns axis; with tiny-chain records a second panel: ns per
             chain of N tiny ops, op by op versus fused, against N

Labels never overlap: every label is placed greedily (peaks, then roofs, theoretical peaks, cache
sizes, then ops, heaviest first) at the first of its candidate spots whose box is inside the axes
and clear of the labels, markers and legend already there; a roof or peak label with no free spot
goes to a note under the panel, an op label is left out. Log axes get enough labelled ticks to
read values (1-2-5 per decade when the axis spans few decades).
PNG (150 dpi) and SVG side by side, so the figures drop into a paper or a README. The *_figure
functions return the matplotlib Figure (tests inspect it); roofline() and bandwidth() save it.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from pathlib import Path

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.text import Text  # noqa: E402
from matplotlib.transforms import Bbox  # noqa: E402

from .memory import fmt_bytes  # noqa: E402
from .roofline import Roofline, capacity, level_windows  # noqa: E402

LEVEL_COLORS = {
    "L1": "#1b9e77",
    "L2": "#7570b3",
    "L3": "#e7298a",
    "L4": "#a6761d",
    "DRAM": "#d95f02",
    "HBM": "#d95f02",
    "shared": "#1b9e77",
    "host": "#666666",
}
DTYPE_COLORS = {
    "float64": "#222222",
    "float32": "#377eb8",
    "float16": "#4daf4a",
    "bfloat16": "#984ea3",
    "tf32": "#ff7f00",
}
DTYPE_SHORT = {"float64": "FP64", "float32": "FP32", "float16": "FP16", "bfloat16": "BF16", "tf32": "TF32"}
CLASS_COLORS = {"compute-bound": "#e41a1c", "memory-bound": "#377eb8", "latency-bound": "#999999"}
MODEL_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">", "h", "p")
KERNEL_STYLE = {"read": "-o", "copy": "-s", "triad": "-^", "update": "-D"}
LABEL_GID = "rooflab-label"  # every placed label carries it (tests find them by it)
LABEL_PAD_PX = 2.0


def _title(result: dict, what: str) -> str:
    m = result["machine"]
    name = m.get("gpu", {}).get("name") if result.get("device") == "cuda" else m["cpu"]["model"]
    date = (result.get("finished") or result.get("started") or "")[:10]
    return f"{what}: {name} ({m['id']}), {date}"


def _save(fig, path: Path) -> list[Path]:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    stem = str(path.with_suffix("")) if path.suffix in (".png", ".svg") else str(path)
    outs = [Path(stem + ".png"), Path(stem + ".svg")]
    fig.savefig(outs[0], dpi=150, bbox_inches="tight")
    fig.savefig(outs[1], bbox_inches="tight")
    plt.close(fig)
    return outs


# ---- labels that never collide --------------------------------------------------------------------


class LabelPlacer:
    """Greedy placement with bounding-box checks, for one axes whose limits and layout are final.

    ``place`` tries candidate spots in order, each (x, y, dx_pt, dy_pt, ha, va) = a data point
    and an offset in points; it keeps the first whose text box lies inside the axes and overlaps
    no box taken before (labels, markers, the legend). Returns the Text, or None."""

    def __init__(self, ax):
        self.ax = ax
        self.fig = ax.figure
        self.renderer = self.fig.canvas.get_renderer()
        self.area = ax.get_window_extent(self.renderer)
        self.taken: list[Bbox] = []  # labels and the legend: never overlapped
        self.soft: list[Bbox] = []  # data markers: avoided when possible
        self.lines: list[Bbox] = []  # flat roof lines: kept clear by labels placed with avoid_lines
        self.overflow: list[tuple[str, str]] = []
        legend = ax.get_legend()
        if legend is not None:
            self.taken.append(legend.get_window_extent(self.renderer))

    def avoid_points(self, xs, ys, radius_pt: float = 4.0, hard: bool = False) -> None:
        r = radius_pt * self.fig.dpi / 72
        for x, y in self.ax.transData.transform(np.column_stack([xs, ys])) if len(xs) else []:
            (self.taken if hard else self.soft).append(Bbox.from_extents(x - r, y - r, x + r, y + r))

    def avoid_hline(self, y: float, x0: float, x1: float) -> None:
        (a0, py), (a1, _) = self.ax.transData.transform([(x0, y), (x1, y)])
        self.lines.append(Bbox.from_extents(a0, py, a1, py))

    def avoid_artist(self, artist) -> None:
        self.taken.append(artist.get_window_extent(self.renderer))

    def _free(self, box: Bbox, soft: bool, lines: bool = False) -> bool:
        a = self.area
        if box.x0 < a.x0 or box.x1 > a.x1 or box.y0 < a.y0 or box.y1 > a.y1:
            return False
        grown = box.padded(LABEL_PAD_PX)
        others = self.taken + (self.soft if soft else []) + (self.lines if lines else [])
        return not any(grown.overlaps(b) for b in others)

    def _leader_clear(self, xy, box: Bbox) -> bool:
        """A leader line from the data point to the label crosses no other label (nor the legend)."""
        x0, y0 = self.ax.transData.transform(xy)
        x1, y1 = min(max(x0, box.x0), box.x1), min(max(y0, box.y0), box.y1)  # nearest point of the box
        for f in np.linspace(0.0, 1.0, 24):
            px, py = x0 + f * (x1 - x0), y0 + f * (y1 - y0)
            if any(b.x0 <= px <= b.x1 and b.y0 <= py <= b.y1 for b in self.taken):
                return False
        return True

    def place(
        self, text: str, candidates, required: bool = False, arrow_beyond_pt: float = 10.0, avoid_lines=False, **kw
    ):
        style = {"fontsize": 7.5, "zorder": 8, **kw}
        for soft in (True, False) if required else (True,):  # an optional label never covers a marker
            for x, y, dx, dy, ha, va in candidates:
                far = math.hypot(dx, dy) > arrow_beyond_pt
                t = self.ax.annotate(
                    text,
                    (x, y),
                    xytext=(dx, dy),
                    textcoords="offset points",
                    ha=ha,
                    va=va,
                    annotation_clip=False,
                    arrowprops={"arrowstyle": "-", "lw": 0.5, "color": "#666666", "shrinkA": 0, "shrinkB": 2}
                    if far
                    else None,
                    **style,
                )
                t.set_gid(LABEL_GID)
                box = text_box(t, self.renderer)
                if self._free(box, soft, avoid_lines) and (not far or self._leader_clear((x, y), box)):
                    self.taken.append(box)
                    return t
                t.remove()
        if required:
            self.overflow.append((text, style.get("color", "#222222")))
        return None

    def flush_notes(self, notes: list[str] = ()) -> None:
        """Notes under the axes, below its x label: ``notes`` and any required label that found no
        free spot in the chart (named, never dropped)."""
        lines = list(notes)
        if self.overflow:
            lines.append("not placed in the chart: " + "; ".join(t for t, _ in self.overflow))
        if not lines:
            return
        label = self.ax.xaxis.get_label().get_window_extent(self.renderer)
        ticks = self.ax.xaxis.get_tightbbox(self.renderer)
        y_px = min(label.y0, ticks.y0 if ticks is not None else label.y0) - 4
        _, y = self.ax.transAxes.inverted().transform((0, y_px))
        note = self.ax.text(0.0, y, "\n".join(lines), transform=self.ax.transAxes, fontsize=6.5, va="top", ha="left")
        note.set_gid(LABEL_GID + "-note")


def text_box(t, renderer) -> Bbox:
    """Display box of a label's text alone (an Annotation's own extent includes its leader line)."""
    if hasattr(t, "update_positions"):
        t.update_positions(renderer)
    return Text.get_window_extent(t, renderer)


def _geom(lo: float, hi: float, n: int) -> list[float]:
    if hi <= lo:
        return [lo]
    return list(np.geomspace(lo, hi, n))


def enough_log_ticks(ax, axis: str = "y", unit_fmt=None) -> None:
    """Labelled major ticks a reader can use: decades when the axis spans >= 4 of them, else 1-2-5
    (or finer) per decade; plain numbers, no 10^x."""
    lo, hi = ax.get_ylim() if axis == "y" else ax.get_xlim()
    decades = math.log10(hi / lo) if lo > 0 and hi > lo else 3
    subs = (1.0,) if decades >= 4 else (1.0, 2.0, 5.0) if decades >= 1.2 else (1.0, 1.5, 2.0, 3.0, 5.0, 7.0)
    target = ax.yaxis if axis == "y" else ax.xaxis
    target.set_major_locator(matplotlib.ticker.LogLocator(base=10, subs=subs, numticks=30))
    target.set_major_formatter(matplotlib.ticker.FuncFormatter(unit_fmt or (lambda v, _: f"{v:g}")))
    target.set_minor_formatter(matplotlib.ticker.NullFormatter())


# ---- roofline -------------------------------------------------------------------------------------


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
    fig.suptitle(_title(result, "Empirical roofline"), fontsize=11)
    fig.tight_layout()
    fig.canvas.draw()
    for ax, panel in zip(axes[0], panels):
        _place_labels(ax, panel, label_top)
    return fig


def roofline(
    result: dict, out: Path, threads: list[int] | None = None, ops: list[dict] | None = None, label_top: int = 8
) -> list[Path]:
    """Roofline chart, saved as PNG and SVG next to ``out``."""
    return _save(roofline_figure(result, threads, ops, label_top), out)


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
    # continued dotted up to the higher FP32/FP64 peak (not to tensor-core peaks, 10-100x above)
    above = sorted({v for d, v in top_of.items() if cap and v > cap * 1.001 and d in ("float32", "float64")})
    lows = []
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
    theo = [p for p in _theoretical(result) if p["threads"] == threads]
    for p in theo:
        ax.axhline(p["gflops"], color=DTYPE_COLORS.get(p["dtype"], "#222222"), ls="--", lw=0.9, alpha=0.7)
    handles = []
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
        lows += [o["achieved_gflops"] for o in ops]
        for model in by_model:
            handles.append(
                Line2D(
                    [], [], ls="", marker=markers.get(model, "o"), color="#666666", mec="black", mew=0.4, label=model
                )
            )
        for cls in sorted({o.get("class") for o in ops if o.get("class")}):
            handles.append(Line2D([], [], ls="", marker="o", color=CLASS_COLORS.get(cls, "#bbbbbb"), label=cls))
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
    }


def fmt_ns(v: float) -> str:
    """A duration given in ns, in the unit that reads best (ns, us, ms)."""
    if v < 1e3:
        return f"{v:.3g} ns"
    if v < 1e6:
        return f"{v / 1e3:.3g} us"
    return f"{v / 1e6:.3g} ms"


def overhead_floor(result: dict) -> str | None:
    """The boxed note of a roofline panel: the per-call latency floor (dispatch paths on the CPU,
    launch paths on the GPU; not memory latency, which no call pays as a whole), or None."""
    lat = [c for c in result.get("ceilings", []) if c["kind"] == "latency" and not c.get("level")]
    if not lat:
        return None
    parts = []
    for c in lat:
        what = c["name"].split(":", 1)[-1].strip().replace("_", "/")
        if c.get("threads", 0) > 1:
            what += f" ({c['threads']}T)"
        parts.append(f"{what} {fmt_ns(c['value'])}")
    head = "launch" if result.get("device") == "cuda" else "dispatch"
    return f"{head} latency per call: " + ", ".join(parts) + "\nops within ~2x of it are overhead-bound"


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
        text = f"{DTYPE_SHORT.get(c['dtype'], c['dtype'])} peak {v:.4g} GFLOP/s{frac}{kernel}"
        if not c.get("_roof", True):  # a slower kernel of the same dtype: a short label
            text = f"{c.get('kernel') or DTYPE_SHORT.get(c['dtype'], c['dtype'])} {v:.4g}"
        xs = _geom(max(xmin, c.get("_x0", xmin)) * 1.5, xmax / 1.04, 12)[::-1]
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
        xs = _geom(xmin * 1.3, r["x_end"] / 1.1, 14)
        cands = []
        for x in xs:
            cands += [(x, x * bw, -1.5, 1.5, "right", "bottom"), (x, x * bw, 1.5, -1.5, "left", "top")]
        placer.place(text, cands, required=True, avoid_lines=True, color=r["color"], bbox=box)
    for p in panel["theo"]:  # a short label on the dashed line, the formula in the note under the panel
        g = p["gflops"]
        dt = DTYPE_SHORT.get(p["dtype"], p["dtype"])
        xs = _geom(xmin * 1.05, xmax / 3, 16)
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
        cands += [(x, yhi, 0, -4, "center", "top") for x in _geom(xmin * 4, xmax / 4, 6)]
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


# ---- bandwidth staircase --------------------------------------------------------------------------


def chase_points(result: dict) -> list[dict]:
    """The latency staircase of a result: one point per pointer-chase working set (bytes, ns per
    load, cycles, variant, level), from its records."""
    from .families.chase import staircase

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
        xs = _geom(lo, hi, 4)
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
        ys_all = []
        for kernel in sorted({p["kernel"] for p in pts}):
            sel = sorted(
                (p for p in pts if p["threads"] == t and p["kernel"] == kernel), key=lambda p: p["working_set_bytes"]
            )
            if not sel:
                continue
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
    fig.suptitle(_title(result, what + (" (and latency)" if counts and chase else "")), fontsize=11)
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
    return _save(bandwidth_figure(result), out)


# ---- latency chart ---------------------------------------------------------------------------------

LATENCY_GROUPS = ("dispatch", "launch", "memory", "transfer")
GROUP_COLORS = {"dispatch": "#377eb8", "launch": "#984ea3", "memory": "#d95f02", "transfer": "#666666"}


def _group(c: dict) -> str:
    name = c["name"]
    if name.startswith("memory latency"):
        return "memory"
    return name.split(":", 1)[0] if ":" in name else "dispatch"


def _row_label(c: dict) -> str:
    if c["name"].startswith("memory latency"):
        cyc = f", {c['cycles']:.3g} cyc" if c.get("cycles") else ""
        return f"memory {c['level']}{cyc}"
    label = c["name"].replace("_", "-")
    if c.get("threads", 0) > 1:
        label += f" ({c['threads']}T)"
    return label


def _samples_ns(result: dict, c: dict) -> list[float]:
    """The values behind a ceiling: a memory level's per-size points, else the timed samples of
    the record it was taken from (seconds per call / calls' launches)."""
    if c["name"].startswith("memory latency"):
        return [p["ns"] for p in chase_points(result) if p["variant"] == c.get("kernel") and
                p["bytes"] in set(c.get("points_bytes") or [])]  # fmt: skip
    for r in result.get("records", []):
        if (
            r.get("status") == "ok"
            and r.get("variant") == c.get("kernel")
            and r.get("threads") == c.get("threads", r.get("threads"))
            and r.get("ns_per_launch")
            and abs(r["ns_per_launch"]["median"] - c["value"]) <= 1e-9 * max(c["value"], 1)
            and (r.get("work") or {}).get("launches")
        ):
            return [x * 1e9 / r["work"]["launches"] for x in r.get("samples_s") or []]
    return []


def latency_rows(result: dict) -> list[dict]:
    """One row per latency ceiling, grouped (dispatch, launch, memory, transfer), each with its
    stats and the values behind it."""
    rows = []
    for c in result.get("ceilings", []):
        if c["kind"] != "latency" or not c.get("stats"):
            continue
        rows.append({"label": _row_label(c), "group": _group(c), "ceiling": c, "values": _samples_ns(result, c)})
    order = {g: i for i, g in enumerate(LATENCY_GROUPS)}
    levels = {name: i for i, name in enumerate(Roofline.LEVEL_ORDER)}
    return sorted(
        rows, key=lambda r: (order.get(r["group"], 9), levels.get(r["ceiling"].get("level"), 0), r["ceiling"]["value"])
    )


def chain_points(result: dict) -> list[dict]:
    """ns per chain of N tiny ops (the elementwise family's tiny chain), op by op and fused."""
    out = []
    for r in result.get("records", []):
        if r.get("status") == "ok" and r.get("group") == "tiny_chain" and r.get("time_s"):
            ns = r["time_s"]["median"] / max(int(r.get("reps") or 1), 1) * 1e9
            out.append({"n_ops": int(r["n_ops"]), "ns": ns, "fused": bool(r.get("fused")), "variant": r["variant"]})
    return sorted(out, key=lambda p: (p["fused"], p["n_ops"]))


def latency_figure(result: dict):
    """The latency chart (None when the result has no latency path)."""
    rows = latency_rows(result)
    chain = chain_points(result)
    if not rows and not chain:
        return None
    panels = (1 if rows else 0) + (1 if chain else 0)
    height = max(3.2, 0.9 + 0.36 * len(rows))
    fig, axes = plt.subplots(1, panels, figsize=(7.5 + 5.0 * (panels - 1), height), squeeze=False,
                             gridspec_kw={"width_ratios": [1.5, 1][:panels]})  # fmt: skip
    values_text = []
    if rows:
        ax = axes[0][0]
        ys = np.arange(len(rows))[::-1]
        xs_all = []
        for y, row in zip(ys, rows):
            st, color = row["ceiling"]["stats"], GROUP_COLORS.get(row["group"], "#333333")
            lo, hi = st.get("min", st["median"]), st.get("max", st["median"])
            ax.plot([lo, hi], [y, y], color=color, lw=0.8, zorder=2)
            ax.plot([st.get("p20", st["median"]), st.get("p80", st["median"])], [y, y], color=color, lw=6,
                    alpha=0.45, solid_capstyle="butt", zorder=3)  # fmt: skip
            ax.plot([st["median"]], [y], marker="D", color=color, ms=5, mec="black", mew=0.5, zorder=5)
            vals = row["values"]
            if vals:
                jitter = np.random.default_rng(len(vals)).uniform(-0.18, 0.18, len(vals))
                ax.scatter(vals, y + jitter, s=5, color="#222222", alpha=0.35, lw=0, zorder=4)
            xs_all += [lo, hi, *vals]
            values_text.append(
                (y, max([hi, *vals]), fmt_ns(st["median"]) + (" (noisy)" if row["ceiling"].get("noisy") else ""))
            )
        ax.set_yticks(ys)
        ax.set_yticklabels([r["label"] for r in rows], fontsize=7.5)
        ax.set_xscale("log")
        pos = [x for x in xs_all if x > 0]
        ax.set_xlim(min(pos) / 2, max(pos) * 12)
        ax.set_ylim(-0.7, len(rows) - 0.3)
        enough_log_ticks(ax, "x", lambda v, _: fmt_ns(v))
        ax.tick_params(axis="x", labelsize=7)
        ax.set_xlabel("latency per call / per load (log)")
        ax.grid(True, axis="x", which="major", alpha=0.3)
        groups = sorted({r["group"] for r in rows}, key=lambda g: LATENCY_GROUPS.index(g) if g in LATENCY_GROUPS else 9)
        handles = [Line2D([], [], ls="", marker="D", color=GROUP_COLORS.get(g, "#333"), mec="black", mew=0.5, label=g)
                   for g in groups]  # fmt: skip
        handles.append(Line2D([], [], color="#999999", lw=6, alpha=0.45, label="p20-p80"))
        ax.legend(handles=handles, fontsize=7, loc="lower right", framealpha=0.9)
        ax.set_title("latency per path: median (diamond), p20-p80 (bar), min-max, samples (dots)", fontsize=9)
    if chain:
        ax2 = axes[0][-1]
        for fused, style, name in (
            (False, "-o", "op by op (numpy: N ufunc calls)"),
            (True, "-s", "fused (one @njit call)"),
        ):
            sel = [p for p in chain if p["fused"] == fused]
            if sel:
                ax2.plot([p["n_ops"] for p in sel], [p["ns"] for p in sel], style, ms=4, label=name)
        ufunc = next((r["ceiling"] for r in rows if r["ceiling"]["name"] == "dispatch: ufunc"), None)
        if ufunc:  # what N separate dispatches cost at the measured per-call floor
            ns_ = sorted({p["n_ops"] for p in chain})
            ax2.plot(ns_, [n * ufunc["value"] for n in ns_], ":", color="#999999", label="N x dispatch: ufunc")
        ax2.set_xscale("log", base=2)
        ax2.set_yscale("log")
        ax2.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        enough_log_ticks(ax2, "y", lambda v, _: fmt_ns(v))
        ax2.set_xlabel("N tiny ops (8 elements each)")
        ax2.set_ylabel("time per chain")
        ax2.set_title("dispatch overhead grows with N op by op, not fused", fontsize=9)
        ax2.grid(True, which="major", alpha=0.3)
        ax2.legend(fontsize=7, loc="upper left")
    fig.suptitle(_title(result, "Latency"), fontsize=11)
    fig.tight_layout()
    fig.canvas.draw()
    if rows:
        ax = axes[0][0]
        placer = LabelPlacer(ax)
        for y, x, text in values_text:
            placer.place(text, [(x, y, dx, 0, "left", "center") for dx in (5, 14, 30)], required=True,
                         arrow_beyond_pt=1e9, fontsize=6.5, color="#222222")  # fmt: skip
        placer.flush_notes()
    return fig


def latency(result: dict, out: Path) -> list[Path]:
    """Latency chart, saved as PNG and SVG next to ``out`` (nothing when there is no latency path)."""
    fig = latency_figure(result)
    return _save(fig, out) if fig is not None else []


def all_plots(result: dict, stem: Path, ops: list[dict] | None = None) -> list[Path]:
    stem = Path(stem)
    files = roofline(result, stem.parent / (stem.name + ".roofline"), ops=ops)
    if result.get("sweeps", {}).get("bandwidth") or chase_points(result):
        files += bandwidth(result, stem.parent / (stem.name + ".bandwidth"))
    files += latency(result, stem.parent / (stem.name + ".latency"))
    return files
