"""Driver.time_runs: the one path every runtime's whole step (an onnxruntime session run, a torch
forward, an LLM decode step) is timed by: warm-ups untimed, every sample kept, ``after`` outside the
clock, the untimed ``between`` blocks alternated with the timed ones, and the same noise check as a
kernel's samples (a spread past the limit is flagged, never silently kept)."""

from __future__ import annotations

import time

from rooflab.backend import Backend
from rooflab.driver import Driver, Settings


def _driver(clock=None) -> Driver:
    backend = Backend(device="cpu", timer=None, calibrate=None, clock=clock)
    return Driver(backend, Settings(cv_limit=0.05))


def test_runs_are_timed_after_the_warmups_with_after_outside_and_between_each_block():
    calls: list[str] = []
    d = _driver()
    got = d.time_runs(
        lambda: calls.append("run"), 5, warmup=2, after=lambda: calls.append("after"),
        block=2, between=lambda k: calls.append(f"between {k}"),
    )  # fmt: skip
    assert calls == (
        ["run", "after"] * 2
        + ["between 2"] + ["run", "after"] * 2
        + ["between 2"] + ["run", "after"] * 2
        + ["between 1"] + ["run", "after"]
    )  # fmt: skip
    assert got["runs"] == 5 and len(got["samples_s"]) == 5
    assert got["median_s"] == sorted(got["samples_s"])[2]


def test_a_step_whose_time_wanders_is_flagged_noisy_and_a_clock_drop_is_named():
    waits = iter([0.001, 0.006] * 4)
    got = _driver().time_runs(lambda: time.sleep(next(waits)), 8, warmup=0)
    assert got["noisy"] and any("samples CV" in r for r in got["noise_reasons"])

    probes = iter([[3.0], [3.0], [1.5]])  # the run's best, before, after: a neighbour took the core
    d = _driver(clock=lambda threads: next(probes))
    d.probe_clock(1)
    got = d.time_runs(lambda: None, 3, warmup=0)
    assert any("clock after" in r for r in got["noise_reasons"]), got["noise_reasons"]


def test_sync_brackets_each_timed_call():
    seen: list[str] = []
    _driver().time_runs(lambda: seen.append("run"), 2, warmup=0, sync=lambda: seen.append("sync"))
    assert seen == ["sync", "run", "sync"] * 2
