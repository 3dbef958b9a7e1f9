"""asv benchmark processes keep one parameter combination's arrays at a time (benchmarks/_common.py):
keeping every combination held 9 GB in one process on a VM reporting a 480 MiB L3."""

from __future__ import annotations

import gc
import sys
import weakref
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import _common  # noqa: E402


def test_prepared_keeps_one_combination_per_slot():
    built = []

    def build(n):
        def make():
            a = np.ones(n)
            built.append(weakref.ref(a))
            return a

        return make

    first = _common.prepared(("t", 1), build(10))
    assert _common.prepared(("t", 1), build(10)) is first  # the same combination: built once
    del first
    _common.prepared(("t", 2), build(20))
    gc.collect()
    assert built[0]() is None  # the previous combination's array is gone
    other = _common.prepared("x", build(5), slot="other")
    assert _common.prepared(("t", 2), build(20)) is not None and _common.prepared("x", build(5), slot="other") is other
    assert len(built) == 3
