"""One description of the caches: how big each level really is, where DRAM starts, the LLC.

Why one place: the OS's sizes are not what a run meets. A cloud VM reports a 480 MiB L3 (a slice
of a server part) whose bandwidth plateau ends near 32-128 MiB; placing GPT-2's 154.6 MB LM head
in "L3" because 154.6 MB < 480 MiB judged it against a roof 1.5x too high. So every user of cache
sizes (op placement, the LLM predictor, the elementwise suite's DRAM sizing, the cold-cache flush)
asks this module, which prefers what a ceilings run (or this host's DRAM probe) measured:

  level capacity   the largest working set a ceilings run measured still on that level's plateau
                   (``plateau_end_bytes`` of its bandwidth ceilings at that thread count; the
                   kernel asked for, else the largest over kernels), else the OS size for that
                   many threads (roofline.capacity). The LLC never reaches past where the run's
                   DRAM probe found DRAM's plateau (``dram_from_bytes``/2: the probe's first size
                   on it).
  DRAM from        the probe's ``dram_from_bytes``, else 4x the OS LLC (STREAM's rule), else
                   1 GiB with no cache sizes at all.
  the LLC          the last level's OS size, or FALLBACK_LLC (one fallback for the whole
                   project; a ceilings run without cache sizes says so in its notes); what it
                   really holds (llc_effective) never reaches past dram_from_bytes/2: the size a
                   cold-sample flush and a streamed rotation must exceed (rooflab/flush.py).

    from rooflab.cpu.caches import CacheMap
    cm = CacheMap.of(result)                 # a ceilings result document, or {"machine": ...}
    cm.level_for(154.6e6, threads=2)         # "DRAM" on that VM, as measured
    cm.llc_bytes()                           # 503316480: the OS's size
    cm.llc_effective()                       # 134217728: where that run's probe found DRAM, halved
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

FALLBACK_LLC = 32 << 20  # where the OS gives no cache sizes: a common server LLC slice
UNKNOWN_CACHES_DRAM_FROM = 1 << 30  # no cache sizes: only sizes far beyond any LLC shipped today are DRAM


def capacity(cache: dict, threads: int) -> int:
    """Bytes of this level available to ``threads`` threads (one per core)."""
    if cache.get("private", False):
        return cache["size_bytes"] * min(threads, cache.get("instances", threads))
    per = max(cache.get("shared_by_cpus", 1), 1)
    instances_used = max(1, math.ceil(threads / per)) if cache.get("instances", 1) > 1 else 1
    return cache["size_bytes"] * min(instances_used, cache.get("instances", 1))


@dataclass
class CacheMap:
    caches: list[dict]  # machine.cpu.caches (OS sizes; the LLC may carry the run's dram_from_bytes)
    ceilings: list[dict] = field(default_factory=list)  # a ceilings run's, for the measured plateaus

    @classmethod
    def of(cls, doc: dict | None) -> CacheMap:
        """From a result document (its machine and, for a ceilings run, its ceilings) or a machine
        description ({"cpu": {...}}) or a bare cpu dict."""
        doc = doc or {}
        machine = doc.get("machine", doc)
        cpu = machine.get("cpu", machine) if isinstance(machine, dict) else {}
        caches = list(cpu.get("caches") or [])
        return cls(caches, list(doc.get("ceilings") or []))

    @classmethod
    def host(cls) -> CacheMap:
        from .machine import check_caches, read_caches

        caches, _ = check_caches(read_caches())
        return cls(caches, [])

    # ---- sizes ----------------------------------------------------------------------------------

    def llc_bytes(self) -> int:
        """The last level's OS size (FALLBACK_LLC where the OS gives none)."""
        return self.caches[-1]["size_bytes"] if self.caches else FALLBACK_LLC

    def llc_effective(self) -> float:
        """What the LLC really holds: its OS size, never past where the run's probe found DRAM."""
        d = self.caches[-1].get("dram_from_bytes") if self.caches else None
        return min(self.llc_bytes(), d / 2) if d else self.llc_bytes()

    def dram_from(self) -> int:
        """Where DRAM starts: the run's measurement, else 4x the OS LLC, else 1 GiB."""
        if not self.caches:
            return UNKNOWN_CACHES_DRAM_FROM
        measured = self.caches[-1].get("dram_from_bytes")
        return min(measured, 4 * self.llc_bytes()) if measured else 4 * self.llc_bytes()

    def capacities(self, threads: int, kernel: str | None = None) -> list[tuple[str, float, str]]:
        """[(level, bytes, source)] nearest first: what each level holds for ``threads`` threads."""
        out = []
        for i, c in enumerate(self.caches):
            size, source = float(capacity(c, max(threads, 1))), "OS size"
            ends = [
                x
                for x in self.ceilings
                if x.get("kind") == "bandwidth"
                and x.get("level") == c["name"]
                and x.get("threads") == threads
                and x.get("plateau_end_bytes")
            ]
            pick = [x for x in ends if x.get("kernel") == kernel] or ends
            if pick:
                size, source = float(max(x["plateau_end_bytes"] for x in pick)), "measured plateau end"
            if i == len(self.caches) - 1 and c.get("dram_from_bytes") and c["dram_from_bytes"] / 2 < size:
                size, source = c["dram_from_bytes"] / 2, "where the run's probe found DRAM"
            out.append((c["name"], size, source))
        return out

    def level_for(self, nbytes: float, threads: int, kernel: str | None = None, main: str = "DRAM") -> str:
        """The nearest level whose capacity (as measured where a run measured it) holds ``nbytes``."""
        for name, size, _ in self.capacities(threads, kernel):
            if nbytes <= size:
                return name
        return main


@functools.cache
def host_measured(measure=None) -> CacheMap:
    """This host's caches with where DRAM really starts, probed once per process (the ceilings
    run's own probe, rooflab/cpu/dram_probe.py: ~0.5 s) for suites that size DRAM-sized arrays
    without a ceilings run (the elementwise family). ``measure``: the probe's (tests)."""
    from .dram_probe import plan_dram

    cm = CacheMap.host()
    if cm.caches:
        found = plan_dram(cm.caches, 4 * cm.llc_bytes(), measure=measure).get("dram_from_bytes")
        if found:
            cm.caches = [*cm.caches[:-1], {**cm.caches[-1], "dram_from_bytes": found}]
    return cm
