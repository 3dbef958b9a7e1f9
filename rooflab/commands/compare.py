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
    from rich.table import Table

    from .. import roofline
    from ..results import load

    if len(args.results) < 2:
        raise RooflabError("compare needs at least two result files", "rooflab compare A.json B.json")
    data = [load(p) for p in args.results]
    for path, d in zip(args.results, data):
        if not d.get("ceilings"):
            raise RooflabError(
                f"{path} has no ceilings (a {d.get('suite')!r} result): compare compares ceilings",
                "pass result files written by `rooflab run` (suite ceilings), or by `rooflab place`",
            )
    kinds = {d.get("device") for d in data}
    if len(kinds) > 1:
        print(f"note: comparing different devices ({', '.join(sorted(kinds))})", file=sys.stderr)
    from ..intervals import inside
    from ..machine import cpu_signature

    machines = {(d["machine"].get("cpu") or {}).get("model") or d["machine"]["id"] for d in data}
    if len(machines) > 1:
        print(f"note: these results come from different machines ({', '.join(sorted(machines))})", file=sys.stderr)
    elif len({cpu_signature(d["machine"]) for d in data}) > 1:  # one brand string, two CPUs (a VM's)
        cpu = [(d["machine"].get("cpu") or {}) for d in data]
        said = ", ".join(sorted({f"family {c.get('family')} model {c.get('model_number')}" for c in cpu}))
        print(f"note: these results come from different CPUs under one name ({said})", file=sys.stderr)
    rows = roofline.compare_ceilings(data)
    base = {c["name"]: c for c in data[0]["ceilings"]}
    thr = args.threshold / 100
    t = Table(title="Ceilings: " + " vs ".join(f"{d['machine']['id']} {d.get('started', '')[:16]}" for d in data))
    t.add_column("ceiling")
    t.add_column("unit")
    for i, _ in enumerate(data):
        t.add_column(chr(65 + i), justify="right")
        if i:
            t.add_column(f"{chr(65 + i)}/A", justify="right")
    regressions, missing, held, untrue = [], 0, [], []
    for r in rows:
        cells = [r["name"], r["unit"], f"{r['values'][0]:.4g}"]
        for v, ratio in zip(r["values"][1:], r["ratios"]):
            if v is None:
                cells += ["-", "-"]
                missing += 1
                continue
            worse = (ratio > 1 + thr) if r["lower_is_better"] else (ratio < 1 - thr)
            if worse and base[r["name"]].get("implausible"):  # A's figure cannot be true: no baseline
                worse = False
                untrue.append(r["name"])
            elif worse and inside(base[r["name"]], v):  # inside A's interval: the run-to-run spread
                worse = False
                held.append(r["name"])
            if worse:
                regressions.append(r["name"])
            cells += [f"{v:.4g}", f"[red]{ratio:.3f}[/red]" if worse else f"{ratio:.3f}"]
        t.add_row(*cells)
    Console().print(t)
    if missing:
        print(f"{missing} ceiling(s) of A have no counterpart in the other file(s) (shown as -): not compared")
    if held:
        print(
            f"{len(held)} move(s) beyond {args.threshold:g}% stay inside A's interval (its run-to-run spread): not regressions"
        )
    if untrue:
        print(
            f"{len(untrue)} ceiling(s) of A cannot be true (flagged in A): not compared: {', '.join(sorted(set(untrue)))}"
        )
    if regressions:
        print(f"regressed beyond {args.threshold:g}%: {len(regressions)} ceiling(s):")
        for name in regressions:  # every one, never a cut list
            print(f"  {name}")
        return 1
    print(f"no ceiling regressed beyond {args.threshold:g}%")
    return 0
