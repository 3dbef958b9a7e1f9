"""The tables `rooflab run` prints when a suite ends: a family's rungs beside the library, or the
ceilings with their intervals and flags (rich tables; the result file holds every figure)."""

from __future__ import annotations

from rich.console import Console


def family_table(data: dict) -> None:
    """Every rung of a family run with its figure and % of the library on the same case."""
    from rich.table import Table

    from .. import family_report

    family_report.add_pct_of_library(data["records"])
    peaks = family_report.has_unit_peaks(data["records"])  # "% of unit peak": rungs beside their unit's peak
    prefix = f"{data['device']}.{data['suite']}."  # said once in the title: a narrow terminal folds names
    t = Table(title=f"{data['suite']} ({data['machine']['id']}, {data['device']}): variants {prefix}*, T = threads")
    if peaks:
        t.title += "; % of peak: of the rung's unit peak (lowprec.*) in this run"
    cols = ("variant", "case", "T", "figure", "% of library", *(("% of peak",) if peaks else ()), "status")
    for col in cols:  # T: threads
        right = col in ("T", "figure", "% of library", "% of peak")
        t.add_column(col, justify="right" if right else "left", no_wrap=right, overflow="fold")
    for variant, label, threads, value, unit, pct, pct_peak, status in family_report.table(data["records"]):
        cells = [
            variant.removeprefix(prefix).removeprefix(f"{data['device']}."),
            label,
            "-" if threads is None else str(threads),
            "-" if value is None else f"{value:.4g} {unit}",
            "-" if pct is None else f"{pct:.0f}%",
        ]
        cells += (["-" if pct_peak is None else f"{pct_peak:.0f}%"] if peaks else []) + [status]
        t.add_row(*cells)
    Console().print(t)


def ceilings_table(data: dict) -> None:
    """The ceilings of a run, each with its interval (or p20-p80) and its flags; errors and notes after."""
    from rich.table import Table

    c = Console()
    if data.get("ceilings"):
        t = Table(title=f"Ceilings ({data['machine']['id']}, {data['device']})")
        # the interval a next run should fall into (rooflab/intervals.py: this run's spread, the
        # history of this machine's runs, a floor), not p20-p80 of what may be one sweep point
        ivs = [ce["interval"] for ce in data["ceilings"] if ce.get("interval")]
        for col in ("ceiling", "median", "interval" if ivs else "p20-p80", "unit", "notes"):
            t.add_column(col, overflow="fold")
        from ..roofline import ceiling_notes

        for ce in data["ceilings"]:
            s, iv = ce["stats"], ce.get("interval")
            spread = f"{iv['lo']:.4g}-{iv['hi']:.4g}" if iv else f"{s['p20']:.4g}-{s['p80']:.4g}"
            notes = [f"[red]{n}[/red]" if n.startswith(("noisy", ">105%")) else n for n in ceiling_notes(ce)]
            if ivs and not iv:  # a ceiling without an interval in a table of intervals
                notes.append("p20-p80, no interval")
            if ce.get("moved"):
                notes.append(f"[red]moved {ce['moved']['ratio'] - 1:+.0%} vs previous run[/red]")
            t.add_row(ce["name"], f"{ce['value']:.4g}", spread, ce["unit"], ", ".join(notes))
        c.print(t)
        if ivs:
            runs = max(iv.get("history_runs", 0) for iv in ivs)
            c.print(
                "interval: where the next quiet run should fall; "
                + (
                    f"from this run and up to {runs} earlier run(s) of this machine"
                    if runs
                    else "this run's spread only (no earlier runs here yet), at least 3 %"
                )
            )
    from rich.markup import escape

    for e in data.get("errors", []):  # compiler logs and CUDA messages hold brackets: no markup
        c.print(f"[red]error[/red] {escape(str(e.get('label')))}: {escape(e['error'])}")
    for n in data.get("notes", []):
        c.print(f"[yellow]note[/yellow] {escape(n)}")
