"""The fleet page (`rooflab report FLEET_DIR`): one self-contained HTML file (inline PNGs, no CDN).

  - the nodes: each node's outcome from the manifest (ok, failed, died, timeout, with the reason)
  - per SKU, each ceiling's distribution over the nodes: a dot per node at its % of the SKU's
    median, flagged nodes in red (diagnose.py's rules and modified z-score)
  - the flagged ceilings as a table
  - per flagged node (else the node furthest below its SKU), its roofline drawn over its SKU's:
    the baseline's roofs dashed, the node's solid

The baseline is the fleet's own median per SKU unless one is given (`baseline=` here, or
`rooflab fleet diagnose --baseline` for a recorded one). Reads records only; draws with matplotlib.
"""

from __future__ import annotations

import html
from pathlib import Path

from ..charts.fleet import distribution_figure, roofline_figure
from . import baseline as bl
from . import diagnose as dg
from . import store

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:1200px;color:#222;padding:0 1rem}
h1{font-size:1.6rem}h2{font-size:1.25rem;margin-top:2rem;border-bottom:1px solid #ddd;padding-bottom:.3rem}
table{border-collapse:collapse;margin:.6rem 0;font-size:.86rem}td,th{border:1px solid #ddd;padding:.2rem .5rem;text-align:left}
th{background:#f4f4f4}td.num{text-align:right;font-variant-numeric:tabular-nums}img{max-width:100%;border:1px solid #eee}
.bad{color:#b00;font-weight:bold}.ok{color:#060}.muted{color:#777;font-size:.85rem}
"""
MAX_ROOFLINES = 6  # node rooflines drawn (the flagged first)


def _esc(x) -> str:
    return html.escape(str(x))


def _img(fig, alt: str) -> str:
    from ..charts.style import inline_png

    return inline_png(fig, alt, dpi=100)


def _table(head: list[str], rows: list[list[str]]) -> str:
    th = "".join(f"<th>{_esc(h)}</th>" for h in head)
    body = "".join(
        "<tr>" + "".join(c if c.startswith("<td") else f"<td>{_esc(c)}</td>" for c in r) + "</tr>" for r in rows
    )
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def build(path, base: dict | None = None) -> str:
    path = Path(path)
    manifest = store.load_manifest(path)
    nodes = store.node_results(path)
    base = base or (bl.build(nodes, sources=[str(path)]) if nodes else None)
    rows = dg.diagnose(nodes, base, dg.load_rules(None, base)) if nodes else []
    flagged = sorted({r["node"] for r in rows if r["failed"]})
    gone = store.superseded(manifest)
    s = manifest.get("settings", {})
    out = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>rooflab fleet {_esc(path.name)}</title>"
        f"<style>{CSS}</style></head><body>",
        f"<h1>Fleet {_esc(path.name)}</h1>",
        f"<p>{len(manifest['nodes']) - len(gone)} node(s) through {_esc(manifest.get('engine'))}"
        + (f" ({len(gone)} earlier failed node(s) left the cluster before a --resume)" if gone else "")
        + f"{' at ' + _esc(manifest['address']) if manifest.get('address') else ''}; suite {_esc(s.get('suite'))}"
        f"{' --quick' if s.get('quick') else ''} on {_esc(s.get('device'))}; {len(nodes)} good result(s); "
        f"<span class='{'bad' if flagged else 'ok'}'>{len(flagged)} node(s) flagged</span>. "
        f"<span class='muted'>Baseline: {'the fleet median per SKU' if base and base.get('sources') == [str(path)] else 'given'}; "
        f"rules: {dg.DEFAULT_PCT:g} % either way, modified z beyond {dg.Z_THRESHOLD} within >= {dg.Z_MIN_NODES} nodes of a SKU.</span></p>",
    ]
    out.append("<h2>Nodes</h2>")
    node_rows = []
    for n, e in sorted(manifest["nodes"].items()):
        cls = "ok" if e.get("status") == "ok" and n not in flagged else "bad"
        state = e.get("status", "?") + (" (flagged)" if n in flagged else "")
        state += " (left the cluster; not counted)" if n in gone else ""
        secs = e.get("seconds")
        node_rows.append([n, e.get("sku_key") or "-", f"<td class='{cls}'>{_esc(state)}</td>",
                          f"{secs:.1f} s" if secs else "-", e.get("reason") or ""])  # fmt: skip
    out.append(_table(["node", "SKU", "status", "run", "reason"], node_rows))
    docs = dict(nodes)
    for key, group in (base or {}).get("skus", {}).items():
        sku_rows = [r for r in rows if r["sku"] == key]
        if not sku_rows:
            continue
        out.append(f"<h2>SKU {_esc(key)}</h2>")
        out.append(_img(distribution_figure(key, group, sku_rows, dg.DEFAULT_PCT), f"ceiling distribution of {key}"))
        bad = [r for r in sku_rows if r["failed"]]
        if bad:
            out.append(
                _table(
                    ["node", "ceiling", "value", "baseline", "delta", "z", "verdict"],
                    [
                        [
                            r["node"],
                            r["ceiling"],
                            "-" if r["value"] is None else f"{r['value']:.4g} {r['unit']}",
                            f"{r['baseline']:.4g}",
                            "-" if r["delta_pct"] is None else f"{r['delta_pct']:+.1f} %",
                            "-" if r["z"] is None else f"{r['z']:+.1f}",
                            "; ".join(r["verdicts"]),
                        ]
                        for r in bad
                    ],  # fmt: skip
                )
            )
        show = [n for n in flagged if n in docs and any(r["node"] == n for r in sku_rows)][:MAX_ROOFLINES]
        if not show:  # a healthy SKU: the node furthest below its median on a bandwidth or FLOP/s
            low = [r for r in sku_rows if r["delta_pct"] is not None and r["kind"] != "latency"]
            show = [min(low, key=lambda r: r["delta_pct"])["node"]] if low else []
        for n in show:
            out.append(_img(roofline_figure(n, docs[n], group), f"roofline of {n}"))
    out.append("</body></html>")
    return "\n".join(out)
