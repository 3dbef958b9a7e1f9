"""Placement and classification of measured ops against a result file's measured ceilings.

For an op with F FLOPs, minimum bytes B (so intensity I = F/B) and measured time t:
  achieved       = F / t                    (GFLOP/s)      achieved bandwidth = B / t
  attainable(I)  = min(peak_dtype, I x BW_DRAM)           t_roof = max(F / peak, B / BW_DRAM)
  latency floor  t_lat = dispatches x measured dispatch latency of that path
                 (CPU numpy path: the `dispatch: ufunc` ceiling; GPU: the kernel-launch ceiling)
Class (the first rule that holds):
  latency-bound  t <= 2 x t_lat, or t_roof < t_lat  (the fixed cost dominates)
  memory-bound   I < ridge point of the op's dtype (peak / BW_DRAM)
  compute-bound  otherwise
Flag: cache-resident when B / t exceeds the DRAM roof (the data came from a cache: warm runs of
ops whose working set fits the LLC). Every number comes from the measurements; nothing is a
datasheet value.
"""

from __future__ import annotations

import csv
import io
import math

from ..errors import RooflabError
from ..roofline import Roofline

LATENCY_FACTOR = 2.0
RULE = (
    "latency-bound if t <= 2 x (dispatches x measured dispatch latency) or the roofline time "
    "max(F/peak, B/BW_DRAM) is below that latency; else memory-bound if FLOP/byte < the ridge "
    "point (peak / BW_DRAM) of the op's dtype; else compute-bound. cache-resident if B/t > BW_DRAM."
)


def classify(
    flops: float, nbytes: float, seconds: float, peak_gflops: float, dram_gbps: float, latency_s: float
) -> dict:
    """Class and the numbers that decided it (all inputs are measurements)."""
    if seconds <= 0:
        raise ValueError("time must be positive")
    intensity = flops / nbytes if nbytes else math.inf
    t_roof = max(flops / (peak_gflops * 1e9), nbytes / (dram_gbps * 1e9))
    ridge = peak_gflops / dram_gbps
    attainable = min(peak_gflops, intensity * dram_gbps)
    achieved = flops / seconds / 1e9
    if seconds <= LATENCY_FACTOR * latency_s or t_roof < latency_s:
        cls = "latency-bound"
    elif intensity < ridge:
        cls = "memory-bound"
    else:
        cls = "compute-bound"
    return {
        "class": cls,
        "intensity": intensity,
        "achieved_gflops": achieved,
        "achieved_gbps": nbytes / seconds / 1e9,
        "attainable_gflops": attainable,
        "pct_of_attainable": 100 * achieved / attainable if attainable else None,
        "t_roof_s": t_roof,
        "ridge": ridge,
        "latency_floor_s": latency_s,
        "cache_resident": nbytes / seconds / 1e9 > dram_gbps,
    }


def ceilings_for(ceilings: dict, dtype: str, threads: int | None, device: str = "cpu") -> dict:
    """peak (for dtype), DRAM/HBM roof and dispatch latency from a ceilings result."""
    rf = Roofline(ceilings)
    counts = rf.thread_counts()
    if threads is None or threads not in counts:
        threads = max(counts) if counts else None
    run_dtype = dtype if dtype in ("float32", "float64") or device == "cuda" else "float32"
    peak = rf.peak(run_dtype, threads) or rf.peak(run_dtype)
    mem = rf.main_memory_roof(threads)
    # the fixed cost of one eager call: numpy's ufunc dispatch on the CPU, a kernel enqueue on a GPU
    lat = rf.latency("ufunc") if device == "cpu" else (rf.latency("enqueue") or rf.latency("launch"))
    lat = lat or rf.latency()
    if not peak or not mem:
        raise RooflabError(
            "the ceilings file has no compute peak or memory roof for this device",
            "run `rooflab run` (suite ceilings) first, or pass --ceilings",
        )
    return {
        "peak": peak,
        "memory": mem,
        "latency": min(lat, key=lambda c: c["value"]) if lat else None,
        "threads": threads,
    }


def place_op(op: dict, seconds: float, dispatches: int, roofs: dict) -> dict:
    from .ops import flops, min_bytes

    F, B = flops(op), min_bytes(op)
    lat_ns = roofs["latency"]["value"] if roofs["latency"] else 0.0
    c = classify(F, B, seconds, roofs["peak"]["value"], roofs["memory"]["value"], dispatches * lat_ns * 1e-9)
    return {
        **c,
        "flops": F,
        "bytes_min": B,
        "seconds": seconds,
        "dispatches": dispatches,
        "peak_used": roofs["peak"]["name"],
        "memory_roof_used": roofs["memory"]["name"],
    }


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


def summary_line(model: str, device_name: str, summary: dict) -> str:
    parts = ", ".join(f"{v:.0f}% {k}" for k, v in sorted(summary["share_pct"].items(), key=lambda kv: -kv[1]))
    return (
        f"{model} on {device_name}: {summary['total_time_s'] * 1e3:.2f} ms per forward pass "
        f"({summary['achieved_gflops']:.1f} GFLOP/s), {parts}"
    )


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
    "cache_resident",
    "total_time_s",
]


def to_csv(placed: list[dict]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=COLUMNS, extrasaction="ignore")
    w.writeheader()
    for p in placed:
        w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in p.items()})
    return buf.getvalue()


def to_markdown(placed: list[dict]) -> str:
    head = (
        "| op | kind | count | impl | FLOP/B | time (us) | GFLOP/s | % of attainable | class |\n"
        "|---|---|---|---|---|---|---|---|---|\n"
    )
    rows = []
    for p in placed:
        pct = "-" if p.get("pct_of_attainable") is None else f"{p['pct_of_attainable']:.0f}%"
        rows.append(
            f"| {p['name']} | {p['kind']} | {p['count']} | {p['impl']} | {p['intensity']:.3g} | "
            f"{p['seconds'] * 1e6:.1f} | {p['achieved_gflops']:.3g} | {pct} | "
            f"{p['class']}{' (cache-resident)' if p['cache_resident'] else ''} |"
        )
    return head + "\n".join(rows) + "\n"


def cmd_place(args) -> int:
    """rooflab place OPS.json|MODEL.onnx"""
    from pathlib import Path

    from . import measure

    path = Path(args.ops)
    if not path.exists():
        raise RooflabError(f"no such file: {path}", "give an OPS.json or a MODEL.onnx")
    if path.suffix.lower() == ".onnx":
        from .onnx_import import ops_from_onnx

        ops, unsupported = ops_from_onnx(path)
    else:
        from .userops import load_ops

        ops, unsupported = load_ops(path)
    return measure.place_command(ops, unsupported, args, source=str(path))
