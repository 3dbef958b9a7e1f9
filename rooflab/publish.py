"""`rooflab publish RESULTS_DIR -o SITE/`: a static site from a results tree, that opens offline
(file://, no server, no CDN: every chart an inline PNG or a file beside the page).

  SITE/index.html                    machines and fleets found under RESULTS_DIR, asv if present
  SITE/machines/<id>/index.html      one machine: its result files, newest first
  SITE/machines/<id>/<result>.html   every result as `rooflab report` renders it (rooflab.report.build):
                                     a ceilings run's roofline, staircases and ceilings; ops placed
                                     (place, place --runtime, run --suite models, llm) on their
                                     roofline with their tables; a kernel family's table and charts,
                                     its rungs on the machine's newest ceilings
  SITE/fleets/<name>.html            a fleet directory (fleet.json): the fleet page (fleet/page.py)
  SITE/asv/                          a copy of `asv publish` output (RESULTS_DIR/html/index.html)

Reads result files only (never measures). A file that is not a readable rooflab result is listed
as skipped with the reason, the rest of the site is still built.
"""

from __future__ import annotations

import html
import shutil
from pathlib import Path

from .errors import RooflabError
from .results import load

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:1100px;color:#222;padding:0 1rem}
table{border-collapse:collapse;margin:.6rem 0;font-size:.9rem}td,th{border:1px solid #ddd;padding:.25rem .6rem;text-align:left}
th{background:#f4f4f4}h2{border-bottom:1px solid #ddd;padding-bottom:.3rem;margin-top:2rem}img{max-width:100%;border:1px solid #eee}
.muted{color:#777;font-size:.85rem}.bad{color:#b00}
"""


def _esc(x) -> str:
    return html.escape(str(x))


def _page(title: str, body: str, up: str | None = None) -> str:
    nav = f"<p class='muted'><a href='{up}'>&larr; index</a></p>" if up else ""
    return (
        f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{_esc(title)}</title>"
        f"<style>{CSS}</style></head><body>{nav}<h1>{_esc(title)}</h1>{body}</body></html>\n"
    )


def scan(root: Path) -> dict:
    """{machines: {id: [(path, doc)]}, fleets: [dir], asv: dir | None, skipped: [(path, why)]}."""
    from .fleet.store import is_fleet_dir

    fleets = sorted(p.parent for p in root.rglob("fleet.json") if is_fleet_dir(p.parent))
    machines: dict = {}
    skipped = []
    for f in sorted(root.rglob("rooflab-*.json")):
        if any(fl in f.parents for fl in fleets):
            continue
        try:
            doc = load(f)
        except RooflabError as e:
            skipped.append((f, str(e)))
            continue
        if doc.get("status") == "failed" and not (doc.get("records") or doc.get("ops_placed") or doc.get("ceilings")):
            skipped.append((f, "a failed run that measured nothing"))
            continue
        machines.setdefault(doc["machine"]["id"], []).append((f, doc))
    asv = root / "html" if (root / "html" / "index.html").is_file() else None
    return {"machines": machines, "fleets": fleets, "asv": asv, "skipped": skipped}


def _result_page(path: Path, doc: dict) -> str:
    """A result's page: the report of it (rooflab.report.build), as `rooflab report` renders it, a
    kernel family's rungs drawn on its machine's newest complete ceilings of its device beside it."""
    from .ceilings_file import ceilings_beside
    from .report import build, kind_of

    ceilings = ceilings_beside(path, doc) if kind_of(doc) == "family" else None
    return build([doc], [ceilings], up="index.html")


def build_site(root: Path, site: Path) -> dict:
    found = scan(root)
    site.mkdir(parents=True, exist_ok=True)
    index_rows = []
    for mid, items in sorted(found["machines"].items()):
        folder = site / "machines" / mid
        folder.mkdir(parents=True, exist_ok=True)
        items = sorted(items, key=lambda fd: fd[1].get("started") or "", reverse=True)
        rows = []
        for f, doc in items:
            name = f.stem + ".html"
            (folder / name).write_text(_result_page(f, doc))
            rows.append(
                f"<tr><td><a href='{_esc(name)}'>{_esc(doc.get('suite'))} on {_esc(doc.get('device'))}</a></td>"
                f"<td>{_esc(doc.get('started'))}</td><td>{_esc(doc.get('status'))}</td>"
                f"<td>{len(doc.get('ceilings') or [])}</td><td>{_esc(f.name)}</td></tr>"
            )
        cpu = items[0][1]["machine"].get("cpu", {})
        body = (
            f"<p>{_esc(cpu.get('model'))}, {cpu.get('physical_cores')} cores</p><table><tr><th>result</th>"
            f"<th>started</th><th>status</th><th>ceilings</th><th>file</th></tr>{''.join(rows)}</table>"
        )
        (folder / "index.html").write_text(_page(f"machine {mid}", body, "../../index.html"))
        index_rows.append(
            f"<tr><td><a href='machines/{_esc(mid)}/index.html'>{_esc(mid)}</a></td><td>{_esc(cpu.get('model'))}</td>"
            f"<td>{len(items)}</td><td>{_esc(items[0][1].get('started'))}</td></tr>"
        )
    fleet_rows = []
    if found["fleets"]:
        from .fleet.page import build as fleet_page
        from .fleet.store import load_manifest, superseded

        (site / "fleets").mkdir(exist_ok=True)
        for d in found["fleets"]:
            name = "-".join(d.relative_to(root).parts) or d.name
            (site / "fleets" / f"{name}.html").write_text(fleet_page(d))
            m = load_manifest(d)
            ok = sum(e.get("status") == "ok" for e in m["nodes"].values())
            gone = superseded(m)
            left = f" ({len(gone)} earlier failed node(s) left the cluster)" if gone else ""
            fleet_rows.append(
                f"<tr><td><a href='fleets/{_esc(name)}.html'>{_esc(name)}</a></td><td>{_esc(m.get('engine'))}</td>"
                f"<td>{ok} of {len(m['nodes']) - len(gone)}{left}</td><td>{_esc(m.get('updated'))}</td></tr>"
            )
    if found["asv"]:
        shutil.copytree(found["asv"], site / "asv", dirs_exist_ok=True)
    body = "<h2>Machines</h2>" + (
        f"<table><tr><th>machine</th><th>CPU</th><th>results</th><th>newest</th></tr>{''.join(index_rows)}</table>"
        if index_rows
        else "<p class='muted'>none</p>"
    )
    body += "<h2>Fleets</h2>" + (
        f"<table><tr><th>fleet</th><th>engine</th><th>good results</th><th>updated</th></tr>{''.join(fleet_rows)}</table>"
        if fleet_rows
        else "<p class='muted'>none</p>"
    )
    body += "<h2>History</h2>" + (
        "<p><a href='asv/index.html'>asv benchmarks over commits</a></p>"
        if found["asv"]
        else "<p class='muted'>no <code>asv publish</code> output (RESULTS_DIR/html) found</p>"
    )
    if found["skipped"]:
        body += (
            "<h2>Skipped</h2><ul>" + "".join(f"<li>{_esc(f)}: {_esc(w)}</li>" for f, w in found["skipped"]) + "</ul>"
        )
    (site / "index.html").write_text(_page(f"rooflab results: {root.name}", body))
    return found
