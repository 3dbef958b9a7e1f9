"""The one driver: build -> verify -> time -> record.

``Runner.measure`` takes a registered variant and its inputs (already built: allocated, pages
touched, kernel compiled by the verification call) and returns a tidy record. The timed callable
only launches the kernel; nothing is compiled or allocated inside it.

Contention. The development machine is a shared VM: a neighbour can take half of a core for
minutes, and steal time does not show it. Each measurement is bracketed by the clock probe
(kernels/cpu/clock.py) on the same threads. If the clock before or after is >5% below the best
clock seen in this run, or the samples' CV is above the limit, the measurement is marked noisy
and repeated (up to ``max_attempts``); the best attempt is kept with every attempt's figures, and
a measurement still noisy at the end says so in the result instead of passing as a ceiling.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from . import verify as verify_mod
from .errors import VerificationError
from .registry import Variant, get_variant
from .threads import use_threads
from .timing import calibrate, invert_stats, summarize, time_cpu

# A probe below 85% of the run's best clock means someone else is on the core. Turbo and AVX-512
# frequency licences move the clock by up to ~12% on their own (3.5-4.0 GHz seen here); a
# neighbour on a shared host takes 30-50%.
CLOCK_DROP = 0.85


@dataclass
class Settings:
    budget_s: float = 0.3  # time budget per measurement (samples are taken until it is spent)
    target_s: float = 0.01  # duration of one sample; kernels repeat inside to reach it
    min_samples: int = 5
    cv_limit: float = 0.05  # samples spread above this marks the measurement noisy
    max_attempts: int = 3
    probe_clock: bool = True
    probe_s: float = 0.005


@dataclass
class Runner:
    settings: Settings = field(default_factory=Settings)
    best_clock: dict = field(default_factory=dict)  # threads -> best GHz seen in this run

    # ---- clock ---------------------------------------------------------------------------------
    def probe_clock(self, threads: int) -> list[float] | None:
        """Per-thread running clock in GHz from the dependent-add chain, all threads at once."""
        from .kernels.cpu import clock

        if not (self.settings.probe_clock and clock.SUPPORTED):
            return None
        v = get_variant("cpu.clock.add_chain")
        with use_threads(threads):
            blocks = 1000
            v(blocks=blocks, threads=threads)  # compile and wake the pool
            # one probe lasts probe_s: 100 adds per block at ~3-4 GHz is ~30 ns per block
            blocks = max(1000, int(self.settings.probe_s * 3.5e9 / 100))
            t0 = time.perf_counter_ns()
            out = v(blocks=blocks, threads=threads)
            dt = (time.perf_counter_ns() - t0) * 1e-9
        expected = v.reference(blocks=blocks, threads=threads)
        if not np.array_equal(out, expected):
            raise VerificationError(f"clock probe returned {out}, expected {expected}")
        ghz = blocks * 100 / dt / 1e9
        per_thread = [ghz] * threads
        self.best_clock[threads] = max(self.best_clock.get(threads, 0.0), ghz)
        return per_thread

    # ---- measurement ---------------------------------------------------------------------------
    def verify(self, variant: Variant, inputs: tuple, params: dict, threads: int) -> dict:
        """Run once on ``inputs`` and compare with the reference computed beforehand."""
        expected = variant.reference(*inputs, **params)
        with use_threads(threads):
            got = variant.kernel(*inputs, threads=threads, **params)
        dtype = (
            variant.result_dtype(*inputs, **params)
            if variant.result_dtype
            else (inputs[0].dtype if inputs else np.asarray(got).dtype)
        )
        return verify_mod.check(got, expected, dtype=dtype, what=variant.name)

    def measure(
        self,
        variant: Variant | str,
        inputs: tuple,
        *,
        threads: int,
        params: dict | None = None,
        verify_params: dict | None = None,
        label: str | None = None,
        reps: int | None = None,
        budget_s: float | None = None,
        min_samples: int | None = None,
        target_s: float | None = None,
        cv_limit: float | None = None,
        max_attempts: int | None = None,
        meta: dict | None = None,
    ) -> dict:
        """Verify, calibrate, time with contention checks; returns the record (never raises for a
        wrong kernel: the record then has status 'failed' and the error, and no figures)."""
        variant = get_variant(variant) if isinstance(variant, str) else variant
        s = self.settings
        params = variant.params(**(params or {}))
        record = {
            "variant": variant.name,
            "family": variant.family,
            "device": variant.device,
            "label": label or variant.name,
            "threads": threads,
            "dtype": str(inputs[0].dtype) if inputs and hasattr(inputs[0], "dtype") else None,
            "shape": {"n": int(inputs[0].size)} if inputs and hasattr(inputs[0], "size") else {},
            "working_set_bytes": int(sum(getattr(x, "nbytes", 0) for x in inputs)),
            "params": {k: _jsonable(v) for k, v in params.items()},
            **(meta or {}),
        }
        try:
            vparams = variant.params(**{**params, **(verify_params or {})})
            record["verification"] = self.verify(variant, inputs, vparams, threads)
            record["verified"] = True
        except VerificationError as e:
            record.update(status="failed", verified=False, error=str(e))
            return record

        budget = budget_s if budget_s is not None else s.budget_s
        target = target_s if target_s is not None else s.target_s
        nmin = min_samples if min_samples is not None else s.min_samples
        cvmax = cv_limit if cv_limit is not None else s.cv_limit
        attempts_max = max_attempts if max_attempts is not None else s.max_attempts

        with use_threads(threads):

            def make_call(r):
                return lambda: variant.kernel(*inputs, reps=r, threads=threads, **params)

            if reps is None:
                reps = calibrate(make_call, target)
            call = make_call(reps)
            attempts = []
            for _ in range(attempts_max):
                before = self.probe_clock(threads)
                samples = time_cpu(call, budget_s=budget, min_samples=nmin)
                after = self.probe_clock(threads)
                attempts.append(self._attempt(samples.seconds, before, after, threads, cvmax))
                if not attempts[-1]["noise_reasons"]:
                    break
        work = variant.work(*inputs, reps=reps, **params)
        best = min(attempts, key=lambda a: (bool(a["noise_reasons"]), a["stats"]["median"]))
        t = best["stats"]
        record.update(
            status="ok",
            reps=int(reps),
            work=work.as_dict(),
            time_s=t,
            samples_s=best["samples"],
            gflops=invert_stats(t, work.flops / 1e9) if work.flops else None,
            gbps=invert_stats(t, work.bytes / 1e9) if work.bytes else None,
            ns_per_launch=_per_launch_ns(t, work.launches),
            clock_ghz={"before": best["before"], "after": best["after"], "best_in_run": self.best_clock.get(threads)},
            noisy=bool(best["noise_reasons"]),
            noise_reasons=best["noise_reasons"],
            attempts=[
                {"median_s": a["stats"]["median"], "cv": a["stats"]["cv"], "noise_reasons": a["noise_reasons"]}
                for a in attempts
            ],
        )
        return record

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


def _per_launch_ns(t: dict, launches: int) -> dict:
    """Time statistics of one call divided over its launches, in nanoseconds."""
    n = max(launches, 1)
    out = {k: t[k] * 1e9 / n for k in ("median", "p20", "p80", "min", "max")}
    out.update(cv=t["cv"], n=t["n"])
    return out


def _jsonable(v):
    if isinstance(v, (np.generic,)):
        return v.item()
    return v
