"""Placement and classification of measured ops against a result file's measured ceilings.

For an op with F FLOPs, minimum bytes B (R read + W written) and measured time t, each roof
predicts a time, and the class is the roof that explains the measured time:
  compute   t_c = F / peak(dtype executed, threads)
  memory    t_m = B / BW(level, kernel)   level: the nearest cache whose capacity (for these
            threads, as the ceilings run measured it: rooflab/cpu/caches.py) holds B in a warm run, else DRAM/HBM (hierarchical roofline); kernel: the
            STREAM kernel with the op's read/write mix (read-only -> read; R <= 1.5 W -> copy;
            else triad), not the in-place `update` an op that writes a new output cannot reach
  latency   t_l = dispatches x the measured dispatch latency of the path the op takes (numpy or
            BLAS call: `ufunc`; a numba kernel: `empty` call; a GPU kernel: launch `enqueue`)
  class = the largest of t_c, t_m, t_l; pct_of_roof = 100 x max(t_c, t_m, t_l) / t. An op at
  under 50 % of its roof is far below every roof and says so (``below_roof``) with the fraction,
  rather than being called memory- or compute-bound on intensity alone.
attainable(I) = min(peak, I x BW(level, kernel)); no op may show more than 100 % of it: if one does
(over 105 %: ``above_roof``), the roof it was held against is the wrong one and placement warns.
Roofs that cannot be true (roofline.implausible) are never used: the other thread count's roofs
are, with a one-line note (``Roofs.note``), and the ops then run at that thread count too (a time
at 2 threads held to 1-thread roofs reads as 183 % of its roof), or placement refuses.
"""

from __future__ import annotations

import csv
import io
import math

from ..cpu.caches import CacheMap
from ..errors import RooflabError
from ..roofline import Roofline

BELOW_ROOF = 0.5
ABOVE_ROOF = 1.05  # an op faster than its roof by more than timing noise: the roof (or the count) is wrong
RULE = (
    "each roof predicts a time (F/peak, B/BW of the level the data lives in for the STREAM kernel "
    "with the op's read/write mix, dispatches x the dispatch latency of the op's path); the class is "
    "the roof with the largest predicted time; below 50% of that roof the op is flagged below-roof"
)


def classify(flops: float, nbytes: float, seconds: float, peak_gflops: float, bw_gbps: float, latency_s: float) -> dict:
    """Class and the numbers that decided it (all inputs are measurements)."""
    if seconds <= 0:
        raise ValueError("time must be positive")
    intensity = flops / nbytes if nbytes else math.inf
    t = {
        "compute-bound": flops / (peak_gflops * 1e9),
        "memory-bound": nbytes / (bw_gbps * 1e9),
        "latency-bound": latency_s,
    }
    cls = max(t, key=t.get)
    fraction = t[cls] / seconds
    attainable = min(peak_gflops, intensity * bw_gbps)
    achieved = flops / seconds / 1e9
    return {
        "class": cls,
        "pct_of_roof": 100 * fraction,
        "below_roof": fraction < BELOW_ROOF,
        "above_roof": fraction > ABOVE_ROOF,
        "predicted_s": t,
        "intensity": intensity,
        "achieved_gflops": achieved,
        "achieved_gbps": nbytes / seconds / 1e9,
        "attainable_gflops": attainable,
        "pct_of_attainable": 100 * achieved / attainable if attainable else None,
        "t_roof_s": max(t["compute-bound"], t["memory-bound"]),
        "ridge": peak_gflops / bw_gbps,
        "latency_floor_s": latency_s,
    }


def stream_kernel_for(read: float, written: float) -> str:
    """The STREAM kernel whose read/write mix matches an op's."""
    if written <= 0:
        return "read"
    return "copy" if read <= 1.5 * written else "triad"


class Roofs:
    """The roofs of one ceilings result for one thread count, looked up per op."""

    def __init__(self, ceilings: dict, threads: int | None, device: str = "cpu"):
        self.rf = Roofline(ceilings)
        counts = self.rf.thread_counts()
        if threads is None or threads not in counts:
            threads = max(counts) if counts else None
        self.note = None  # one line when the roofs asked for cannot be true and others are used
        bad = self.rf.flagged_ceilings(threads) if threads is not None else []
        if bad:
            what = "; ".join(f"{c['name']}: {c['why']}" for c in bad[:3]) + (" ..." if len(bad) > 3 else "")
            clean = [t for t in counts if not self.rf.flagged_ceilings(t)]
            if not clean:
                raise RooflabError(
                    f"the ceilings hold roofs that cannot be true at every thread count ({what})",
                    "re-run `rooflab run` when the machine is quiet, or pass --ceilings with another result",
                )
            alt = min(clean, key=lambda t: abs(t - threads))
            self.note = (
                f"the {threads}-thread ceilings hold roofs that cannot be true ({what}): "
                f"ops run at {alt} thread(s) and are placed on those roofs instead"
            )
            threads = alt
        self.threads, self.device = threads, device
        machine = ceilings.get("machine", {})
        if device == "cuda":
            l2 = (machine.get("gpu") or {}).get("l2_bytes")
            self.caches = [{"name": "L2", "size_bytes": l2, "private": False, "instances": 1}] if l2 else []
            self.main = "HBM"
        else:
            self.caches = (machine.get("cpu") or {}).get("caches", [])
            self.main = "DRAM"
        if (
            not self.rf.main_memory_roof(threads)
            or not self.rf.peak("float32", threads)
            and not self.rf.peak("float16")
        ):
            raise RooflabError(
                "the ceilings file has no compute peak or memory roof for this device",
                "run `rooflab run` (suite ceilings) first, or pass --ceilings",
            )

    def peak(self, dtype: str) -> dict:
        return self.rf.peak(dtype, self.threads) or self.rf.peak(dtype) or self.rf.peak("float32", self.threads)

    def memory(self, read: float, written: float, cold: bool = False) -> dict:
        kernel = stream_kernel_for(read, written)
        level = (
            self.main
            if cold
            else CacheMap(self.caches, self.rf.ceilings).level_for(read + written, self.threads or 1, kernel, self.main)
        )
        cands = [
            c
            for c in self.rf.ceilings
            if c["kind"] == "bandwidth" and c["threads"] == self.threads and c["level"] == level
        ]
        exact = [c for c in cands if c.get("kernel") == kernel]
        if exact:
            return exact[0]
        if cands:  # the GPU's L2 has only a read roof: the fastest kernel measured there
            return max(cands, key=lambda c: c["value"])
        return self.rf.main_memory_roof(self.threads)

    def latency(self, path: str) -> dict | None:
        """The dispatch latency of a path; a runtime's node (``runtime-*``: an engine's executor calls
        its kernels without Python) is held to the cheapest dispatch measured."""
        names = {"library-cpu": "ufunc", "own-cpu": "empty", "library-cuda": "enqueue", "own-cuda": "enqueue"}
        # dispatch latencies only: a memory-latency ceiling (chase, with a level) is no call's cost
        lat = [
            c
            for c in (self.rf.latency(names.get(path)) or self.rf.latency("launch") or self.rf.latency())
            if not c.get("level")
        ]
        return min(lat, key=lambda c: c["value"]) if lat else None


def run_threads(roofs: Roofs, threads: int) -> int:
    """The threads ops run at: those of the roofs they are placed on (``threads`` unless Roofs fell
    back to another count's roofs; a GPU's roofs have no thread count)."""
    if roofs.device != "cpu" or not roofs.threads or roofs.threads == threads:
        return threads
    return roofs.threads


def place_op(op: dict, seconds: float, dispatches: int, roofs: Roofs, path: str, cold: bool = False) -> dict:
    from ..workloads.ops import flops, min_bytes, output_bytes

    F, B = flops(op), min_bytes(op)
    written = min(B, output_bytes(op))
    dtype = compute_dtype(op, roofs)
    placed = place_work(F, B, written, dtype, seconds, dispatches, roofs, path, cold)
    if op["kind"] == "qgemm_nbits" and dtype != "w4":
        placed["peak_used"] += (
            " (codes widened once per packed panel, then FP32 FMAs)"
            if op["shape"]["M"] > _gemv_rows()
            else " (an upper bound: each code is widened before its FMA)"
        )
    return placed


def _gemv_rows() -> int:
    from ..kernels.cpu.qgemm_w import ROWS_GEMV

    return ROWS_GEMV


def compute_dtype(op: dict, roofs: Roofs | None = None) -> str:
    """The arithmetic roof an op runs under: its dtype; INT8 dot products for an integer GEMM (the
    INT8 peak); for a 4-bit weight-only GEMV (a few rows: every code widened for each use) the
    measured dequantize-and-FMA roof (``w4``) where the ceilings have it. A weight-only GEMM of more
    rows widens each panel once for all of them (kernels/cpu/qgemm_w.py, MLAS alike): the FP32
    FMA peak (measured: prefill at 75-83 % of it, 1.6-2.9x the w4 roof)."""
    if op["kind"] == "qgemm_int8":
        return "int8"
    s = op["shape"]
    if op["kind"] == "qgemm_nbits" and s["bits"] == 4 and s["M"] <= _gemv_rows():
        if roofs is not None and roofs.rf.peak("w4"):
            return "w4"
    return op["dtype"]


def place_work(
    F: float, B: float, written: float, dtype: str, seconds: float, dispatches: int, roofs: Roofs, path: str,
    cold: bool = False,
) -> dict:  # fmt: skip
    """place_op for work given as numbers: F FLOPs, B minimum bytes of which ``written`` are written
    (what a fused runtime node, the sum of several ops, is placed with)."""
    # the roof of the dtype the work ran in: a bfloat16 GEMM ran on the BF16 unit (the bgemm family; an
    # op placed at a dtype rooflab's CPU kernels lack was executed and passed here as float32)
    peak = roofs.peak(
        dtype if dtype in ("float32", "float64", "int8", "w4", "bfloat16") or roofs.device == "cuda" else "float32"
    )
    mem = roofs.memory(B - written, written, cold)
    lat = roofs.latency(path)
    lat_s = dispatches * lat["value"] * 1e-9 if lat else 0.0
    c = classify(F, B, seconds, peak["value"], mem["value"], lat_s)
    return {
        **c,
        "flops": F,
        "bytes_min": B,
        "seconds": seconds,
        "dispatches": dispatches,
        "peak_used": peak["name"],
        "memory_roof_used": mem["name"],
        "memory_level": mem.get("level"),
        "memory_kernel": mem.get("kernel"),
        "latency_used": lat["name"] if lat else None,
    }


def above_roof_warning(placed: list[dict], name: str = "name") -> str | None:
    """One line naming every op measured faster than its roof allows (a true roof cannot be beaten:
    the roof is wrong, or the op's FLOP/byte count is); None when there is none."""
    over = sorted((p for p in placed if p.get("above_roof")), key=lambda p: -p["pct_of_roof"])
    if not over:
        return None
    return (
        f"warning: {len(over)} op(s) measured above their roof (a true roof cannot be beaten: the roof or the op's work count is wrong): "
        + ", ".join(f"{p.get(name)} {p['pct_of_roof']:.0f}% of {p.get('class')}" for p in over)
    )


def summarize_model(placed: list[dict]) -> dict:
    """Share of the forward pass's time by class (times weighted by each op's count)."""
    total = sum(p["total_time_s"] for p in placed) or 1.0
    by = {}
    for p in placed:
        by[p["class"]] = by.get(p["class"], 0.0) + p["total_time_s"]
    shares = {k: 100 * v / total for k, v in sorted(by.items())}
    return {
        "total_time_s": total,
        "share_pct": shares,
        "ops": len(placed),
        "flops": sum(p["flops"] * p["count"] for p in placed),
        "achieved_gflops": sum(p["flops"] * p["count"] for p in placed) / total / 1e9,
    }


def summary_line(model: str, device_name: str, summary: dict, missing: list[str] | None = None) -> str:
    """One line per model. The time is the sum of the ops' isolated times (each op timed on its
    own, warm): a runtime that fuses or overlaps ops can be faster; ops that failed or are not
    modelled are named, never silently dropped."""
    parts = ", ".join(f"{v:.0f}% {k}" for k, v in sorted(summary["share_pct"].items(), key=lambda kv: -kv[1]))
    if not summary.get("ops"):
        line = f"{model} on {device_name}: no op placed"
    else:
        line = (
            f"{model} on {device_name}: {summary['total_time_s'] * 1e3:.2f} ms summed over isolated op times "
            f"({summary['achieved_gflops']:.1f} GFLOP/s), {parts}"
        )
    if missing:
        line += f"; not placed ({len(missing)}): {', '.join(missing[:6])}{' ...' if len(missing) > 6 else ''}"
    return line


COLUMNS = [
    "model",
    "name",
    "kind",
    "dtype",
    "count",
    "impl",
    "flops",
    "bytes_min",
    "intensity",
    "seconds",
    "cold_seconds",
    "achieved_gflops",
    "achieved_gbps",
    "attainable_gflops",
    "pct_of_attainable",
    "class",
    "pct_of_roof",
    "below_roof",
    "memory_level",
    "memory_kernel",
    "total_time_s",
]


def fmt_intensity(v) -> str:
    """FLOP/B for a table: "-" where no byte is moved (a view, a Reshape: 0 FLOPs over 0 bytes)."""
    return f"{v:.3g}" if v is not None and math.isfinite(v) else "-"


def to_csv(placed: list[dict]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=COLUMNS, extrasaction="ignore")
    w.writeheader()
    for p in placed:
        w.writerow(
            {k: (("" if not math.isfinite(v) else f"{v:.6g}") if isinstance(v, float) else v) for k, v in p.items()}
        )
    return buf.getvalue()


def to_markdown(placed: list[dict]) -> str:
    head = (
        "| op | kind | count | impl | FLOP/B | time (us) | GFLOP/s | roof (level, kernel) | % of roof | class |\n"
        "|---|---|---|---|---|---|---|---|---|---|\n"
    )
    rows = []
    for p in placed:
        roof = f"{p.get('memory_level')}, {p.get('memory_kernel')}"
        rows.append(
            f"| {p['name']} | {p['kind']} | {p['count']} | {p['impl']} | {fmt_intensity(p['intensity'])} | "
            f"{p['seconds'] * 1e6:.1f} | {p['achieved_gflops']:.3g} | {roof} | {p['pct_of_roof']:.0f}% | "
            f"{p['class']}{' (below roof)' if p['below_roof'] else ''}"
            f"{' (ABOVE its roof: roof or work count wrong)' if p.get('above_roof') else ''} |"
        )
    return head + "\n".join(rows) + "\n"
