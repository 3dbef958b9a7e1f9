"""How far a ceiling can be trusted: an interval the next run on the same quiet machine falls into.

A run's p20-p80 is the spread inside one burst of samples (median width 1.1 % on the Xeon VM) and
held the next quick run's value for 5 of 43 ceilings: a neighbour's minute, the DRAM regime of the
hour, the L3's tenants move a figure by more than that between runs. So each ceiling's interval
uses both sources, and says which it had:

  run     the ceiling's own spread in this run: p20-p80 of the points or passes it is derived from,
          and the spread between passes (``pass_spread``);
  history the same ceiling in the earlier finished runs of the same kind (quick or full) on this
          machine in its results folder (the newest HISTORY): a 95 % prediction interval for the
          next run from their values and this one (Student's t on the log values: with 3 runs
          t = 4.30, so a handful of runs that happened to agree does not make a narrow interval;
          the range of n runs alone holds the next one with probability (n-1)/(n+1) only);
  floor   FLOOR: even a quiet L1 or FMA figure moves by 1-3 % between consecutive quick runs here
          (the clock, page placement, a neighbour): five quick runs on the Zen 4 VM, 2026-12-05.

  interval = value x [1 / (1 + h), 1 + h],  h = max(run half-width, history's prediction, FLOOR)

(symmetric on the log scale the prediction is made on: a wide interval, as a busy host's gives, never
reaches down to 0 or below; for a narrow one 1 / (1 + h) is 1 - h to within h^2).

With fewer than 2 earlier runs the interval is the run's own spread or the floor and says so
(``how``): it grows truthful as the folder fills. ``compare`` and the end-of-run consistency line call a move inside the earlier
run's interval no regression and no move.

Napkin math: 5 earlier runs x 43 ceilings read from JSON files of ~1-3 MB: well under a second.
"""

from __future__ import annotations

import math
from statistics import stdev

HISTORY = 5  # earlier runs the history half of the interval looks at
FLOOR = 0.03  # no interval narrower than +-3 % (see above)
T95 = (12.71, 4.30, 3.18, 2.78, 2.57, 2.45)  # Student's t, two-sided 95 %, 1..6 degrees of freedom


def _key(c: dict) -> tuple:
    return (c["name"], c.get("threads"), c.get("kind"))


def run_half_width(c: dict) -> float:
    """Relative half-width of the ceiling's spread inside its own run."""
    v = c.get("value") or 0.0
    s = c.get("stats") or {}
    h = 0.0
    if v and s.get("p20") is not None and s.get("p80") is not None:
        h = max(abs(v - s["p20"]), abs(s["p80"] - v)) / v
    return max(h, float(c.get("pass_spread") or 0.0))


def set_intervals(ceilings: list[dict], earlier: list[dict]) -> None:
    """Give every ceiling its ``interval`` {lo, hi, half_width, how, history_runs}. ``earlier``:
    result documents of the earlier finished runs of the same kind on this machine, newest last."""
    past = [{_key(c): c["value"] for c in d.get("ceilings", []) if c.get("value")} for d in earlier[-HISTORY:]]
    for c in ceilings:
        v = c.get("value")
        if not v:
            continue
        own = run_half_width(c)
        hist = [p[_key(c)] for p in past if _key(c) in p]
        h, how = (
            max(own, FLOOR),
            f"this run's spread, at least {FLOOR:.0%} (fewer than 2 earlier runs of this kind here)",
        )
        if len(hist) >= 2:
            logs = [math.log(x) for x in [*hist, v] if x > 0]
            n = len(logs)
            pred = T95[min(n - 2, len(T95) - 1)] * stdev(logs) * math.sqrt(1 + 1 / n)
            h = max(h, math.expm1(pred))
            how = f"this run's spread and a 95 % prediction from the {len(hist)} earlier run(s) of this kind here"
        c["interval"] = {"lo": v / (1 + h), "hi": v * (1 + h), "half_width": h, "how": how, "history_runs": len(hist)}


def inside(c: dict, value: float) -> bool | None:
    """Whether ``value`` falls inside the ceiling's interval (None: it has none)."""
    iv = c.get("interval")
    if not iv:
        return None
    return iv["lo"] <= value <= iv["hi"]


# ---- asv's regression view ------------------------------------------------------------------------

ASV_DEFAULT = 0.10  # asv.conf.json's threshold for every benchmark no interval speaks for
ASV_FLOOR = 0.05  # asv's own default: no entry below it


def _asv_entries(c: dict) -> list[str]:
    """asv entry names (benchmarks/, as asv names a parameter combination: ``name(p1, p2)``) that
    measure what the ceiling ``c`` measures."""
    from .asv_params import BENCH_PARAMS
    from .cpu.machine import LOWPREC_INSTRUCTION

    t = c.get("threads")
    if c["kind"] == "compute" and c.get("dtype") in ("float64", "float32") and "FMA" in c["name"]:
        return [f"bench_compute_cpu.FmaPeakCPU.track_gflops('{c['dtype']}', {t})"]
    if c["kind"] == "compute":
        units = [u for u, ins in LOWPREC_INSTRUCTION.items() if ins == c.get("kernel")]
        return [f"bench_compute_cpu.LowPrecPeakCPU.track_gops('{u}', {t})" for u in units]
    if c["kind"] == "bandwidth" and c.get("window_bytes"):
        lo, hi = c["window_bytes"]
        sizes = sorted({*BENCH_PARAMS["stream_bytes"], *BENCH_PARAMS["stream_bytes_quick"]})
        return [
            f"bench_stream_cpu.StreamCPU.track_gbps('{c['kernel']}', {b}, {t})"
            for b in sizes
            if lo <= b and (hi is None or b <= hi)
        ]
    path = {"dispatch: empty": "track_empty_njit_seconds", "dispatch: ufunc": "track_ufunc_8_seconds"}.get(c["name"])
    return [f"bench_latency_cpu.Dispatch.{path}"] if path else []


def asv_thresholds(docs: list[dict]) -> dict[str, float]:
    """asv.conf.json's ``regressions_thresholds`` from the intervals of ceilings runs (the newest run
    of each machine whose results are given): each asv entry that measures a ceiling gets that
    ceiling's interval half-width (the largest over the machines, at least ASV_FLOOR), so the
    regression view calls a step inside it no regression, as ``compare`` and the end-of-run line do;
    every other benchmark keeps ASV_DEFAULT. asv takes the largest of the thresholds whose regex
    matches an entry, so the default's regex excludes the entries given their own."""
    import re

    own: dict[str, float] = {}
    for d in docs:
        for c in d.get("ceilings", []):
            h = (c.get("interval") or {}).get("half_width")
            if h is None or c.get("implausible"):
                continue
            for e in _asv_entries(c):
                own[e] = max(own.get(e, 0.0), round(max(float(h), ASV_FLOOR), 3))
    out = {}
    if own:
        names = "|".join(re.escape(e) for e in sorted(own))
        out[rf"^(?!(?:{names})(?:@.*)?$).*"] = ASV_DEFAULT
    else:
        out[".*"] = ASV_DEFAULT
    out.update({rf"^{re.escape(e)}(?:@.*)?$": h for e, h in sorted(own.items())})
    return out
