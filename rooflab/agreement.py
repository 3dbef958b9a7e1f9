"""Does this run agree with the earlier ones? After a ceilings run, each ceiling gets its interval
(rooflab/intervals.py: this run's spread and the earlier runs of the same kind here) and every
ceiling outside the previous run's interval is flagged ``moved``; `rooflab run` prints the one line
`check` returns. "The same kind": same machine id and CPU (machine.cpu_signature), suite, device
and --quick, finished.
"""

from __future__ import annotations

from pathlib import Path

from .errors import RooflabError

AGREEMENT = 0.05  # two consecutive runs should agree within 5% on every ceiling's median, where a run has no interval


def earlier_same_kind(out: Path, data: dict, path: Path, n: int = 1) -> list[tuple[Path, dict]]:
    """The newest ``n`` earlier finished results of the same suite, device and --quick on this
    machine (the same id and the same CPU: machine.cpu_signature), oldest first."""
    from .machine import cpu_signature
    from .results import load, previous_results

    prev = previous_results(out, data["machine"]["id"], data["suite"], data["device"], path)
    found = []
    for p in reversed([p for p in prev if p.name < Path(path).name]):  # not a run started after this one
        try:
            old = load(p)
        except RooflabError:
            continue
        same_cpu = cpu_signature(old.get("machine")) == cpu_signature(data["machine"])
        if (
            same_cpu
            and old.get("status", "").startswith("complete")
            and old.get("config", {}).get("quick") == data["config"].get("quick")
        ):
            found.append((p, old))
            if len(found) >= n:
                break
    return found[::-1]


def check(writer, out: Path) -> str:
    """Compare with the previous finished run of the same suite on this machine (same --quick):
    each ceiling first gets its interval (rooflab/intervals.py: this run's spread and the earlier
    runs of this kind in the folder); every ceiling outside the previous run's interval (beyond
    AGREEMENT where that run has none) is flagged in the result (``moved``) and in the summary, and named in the line returned (always one line, also when there is nothing to
    compare with)."""
    from . import roofline
    from .intervals import HISTORY, inside, set_intervals

    data = writer.data
    earlier = earlier_same_kind(out, data, writer.path, HISTORY)
    prev, old = earlier[-1] if earlier else (None, None)
    kind = "quick" if data["config"].get("quick") else "full"
    if not data.get("ceilings"):
        return "consistency: no ceilings in this run to compare"
    set_intervals(data["ceilings"], [d for _, d in earlier])
    writer.save()
    if prev is None:
        return f"consistency: no earlier finished {kind} run of this suite in {out} to compare with"
    rows = roofline.compare_ceilings([old, data])
    by_name = {c["name"]: c for c in data["ceilings"]}
    old_by_name = {c["name"]: c for c in old.get("ceilings", [])}

    def moved(r) -> bool:  # outside the previous run's interval; a run without intervals: beyond AGREEMENT
        ok = inside(old_by_name.get(r["name"], {}), r["values"][-1])
        return (abs(r["ratios"][-1] - 1) > AGREEMENT) if ok is None else not ok

    movers = [r for r in rows if r["ratios"][-1] is not None and moved(r)]
    for r in movers:
        c = by_name.get(r["name"])
        if c is not None:
            c["moved"] = {"ratio": r["ratios"][-1], "previous": str(prev)}
    compared = sum(r["ratios"][-1] is not None for r in rows)
    data["agreement"] = {
        "previous": str(prev),
        "tolerance": f"the previous run's interval of each ceiling (rooflab/intervals.py), else {AGREEMENT:.0%}",
        "disagreeing": [{"name": r["name"], "ratio": r["ratios"][-1]} for r in movers],
        "compared": compared,
        "agreeing_share": (compared - len(movers)) / compared if compared else None,
    }
    writer.save()
    if movers:
        names = ", ".join(f"{r['name']} ({r['ratios'][-1] - 1:+.0%})" for r in movers)
        return f"noisy: {len(movers)} of {compared} ceilings moved outside {prev.name}'s intervals: {names}"
    return f"consistent: all {compared} ceilings inside {prev.name}'s intervals"
