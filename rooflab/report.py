"""Self-contained HTML characterization pages (no CDN, no external file: opens offline).

One result file gives its machine description, the roofline, the bandwidth staircase (with the
latency staircase under it when the result has pointer-chase records), the latency chart and
table, every ceiling with its spread and the model ops placed on it. Several result files add a
comparison view: their roofs overlaid on one chart and their ceilings side by side with ratios.
Figures are inline PNGs (base64); a small inline script marks the page as rendered once every
image has decoded, which the browser test reads back.
"""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path

from .memory import fmt_bytes
from .roofline import ceiling_notes

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:1200px;color:#222;padding:0 1rem}
h1{font-size:1.6rem}h2{font-size:1.25rem;margin-top:2.2rem;border-bottom:1px solid #ddd;padding-bottom:.3rem}
table{border-collapse:collapse;margin:.6rem 0;font-size:.88rem}td,th{border:1px solid #ddd;padding:.25rem .5rem;text-align:left}
th{background:#f4f4f4}td.num{text-align:right;font-variant-numeric:tabular-nums}img{max-width:100%;border:1px solid #eee}
.noisy{color:#b00}.worse{color:#b00;font-weight:bold}.better{color:#060}.muted{color:#777;font-size:.85rem}
"""

SCRIPT = """
window.addEventListener('load', function () {
  var imgs = Array.prototype.slice.call(document.images);
  var ok = imgs.filter(function (i) { return i.complete && i.naturalWidth > 0; }).length;
  var tables = document.querySelectorAll('table').length;
  var rows = document.querySelectorAll('tbody tr').length;
  document.title = 'rooflab-report rendered images=' + ok + '/' + imgs.length + ' tables=' + tables + ' rows=' + rows;
  document.body.setAttribute('data-rendered', ok === imgs.length ? 'yes' : 'no');
});
"""


def _esc(x) -> str:
    return html.escape(str(x))


def _fig_to_img(fig, alt: str) -> str:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    data = base64.b64encode(buf.getvalue()).decode()
    return f'<img alt="{_esc(alt)}" src="data:image/png;base64,{data}">'


def _png_of(plot_fn, *args, **kw) -> str:
    """Render one of rooflab.plots' charts into an inline <img>."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        files = plot_fn(*args, Path(d) / "fig", **kw)
        png = next(f for f in files if f.suffix == ".png")
        data = base64.b64encode(png.read_bytes()).decode()
    return f'<img alt="{_esc(plot_fn.__name__)} chart" src="data:image/png;base64,{data}">'


def _table(headers, rows) -> str:
    th = "".join(f"<th>{_esc(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(c if c.startswith("<td") else f"<td>{_esc(c)}</td>" for c in r) + "</tr>" for r in rows
    )
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def _num(v, fmt="{:.4g}", cls="num") -> str:
    return f'<td class="{cls}">{_esc(fmt.format(v)) if v is not None else "-"}</td>'


def _machine_section(d: dict) -> str:
    m = d["machine"]
    cpu = m.get("cpu", {})
    rows = [
        ["machine id", m["id"]],
        ["CPU", cpu.get("model", "?")],
        ["cores", f"{cpu.get('physical_cores')} physical, {cpu.get('logical_cpus')} logical"],
        [
            "caches (OS)",
            ", ".join(f"{c['name']} {fmt_bytes(c['size_bytes'])} x{c['instances']}" for c in cpu.get("caches", [])),
        ],
        ["clock", f"nominal {cpu.get('nominal_ghz') or 0:.2f} GHz, measured {cpu.get('measured_ghz') or 0:.2f} GHz"],
        ["memory", fmt_bytes(m.get("memory_bytes") or 0)],
        ["OS", m.get("os", "")],
        ["software", ", ".join(f"{k} {v}" for k, v in m.get("software", {}).items() if isinstance(v, str))],
        ["git commit", (m.get("git") or {}).get("commit") or "-"],
        [
            "run",
            f"{d.get('suite')} on {d.get('device')}, {d.get('started')} to {d.get('finished')} ({d.get('status')})",
        ],
    ]
    if m.get("gpu"):
        g = m["gpu"]
        rows.insert(
            2,
            ["GPU", f"{g['name']} (sm_{g['compute_capability']}, {g['sm_count']} SMs, L2 {fmt_bytes(g['l2_bytes'])})"],
        )
    theo = (m.get("gpu") or cpu).get("theoretical", {}).get("peaks", [])
    for p in theo:
        rows.append([f"theoretical {p['dtype']} ({p['threads'] or 'device'})", p["formula"]])
    return "<h2>Machine</h2>" + _table(["", ""], rows)


def _ceilings_section(d: dict) -> str:
    rows = []
    for c in d.get("ceilings", []):
        s = c["stats"]
        note = [f'<span class="noisy">{_esc(n)}</span>' if n == "noisy" else _esc(n) for n in ceiling_notes(c)]
        rows.append(
            [
                c["name"],
                c["kind"],
                _num(c["value"]),
                _num(s.get("p20")),
                _num(s.get("p80")),
                c["unit"],
                f"<td>{' · '.join(note)}</td>",
            ]
        )
    return "<h2>Ceilings</h2>" + _table(["ceiling", "kind", "median", "p20", "p80", "unit", "notes"], rows)


def _latency_section(d: dict) -> str:
    from . import plots

    rows = [
        [
            c["name"],
            _num(c["value"], "{:.1f}"),
            _num(c["stats"].get("p20"), "{:.1f}"),
            _num(c["stats"].get("p80"), "{:.1f}"),
            _num(c.get("cycles"), "{:.1f}"),
        ]
        for c in d.get("ceilings", [])
        if c["kind"] == "latency"
    ]
    if not rows:
        return ""
    return (
        "<h2>Latency</h2><p class='muted'>Dispatch and launch: fixed cost per call; an op within 2x of it is "
        "latency-bound. Memory: ns per dependent load (pointer chase), cycles at the measured clock.</p>"
        + _png_of(plots.latency, d)
        + _table(["path", "median ns", "p20", "p80", "cycles"], rows)
    )


def _ops_section(d: dict) -> str:
    ops = d.get("ops_placed") or []
    if not ops:
        return ""
    out = [
        "<h2>Model operations on the roofline</h2>",
        f"<p class='muted'>{_esc(d.get('classification_rule', ''))}</p>",
    ]
    for s in d.get("model_summaries", []):
        out.append(f"<p>{_esc(s.get('line', ''))}</p>")
    heavy = sorted(ops, key=lambda o: -o.get("total_time_s", 0))[:60]
    rows = [
        [
            o["name"],
            o["kind"],
            str(o["count"]),
            o["impl"],
            _num(o["intensity"], "{:.3g}"),
            _num(o["seconds"] * 1e6, "{:.1f}"),
            _num(o["achieved_gflops"], "{:.3g}"),
            _num(o.get("pct_of_attainable"), "{:.0f}%"),
            o["class"] + (" (below roof)" if o.get("below_roof") else ""),
        ]
        for o in heavy
    ]
    out.append(
        _table(["op", "kind", "count", "implementation", "FLOP/B", "time us", "GFLOP/s", "% attainable", "class"], rows)
    )
    return "".join(out)


def _sweep_section(d: dict) -> str:
    pts = d.get("sweeps", {}).get("intensity", [])
    if not pts:
        return ""
    rows = [
        [
            f"{p.get('flops_per_byte', 0):g}",
            _num(p["gflops"]["median"]),
            _num(p["gbps"]["median"]) if p.get("gbps") else "<td>-</td>",
            str(p.get("threads")),
        ]
        for p in pts
        if p.get("gflops")
    ]
    return "<h2>Intensity sweep</h2>" + _table(["FLOP/byte", "GFLOP/s", "GB/s", "threads"], rows)


def _compare_section(results: list[dict]) -> str:
    import matplotlib

    from .plots import LEVEL_COLORS
    from .roofline import compare_ceilings

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from .roofline import Roofline

    fig, ax = plt.subplots(figsize=(8, 5.5))
    xs = np.logspace(-4, 10, 200, base=2)
    styles = ["-", "--", ":", "-."]
    for i, d in enumerate(results):
        rf = Roofline(d)
        t = max(rf.thread_counts() or [0])
        peak = max((c["value"] for c in rf.ceilings if c["kind"] == "compute" and c["threads"] == t), default=None)
        label = f"{d['machine']['id']} ({d.get('device')}, {(d.get('started') or '')[:10]})"
        for c in rf.memory_roofs(t):
            y = xs * c["value"]
            if peak:
                y = np.minimum(y, peak)
            ax.plot(
                xs,
                y,
                styles[i % 4],
                color=LEVEL_COLORS.get(c["level"], "#444"),
                lw=1.4,
                label=f"{label}: {c['level']} {c['value']:.3g} GB/s",
            )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity [FLOP/byte]")
    ax.set_ylabel("GFLOP/s")
    ax.set_title("Measured roofs, overlaid (all cores / whole device)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=6.5, loc="lower right")
    img = _fig_to_img(fig, "comparison roofline")
    rows = []
    for r in compare_ceilings(results):
        cells = [r["name"], r["unit"], _num(r["values"][0])]
        for v, ratio in zip(r["values"][1:], r["ratios"]):
            if v is None:
                cells += ["-", "-"]
                continue
            gain = (1 / ratio if ratio else 0) if r["lower_is_better"] else ratio
            cls = "num better" if gain > 1.02 else "num worse" if gain < 0.98 else "num"
            cells += [_num(v), _num(ratio, "{:.3f}", cls)]
        rows.append(cells)
    heads = ["ceiling", "unit", "A"] + sum(([chr(66 + i), f"{chr(66 + i)}/A"] for i in range(len(results) - 1)), [])
    legend = "".join(
        f"<li>{chr(65 + i)}: {_esc(d['machine']['id'])}, {_esc(d.get('device'))}, {_esc(d.get('started'))}</li>"
        for i, d in enumerate(results)
    )
    return f"<h2>Comparison</h2><ul>{legend}</ul>{img}" + _table(heads, rows)


def build(results: list[dict]) -> str:
    from . import plots

    parts = [
        f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>rooflab report</title>"
        f"<style>{CSS}</style><script>{SCRIPT}</script></head><body>",
        "<h1>rooflab characterization</h1>",
        "<p class='muted'>Measured with rooflab: every figure is a median of verified samples; spread is p20-p80.</p>",
    ]
    if len(results) > 1:
        parts.append(_compare_section(results))
    for d in results:
        parts.append(
            f"<h2 style='border:0;font-size:1.45rem'>{_esc(d['machine']['id'])} — {_esc(d.get('suite'))} on "
            f"{_esc(d.get('device'))}</h2>"
        )
        parts.append(_machine_section(d))
        if d.get("ceilings"):
            parts.append("<h2>Roofline</h2>" + _png_of(plots.roofline, d, ops=d.get("ops_placed")))
        if d.get("sweeps", {}).get("bandwidth") or plots.chase_points(d):
            parts.append("<h2>Bandwidth and latency staircase</h2>" + _png_of(plots.bandwidth, d))
        parts += [_ceilings_section(d), _latency_section(d), _sweep_section(d), _ops_section(d)]
        from .models.llm_report import llm_section

        parts.append(llm_section(d))
    parts.append("</body></html>")
    return "\n".join(parts)
