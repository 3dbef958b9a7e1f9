"""Family `clock`: the running clock of each thread (dependent register adds, 1 per cycle)."""

from __future__ import annotations

import numpy as np

from ..kernels.cpu import clock
from ..registry import Variant, register
from ..threads import resolve_threads
from ..work import Work

# ---- clock probe -----------------------------------------------------------------------------------


def _clock(blocks=1000, reps=1, threads=None):
    n = resolve_threads(threads)
    if n == 1:
        return np.array([clock.add_chain(int(blocks) * int(reps), 0)], dtype=np.int64)
    return clock.add_chain_threads(int(blocks) * int(reps), n)


register(
    Variant(
        name="cpu.clock.add_chain",
        family="clock",
        device="cpu",
        description="dependent register adds, 1 per cycle: the running clock of each thread",
        kernel=_clock,
        reference=lambda blocks=1000, reps=1, threads=None, **_: (
            np.arange(resolve_threads(threads), dtype=np.int64) + clock.ADDS_PER_BLOCK * int(blocks) * int(reps)
        ),
        work=lambda blocks=1000, reps=1, **_: Work(flops=0, launches=1),
        inputs=lambda n=None, dtype=None, seed=0, **_: (),
        result_dtype=lambda **_: np.dtype(np.int64),
        defaults={"blocks": 1000},
    )
)
