"""The one driver: build -> verify -> time -> Record, for any variant on any device.

Everything that measures goes through here: the ceilings suites (CPU and GPU), the kernel-family
suites, the library peers and the model ops. The device is injected as a ``Backend`` (its timer,
its clock probe, its thread control); the checker is rooflab.verify.check for every device.

    driver = Driver(cpu_backend())                    # or rooflab.cuda.backend.driver_backend()
    record = driver.measure("cpu.stream.triad", inputs, threads=2)
    records = driver.run(cases, writer, progress)     # a suite: a list of registry.Case
    records = driver.interleaved(entries, rounds=5)   # comparisons: round r times every entry once

The timed callable only launches the kernel (inputs are built, pages touched and the kernel compiled
by the verification call before timing). A wrong kernel gets a record with status "failed" and the
error, never a figure.

Contention. The development machines are shared VMs: a neighbour can take half a core for minutes
and steal time does not show it. Each measurement is bracketed by the backend's clock probe on the
same threads; a probe >15 % below the best clock of the run, or samples whose CV is above the
limit, mark the attempt noisy and it is repeated (up to ``max_attempts``); the best attempt is kept
with every attempt's figures, and one still noisy says so (``noisy``, ``noise_reasons``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from . import verify
from .backend import Backend
from .errors import RooflabError, VerificationError
from .idle_threads import CAP_S, WINDOW_S, wait_until_idle
from .memory import check_footprint
from .registry import Case, Variant, check_cases, get_variant
from .timing import invert_stats, summarize

# A probe below 85% of the run's best clock means someone else is on the core. Turbo and AVX-512
# frequency licences move the clock by up to ~12% on their own; a neighbour takes 30-50%.
CLOCK_DROP = 0.85


@dataclass
class Settings:
    budget_s: float = 0.3  # time budget per attempt (samples are taken until it is spent)
    target_s: float = 0.01  # duration of one sample; kernels repeat inside to reach it
    min_samples: int = 5
    cv_limit: float = 0.05  # samples spread above this marks the attempt noisy
    max_attempts: int = 3
    probe_clock: bool = True


@dataclass
class Record:
    """One measurement, as written to result files (``as_dict``; ``meta`` is flattened)."""

    variant: str
    family: str
    device: str
    label: str
    threads: int
    dtype: str | None
    shape: dict
    params: dict
    working_set_bytes: int
    status: str = "ok"
    verified: bool = False
    verification: dict | None = None
    error: str | None = None
    reps: int | None = None
    work: dict | None = None
    time_s: dict | None = None
    samples_s: list = field(default_factory=list)
    gflops: dict | None = None
    gbps: dict | None = None
    ns_per_launch: dict | None = None
    clock_ghz: dict | None = None
    noisy: bool = False
    noise_reasons: list = field(default_factory=list)
    attempts: list = field(default_factory=list)
    library: bool = False
    number: int | None = None
    meta: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        d = asdict(self)
        meta = d.pop("meta")
        return {**d, **meta}

    # Read like the JSON record it becomes: rec["gflops"], rec.get("error"); a field that was not
    # measured (None, e.g. the figures of a failed record) is absent, as in the file.
    def __getitem__(self, key):
        value = self.as_dict()[key]
        if value is None:
            raise KeyError(key)
        return value

    def get(self, key, default=None):
        value = self.as_dict().get(key)
        return default if value is None else value

    def __contains__(self, key) -> bool:
        return self.as_dict().get(key) is not None


def _jsonable(v: Any) -> Any:
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.dtype):
        return v.name
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    return v


def _per_launch_ns(t: dict, launches: int) -> dict:
    n = max(launches, 1)
    out = {k: t[k] * 1e9 / n for k in ("median", "p20", "p80", "min", "max")}
    out.update(cv=t["cv"], n=t["n"])
    return out


def _size_of(inputs) -> tuple[str | None, dict, int]:
    arrays = [x for x in inputs if hasattr(x, "nbytes")]
    dtype = str(arrays[0].dtype) if arrays else None
    shape = {"n": int(arrays[0].size)} if arrays else {}
    return dtype, shape, int(sum(x.nbytes for x in arrays))


@dataclass
class Entry:
    """One contender of an interleaved comparison (``Driver.interleaved``). Entries of one ``group``
    are compared with the group's library variant (number 0), else with its first entry; inputs
    may be shared between entries (the same operands for every rung of a ladder)."""

    variant: Variant | str
    inputs: tuple
    params: dict = field(default_factory=dict)
    verify_params: dict | None = None
    label: str | None = None
    group: str | None = None
    threads: int = 1
    reps: int | None = None
    meta: dict = field(default_factory=dict)
    rotate: tuple = ()  # more input sets (copies of ``inputs``): one sample's calls cycle through all
    # of them (operands > 2x the last-level cache come from DRAM: "cold"); reps >= the number of sets


def _rate(work, seconds: float) -> float:
    """Work per second: FLOPs where the work declares them, else bytes, else launches."""
    amount = work.flops or work.bytes or work.launches or 1
    return amount / seconds


def _or(given, default):
    """A measurement's own setting where it gives one, else the run's."""
    return default if given is None else given


def _case_key(case) -> str | None:
    """A suite case as the key of its verification: what makes its operands and its check (variant,
    size, dtype, threads, parameters; not its label or timing). None when it is not JSON."""
    try:
        return json.dumps(
            [case.variant, case.size, case.dtype, case.threads, case.params, case.verify_params], sort_keys=True
        )
    except (TypeError, ValueError):
        return None


def _new_record(variant: Variant, inputs, threads: int, params: dict, label, shape, meta) -> Record:
    """A record of ``variant`` on ``inputs`` before it is verified or timed: the one place a record
    is built, for a single measurement and an interleaved one alike."""
    dtype, size_shape, ws = _size_of(inputs)
    return Record(
        variant=variant.name,
        family=variant.family,
        device=variant.device,
        label=label or variant.name,
        threads=threads,
        dtype=dtype,
        shape=_jsonable(shape) if shape is not None else size_shape,
        params=_jsonable(params),
        working_set_bytes=ws,
        library=variant.library,
        number=variant.number,
        meta=_jsonable(meta or {}),
    )


def _set_figures(rec: Record, work, reps: int, t: dict) -> None:
    """The record's figures from its time statistics ``t`` and the declared work of ``reps`` calls."""
    rec.reps, rec.work, rec.time_s = reps, work.as_dict(), t
    rec.gflops = invert_stats(t, work.flops / 1e9) if work.flops else None
    rec.gbps = invert_stats(t, work.bytes / 1e9) if work.bytes else None
    rec.ns_per_launch = _per_launch_ns(t, work.launches)


VERIFY_COPIES = 8  # a rotation's copies the kernel is checked on: the first, the last, evenly spaced between


def checked_copies(copies: list) -> list:
    """The copies of a rotation its kernel is verified on: every one of up to VERIFY_COPIES, else
    the first, the last and evenly spaced ones between. The copies are one kernel at one shape on
    operands from different seeds: a kernel wrong on random values is wrong on the first already;
    the spread sample, the last copy included, checks how the copies were made. Checking all 512
    of a tiny op's copies took half of a tiny model's `llm --grid small` (51 of 111 s)."""
    n = len(copies)
    if n <= VERIFY_COPIES:
        return list(copies)
    return [copies[round(i * (n - 1) / (VERIFY_COPIES - 1))] for i in range(VERIFY_COPIES)]


def _settle(meta: dict, threads: int) -> None:
    """Before a multi-thread time: wait for this process's other threads to go idle (idle_threads:
    a pool an earlier call left spinning, e.g. OpenBLAS after the references, would take the
    cores); a wait longer than one look, or one that hit its cap, is kept in ``meta`` (waits of
    several calls on one meta add up)."""
    if threads <= 1:
        return
    waited = wait_until_idle()
    if waited is not None and waited > 2 * WINDOW_S:
        meta["waited_for_idle_threads_s"] = round(meta.get("waited_for_idle_threads_s", 0.0) + waited, 4)
        if waited >= CAP_S:
            meta["threads_still_busy"] = True


@dataclass
class Driver:
    backend: Backend
    settings: Settings = field(default_factory=Settings)
    best_clock: dict = field(default_factory=dict)  # threads -> best GHz seen in this run
    # a suite case (its JSON) -> its verification in this run, or the error it gave (``measure``)
    verified: dict = field(default_factory=dict)

    # ---- clock ---------------------------------------------------------------------------------
    def probe_clock(self, threads: int) -> list[float] | None:
        if not (self.settings.probe_clock and self.backend.clock):
            return None
        ghz = self.backend.clock(threads)
        if ghz:  # the slowest thread's clock: what an all-thread kernel runs at
            self.best_clock[threads] = max(self.best_clock.get(threads, 0.0), min(ghz))
        return ghz

    # ---- one measurement -----------------------------------------------------------------------
    def verify(self, variant: Variant, inputs: tuple, params: dict, threads: int) -> dict:
        """Run once on ``inputs`` and compare with the reference computed beforehand (under the same
        thread limit, so a reference that follows the thread layout sees the kernel's)."""
        with self.backend.threads(threads):
            expected = variant.reference(*inputs, **params)
            got = variant.kernel(*inputs, threads=threads, **params)
        dtype = variant.result_dtype(*inputs, **params) if variant.result_dtype else None
        return verify.check(got, expected, dtype=dtype, what=variant.name, kind=variant.tolerance)

    @staticmethod
    def _verify_rotation(variant: Variant, copies: list, run_all: Callable, params: dict) -> None:
        """A rotation the variant runs its own way (Variant.rotate: one merged graph) is another
        execution path than the kernel each copy was verified with: each of its outputs, one per
        copy in order, is checked against that copy's reference before it is timed."""
        outs = list(run_all())
        if len(outs) != len(copies):
            raise VerificationError(
                f"{variant.name}: its rotation returned {len(outs)} outputs for {len(copies)} copies"
            )
        for c, got in zip(copies, outs):
            dtype = variant.result_dtype(*c, **params) if variant.result_dtype else None
            verify.check(
                got,
                variant.reference(*c, **params),
                dtype=dtype,
                what=f"{variant.name} (rotation)",
                kind=variant.tolerance,
            )

    def measure(
        self,
        variant: Variant | str,
        inputs: tuple,
        *,
        threads: int = 1,
        params: dict | None = None,
        verify_params: dict | None = None,
        label: str | None = None,
        shape: dict | None = None,
        meta: dict | None = None,
        reps: int | None = None,
        budget_s: float | None = None,
        min_samples: int | None = None,
        target_s: float | None = None,
        cv_limit: float | None = None,
        max_attempts: int | None = None,
        flush: Callable | None = None,
        rotation: list[tuple] | None = None,
        unit_clock: bool = False,
        case_key: str | None = None,
    ) -> Record:
        """Verify, calibrate, time with contention checks. Never raises for a wrong kernel: the
        record then has status 'failed' and the error, and no figures.

        ``case_key``: the suite case these inputs were made from (``run_case``): a case measured
        again in a later pass of the run (its operands made again from the same case and seed: the
        same values) keeps its first verification, or its first error; without it, every call
        verifies.

        ``rotation``: further copies of ``inputs`` (same shapes; the operand that streams in distinct
        buffers, the others may be shared). Every copy is verified; each sample then calls the kernel once on each copy in turn and is charged per
        call (sample / copies): operands that together exceed the caches stream from memory on every
        call without a flush between calls, as a decode step streams its layers' weights."""
        variant = get_variant(variant) if isinstance(variant, str) else variant
        params = variant.params(**(params or {}))
        rec = _new_record(variant, inputs, threads, params, label, shape, meta)
        copies = [inputs, *(rotation or [])]
        vparams = variant.params(**{**params, **(verify_params or {})})
        try:  # the variant's own way through the copies (Variant.rotate: one graph), or None
            run_all = variant.rotate(copies, threads=threads, **params) if len(copies) > 1 and variant.rotate else None
        except RooflabError as e:
            rec.status, rec.error = "failed", str(e)
            return rec
        if not self._check(rec, variant, copies, vparams, threads, case_key, run_all):
            return rec
        _settle(rec.meta, threads)  # the references' BLAS pool just ran on these threads
        s = self.settings
        try:
            attempts, reps = self._time(
                variant, copies, params, threads, reps, _or(target_s, s.target_s), _or(budget_s, s.budget_s),
                _or(min_samples, s.min_samples), _or(cv_limit, s.cv_limit), _or(max_attempts, s.max_attempts),
                flush, unit_clock, run_all,
            )  # fmt: skip
        except RooflabError as e:  # e.g. a launch that fails only at the timed size
            rec.status, rec.error = "failed", str(e)
            return rec
        work = variant.work(*inputs, reps=reps, **params)
        best = min(attempts, key=lambda a: (bool(a["noise_reasons"]), a["stats"]["median"]))
        _set_figures(rec, work, int(reps), best["stats"])
        rec.samples_s = best["samples"]
        self._record_attempts(rec, best, attempts, threads)
        if self.backend.after_verify:
            rec.meta.update(self.backend.after_verify(variant, inputs) or {})
        if variant.after_run:  # what the kernel measured on the chip (SM clock, ns per hop)
            rec.meta.update(_jsonable(variant.after_run(*inputs) or {}))
        return rec

    def verify_case(self, case: Case, inputs: tuple) -> None:
        """Verify a suite case now and remember the outcome for this run: its measurement then
        takes this check (or its error) instead of verifying again (a measuring process does it
        before it is told to measure, rooflab.processes)."""
        v = get_variant(case.variant)
        params = v.params(**case.params)
        rec = _new_record(v, inputs, case.threads, params, case.label, None, case.meta)
        vparams = v.params(**{**params, **(case.verify_params or {})})
        self._check(rec, v, [inputs], vparams, case.threads, _case_key(case))

    def _check(
        self, rec: Record, variant: Variant, copies: list, vparams: dict, threads: int, case_key, run_all=None
    ) -> bool:
        """Verify the copies of the operands (checked_copies: all of a rotation of up to
        VERIFY_COPIES), or take the case's check (or error) from an earlier pass of this run; False,
        with the record failed and the error, for a wrong result, a refusal of these inputs or a
        launch error. ``run_all``: the variant's own rotation over the copies, what is timed: the
        kernel is checked on the first copy, the rotation's output on every copy."""
        earlier = self.verified.get(case_key) if case_key is not None else None
        try:
            if isinstance(earlier, RooflabError):
                raise earlier
            if earlier is not None:  # the same case, checked in an earlier pass of this run
                rec.verification = {**earlier, "earlier_in_run": True}
            kernel_checked = copies[:1] if run_all is not None else checked_copies(copies)
            for i, c in enumerate(kernel_checked if earlier is None else []):
                checked = self.verify(variant, c, vparams, threads)
                if i == 0:
                    rec.verification = checked
            if run_all is not None:
                with self.backend.threads(threads):
                    self._verify_rotation(variant, copies, run_all, vparams)
        except RooflabError as e:
            if case_key is not None:
                self.verified[case_key] = e
            rec.status, rec.error = "failed", str(e)
            return False
        if case_key is not None:
            self.verified[case_key] = rec.verification
        rec.verified = True
        if len(copies) > 1:
            distinct = {id(x): x.nbytes for c in copies for x in c if hasattr(x, "nbytes")}
            rec.meta.update(rotation_copies=len(copies), rotation_bytes=sum(distinct.values()))
        return True

    def _record_attempts(self, rec: Record, best: dict, attempts: list[dict], threads: int) -> None:
        """The chosen attempt's clocks and noise, and every attempt's median, CV and noise."""
        if best["before"] is not None:
            rec.clock_ghz = {
                "before": best["before"],
                "after": best["after"],
                "best_in_run": self.best_clock.get(threads),
            }
        if best.get("unit") is not None:  # the clock while this kernel's unit ran: per thread, the
            # median over the samples; per sample (the slowest thread's), in the samples' order
            rec.clock_ghz = {**(rec.clock_ghz or {}), "unit": best["unit"], "unit_per_sample": best["unit_per_sample"]}
        rec.noisy = bool(best["noise_reasons"])
        rec.noise_reasons = best["noise_reasons"]
        rec.attempts = [
            {"median_s": a["stats"]["median"], "cv": a["stats"]["cv"], "noise_reasons": a["noise_reasons"]}
            for a in attempts
        ]

    def _time(
        self, variant, copies, params, threads, reps, target, budget, nmin, cvmax, attempts_max, flush=None, unit=False,
        run_all=None,
    ):  # fmt: skip
        """``copies``: the inputs, then any rotation copies; a sample runs each once, charged per copy
        (``run_all``: the variant's own verified way through them, one graph)."""
        with self.backend.threads(threads):

            def make_call(r):
                if len(copies) == 1:
                    return lambda: variant.kernel(*copies[0], reps=r, threads=threads, **params)
                if run_all is not None:

                    def rotated():
                        for _ in range(r):
                            run_all()

                    return rotated

                def rotate():
                    for c in copies:
                        variant.kernel(*c, reps=r, threads=threads, **params)

                return rotate

            warm = False  # the calibration just ran this very call: the first attempt needs no warm-up
            if reps is None:
                reps = self.backend.calibrate(make_call, target)
                warm = self.backend.calibrated_is_warm and flush is None and len(copies) == 1
            call = make_call(reps)
            # a peak kernel's unit clock: a short chain right after every sample (the clock that
            # sample's unit ran at, however the host's clock wanders)
            per_sample = unit and self.settings.probe_clock and self.backend.sample_clock
            hook = {"after": lambda: self.backend.sample_clock(threads)} if per_sample else {}
            attempts = []
            for i in range(attempts_max):
                before = self.probe_clock(threads)
                skip = {"warmup": 0} if warm and i == 0 else {}
                got = self.backend.timer(call, budget_s=budget, min_samples=nmin, flush=flush, **hook, **skip)
                seconds, clocks = got if per_sample else (got, None)
                seconds = [x / len(copies) for x in seconds]
                after = self.probe_clock(threads)
                attempts.append(self._attempt(seconds, before, after, threads, cvmax))
                if clocks and all(clocks):
                    per_thread = np.asarray(clocks, dtype=np.float64)  # [sample][thread]
                    attempts[-1]["unit"] = [float(g) for g in np.median(per_thread, axis=0)]
                    attempts[-1]["unit_per_sample"] = [round(float(g), 4) for g in per_thread.min(axis=1)]
                if not attempts[-1]["noise_reasons"]:
                    break
        return attempts, reps

    def _attempt(self, seconds, before, after, threads, cvmax) -> dict:
        stats = summarize(seconds)
        reasons = []
        if stats["cv"] > cvmax:
            reasons.append(f"samples CV {stats['cv']:.1%} > {cvmax:.0%}")
        best = self.best_clock.get(threads)
        for when, probe in (("before", before), ("after", after)):
            if probe and best and min(probe) < CLOCK_DROP * best:
                reasons.append(f"clock {when} {min(probe):.2f} GHz < {CLOCK_DROP:.0%} of {best:.2f} GHz")
        return {"stats": stats, "samples": list(seconds), "before": before, "after": after, "noise_reasons": reasons}

    # ---- a runtime's whole step -------------------------------------------------------------------
    def time_runs(
        self, run, runs: int, *, threads: int = 1, warmup: int = 2, sync=None, after=None, block=None, between=None
    ) -> dict:
        """A runtime's whole step timed end to end (a session run, a model's forward, a decode step:
        milliseconds, no repetition count needed), checked for noise as a kernel's samples are (their
        spread, the clock probed before and after): ``warmup`` untimed calls, then ``runs`` timed ones,
        every sample kept. ``sync`` runs before the clock starts and before it stops (a device's queue
        drained); ``after`` runs outside the time after each call (a KV cache rolled back);
        ``between(k)`` runs untimed before each block of ``block`` timed calls (k of them: a profiled
        session's runs, alternated with the timed ones so that a neighbour hits both alike); the
        block waits for the threads ``between`` left spinning (``_settle``)."""
        sync = sync or (lambda: None)
        after = after or (lambda: None)
        settled: dict = {}
        _settle(settled, threads)
        for _ in range(warmup):
            run()
            after()
        before = self.probe_clock(threads)
        times: list[float] = []
        while len(times) < runs:
            k = min(block or runs, runs - len(times))
            if between is not None:
                between(k)
                _settle(settled, threads)
            for _ in range(k):
                sync()
                t0 = time.perf_counter()
                run()
                sync()
                times.append(time.perf_counter() - t0)
                after()
        a = self._attempt(times, before, self.probe_clock(threads), threads, self.settings.cv_limit)
        return {
            "median_s": a["stats"]["median"],
            "min_s": a["stats"]["min"],
            "runs": runs,
            "samples_s": times,
            "stats": a["stats"],
            "noisy": bool(a["noise_reasons"]),
            "noise_reasons": a["noise_reasons"],
            "clock_ghz": {"before": before, "after": a["after"]},
            **settled,
        }

    # ---- an interleaved comparison ---------------------------------------------------------------
    def interleaved(
        self, entries: list[Entry], rounds: int = 5, *, target_s: float | None = None, cpu_time: bool = False
    ) -> list[Record]:
        """Verify and calibrate every entry, then ``rounds`` rounds in which every entry is timed once,
        in order: a neighbour's burst or a clock change hits every contender of a round alike, so
        the per-round ratio to the group's base cancels it. Every sample is kept (``samples_s``, one
        per round); ``meta`` gets ``round_ratios`` (entry's work rate / base's, per round), their
        median ``ratio`` and the ``base`` label. A wrong or failing entry gets a failed record (no
        figure) and the others go on; a group whose base failed has no ratios.

        Entries of other families ride in the same rounds in their own ``group`` (the FMA peak, a
        stream roof over the same bytes): their figures share the rounds' load, their ratios stay
        within their group. Where the backend has a clock probe (and ``Settings.probe_clock``), the
        clock is probed on each thread count before every round and after the last:
        ``meta["round_clock_ghz"]`` (per round, the per-thread GHz before it), ``clock_ghz``
        before the first and after the last round, and a round whose probe is below CLOCK_DROP of
        the run's best makes the record ``noisy`` with the reason. ``cpu_time``: also the calling
        thread's CPU time of each sample of a 1-thread entry (``meta["cpu_samples_s"]``, and
        ``cpu_ratio`` per group): on a shared VM it leaves out the time slices other processes got."""
        target = self.settings.target_s if target_s is None else target_s
        out = [self._prepare(e, target) for e in entries]
        live = [x for x in out if x[0].status == "ok"]
        probes = []  # per round (and after the last): {threads: per-thread GHz}
        for _ in range(int(rounds)):
            probes.append(self._probe_threads(live))
            for rec, _v, e, _p, _r, call in live:
                if rec.status != "ok":
                    continue
                try:
                    _settle(rec.meta, e.threads)  # the entry before may have left a pool spinning
                    with self.backend.threads(e.threads):
                        self._sample(rec, call, cpu_time and e.threads == 1)
                except RooflabError as err:  # a launch that fails only now
                    rec.status, rec.error, rec.samples_s = "failed", str(err), []
                    rec.meta.pop("cpu_samples_s", None)
        probes.append(self._probe_threads(live))
        for rec, v, e, params, reps, _ in live:
            if rec.status != "ok":
                continue
            work = v.work(*e.inputs, reps=reps, **params)
            _set_figures(rec, work, reps, summarize(rec.samples_s))
            rec.meta["_rates"] = [_rate(work, s) for s in rec.samples_s]
            if "cpu_samples_s" in rec.meta:
                rec.meta["_cpu_rates"] = [_rate(work, s) for s in rec.meta["cpu_samples_s"]]
            self._round_clocks(rec, [p.get(e.threads) for p in probes])
            if v.after_run:
                rec.meta.update(_jsonable(v.after_run(*e.inputs) or {}))
        out = [x[0] for x in out]
        _group_ratios(out)
        return out

    def _prepare(self, e: Entry, target: float) -> tuple:
        """An interleaved entry verified and calibrated: (record, variant, entry, params, reps, call);
        a failure leaves the record failed (call None) and the others go on."""
        v = get_variant(e.variant) if isinstance(e.variant, str) else e.variant
        params = v.params(**e.params)
        meta = {**e.meta, **({"group": e.group} if e.group is not None else {})}
        rec = _new_record(v, e.inputs, e.threads, params, e.label, None, meta)
        try:
            rec.verification = self.verify(v, e.inputs, v.params(**{**params, **(e.verify_params or {})}), e.threads)
            rec.verified = True
            with self.backend.threads(e.threads):
                sets = (e.inputs, *e.rotate)

                def make_call(r):
                    if len(sets) == 1:
                        return lambda: v.kernel(*e.inputs, reps=r, threads=e.threads, **params)
                    return lambda: [
                        v.kernel(*sets[i % len(sets)], reps=1, threads=e.threads, **params) for i in range(r)
                    ]

                reps = int(max(len(sets), e.reps or self.backend.calibrate(make_call, target)))
            return rec, v, e, params, reps, make_call(reps)
        except RooflabError as err:
            rec.status, rec.error = "failed", str(err)
            return rec, v, e, params, 0, None

    def _probe_threads(self, live) -> dict:
        """The clock on every thread count of the entries still timed (none: no probe)."""
        counts = dict.fromkeys(e.threads for rec, _v, e, *_ in live if rec.status == "ok")
        return {t: g for t in counts if (g := self.probe_clock(t))}

    def _sample(self, rec: Record, call, cpu_time: bool) -> None:
        """One timed sample of ``call`` (the backend's timer, its warm-up untimed); with
        ``cpu_time`` the calling thread's CPU time of that sample too."""
        if not cpu_time:
            rec.samples_s += list(self.backend.timer(call, budget_s=0.0, min_samples=1))
            return
        cpu = []

        def timed():
            c0 = time.thread_time()
            call()
            cpu.append(time.thread_time() - c0)

        seconds = list(self.backend.timer(timed, budget_s=0.0, min_samples=1))
        rec.samples_s += seconds
        rec.meta.setdefault("cpu_samples_s", []).extend(cpu[-len(seconds) :])

    def _round_clocks(self, rec: Record, probes: list) -> None:
        """Each round's clock probe on the record (the last one is after the last round); rounds
        that began below CLOCK_DROP of the run's best clock make it noisy, with the reason."""
        if not any(probes):
            return
        rec.meta["round_clock_ghz"] = probes[:-1]
        best = self.best_clock.get(rec.threads)
        rec.clock_ghz = {"before": probes[0], "after": probes[-1], "best_in_run": best}
        low = [i for i, p in enumerate(probes) if p and best and min(p) < CLOCK_DROP * best]
        if low:
            rec.noisy = True
            rec.noise_reasons.append(
                f"clock below {CLOCK_DROP:.0%} of the run's best {best:.2f} GHz at probe(s) {low} "
                f"(probe i: before round i; {len(probes) - 1}: after the last)"
            )

    # ---- a suite -------------------------------------------------------------------------------
    def run_case(self, case: Case, inputs: tuple | None = None) -> Record:
        processes = int(case.timing.get("processes", 1))
        if processes > 1 and self.backend.isolate:  # a figure fixed per process: several draws
            return self.backend.isolate(self, case, processes)
        case_timing = {k: v for k, v in case.timing.items() if k != "processes"}
        v = get_variant(case.variant)
        if inputs is None:
            inputs = self.inputs(case)
        if callable(case_timing.get("rotation")):  # the case's copies, made now beside its inputs
            case_timing["rotation"] = case_timing["rotation"](case, inputs)
        shape = case.size if isinstance(case.size, dict) else None
        return self.measure(
            v,
            inputs,
            threads=case.threads,
            params=case.params,
            verify_params=case.verify_params,
            label=case.label,
            shape=shape,
            meta=case.meta,
            case_key=_case_key(case),
            **case_timing,
        )

    @staticmethod
    def inputs(case: Case) -> tuple:
        v = get_variant(case.variant)
        return v.inputs(case.size, np.dtype(case.dtype) if case.dtype else None, seed=0, threads=case.threads)

    def run(self, cases: list[Case], writer=None, progress=None) -> list[Record]:
        """Run a suite: every case verified then timed; the writer saves after each record.
        Consecutive cases of one variant at one size and dtype (thread counts) share inputs: a
        2 GiB working set is allocated and first-touched once, not once per thread count."""
        check_cases(cases)
        out = []
        cached_key, cached = None, None
        for case in cases:
            if progress:
                progress.step(case.label or case.variant)
            try:
                key = (case.variant, repr(case.size), case.dtype)
                if key != cached_key:
                    cached_key, cached = None, None  # free the previous working set first
                    if case.footprint:  # refused before it is allocated (never OOM-killed)
                        check_footprint(case.footprint, case.label or case.variant)
                    cached, cached_key = self.inputs(case), key
                rec = self.run_case(case, cached)
            except (RooflabError, MemoryError) as e:
                if writer:
                    writer.add_error(case.label or case.variant, str(e) or type(e).__name__)
                continue
            out.append(rec)
            if writer:
                writer.add_record(rec.as_dict(), sweep=case.sweep)
        return out


def _group_ratios(out: list[Record]) -> None:
    """Per group of an interleaved run, each record's per-round rate over its base's (the group's
    library entry, else its first), their median, and the same for CPU time where it was kept."""
    for group in dict.fromkeys(r.meta.get("group") for r in out):
        members = [r for r in out if r.meta.get("group") == group]
        base = next((r for r in members if r.library), members[0])
        for key, rates in (("ratio", "_rates"), ("cpu_ratio", "_cpu_rates")):
            base_rates = base.meta.get(rates)
            for r in members:
                mine = r.meta.pop(rates, None)
                if base_rates and mine:
                    per_round = [a / b for a, b in zip(mine, base_rates)]
                    r.meta[f"round_{key}s"] = per_round
                    r.meta[key] = float(np.median(per_round))
                    r.meta["base"] = base.label
