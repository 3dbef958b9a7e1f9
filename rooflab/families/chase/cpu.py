"""CPU variants of the `chase` family (kernels/cpu/chase.py): the same dependent chase over a
random single cycle, with 4 KiB pages or 2 MiB (transparent huge) pages.

  cpu.chase.01-random-cycle            page size as the OS gives it (4 KiB unless THP is "always"):
                                       beyond the TLB's reach (~3k entries x 4 KiB = 12 MiB on Zen 4)
                                       every hop also walks the page table
  cpu.chase.02-random-cycle-hugepages  2 MiB-aligned and madvise(MADV_HUGEPAGE) before the first touch:
                                       a 128 MiB set needs 64 TLB entries, so a hop costs the memory
                                       level alone (what the latency ceilings use)

kernel(chain, order, hops=None, reps=1) follows hops x reps links from line 0 in one compiled call
and returns the line reached; ``order`` is only read by the reference.
"""

from __future__ import annotations

import numpy as np

from ...kernels.cpu import chase as K
from ...registry import Variant, register
from . import SLOTS, check_inputs, expected_line, make_inputs, total_hops, verify_cycle, work


def _kernel(name):
    def run(chain, order, hops=None, reps=1, threads=None):
        check_inputs(name, chain, order)
        h = total_hops(chain, hops, reps)
        return np.int64(K.chase(chain, h) // SLOTS)

    return run


def _reference(name):
    def ref(chain, order, hops=None, reps=1, **_):
        check_inputs(name, chain, order)
        verify_cycle(chain, order, what=name)
        return expected_line(order, total_hops(chain, hops, reps))

    return ref


for _number, _tech, _huge, _desc in (
    (1, "random-cycle", False, "dependent loads over a random single cycle, one 64 B line per hop, OS page size"),
    (2, "random-cycle-hugepages", True, "the same chase on 2 MiB transparent huge pages (no page walks)"),
):
    _name = f"cpu.chase.{_number:02d}-{_tech}"
    register(
        Variant(
            name=_name,
            family="chase",
            device="cpu",
            number=_number,
            description=_desc,
            kernel=_kernel(_name),
            reference=_reference(_name),
            work=work,
            inputs=lambda size, dtype=None, seed=0, _h=_huge, **_: make_inputs(size, seed, hugepages=_h),
            result_dtype=lambda *_, **__: np.dtype(np.int64),
            defaults={"hops": None},
            dtypes=("uint64",),
        )
    )
