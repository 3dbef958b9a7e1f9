"""Declared work of one kernel call: what it computes and what it moves.

Only the harness turns time into throughput, from these numbers (BabelStream's bytes-per-element
table, NVBench's declared reads and writes). Conventions: 1 FMA = 2 FLOP; bytes are the bytes the
kernel is *required* to read and write (STREAM convention: write-allocate traffic is not counted,
so a normal-store triad moves 32 B per element on the wire but is credited 24 B).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Work:
    flops: float = 0.0
    bytes_read: float = 0.0
    bytes_written: float = 0.0
    launches: int = 1

    @property
    def bytes(self) -> float:
        return self.bytes_read + self.bytes_written

    @property
    def intensity(self) -> float:
        """FLOP per byte moved (inf when the kernel moves nothing)."""
        return self.flops / self.bytes if self.bytes else float("inf")

    def scaled(self, factor: float) -> Work:
        return Work(
            self.flops * factor, self.bytes_read * factor, self.bytes_written * factor, int(self.launches * factor)
        )

    def as_dict(self) -> dict:
        d = asdict(self)
        d["bytes"] = self.bytes
        return d


def throughput(work: Work, seconds: float) -> dict:
    """GFLOP/s and GB/s (10^9, not 2^30) of one call of ``work`` taking ``seconds``."""
    if seconds <= 0:
        raise ValueError(f"time must be positive, got {seconds!r}")
    return {
        "gflops": work.flops / seconds / 1e9,
        "gbps": work.bytes / seconds / 1e9,
        "ns_per_launch": seconds * 1e9 / max(work.launches, 1),
    }
