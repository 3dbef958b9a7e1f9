"""`rooflab plot RESULT.json [-o FILE]`: a result's charts (PNG + SVG): a ceilings run's roofline,
bandwidth staircase and latency chart; a placement's roofline with its ops; a family's own charts
beside its machine's newest ceilings."""

from __future__ import annotations

from pathlib import Path

HELP = "roofline, bandwidth staircase and latency chart (PNG + SVG) from a result file"


def add_parser(sub) -> None:
    pl = sub.add_parser("plot", help=HELP)
    pl.add_argument("result")
    pl.add_argument(
        "-o",
        "--output",
        default=None,
        help="output stem, or X.png/X.svg: the roofline there, the staircase at X.bandwidth.*, the latency chart at "
        "X.latency.* (default: next to the result)",
    )


def main(args) -> int:
    from .. import charts
    from ..charts import family
    from ..report import kind_of
    from ..results import load

    data = load(args.result)
    stem = Path(args.output) if args.output else Path(args.result).with_suffix("")
    at = None  # -o X.png: the roofline at X.png (and .svg), the other charts beside it
    if stem.suffix in (".png", ".svg"):
        at, stem = stem, stem.with_suffix("")
    if kind_of(data) != "placement" and data.get("suite") not in (None, "ceilings"):  # a family's run: its charts
        from ..ceilings_file import ceilings_beside

        files = family.chart(data, stem, ceilings_beside(args.result, data))
    else:  # ceilings, or ops placed on them: roofline, staircase (with sweeps), latency chart
        files = charts.all_plots(data, stem, ops=data.get("ops_placed"), roofline_at=at)
    for f in files:
        print(f)
    return 0
