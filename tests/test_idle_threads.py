"""Before a multi-thread time the driver waits for this process's other threads to go idle
(rooflab/idle_threads.py): a spinning thread is waited for, a process whose threads never go idle
costs the cap and says so, no schedstat means no wait, and a 1-thread time never waits."""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest

from rooflab import driver as driver_mod
from rooflab import idle_threads
from rooflab.cpu.backend import cpu_backend
from rooflab.driver import Driver, Settings

needs_schedstat = pytest.mark.skipif(
    not os.path.exists(f"/proc/self/task/{threading.get_native_id()}/schedstat"), reason="no schedstat here"
)


@needs_schedstat
def test_a_thread_spinning_after_a_call_is_waited_for():
    spin_s = 0.12
    started = threading.Event()

    def spin(until=time.perf_counter() + spin_s):
        started.set()
        while time.perf_counter() < until:
            pass

    t = threading.Thread(target=spin)
    t.start()
    started.wait()
    waited = idle_threads.wait_until_idle()
    alive_after = t.is_alive()
    t.join()
    assert waited >= 0.5 * spin_s and not alive_after or waited >= idle_threads.CAP_S


def test_threads_that_never_go_idle_cost_the_cap(monkeypatch):
    ran = iter(range(0, 10**12, 10**9))  # one other thread, a whole second of CPU per look
    monkeypatch.setattr(idle_threads, "other_threads_ns", lambda: {1: next(ran)})
    assert idle_threads.wait_until_idle(window_s=0.001, cap_s=0.02) >= 0.02


def test_idle_threads_cost_one_window(monkeypatch):
    monkeypatch.setattr(idle_threads, "other_threads_ns", lambda: {1: 5, 2: 7})
    assert idle_threads.wait_until_idle(window_s=0.001) < 0.05


def test_without_schedstat_nothing_is_waited_for(monkeypatch, tmp_path):
    monkeypatch.setattr(idle_threads, "TASKS", str(tmp_path / "none"))
    assert idle_threads.other_threads_ns() is None and idle_threads.wait_until_idle() is None


@pytest.mark.parametrize("threads, waits", [(1, False), (2, True)])
def test_the_driver_waits_before_a_multi_thread_time_and_keeps_a_long_wait(monkeypatch, threads, waits):
    asked = []
    monkeypatch.setattr(driver_mod, "wait_until_idle", lambda: asked.append(1) or idle_threads.CAP_S)
    d = Driver(cpu_backend(probe=False), Settings(budget_s=0.0, min_samples=1, max_attempts=1))
    a = np.arange(1.0, 65.0)
    rec = d.measure("cpu.stream.copy", (a, np.empty_like(a)), threads=threads, reps=1)
    assert rec.status == "ok" and bool(asked) == waits
    assert (rec.meta.get("waited_for_idle_threads_s") == idle_threads.CAP_S) == waits
    assert rec.meta.get("threads_still_busy", False) == waits
    got = d.time_runs(lambda: None, 3, threads=threads, warmup=0)
    assert got.get("threads_still_busy", False) == waits


def test_each_timed_block_waits_for_what_the_untimed_runs_between_left_spinning(monkeypatch):
    """time_runs(block=, between=): the profiled session's runs between the timed blocks leave its
    workers spinning; each timed block waits for them, and the waits add up in the result."""
    events = []
    monkeypatch.setattr(driver_mod, "wait_until_idle", lambda: events.append("wait") or 0.1)
    d = Driver(cpu_backend(probe=False), Settings(budget_s=0.0, min_samples=1, max_attempts=1))
    got = d.time_runs(lambda: events.append("run"), 4, threads=2, warmup=0, block=2,
                      between=lambda k: events.append(f"between {k}"))  # fmt: skip
    assert events == ["wait", "between 2", "wait", "run", "run", "between 2", "wait", "run", "run"]
    assert got["waited_for_idle_threads_s"] == pytest.approx(0.3)


def test_an_interleaved_round_waits_before_each_multi_thread_entry(monkeypatch):
    """Driver.interleaved: the entry before (numpy's BLAS, say) may leave its pool spinning into the
    next entry's sample; each multi-thread sample waits for it, a 1-thread one does not."""
    from rooflab.driver import Entry

    asked = []
    monkeypatch.setattr(driver_mod, "wait_until_idle", lambda: asked.append(1) or idle_threads.CAP_S)
    d = Driver(cpu_backend(probe=False), Settings(target_s=0.0005, probe_clock=False))
    a = np.arange(1.0, 4097.0)
    entries = [Entry("cpu.stream.copy", (a, np.empty_like(a)), label=f"T{t}", threads=t) for t in (1, 2)]
    before = len(asked)
    recs = {r.label: r for r in d.interleaved(entries, rounds=3)}
    assert recs["T2"].meta.get("waited_for_idle_threads_s", 0) >= 3 * idle_threads.CAP_S
    assert "waited_for_idle_threads_s" not in recs["T1"].meta and len(asked) - before >= 3
