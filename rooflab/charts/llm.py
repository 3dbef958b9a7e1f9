"""Charts of `rooflab llm`: decode tokens/s against batch and against context, with the memory
roof (B / (bytes(B) / DRAM bandwidth)) and the compute roof (B / (FLOPs(B) / peak)) as lines,
the batch where decode turns compute-bound marked, and the tokens/s measured op by op as points;
the grid's measured against predicted cells; the turn to compute-bound (rooflab/models/llm/turn.py):
the runtime's decode tokens/s against batch, the knee where it flattens and the predicted turn.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from .style import save  # noqa: E402


def decode_figure(summary: dict):
    c = summary["curves"]
    decode = [r for r in summary.get("rows", []) if r["phase"] == "decode"]
    fig, axes = plt.subplots(1, 2, figsize=(13, 5))
    for ax, key, pts, xlabel in (
        (axes[0], "batch", [r for r in decode if r["context"] == c["context"]], "batch (sequences decoded together)"),
        (axes[1], "context", [r for r in decode if r["batch"] == c["batch"]], "context length (KV positions)"),
    ):
        curve = c["vs_" + key]
        x = [p[key] for p in curve]
        mem = [p["memory_tokens_per_s"] for p in curve]
        comp = [p["compute_tokens_per_s"] for p in curve]
        ax.plot(
            x,
            mem,
            "-",
            color="#377eb8",
            label=f"memory roof (DRAM read {c['dram_gbps']:.1f} GB/s: weights and KV streamed)",
        )
        ax.plot(x, comp, "-", color="#e41a1c", label=f"compute roof ({c['dtype']} {c['peak_gflops']:.0f} GFLOP/s)")
        ax.plot(x, [min(a, b) for a, b in zip(mem, comp)], ":", color="black", lw=2, label="attainable")
        if pts:  # rooflab's prediction: its measured ops summed (what `llm` reports as predicted)
            ax.plot([r[key] for r in pts], [r["tokens_per_s"] for r in pts], "o", color="#4daf4a", ms=8,
                    label="rooflab predicted (its measured ops summed)")  # fmt: skip
        check = summary.get("runtime_check") or {}
        rt = check.get("decode") or {}
        fixed_ok = rt.get("context") == c["context"] if key == "batch" else rt.get("batch") == c["batch"]
        if rt.get("measured_s") and key in rt and fixed_ok:  # the runtime's own decode step, beside it
            ax.plot([rt[key]], [rt["batch"] / rt["measured_s"]], "D", color="#984ea3", ms=8,
                    label=f"{check.get('check_name', 'onnxruntime')} measured")  # fmt: skip
        if key == "batch" and c["compute_bound_batch"]:
            b = c["compute_bound_batch"]
            ax.axvline(b, color="grey", ls="--")
            ax.annotate(f"compute-bound from batch {b}", (b, min(mem + comp)), xytext=(5, 5),
                        textcoords="offset points", fontsize=9)  # fmt: skip
        fixed = f"context {c['context']}" if key == "batch" else f"batch {c['batch']}"
        _tokens_axes(ax, xlabel, f"{summary['config']} decode vs {key} ({fixed})")
    fig.tight_layout()
    return fig


def _tokens_axes(ax, xlabel: str, title: str, legend: dict | None = None) -> None:
    """A decode tokens/s panel's axes: log2 x, log y, labels, title, grid and legend."""
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("decode tokens/s")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(**(legend or {"fontsize": 8, "loc": "best"}))


def decode_charts(summary: dict, stem: Path) -> list[Path]:
    return save(decode_figure(summary), Path(str(stem) + ".decode"))


def grid_figure(grid: dict):
    """Measured in the runtime against predicted op by op, one point per grid cell (log-log), the
    y = x line and a +-10 % band; prefill circles, decode squares, one colour per runtime."""
    cells = grid["cells"]
    fig, ax = plt.subplots(figsize=(6.4, 5.6))
    colours = {"torch": "tab:orange", "onnxruntime": "tab:blue"}
    for c in cells:
        ax.scatter(c["measured_s"] * 1e3, c["predicted_s"] * 1e3, marker="o" if c["phase"] == "prefill" else "s",
                   color=colours.get(c["runtime"], "tab:gray"), s=36, edgecolor="black", linewidth=0.4)  # fmt: skip
    vals = [v * 1e3 for c in cells for v in (c["measured_s"], c["predicted_s"])] or [1.0]
    lo, hi = min(vals) / 1.5, max(vals) * 1.5
    ax.plot([lo, hi], [lo, hi], color="black", linewidth=0.8, label="predicted = measured")
    ax.fill_between([lo, hi], [lo * 0.9, hi * 0.9], [lo * 1.1, hi * 1.1], color="gray", alpha=0.2, label="+-10 %")
    for r, colour in colours.items():
        if any(c["runtime"] == r for c in cells):
            by = grid["mape"].get(r, {})
            ax.scatter([], [], color=colour, label=f"{r}: MAPE " + ", ".join(f"{p} {v:.0f}%" for p, v in by.items()))
    ax.scatter([], [], marker="o", color="white", edgecolor="black", label="prefill")
    ax.scatter([], [], marker="s", color="white", edgecolor="black", label="decode")
    ax.set(xscale="log", yscale="log", xlim=(lo, hi), ylim=(lo, hi), xlabel="measured in the runtime [ms]",
           ylabel="predicted by rooflab, op by op [ms]", title="LLM runtime check over the grid")  # fmt: skip
    import math

    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    # plain milliseconds at 1, 2, 5 x 10^k (no 3 x 10^1 labels crowding each other)
    ticks = [m * 10.0**k for k in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1) for m in (1, 2, 5)]
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_locator(FixedLocator([t for t in ticks if lo <= t <= hi]))
        axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        axis.set_minor_formatter(NullFormatter())
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    return fig


def grid_charts(summary: dict, stem: Path) -> list[Path]:
    if not (summary.get("grid") or {}).get("cells"):
        return []
    return save(grid_figure(summary["grid"]), Path(str(stem) + ".grid"))


def turn_figure(turns: list[dict], config: str):
    """One panel per (runtime, threads): the runtime's decode tokens/s against batch (log-log), the two
    asymptotes whose meeting is the measured knee (the rise through the first point, the plateau),
    the knee; the prediction's curve and knee beside it, and the batch from which its weight GEMMs
    are compute-bound on their roofs."""
    fig, axes = plt.subplots(1, len(turns), figsize=(6.2 * len(turns), 4.8), squeeze=False)
    for ax, t in zip(axes[0], turns):
        pts, k = t["points"], t["knee"]
        x = [p["batch"] for p in pts]
        ax.plot(x, [p["tokens_per_s"] for p in pts], "o-", color="#984ea3", ms=7, label=f"{t['runtime']} measured")
        if k.get("batch") is not None:
            xs = [x[0], x[-1]]
            ax.plot(xs, [k["slope_tokens_per_s"] * b for b in xs], ":", color="#377eb8", lw=1,
                    label="rise through batch 1 (weights read once per step)")  # fmt: skip
            ax.axhline(k["plateau_tokens_per_s"], ls=":", color="#e41a1c", lw=1, label="plateau (largest measured)")
            flat = "" if k["flat"] else " (not flat yet: a lower bound)"
            ax.axvline(k["batch"], color="#984ea3", ls="-.", label=f"measured knee: batch {k['batch']:.1f}{flat}")
        pred, pk = t.get("predicted_points") or [], t.get("predicted_knee") or {}
        if pred:
            ax.plot([p["batch"] for p in pred], [p["tokens_per_s"] for p in pred], "s--", color="grey", ms=5,
                    label="predicted (what the roofs allow)")  # fmt: skip
        if pk.get("batch") is not None:
            ax.axvline(pk["batch"], color="grey", ls="--", label=f"predicted knee: batch {pk['batch']:.1f}")
        if t.get("predicted_gemm_turn"):
            ax.plot([], [], " ", label=f"GEMMs compute-bound on their roofs from batch {t['predicted_gemm_turn']}")
        from matplotlib.ticker import FixedLocator, FuncFormatter

        title = f"{config} decode, {t['runtime']}, {t['threads']} thread(s), context {t['context']}"
        _tokens_axes(ax, "batch (sequences decoded together)", title, {"fontsize": 7, "loc": "upper left"})
        ax.xaxis.set_major_locator(FixedLocator(x))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))  # 1, 2, 4 ... not 2^0, 2^1
        for fmt in (ax.yaxis.set_major_formatter, ax.yaxis.set_minor_formatter):
            fmt(FuncFormatter(lambda v, _: f"{v:g}"))
    fig.tight_layout()
    return fig


def plotted_turns(grid: dict | None) -> list[dict]:
    """The grid's turns that have measured points (what turn_figure draws)."""
    return [t for t in (grid or {}).get("turns", []) if t.get("points")]


def turn_charts(summary: dict, stem: Path) -> list[Path]:
    turns = plotted_turns(summary.get("grid"))
    if not turns:
        return []
    return save(turn_figure(turns, summary.get("config", "")), Path(str(stem) + ".turn"))
