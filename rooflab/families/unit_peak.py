"""The case that measures one low-precision unit's peak (family ``lowprec``) at a thread count.

Shared by the ceilings suite and by the GEMM families that run a unit's peak beside the rungs on
that unit (qgemm, bgemm), so a rung reads as a share of the rate its unit reaches at the clock it
ran at. The clock is probed per sample like the FMA peaks' (``timing={"unit_clock": True}``).

Napkin math: vpdpbusd zmm = 64 u8 x s8 products = 128 int8 ops per cycle per port; one core at
3.7 GHz on one port is 474 GOPS, which a 2048^3 INT8 rung at 0.85 of it reads as 403 GOPS.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..registry import Case


def peak_case(unit: str, threads: int, label: str | None = None) -> Case:
    """The ``cpu.lowprec.<unit>`` case at ``threads``, labelled ``label`` (default "<unit> peak <t>T")."""
    from ..cpu.machine import LOWPREC_INSTRUCTION

    return Case(
        f"cpu.lowprec.{unit}",
        size=threads,
        threads=threads,
        verify_params={"reps": 3},
        label=label or f"{unit} peak {threads}T",
        meta={"kernel": "lowprec", "unit": unit, "instruction": LOWPREC_INSTRUCTION[unit]},
        timing={"unit_clock": True},
    )


def peak_cases(units: Iterable[str], threads: list[int]) -> list[Case]:
    """Each unit's peak (once, in order) at every thread count, as a GEMM family runs it beside its rungs."""
    return [peak_case(u, t, f"cpu.lowprec.{u} unit peak") for u in dict.fromkeys(units) for t in threads]
