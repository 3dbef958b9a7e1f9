"""The fleet page's charts (rooflab/fleet/page.py builds the page): each ceiling's distribution over
the nodes of one SKU (a dot per node at its % of the SKU's median, flagged nodes in red, the 5 %
rule's lines dashed) and a node's roofline drawn over its SKU baseline's (FP64 all-thread peak,
one roof per memory level: the node solid, the baseline dashed)."""

from __future__ import annotations


def distribution_figure(key: str, group: dict, rows: list[dict], rule_pct: float):
    """Each ceiling of one SKU: a dot per node at its % of the SKU's median, flagged in red; the
    rule's +-``rule_pct`` dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(group["ceilings"])
    fig, ax = plt.subplots(figsize=(9, 0.32 * len(names) + 1.4))
    for i, name in enumerate(names):
        for r in (r for r in rows if r["ceiling"] == name and r["value"] is not None):
            pct = (r["value"] / r["baseline"] - 1) * 100 if r["baseline"] else 0.0
            ax.plot(pct, i, "o", ms=6 if r["failed"] else 4, color="#c00" if r["failed"] else "#357", alpha=0.8)
            if r["failed"]:
                ax.annotate(r["node"], (pct, i), xytext=(4, 3), textcoords="offset points", fontsize=7, color="#c00")
    ax.axvline(0, color="#888", lw=0.8)
    for x in (-rule_pct, rule_pct):
        ax.axvline(x, color="#bbb", lw=0.8, ls="--")
    ax.set_yticks(range(len(names)), names, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("% of the SKU's median (latency: above is slower; bandwidth and FLOP/s: below is slower)")
    ax.set_title(f"{key}: {len(group['nodes'])} node(s), one dot each", fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    return fig


def _roofs(ceilings: dict) -> tuple[float | None, dict]:
    """(the highest FP64 all-thread FMA peak, {level: the all-thread bandwidth}) from name -> value."""
    peaks = {n: v for n, (k, v) in ceilings.items() if k == "compute" and n.startswith("FP64")}
    peak = max(peaks.values()) if peaks else None
    bw: dict = {}
    for n, (k, v) in ceilings.items():
        if k == "bandwidth":
            level = n.split(" ")[0]
            threads = int("".join(ch for ch in n.rsplit(",", 1)[-1] if ch.isdigit()) or 1)
            if level not in bw or threads > bw[level][0]:
                bw[level] = (threads, v)
    return peak, {lv: v for lv, (_, v) in bw.items()}


def roofline_figure(node: str, doc: dict, group: dict):
    """The node's roofline (solid) over its SKU baseline's (dashed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from ..roofline import attainable

    mine = _roofs({c["name"]: (c["kind"], c["value"]) for c in doc.get("ceilings", [])})
    base = _roofs({n: (c["kind"], c["median"]) for n, c in group["ceilings"].items()})
    x = np.logspace(-3, 3, 200)
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for (peak, bws), style, who in ((base, "--", "SKU median"), (mine, "-", node)):
        if not peak:
            continue
        for i, (level, bw) in enumerate(sorted(bws.items())):
            ax.plot(x, attainable(x, peak, bw), style, color=colors[i % len(colors)], lw=1.4,
                    label=f"{level} ({who})")  # fmt: skip
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("GFLOP/s (FP64, all threads)")
    ax.set_title(f"{node} over its SKU's baseline", fontsize=10)
    ax.legend(fontsize=7, ncol=2)
    ax.grid(which="both", alpha=0.25)
    return fig
