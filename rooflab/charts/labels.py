"""Labels that never overlap: every label is placed greedily at the first of its candidate spots
whose box is inside the axes and clear of the labels, markers and legend already there; a required
label with no free spot goes to a note under the panel (named, never dropped), an optional one is
left out. Log axes get enough labelled ticks to read values (1-2-5 per decade when the axis spans
few decades). Cost: one text-extent query per candidate tried (a few hundred per panel, ~ms each).
"""

from __future__ import annotations

import math

import matplotlib
import matplotlib.ticker
import numpy as np
from matplotlib.text import Text
from matplotlib.transforms import Bbox

LABEL_GID = "rooflab-label"  # every placed label carries it (tests find them by it)
LABEL_PAD_PX = 2.0


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


def geom(lo: float, hi: float, n: int) -> list[float]:
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
