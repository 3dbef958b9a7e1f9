"""Measure one case in several fresh Python processes: for costs that are fixed per process.

Some figures are drawn once per process: where CPython's eval loop, numba's dispatcher and the
jitted code land in memory (ASLR) sets their branch-predictor and cache-set aliasing. The empty
@njit call reads either ~52-60 ns or ~95-100 ns per process on a Zen 4 VM (two modes, each process
stable to a few % within itself; which one also depends on what the host runs beside this core at
the time): one process is one draw, and two runs of one process each disagreed by up to 17 % (and
by 1.7x when they drew different modes). So a case whose ``timing``
says ``processes: N`` (N > 1, on a backend whose ``isolate`` hook is this module's, the CPU's) is
measured N times, each time by the one driver in a new interpreter (``python -m`` the backend's
module, which calls ``serve`` with its backend: the case and settings as JSON on stdin, the record
as JSON on stdout), and the record kept is the fastest process's: a floor, as the fastest pass is for
every ceiling (the median process drew the slow mode in a run where 3 of 5 did). Every process's
median and samples stay in the record (``meta.processes``), with their spread.

Cost: ~0.7 s of interpreter start and imports per process, plus the measurement itself. The case
travels as JSON, so its size, params and meta must be JSON values (the dispatch cases' are).
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import asdict, fields, replace

from .errors import RooflabError

TIMEOUT_S = 300  # one process: imports, verification, calibration and every attempt


def _record_fields():
    from .driver import Record

    return {f.name for f in fields(Record)}


def measure_in_processes(driver, case, processes: int, child: str):
    """``case`` measured in ``processes`` fresh interpreters (``python -m child``, a module whose
    main is ``serve``); the fastest process's Record, with every process's per-launch (or per-call)
    median and samples in ``meta['processes']``."""
    from .driver import Record

    one = replace(case, timing={k: v for k, v in case.timing.items() if k != "processes"})
    job = json.dumps({"case": asdict(one), "settings": asdict(driver.settings), "best_clock": driver.best_clock})
    records = []
    for _ in range(processes):
        try:
            proc = subprocess.run(
                [sys.executable, "-m", child],
                input=job,
                capture_output=True,
                text=True,
                timeout=TIMEOUT_S,
            )
        except subprocess.TimeoutExpired as e:
            raise RooflabError(f"{case.variant}: a measuring process ran past {TIMEOUT_S} s") from e
        lines = proc.stdout.strip().splitlines()
        if proc.returncode != 0 or not lines:
            why = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise RooflabError(f"{case.variant}: a measuring process failed (exit {proc.returncode}): {why}")
        d = json.loads(lines[-1])
        rec = Record(**{k: v for k, v in d.items() if k in _record_fields()})
        if rec.status != "ok":
            return rec  # a wrong result in any process: the error, never a figure
        records.append(rec)

    def key(r):
        return (r.ns_per_launch or r.time_s)["median"]

    kept = min(records, key=key)
    medians = [key(r) for r in records]
    kept.meta = {
        **kept.meta,
        "processes": {
            "n": len(records),
            "unit": "ns per launch" if kept.ns_per_launch else "s per call",
            "medians": medians,
            "spread": (max(medians) - min(medians)) / key(kept),
            "samples_s": [r.samples_s for r in records],
            "estimator": "the record of the fastest process (lowest median): a floor",
        },
    }
    return kept


def serve(make_backend) -> int:
    """A measuring process's main: read a case and settings on stdin, measure it with the driver
    on ``make_backend(probe=...)``, print the Record as JSON."""
    from .driver import Driver, Settings
    from .registry import Case

    job = json.loads(sys.stdin.read())
    driver = Driver(make_backend(probe=job["settings"].get("probe_clock", True)), Settings(**job["settings"]))
    driver.best_clock = {int(k): v for k, v in (job.get("best_clock") or {}).items()}
    rec = driver.run_case(Case(**job["case"]))
    print(json.dumps(asdict(rec), default=float))
    return 0
