"""`rooflab report RESULT.json [...] | FLEET_DIR [-o FILE]`: a self-contained HTML page (opens
offline) from result files (rooflab/report.py), or a fleet directory's page (rooflab/fleet/page.py)."""

from __future__ import annotations

from pathlib import Path

from ..errors import RooflabError

HELP = "self-contained HTML characterization page from result files"


def add_parser(sub) -> None:
    rp = sub.add_parser("report", help=HELP)
    rp.add_argument("results", nargs="+")
    rp.add_argument("-o", "--output", default=None, help="HTML file (default: results/report.html)")


def main(args) -> int:
    if any(Path(p).is_dir() for p in args.results):  # a fleet directory: the fleet page
        return _fleet_page(args.results, args.output)
    from ..ceilings_file import ceilings_beside
    from ..report import build, kind_of
    from ..results import load

    results = [load(p) for p in args.results]
    beside = [ceilings_beside(p, d) if kind_of(d) == "family" else None for p, d in zip(args.results, results)]
    return _write(Path(args.output or "results/report.html"), build(results, beside))


def _fleet_page(paths: list[str], output: str | None) -> int:
    from ..fleet.page import build

    if len(paths) != 1:
        raise RooflabError("a fleet report takes one fleet directory", "rooflab report FLEET_DIR -o fleet.html")
    path = Path(paths[0])
    text = build(path)
    return _write(Path(output or path / "report.html"), text)


def _write(out: Path, html: str) -> int:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(html)
    print(out)
    return 0
