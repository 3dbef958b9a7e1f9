"""Charts from result records only (read by field name, never from stdout).

  roofline   log-log GFLOP/s against FLOP/byte: measured memory roofs per level (slanted), measured
             compute peaks per dtype (flat), theoretical peaks dashed, intensity-sweep points, and
             optionally placed model ops (colour = class, size = time share)
  bandwidth  the staircase: GB/s against working-set size per kernel, with the OS cache sizes,
             each level's window and where its plateau really ends
PNG (150 dpi) and SVG side by side, so the figures drop into a paper or a README.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from .memory import fmt_bytes  # noqa: E402
from .roofline import Roofline  # noqa: E402

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
CLASS_COLORS = {"compute-bound": "#e41a1c", "memory-bound": "#377eb8", "latency-bound": "#999999"}
KERNEL_STYLE = {"read": "-o", "copy": "-s", "triad": "-^", "update": "-D"}


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


def roofline(
    result: dict, out: Path, threads: list[int] | None = None, ops: list[dict] | None = None, label_top: int = 6
) -> list[Path]:
    """Roofline chart; one panel per thread count (CPU) or one panel (GPU)."""
    rf = Roofline(result)
    counts = threads or rf.thread_counts() or [1]
    fig, axes = plt.subplots(1, len(counts), figsize=(7.5 * len(counts), 5.6), squeeze=False)
    xmin, xmax = 1 / 16, 1024
    for ax, t in zip(axes[0], counts):
        _panel(ax, result, rf, t, xmin, xmax, ops if t == max(counts) else None, label_top)
    fig.suptitle(_title(result, "Empirical roofline"), fontsize=11)
    fig.tight_layout()
    return _save(fig, out)


def _panel(ax, result, rf: Roofline, threads, xmin, xmax, ops, label_top):
    peaks = [c for c in rf.ceilings if c["kind"] == "compute" and c["threads"] == threads]
    roofs = rf.memory_roofs(threads)
    top = max((c["value"] for c in peaks), default=None)
    xs = np.logspace(np.log10(xmin), np.log10(xmax), 256)
    ymin = None
    for c in roofs:
        y = xs * c["value"]
        if top:
            y = np.minimum(y, top)
        color = LEVEL_COLORS.get(c["level"], "#444444")
        ax.plot(xs, y, color=color, lw=1.6)
        ymin = min(ymin or y[0], y[0])
        xl = xmin * 1.6
        ax.text(
            xl,
            xl * c["value"] * 1.15,
            f"{c['level']} {c['value']:.3g} GB/s ({c['kernel']})",
            color=color,
            fontsize=7.5,
            va="bottom",
            bbox={"fc": "white", "ec": "none", "alpha": 0.7, "pad": 0.5},
        )
    fastest = max((c["value"] for c in roofs), default=None)
    label_y = None
    for c in sorted(peaks, key=lambda c: -c["value"]):
        color = DTYPE_COLORS.get(c["dtype"], "#222222")
        x0 = c["value"] / fastest if fastest else xmin
        ax.plot([x0, xmax], [c["value"]] * 2, color=color, lw=2)
        y = c["value"] * 0.93
        if label_y is not None and y > label_y / 1.4:  # peaks close together: stack their labels
            y = label_y / 1.4
        label_y = y
        ax.text(
            xmax / 1.05,
            y,
            f"{c['name'].split(',')[0]} {c['value']:.4g} GFLOP/s"
            + (f" ({c['fraction_of_theoretical']:.0%} of theor.)" if c.get("fraction_of_theoretical") else ""),
            color=color,
            fontsize=8,
            ha="right",
            va="top",
        )
    theo = [p for p in _theoretical(result) if p["threads"] == threads]
    for p in theo:
        color = DTYPE_COLORS.get(p["dtype"], "#222222")
        ax.axhline(p["gflops"], color=color, ls="--", lw=0.9, alpha=0.7)
        ax.text(
            xmin * 1.05,
            p["gflops"] * 1.04,
            f"theoretical {p['dtype']}: {p['formula']}",
            color=color,
            fontsize=6.5,
            alpha=0.85,
        )
    pts = [
        p
        for p in result.get("sweeps", {}).get("intensity", [])
        if p.get("threads") == threads and p.get("gflops") and p.get("status", "ok") == "ok"
    ]
    if pts:
        ax.scatter(
            [p["flops_per_byte"] for p in pts],
            [p["gflops"]["median"] for p in pts],
            marker="x",
            color="black",
            s=28,
            zorder=5,
            label="intensity sweep (fp64, DRAM-sized)",
        )
        for p in pts:
            lo, hi = p["gflops"]["p20"], p["gflops"]["p80"]
            ax.plot([p["flops_per_byte"]] * 2, [lo, hi], color="black", lw=0.8)
    if ops:
        _ops(ax, ops, label_top)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlim(xmin, xmax)
    lows = [ymin or 1.0] + [o["achieved_gflops"] for o in ops or [] if o.get("achieved_gflops")]
    ax.set_ylim(max(min(lows) / 3, 1e-3), (max([top or 1] + [p["gflops"] for p in theo]) * 2.5))
    ax.set_xlabel("arithmetic intensity [FLOP/byte]")
    ax.set_ylabel("performance [GFLOP/s]")
    _plain_y(ax)
    ax.set_title(
        f"{threads} thread{'s' if threads > 1 else ''}" if result.get("device") != "cuda" else "GPU", fontsize=10
    )
    ax.grid(True, which="major", alpha=0.3)
    if pts or ops:
        ax.legend(loc="lower right", fontsize=7.5)


def _plain_y(ax):
    fmt = matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}")
    ax.yaxis.set_major_formatter(fmt)
    ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())


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


def _ops(ax, ops: list[dict], label_top: int):
    total = sum(o.get("total_time_s", 0) for o in ops) or 1.0
    for cls, color in CLASS_COLORS.items():
        sel = [o for o in ops if o.get("class") == cls and o.get("achieved_gflops")]
        if not sel:
            continue
        ax.scatter(
            [o["intensity"] for o in sel],
            [o["achieved_gflops"] for o in sel],
            s=[20 + 400 * o.get("total_time_s", 0) / total for o in sel],
            color=color,
            alpha=0.65,
            edgecolors="black",
            linewidths=0.4,
            label=cls,
            zorder=6,
        )
    heavy = sorted((o for o in ops if o.get("achieved_gflops")), key=lambda o: -o.get("total_time_s", 0))
    for o in heavy[:label_top]:
        ax.annotate(
            o["name"],
            (o["intensity"], o["achieved_gflops"]),
            fontsize=6.5,
            xytext=(4, 4),
            textcoords="offset points",
            zorder=7,
        )


def bandwidth(result: dict, out: Path) -> list[Path]:
    """Staircase chart, one panel per thread count."""
    pts = [p for p in result.get("sweeps", {}).get("bandwidth", []) if p.get("gbps") and p.get("status", "ok") == "ok"]
    counts = sorted({p["threads"] for p in pts}) or [1]
    fig, axes = plt.subplots(1, len(counts), figsize=(7.5 * len(counts), 4.8), squeeze=False)
    ceilings = result.get("ceilings", [])
    if result.get("device") == "cuda":  # the GPU's L2 is the level that matters on a device sweep
        gpu = result["machine"].get("gpu", {})
        caches = (
            [
                {
                    "name": "L2",
                    "size_bytes": gpu.get("l2_bytes") or 0,
                    "private": False,
                    "instances": 1,
                    "shared_by_cpus": 1,
                }
            ]
            if gpu.get("l2_bytes")
            else []
        )
    else:
        caches = result["machine"].get("cpu", {}).get("caches", [])
    from .roofline import capacity

    for ax, t in zip(axes[0], counts):
        for kernel in sorted({p["kernel"] for p in pts}):
            sel = sorted(
                (p for p in pts if p["threads"] == t and p["kernel"] == kernel), key=lambda p: p["working_set_bytes"]
            )
            xs = [p["working_set_bytes"] for p in sel]
            ys = [p["gbps"]["median"] for p in sel]
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
        for c in caches:
            cap = capacity(c, t)
            ax.axvline(cap, color="#888888", ls=":", lw=1)
            ax.text(
                cap,
                0.02,
                f" {c['name']} {fmt_bytes(cap)} (OS)",
                rotation=90,
                fontsize=7,
                color="#555555",
                va="bottom",
                ha="right",
                transform=ax.get_xaxis_transform(),
            )
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
                ax.plot(c["plateau_end_bytes"], y, marker="v", color="red", ms=6)
                ax.annotate(
                    f"{c['level']} plateau ends {fmt_bytes(c['plateau_end_bytes'])}",
                    (c["plateau_end_bytes"], y),
                    fontsize=6.5,
                    color="red",
                    xytext=(3, 6),
                    textcoords="offset points",
                )
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: fmt_bytes(v) if v >= 1 else ""))
        ax.tick_params(axis="x", labelrotation=45, labelsize=7.5)
        ax.set_xlabel("working set")
        _plain_y(ax)
        ax.set_ylabel("bandwidth [GB/s]")
        who = "whole GPU" if result.get("device") == "cuda" else f"{t} thread{'s' if t > 1 else ''}"
        ax.set_title(f"{who} (median, p20-p80 band; red ring = noisy)", fontsize=9)
        ax.grid(True, which="both", alpha=0.25)
        ax.legend(fontsize=8)
    fig.suptitle(_title(result, "Bandwidth by working set"), fontsize=11)
    fig.tight_layout()
    return _save(fig, out)


def all_plots(result: dict, stem: Path, ops: list[dict] | None = None) -> list[Path]:
    stem = Path(stem)
    files = roofline(result, stem.parent / (stem.name + ".roofline"), ops=ops)
    if result.get("sweeps", {}).get("bandwidth"):
        files += bandwidth(result, stem.parent / (stem.name + ".bandwidth"))
    return files
