"""`rooflab publish RESULTS_DIR -o SITE`: a static site that opens offline from a results tree: every
machine's newest runs with their charts, every fleet's page, asv's history where found
(rooflab/publish.py builds it)."""

from __future__ import annotations

from pathlib import Path

from ..errors import RooflabError

HELP = "static site (opens offline) from a results tree: machines, fleets, charts"


def add_parser(sub) -> None:
    p = sub.add_parser("publish", help=HELP)
    p.add_argument("results", metavar="RESULTS_DIR")
    p.add_argument("-o", "--output", required=True, metavar="SITE")


def main(args) -> int:
    from ..publish import build_site

    root = Path(args.results)
    if not root.is_dir():
        raise RooflabError(f"no such results directory: {root}", "give the folder `rooflab run --out` wrote")
    site = Path(args.output)
    if site.resolve() == root.resolve():
        raise RooflabError(f"-o {site} would write into the results", "pass a separate SITE folder")
    found = build_site(root, site)
    if not found["machines"] and not found["fleets"]:
        print(f"note: no rooflab results under {root}", flush=True)
    print(
        f"{site / 'index.html'}: {len(found['machines'])} machine(s), {len(found['fleets'])} fleet(s)"
        + (", asv history" if found["asv"] else "")
        + (f", {len(found['skipped'])} file(s) skipped" if found["skipped"] else "")
    )
    return 0
