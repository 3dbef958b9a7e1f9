"""The latency chart: one row per latency path (dispatch empty / ufunc / fork-join, memory L1 ..
DRAM, launch enqueue / round trip / graph node, small host<->device copies), median, p20-p80 bar,
min-max whisker and the samples (or the per-size points of a memory level) on a log ns axis; with
tiny-chain records a second panel: ns per chain of N tiny ops, op by op versus fused, against N.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.ticker
import numpy as np
from matplotlib.lines import Line2D

from ..roofline import Roofline
from .labels import LabelPlacer, enough_log_ticks
from .staircase import chase_points
from .style import fmt_ns, plt, save, title

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
    if c.get("threads", 0) > 1 and " thread" not in label:  # unless its name says its threads
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
    fig.suptitle(title(result, "Latency"), fontsize=11)
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
    return save(fig, out) if fig is not None else []
