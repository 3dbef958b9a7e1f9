"""Where a run's time went: wall seconds per named phase, kept in the result file and printed at
the end, one line per phase (name, seconds, share of the run).

A phase entered several times (the passes of the sweep are spread over the run) adds up. The
record is saved as each phase ends, so an interrupted run keeps the phases that finished (and
the one it was in, marked ``interrupted``). perf_counter costs ~50 ns: free next to any phase.

    ph = Phases(writer.data)
    with ph("bandwidth sweep"):
        driver.run(cases, writer, progress)
    print("\\n".join(lines(writer.data)))
"""

from __future__ import annotations

import time
from contextlib import contextmanager


class Phases:
    def __init__(self, data: dict, save=None):
        self.data = data
        self.save = save
        self.t0 = time.perf_counter()
        data["phases"] = {"total_s": 0.0, "items": []}

    def _add(self, name: str, seconds: float, interrupted: bool = False) -> None:
        items = self.data["phases"]["items"]
        item = next((p for p in items if p["name"] == name), None)
        if item is None:
            item = {"name": name, "seconds": 0.0, "entered": 0}
            items.append(item)
        item["seconds"] = round(item["seconds"] + seconds, 3)
        item["entered"] += 1
        if interrupted:
            item["interrupted"] = True
        self.data["phases"]["total_s"] = round(time.perf_counter() - self.t0, 3)

    @contextmanager
    def __call__(self, name: str):
        t = time.perf_counter()
        try:
            yield
        except BaseException:
            self._add(name, time.perf_counter() - t, interrupted=True)
            raise
        self._add(name, time.perf_counter() - t)
        if self.save:
            self.save()

    def finish(self) -> None:
        self.data["phases"]["total_s"] = round(time.perf_counter() - self.t0, 3)


def lines(data: dict) -> list[str]:
    """One line per phase: name, seconds, share of the run (the rest: setup and saving)."""
    ph = data.get("phases") or {}
    total = ph.get("total_s") or 0.0
    items = ph.get("items") or []
    if not items or total <= 0:
        return []
    width = max(len(p["name"]) for p in items)
    out = [
        f"phase {p['name']:<{width}} {p['seconds']:7.1f} s {p['seconds'] / total:5.0%}"
        + (" (interrupted)" if p.get("interrupted") else "")
        for p in items
    ]
    rest = total - sum(p["seconds"] for p in items)
    out.append(f"phase {'(other)':<{width}} {rest:7.1f} s {rest / total:5.0%}   total {total:.1f} s")
    return out
