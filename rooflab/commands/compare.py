"""`rooflab compare A.json B.json [...]`: the ceilings of two or more result files side by side with
their ratios to A; a move beyond --threshold outside A's interval is a regression (exit 1)."""

from __future__ import annotations

import sys

from ..errors import RooflabError

HELP = "ceilings of two or more result files side by side; exit 1 on regression"


def add_parser(sub) -> None:
    cp = sub.add_parser("compare", help=HELP)
    cp.add_argument("results", nargs="+")
    cp.add_argument("--threshold", type=float, default=5.0, help="percent drop that counts as a regression (default 5)")


def main(args) -> int:
    from rich.console import Console

    data = _load(args.results)
    _say_what_differs(data)
    table, found = _table(data, args.threshold / 100)
    Console().print(table)
    return _verdict(found, args.threshold)


def _load(paths: list[str]) -> list[dict]:
    """The result files, each holding ceilings (a family's run has none to compare)."""
    from ..results import load

    if len(paths) < 2:
        raise RooflabError("compare needs at least two result files", "rooflab compare A.json B.json")
    data = [load(p) for p in paths]
    for path, d in zip(paths, data):
        if not d.get("ceilings"):
            raise RooflabError(
                f"{path} has no ceilings (a {d.get('suite')!r} result): compare compares ceilings",
                "pass result files written by `rooflab run` (suite ceilings), or by `rooflab place`",
            )
    return data


def _say_what_differs(data: list[dict]) -> None:
    """A note when the files come from different devices, machines, or CPUs under one name."""
    from ..machine import cpu_signature

    kinds = {d.get("device") for d in data}
    if len(kinds) > 1:
        print(f"note: comparing different devices ({', '.join(sorted(kinds))})", file=sys.stderr)
    machines = {(d["machine"].get("cpu") or {}).get("model") or d["machine"]["id"] for d in data}
    if len(machines) > 1:
        print(f"note: these results come from different machines ({', '.join(sorted(machines))})", file=sys.stderr)
    elif len({cpu_signature(d["machine"]) for d in data}) > 1:  # one brand string, two CPUs (a VM's)
        cpu = [(d["machine"].get("cpu") or {}) for d in data]
        said = ", ".join(sorted({f"family {c.get('family')} model {c.get('model_number')}" for c in cpu}))
        print(f"note: these results come from different CPUs under one name ({said})", file=sys.stderr)


def _table(data: list[dict], thr: float):
    """The ceilings side by side with their ratios to A, and what was found: regressions, ceilings
    without a counterpart, moves inside A's interval, A's figures that cannot be true."""
    from rich.table import Table

    from .. import roofline
    from ..intervals import inside

    base = {c["name"]: c for c in data[0]["ceilings"]}
    t = Table(title="Ceilings: " + " vs ".join(f"{d['machine']['id']} {d.get('started', '')[:16]}" for d in data))
    t.add_column("ceiling")
    t.add_column("unit")
    for i, _ in enumerate(data):
        t.add_column(chr(65 + i), justify="right")
        if i:
            t.add_column(f"{chr(65 + i)}/A", justify="right")
    found = {"regressions": [], "missing": 0, "held": [], "untrue": []}
    for r in roofline.compare_ceilings(data):
        cells = [r["name"], r["unit"], f"{r['values'][0]:.4g}"]
        for v, ratio in zip(r["values"][1:], r["ratios"]):
            if v is None:
                cells += ["-", "-"]
                found["missing"] += 1
                continue
            worse = (ratio > 1 + thr) if r["lower_is_better"] else (ratio < 1 - thr)
            if worse and base[r["name"]].get("implausible"):  # A's figure cannot be true: no baseline
                worse = False
                found["untrue"].append(r["name"])
            elif worse and inside(base[r["name"]], v):  # inside A's interval: the run-to-run spread
                worse = False
                found["held"].append(r["name"])
            if worse:
                found["regressions"].append(r["name"])
            cells += [f"{v:.4g}", f"[red]{ratio:.3f}[/red]" if worse else f"{ratio:.3f}"]
        t.add_row(*cells)
    return t, found


def _verdict(found: dict, threshold: float) -> int:
    """The lines under the table; 1 when a ceiling regressed beyond the threshold."""
    if found["missing"]:
        print(f"{found['missing']} ceiling(s) of A have no counterpart in the other file(s) (shown as -): not compared")
    if found["held"]:
        print(
            f"{len(found['held'])} move(s) beyond {threshold:g}% stay inside A's interval (its run-to-run spread): "
            "not regressions"
        )
    if found["untrue"]:
        print(
            f"{len(found['untrue'])} ceiling(s) of A cannot be true (flagged in A): not compared: "
            f"{', '.join(sorted(set(found['untrue'])))}"
        )
    if found["regressions"]:
        print(f"regressed beyond {threshold:g}%: {len(found['regressions'])} ceiling(s):")
        for name in found["regressions"]:  # every one, never a cut list
            print(f"  {name}")
        return 1
    print(f"no ceiling regressed beyond {threshold:g}%")
    return 0
