"""Self-contained HTML characterization pages (no CDN, no external file: opens offline).

One result file gives its machine description, the roofline, the bandwidth staircase (with the
latency staircase under it when the result has pointer-chase records), the latency chart and
table, every ceiling with its spread and the model ops placed on it. A placement (`place`, `place
--runtime`, `run --suite models`) shows its ops on the roofline of its machine, a kernel family's
run (gemm, conv ...) its table and chart. Several ceilings results add a comparison view: their
roofs overlaid on one chart and their ceilings side by side with ratios (colours at the 5 %
threshold of `rooflab compare`, with a key).
Figures are inline PNGs (base64); a small inline script marks the page as rendered once every
image has decoded, which the browser test reads back.
"""

from __future__ import annotations

import base64
import html
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


def _fig_to_img(fig, alt: str, dpi: int = 110) -> str:
    from .charts.style import inline_png

    return inline_png(fig, alt, dpi=dpi)


def _chart_img(fig, name: str) -> str:
    """A chart's figure straight into an inline <img> at the saved charts' 150 dpi (no SVG drawn
    beside it to be thrown away: that was ~40 % of a report's time); "" for no figure."""
    return "" if fig is None else _fig_to_img(fig, f"{name} chart", dpi=150)


def _pngs_of(plot_fn, *args, **kw) -> str:
    """Render one of rooflab.charts' (every PNG it writes) into inline <img>s."""
    import tempfile

    out = []
    with tempfile.TemporaryDirectory() as d:
        for png in (f for f in plot_fn(*args, Path(d) / "fig", **kw) if f.suffix == ".png"):
            data = base64.b64encode(png.read_bytes()).decode()
            out.append(f'<img alt="{_esc(png.stem)} chart" src="data:image/png;base64,{data}">')
    return "".join(out)


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
        ["clock", _clock_text(d)],
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
    theo = (m.get("gpu") or cpu).get("theoretical", {}).get("peaks", []) if m.get("gpu") else _cpu_theoretical(d)
    for p in theo:
        rows.append([f"theoretical {p['dtype']} ({p['threads'] or 'device'})", p["formula"]])
    return "<h2>Machine</h2>" + _table(["", ""], rows)


def _clock_text(d: dict) -> str:
    from .results import run_clock

    cpu = d["machine"].get("cpu", {})
    ghz, how = run_clock(d)
    measured = f"measured {ghz:.3f} GHz ({how})" if ghz else f"measured: none ({how})"
    return f"nominal {cpu.get('nominal_ghz') or 0:.2f} GHz, {measured}"


def _cpu_theoretical(d: dict) -> list[dict]:
    """The CPU's theoretical peaks at the run's one clock: as stored when the run stored them at
    its measured clock, else recomputed at the clock its records carry (a family run)."""
    from .results import run_clock

    cpu = d["machine"].get("cpu", {})
    theo = cpu.get("theoretical", {})
    ghz, _ = run_clock(d)
    if not ghz or "measured" in str(theo.get("clock_source", "")):
        return theo.get("peaks", [])
    try:
        from .cpu.machine import peaks_for

        counts = {p["threads"] for p in theo.get("peaks", [])} or None
        return peaks_for(cpu, ghz, counts)["peaks"]
    except (KeyError, TypeError, ValueError):  # a file from another version: what it stored
        return theo.get("peaks", [])


def kind_of(d: dict) -> str:
    """What a result is to the report: ``ceilings`` (a machine measured), ``placement`` (ops placed
    on ceilings it carries: `place`, `place --runtime`, `run --suite models`) or ``family`` (a kernel
    family's rungs: gemm, conv, elementwise ...)."""
    if d.get("ceilings_source") or d.get("suite") in ("place", "runtime", "models"):
        return "placement"
    if d.get("suite") == "ceilings" or d.get("ceilings"):  # measured here (the latency suite derives some too)
        return "ceilings"
    return "family"


def _notes_section(d: dict) -> str:
    notes = [n for n in d.get("notes") or [] if n]
    if d.get("died"):
        notes.insert(0, f"this run died ({d['died']}): what it finished is shown")
    if not notes:
        return ""
    return "<h2>Notes</h2><ul>" + "".join(f"<li>{_esc(n)}</li>" for n in notes) + "</ul>"


def _family_section(d: dict, chart: bool = True, ceilings: dict | None = None) -> str:
    """A kernel family's run: its table (every rung against the library on the same case and
    thread count) and its charts, the rungs on ``ceilings`` (its machine's) when given."""
    from . import family_report
    from .charts import family

    recs = d.get("records", [])
    if not recs:
        return ""
    family_report.add_pct_of_library(recs)
    peaks = family_report.has_unit_peaks(recs)
    rows = [
        [variant, label, str(threads), _num(value), unit, _num(pct, "{:.0f}%")]
        + ([_num(pct_peak, "{:.0f}%")] if peaks else [])
        + [status]
        for variant, label, threads, value, unit, pct, pct_peak, status in family_report.table(recs)
    ]
    head = ["variant", "case", "threads", "figure", "unit", "% of library"]
    out = "<h2>Kernel family</h2>" + _table(head + (["% of unit peak"] if peaks else []) + ["status"], rows)
    if chart:
        on = (
            f"the rungs are drawn on the ceilings of {_esc(ceilings['machine']['id'])} measured {_esc(ceilings.get('started'))}"
            if ceilings
            else "no ceilings result of this machine beside this file: the rungs are drawn by intensity alone"
        )
        out += f"<p class='muted'>{on}</p>"
    try:
        out += _pngs_of(family.chart, d, ceilings=ceilings) if chart else ""
    except StopIteration:  # nothing to draw (no ok record)
        pass
    return out


def _ceilings_section(d: dict) -> str:
    rows = []
    for c in d.get("ceilings", []):
        s = c["stats"]
        note = [
            f'<span class="noisy">{_esc(n)}</span>' if n == "noisy" or n.startswith("cannot be true") else _esc(n)
            for n in ceiling_notes(c)
        ]
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
    from .charts import latency

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
        + _chart_img(latency.latency_figure(d), "latency")
        + _table(["path", "median ns", "p20", "p80", "cycles"], rows)
    )


def _ops_section(d: dict) -> str:
    from .models.place import fmt_intensity

    ops = d.get("ops_placed") or []
    if not ops:
        return ""
    src = f" (ceilings: {_esc(Path(d['ceilings_source']).name)})" if d.get("ceilings_source") else ""
    out = [
        f"<h2>Model operations on the roofline of {_esc(d['machine']['id'])}{src}</h2>",
        f"<p class='muted'>{_esc(d.get('classification_rule', ''))}</p>",
    ]
    for s in d.get("model_summaries", []):
        out.append(f"<p>{_esc(s.get('line', ''))}</p>")
    heavy = sorted(ops, key=lambda o: -o.get("total_time_s", 0))[:60]
    several = len({o.get("model") for o in ops}) > 1  # a models suite: which network each op is of
    phased = any(o.get("phase") for o in ops)  # an LLM's ops: which phase each is of
    rows = [  # `place` ops and a runtime's nodes (node, op_type, runtime_s) alike
        ([str(o.get("model") or "-")] if several else [])
        + ([str(o.get("phase") or "-")] if phased else [])
        + [
            str(o.get("name") or o.get("node") or "?"),
            str(o.get("kind") or o.get("op_type") or "-"),
            str(o.get("count", 1)),
            str(o.get("impl") or o.get("model") or "-"),
            f'<td class="num">{fmt_intensity(o.get("intensity"))}</td>',
            _num(_seconds(o) * 1e6 if _seconds(o) is not None else None, "{:.1f}"),
            _num(o.get("achieved_gflops"), "{:.3g}"),
            _num(o.get("pct_of_attainable"), "{:.0f}%"),
            str(o.get("class", "-"))
            + (" (below roof)" if o.get("below_roof") else "")
            + (" (ABOVE its roof: roof or work count wrong)" if o.get("above_roof") else ""),
        ]
        for o in heavy
    ]
    out.append(
        _table(
            (["model"] if several else [])
            + (["phase"] if phased else [])
            + ["op", "kind", "count", "implementation", "FLOP/B", "time us", "GFLOP/s", "% attainable", "class"],
            rows,
        )
    )
    return "".join(out)


def _seconds(o: dict) -> float | None:
    for k in ("seconds", "runtime_s", "total_time_s"):
        if o.get(k) is not None:
            return float(o[k])
    return None


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


THRESHOLD = 0.05  # the same as `rooflab compare`'s default --threshold


def _compare_section(results: list[dict]) -> str:
    import matplotlib

    from .charts.style import LEVEL_COLORS
    from .roofline import compare_ceilings

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from .roofline import Roofline

    fig, ax = plt.subplots(figsize=(8, 5.5))
    xs = np.logspace(-4, 10, 200, base=2)
    styles = ["-", "--", ":", "-."]
    seen = set()
    for i, d in enumerate(results):
        rf = Roofline(d)
        t = max(rf.thread_counts() or [0])
        peak = max((c["value"] for c in rf.ceilings if c["kind"] == "compute" and c["threads"] == t), default=None)
        label = f"{chr(65 + i)}"
        for c in rf.memory_roofs(t):
            if (c["level"], round(c["value"], 6), peak) in seen:  # the same roof twice: one legend entry
                continue
            seen.add((c["level"], round(c["value"], 6), peak))
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
            cls = "num better" if gain > 1 + THRESHOLD else "num worse" if gain < 1 - THRESHOLD else "num"
            cells += [_num(v), _num(ratio, "{:.3f}", cls)]
        rows.append(cells)
    heads = ["ceiling", "unit", "A"] + sum(([chr(66 + i), f"{chr(66 + i)}/A"] for i in range(len(results) - 1)), [])
    legend = "".join(
        f"<li>{chr(65 + i)}: {_esc(d['machine']['id'])}, {_esc(d.get('device'))}, {_esc(d.get('started'))}</li>"
        for i, d in enumerate(results)
    )
    key = (
        f"<p class='muted'>Ratios are B/A. Colour key: <span class='better'>green</span> = better by more than "
        f"{THRESHOLD:.0%}, <span class='worse'>red</span> = worse by more than {THRESHOLD:.0%}, black = within "
        f"{THRESHOLD:.0%} (the `rooflab compare` threshold); for latencies lower is better.</p>"
    )
    return f"<h2>Comparison</h2><ul>{legend}</ul>{img}{key}" + _table(heads, rows)


def build(results: list[dict], ceilings: list[dict | None] | None = None, up: str | None = None) -> str:
    """The report of ``results``: each as its kind reads (ceilings, ops placed, a kernel family);
    ``ceilings[i]``: the ceilings of results[i]'s machine a family's rungs are drawn on (the
    newest beside it: ceilings_file.ceilings_beside); ``up``: a link back (the published site)."""
    from .charts import roofline, staircase

    ceilings = ceilings or [None] * len(results)
    parts = [
        f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>rooflab report</title>"
        f"<style>{CSS}</style><script>{SCRIPT}</script></head><body>",
        f"<p class='muted'><a href='{_esc(up)}'>&larr; index</a></p>" if up else "",
        "<h1>rooflab characterization</h1>",
        "<p class='muted'>Measured with rooflab: every figure is a median of verified samples; spread is p20-p80.</p>",
    ]
    measured = [d for d in results if kind_of(d) == "ceilings"]  # a placement carries ceilings it did not measure
    if len(measured) > 1:
        parts.append(_compare_section(measured))
    for d, ceil in zip(results, ceilings):
        kind = kind_of(d)
        what = {"ceilings": "ceilings", "placement": "ops placed", "family": "kernel family"}[kind]
        parts.append(
            f"<h2 style='border:0;font-size:1.45rem'>{_esc(d['machine']['id'])} — {_esc(d.get('suite'))} on "
            f"{_esc(d.get('device'))} ({what})</h2>"
        )
        parts.append(_machine_section(d))
        if kind == "family":
            parts += [_family_section(d, ceilings=ceil), _notes_section(d)]
            continue
        if d.get("ceilings"):
            parts.append(
                "<h2>Roofline</h2>" + _chart_img(roofline.roofline_figure(d, ops=d.get("ops_placed")), "roofline")
            )
        if kind == "placement":  # ops on its machine: the ceilings table is the ceilings result's
            from .models.llm.report import llm_section  # an `rooflab llm` result: its per-config section

            parts += [_ops_section(d), llm_section(d), _notes_section(d)]
            continue
        if d.get("sweeps", {}).get("bandwidth") or staircase.chase_points(d):
            parts.append(
                "<h2>Bandwidth and latency staircase</h2>" + _chart_img(staircase.bandwidth_figure(d), "bandwidth")
            )
        parts += [_ceilings_section(d), _latency_section(d), _sweep_section(d), _ops_section(d)]
        if d.get("suite") not in (None, "ceilings") and d.get("records"):  # a family suite with ceilings
            parts.append(_family_section(d, chart=False))  # its charts are the sections above
        parts.append(_notes_section(d))
    parts.append("</body></html>")
    return "\n".join(parts)
