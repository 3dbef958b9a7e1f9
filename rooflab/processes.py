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

Cost: ~1.4 s per process to start (interpreter, imports, the inputs, numba's start-up in one
verified call), spent by all N processes at once before the first measures, plus the
measurements (~0.4 s each), one after the other. The case
travels as JSON, so its size, params and meta must be JSON values (the dispatch cases' are).
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import asdict, fields, replace

from .errors import RooflabError

TIMEOUT_S = 300  # one process: imports, verification, calibration and every attempt
READY, GO = "rooflab-ready", "go"  # the child, prepared; the parent: measure now


def _record_fields():
    from .driver import Record

    return {f.name for f in fields(Record)}


def _start(child: str, job: str) -> subprocess.Popen:
    """A measuring interpreter with the job on its stdin; its stderr goes to a file (``proc.err``),
    so warnings written while the others are read can never fill a pipe and stall it."""
    import tempfile

    err = tempfile.TemporaryFile(mode="w+")
    proc = subprocess.Popen(
        [sys.executable, "-m", child], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True
    )
    proc.err = err
    proc.stdin.write(job + "\n")
    proc.stdin.flush()
    return proc


def _ready(proc: subprocess.Popen) -> bool:
    """Read the child's stdout up to its READY line (False: it ended first)."""
    for line in proc.stdout:
        if line.strip() == READY:
            return True
    return False


def _failed(case, proc: subprocess.Popen, timer) -> RooflabError:
    """The one error for a process that did not deliver (its last stderr line says why)."""
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    if timer.fired:
        return RooflabError(f"{case.variant}: a measuring process ran past {TIMEOUT_S} s")
    proc.err.seek(0)
    why = (proc.err.read().strip().splitlines() or ["no output"])[-1]
    return RooflabError(f"{case.variant}: a measuring process failed (exit {proc.returncode}): {why}")


def measure_in_processes(driver, case, processes: int, child: str):
    """``case`` measured in ``processes`` fresh interpreters (``python -m child``, a module whose
    main is ``serve``); the fastest process's Record, with every process's per-launch (or per-call)
    median and samples in ``meta['processes']``.

    The interpreters start together and prepare together (imports, numba's start-up, the inputs:
    ~0.9 s each, the larger part of a process's cost), then measure one at a time: each waits,
    idle, until it is told to go, so no measurement shares the cores with another process of the run."""
    one = replace(case, timing={k: v for k, v in case.timing.items() if k != "processes"})
    job = json.dumps({"case": asdict(one), "settings": asdict(driver.settings), "best_clock": driver.best_clock})
    procs, timers, records = [], [], []
    try:
        for _ in range(processes):
            procs.append(_start(child, job))
            timers.append(_watchdog(procs[-1]))
        for proc, timer in zip(procs, timers):  # every process prepared before the first measures
            if not _ready(proc):
                raise _failed(case, proc, timer)
        for proc, timer in zip(procs, timers):
            rec = _go(case, proc, timer)
            if rec.status != "ok":
                return rec  # a wrong result in any process: the error, never a figure
            records.append(rec)
    finally:  # an error or Ctrl-C: no process is left behind
        for proc, timer in zip(procs, timers):
            timer.cancel()
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
            proc.err.close()
    return _fastest(records)


def _watchdog(proc):
    """A timer that kills ``proc`` after TIMEOUT_S (``fired`` says it did)."""
    import threading

    def fire():
        t.fired = True
        proc.kill()

    t = threading.Timer(TIMEOUT_S, fire)
    t.fired = False
    t.daemon = True
    t.start()
    return t


def _go(case, proc, timer):
    """Tell a prepared process to measure and read its Record."""
    from .driver import Record

    proc.stdin.write(GO + "\n")
    proc.stdin.flush()
    out, _ = proc.communicate()
    timer.cancel()
    lines = out.strip().splitlines()
    if timer.fired or proc.returncode != 0 or not lines:
        raise _failed(case, proc, timer)
    d = json.loads(lines[-1])
    return Record(**{k: v for k, v in d.items() if k in _record_fields()})


def _fastest(records):
    """The fastest process's record (a floor), with every process's median and samples in its meta."""

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

    job = json.loads(sys.stdin.readline())
    driver = Driver(make_backend(probe=job["settings"].get("probe_clock", True)), Settings(**job["settings"]))
    driver.best_clock = {int(k): v for k, v in (job.get("best_clock") or {}).items()}
    case = Case(**job["case"])
    inputs = driver.inputs(case)  # imports the variant
    # verified now, while every process of the case prepares at once: numba starts up here (its
    # registries, the kernel from the on-disk cache: ~0.5 s) instead of inside each measurement,
    # one process after another; the measurement takes this check (or its error)
    driver.verify_case(case, inputs)
    print(READY, flush=True)
    if sys.stdin.readline().strip() != GO:
        return 1
    rec = driver.run_case(case, inputs)
    print(json.dumps(asdict(rec), default=float))
    return 0
