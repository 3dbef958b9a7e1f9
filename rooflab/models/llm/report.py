"""The HTML report's section for an `rooflab llm` result (called from rooflab/report.py):
parameters, TTFT / time per token / tokens/s / MBU / MFU per batch and context, time shares, the
decode charts against batch and context, and the onnxruntime check when one was run."""

from __future__ import annotations

import html


def _esc(x) -> str:
    return html.escape(str(x))


def _img(fig, alt: str) -> str:
    from ...charts.style import inline_png

    return inline_png(fig, alt)


def llm_section(d: dict) -> str:
    s = d.get("llm")
    if not s:
        return ""
    from ...charts.llm import decode_figure

    p = s["params"]
    head = (
        f"<h2>LLM: {_esc(s['config'])}</h2><p>{_esc(s['arch'])}. {p['total']:,} parameters ({p['active']:,} active "
        f"per token); requested {_esc(s['dtype_requested'])}, executed {_esc(s.get('dtype_note') or s.get('dtype_executed'))}, "
        f"{_esc(s.get('threads'))} threads. Times are sums of per-op times measured at each op's real shape "
        f"(cold where weights or the KV cache stream from memory); ops marked predicted come from the roofs.</p>"
    )
    rows = []
    for r in s.get("rows", []):
        what = f"prefill {r['prompt']}" if r["phase"] == "prefill" else f"decode @ {r['context']}"
        shares = ", ".join(
            f"{k} {v:.0f}%" for k, v in sorted(r["share_by_op_class"].items(), key=lambda kv: -kv[1]) if v >= 1
        )
        rows.append(
            "<tr>" + "".join(
                f"<td>{_esc(c)}</td>"
                for c in (
                    r["batch"], what, f"{r['seconds'] * 1e3:.2f}", f"{r['tokens_per_s']:.3g}", f"{100 * r['mbu']:.0f}%",
                    f"{100 * r['mfu']:.1f}%", f"{r['roof_seconds'] * 1e3:.2f}", shares,
                    ", ".join(r["predicted_ops"]) or "-",
                )
            ) + "</tr>"
        )  # fmt: skip
    heads = (
        "batch",
        "phase",
        "ms (TTFT or per token)",
        "tokens/s",
        "MBU",
        "MFU",
        "roofs ms",
        "time share",
        "predicted",
    )
    table = (
        "<table><thead><tr>" + "".join(f"<th>{h}</th>" for h in heads) + "</tr></thead><tbody>" + "".join(rows)
        + "</tbody></table>"
    )  # fmt: skip
    c = s.get("curves") or {}
    cb = c.get("compute_bound_batch")
    note = f"<p>Decode at context {c.get('context')} turns compute-bound at batch {cb}.</p>" if cb else ""
    chart = _img(decode_figure(s), "decode tokens/s vs batch and context") if c else ""
    rt = s.get("runtime_check")
    check = ""
    if rt:
        from ..runtimes.llm_check import lines

        check = (
            f"<h3>Against {_esc(rt.get('check_name', 'onnxruntime'))}</h3><pre>" + _esc("\n".join(lines(rt))) + "</pre>"
        )
    return head + table + note + chart + check + _grid_section(s)


def _grid_section(s: dict) -> str:
    """`--grid`: the cells' table and MAPE, measured against predicted, and the turn to compute-bound."""
    g = s.get("grid") or {}
    if not g.get("cells"):
        return ""
    from ...charts.llm import grid_figure, plotted_turns, turn_figure
    from .grid import lines

    out = "<h3>The runtime check over the grid</h3><pre>" + _esc("\n".join(lines(g))) + "</pre>"
    out += _img(grid_figure(g), "measured in the runtime against predicted, per grid cell")
    turns = plotted_turns(g)
    if turns:
        out += _img(turn_figure(turns, s["config"]), "decode tokens/s against batch: the turn to compute-bound")
    return out
