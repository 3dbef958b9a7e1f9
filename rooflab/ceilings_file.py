"""Which ceilings result a placement stands on: the one the user names, else this machine's newest
complete one that has every roof (a main-memory bandwidth and a compute peak). A newer run that
lacks one (a small --max-working-set, an interrupted run) is passed over with a note saying what
it lacks; a named one that lacks it is used with that note, a foreign or non-ceilings file refused.
Used by every command that places ops (`place`, `llm`, `run --suite models`) and by `info`; a kernel
family's charts (`plot`, `report`, `publish`) draw its rungs against ``ceilings_beside`` the result.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

from .errors import RooflabError


def lacks(data: dict, device: str) -> list[str]:
    """What a ceilings result lacks to stand as a machine's roofs: its main memory level (a run with
    a small working-set limit, or one interrupted before DRAM, has only cache levels) and a peak."""
    ceil = data.get("ceilings") or []
    main = "HBM" if device == "cuda" else "DRAM"
    out = []
    if not any(c.get("kind") == "bandwidth" and c.get("level") == main for c in ceil):
        out.append(f"{main} bandwidth")
    if not any(c.get("kind") == "compute" for c in ceil):
        out.append("a compute peak")
    return out


def find_ceilings(out_dir: Path, machine_id: str, device: str, explicit: str | None) -> tuple[dict, str]:
    """``explicit``, or the newest complete ceilings result of this machine with every roof (main
    memory and a compute peak); a newer partial one is passed over with a note saying what it lacks,
    and an explicit partial one is used with that note."""
    from .results import load

    if explicit:
        data = load(explicit)
        if data.get("suite") != "ceilings":
            raise RooflabError(
                f"{explicit} is a {data.get('suite')!r} result, not a ceilings result",
                "pass a file written by `rooflab run` (suite ceilings)",
            )
        if data["machine"]["id"] != machine_id:
            warnings.warn(
                f"ceilings come from machine {data['machine']['id']!r}, not this one ({machine_id!r}): "
                "the classification is for that machine's roofs",
                stacklevel=2,
            )
            print(f"warning: ceilings from another machine ({data['machine']['id']}); placing against them anyway")
        missing = lacks(data, device)
        if missing:
            print(
                f"note: {explicit} lacks {' and '.join(missing)}: ops are placed against the roofs it has "
                "(the slowest level it measured stands for main memory)",
                file=sys.stderr,
            )
        return data, explicit
    cands = sorted((Path(out_dir) / machine_id).glob(f"rooflab-ceilings-{device}-*.json"))
    passed = []
    for c in reversed(cands):
        try:
            data = load(c)
        except RooflabError:
            continue
        if not data.get("ceilings"):
            continue
        missing = lacks(data, device)
        if data.get("status", "").startswith("complete") and not missing:
            for p, why in passed:
                print(f"note: passed over the newer {p.name}: {why}; using {c.name}", file=sys.stderr)
            return data, str(c)
        passed.append((c, f"it lacks {' and '.join(missing)}" if missing else f"it is {data.get('status')}"))
    raise RooflabError(
        f"no complete ceilings result for machine {machine_id!r} under {out_dir}/"
        + (f" ({passed[0][0].name}: {passed[0][1]})" if passed else ""),
        f"run `rooflab run --device {device}` first, or pass --ceilings RESULT.json",
    )


def ceilings_beside(result_path, doc: dict) -> dict | None:
    """The newest complete ceilings of a result's machine in the results tree the result lies in
    (RESULTS/<machine>/<result>.json), or None: what a kernel family's rungs are drawn against."""
    import contextlib
    import io

    try:
        with contextlib.redirect_stderr(io.StringIO()):  # a newer partial run passed over: not this chart's news
            return find_ceilings(
                Path(result_path).resolve().parent.parent, doc["machine"]["id"], doc.get("device", "cpu"), None
            )[0]
    except (RooflabError, KeyError):
        return None
