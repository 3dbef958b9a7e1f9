"""A streamed time's copies: how many distinct copies of an op's operands a time rotates over so that
each call reads them from DRAM, as a decode step streams its layers' weights (rooflab/models/measure.py
for an LLM's ops, families/qgemm.py for the suite's from-DRAM GEMVs), and how they are made.

Napkin: copies together >= 4x the LLC, so the LRU caches hold none of a copy by the time it comes
round again; a 28 MB 4-bit 4096 x 11008 weight on a 32 MiB L3 takes 5 copies.
"""

from __future__ import annotations

STREAM_LLC_MULTIPLE = 4  # a rotation's copies together hold >= 4x the LLC: each call reads from DRAM
ROTATION_MEMORY_SHARE = 0.25  # ... and at most this share of the free memory
ROTATION_MAX_COPIES = 512  # ... and at most this many (the kernel checked on 8); tiny ops then also flush


def rotation_count(ws: int, llc: int, available: int | None) -> int:
    """How many distinct copies of an op's operands (``ws`` bytes each) a streamed time rotates
    over: enough to hold STREAM_LLC_MULTIPLE x the LLC, capped by the memory budget (>= 1)."""
    want = min(-(-STREAM_LLC_MULTIPLE * llc // max(ws, 1)), ROTATION_MAX_COPIES)
    if available is not None:
        want = min(want, int(ROTATION_MEMORY_SHARE * available // max(ws, 1)))
    return max(1, want)


STREAMED = 1  # the operands from this one on stream: B of a weight GEMM (the weights; a 4-bit one's codes
# and scales, a bias), of a batched GEMM (the KV cache); the activation before them stays in cache


def rotation_inputs(variant, shape: dict, dtype, threads: int, first: tuple, copies: int) -> list[tuple]:
    """``copies - 1`` further inputs of ``variant`` at ``shape``: the streamed operands from other
    seeds (distinct buffers), the activation ``first``'s (it stays in cache between a step's ops)."""
    out = []
    for i in range(1, copies):
        fresh = variant.inputs(shape, dtype, seed=i, threads=threads)
        out.append(tuple(fresh[j] if j >= STREAMED else x for j, x in enumerate(first)))
        del fresh
    return out
