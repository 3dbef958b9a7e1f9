"""The case that measures one low-precision unit's peak (family ``lowprec``) at a thread count.

Shared by the ceilings suite and by the GEMM families that run a unit's peak beside the rungs on
that unit (qgemm, bgemm), so a rung reads as a share of the rate its unit reaches at the clock it
ran at. The clock is probed per sample like the FMA peaks' (``timing={"unit_clock": True}``).

The peak runs before the rungs and again after them (``around``): a neighbour that takes the unit
for a while (a core's AMX unit and its vector ports are shared with its other hardware thread, on
a VM often another tenant's) slows a whole case evenly, which no spread inside the case shows. On
the Emerald Rapids VM the same AMX loop ran 2250 and then 1214-1260 GFLOP/s minutes apart, and a
rung's case read 566 and 1012 GFLOP/s in two runs, both unflagged. Where the two passes differ by
more than PEAK_DRIFT, every rung on that unit and thread count is flagged noisy with the figures
(family_report.add_pct_of_unit_peak), and its share of the peak is taken against the faster pass.

Napkin math: vpdpbusd zmm = 64 u8 x s8 products = 128 int8 ops per cycle per port; one core at
3.7 GHz on one port is 474 GOPS, which a 2048^3 INT8 rung at 0.85 of it reads as 403 GOPS.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..registry import Case

PEAK_DRIFT = 0.10  # the unit's two passes further apart than this: its rungs ran on a shared unit
AFTER = "after the rungs"  # the second pass's ``peak_pass``


def peak_case(unit: str, threads: int, label: str | None = None, peak_pass: str = "before the rungs") -> Case:
    """The ``cpu.lowprec.<unit>`` case at ``threads``, labelled ``label`` (default "<unit> peak <t>T")."""
    from ..cpu.machine import LOWPREC_INSTRUCTION

    return Case(
        f"cpu.lowprec.{unit}",
        size=threads,
        threads=threads,
        verify_params={"reps": 3},
        label=label or f"{unit} peak {threads}T",
        meta={"kernel": "lowprec", "unit": unit, "instruction": LOWPREC_INSTRUCTION[unit], "peak_pass": peak_pass},
        timing={"unit_clock": True},
    )


def peak_cases(units: Iterable[str], threads: list[int], after: bool = False) -> list[Case]:
    """Each unit's peak (once, in order) at every thread count, as a GEMM family runs it beside its rungs."""
    label, when = (" unit peak, after the rungs", AFTER) if after else (" unit peak", "before the rungs")
    return [peak_case(u, t, f"cpu.lowprec.{u}{label}", when) for u in dict.fromkeys(units) for t in threads]


def around(units: Iterable[str], threads: list[int], rungs: list[Case]) -> list[Case]:
    """The units' peaks, the rungs, the peaks again (see PEAK_DRIFT); no peaks where no unit."""
    units = list(dict.fromkeys(units))
    if not units or not rungs:
        return peak_cases(units, threads) + rungs
    return peak_cases(units, threads) + rungs + peak_cases(units, threads, after=True)
