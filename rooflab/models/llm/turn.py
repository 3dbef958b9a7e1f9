"""The turn to compute-bound, seen in the measurement: decode tokens/s against batch measured in the
runtime, where that curve flattens, beside where the prediction's curve flattens (the same rule, the
same batches) and the batch where the prediction has the weight GEMMs compute-bound on their roofs
(llm.predict.curves' ``gemm_compute_bound_batch``). Part of `rooflab llm --grid`.

The two predicted batches agree where the GEMMs' compute is per token (fp32 weights: the FMAs). They
part for 4-bit weights on a CPU: a GEMV of <= 4 rows widens every code for each row (the w4 roof,
place.compute_dtype), so the GEMMs are "compute-bound" from batch 1, yet that work is per weight, not
per token, and tokens/s still rises with the batch until the FP32 FMAs of the wider GEMMs dominate.
The check is on the knees: like against like.

Where a measured curve flattens: the knee of its two asymptotes. At small batch a decode step
streams the weights once whatever the batch, so tokens/s rises through the origin with the slope
of the first point (tok/s(B1) / B1); once the GEMMs are compute-bound it stays at a plateau (the
largest tokens/s measured). The knee is the batch where the two lines meet: plateau / slope. For a
step time max(W / bandwidth, B x FLOPs-per-sequence / peak) it is exactly the batch where the
GEMMs' compute time equals their weight-read time, the prediction's turn; for a runtime that adds
the two instead of overlapping them it is where the curve reaches half its plateau. The plateau is
only seen once the last doubling of the batch gained less than FLAT_GAIN: short of that the knee
is a lower bound, and said so.

Napkin (fp32 weights, one Zen 3 core: an FP32 FMA peak of 85 GFLOP/s measured against a 21 GB/s DRAM
read; a weight GEMV does 2B FLOPs per 4 bytes): the GEMMs turn at B = 2 x 85 / 21 = ~8, so the sweep
runs batch 1, 2, ..., 32 (4x past it); SmolLM-135M's step at batch 32 is ~9 GFLOP, ~0.2 s. The
check: within one batch step (a factor of 2: the sweep doubles the batch).
"""

from __future__ import annotations

import math

FLAT_GAIN = 2**0.5  # the last doubling gained less than this (halfway, in log, between a memory-bound
# doubling, 2x, and a compute-bound one, 1x): the curve is past its bend and its plateau is in sight
PAST_TURN = 4  # the sweep runs to this many times the predicted turn (a power of 2 at or above it)
MIN_TOP = 8  # ... and at least to this batch


def batches(predicted_turn: int | None, cap: int) -> list[int]:
    """Powers of 2 from 1 to PAST_TURN x the predicted turn (at least MIN_TOP), at most ``cap``."""
    want = max(MIN_TOP, PAST_TURN * (predicted_turn or cap))
    top = min(cap, 2 ** math.ceil(math.log2(want)))
    return [2**i for i in range(int(math.log2(max(top, 1))) + 1)]


def knee(points: list[dict]) -> dict:
    """``points`` [{"batch", "tokens_per_s"}] by batch -> {"batch": the knee (float), "flat": whether
    the curve has flattened, "plateau_tokens_per_s", "slope_tokens_per_s"} (batch None below 2 points)."""
    pts = sorted(points, key=lambda p: p["batch"])
    if len(pts) < 2:
        return {"batch": None, "flat": False, "why": "fewer than 2 batches measured"}
    slope = pts[0]["tokens_per_s"] / pts[0]["batch"]
    plateau = max(p["tokens_per_s"] for p in pts)
    a, b = pts[-2], pts[-1]
    gain = (b["tokens_per_s"] / a["tokens_per_s"]) ** (1 / math.log2(b["batch"] / a["batch"]))  # per doubling
    return {
        "batch": plateau / slope, "flat": gain < FLAT_GAIN, "last_doubling_gain": gain,
        "plateau_tokens_per_s": plateau, "slope_tokens_per_s": slope,
    }  # fmt: skip


def check(predicted: float | None, measured: dict) -> dict:
    """Whether the measured knee lies within one batch step (a factor of 2) of the predicted one."""
    m = measured.get("batch")
    if predicted is None:
        return {"ok": None, "why": "the prediction does not flatten within the batches measured"}
    if m is None:
        return {"ok": None, "why": measured.get("why", "nothing measured")}
    if not measured["flat"]:
        top = measured.get("top_batch")
        return {"ok": None, "why": f"the measured tokens/s still rises at batch {top}: the knee lies beyond"}
    ratio = m / predicted
    return {"ok": 0.5 <= ratio <= 2.0, "ratio": ratio}


def predicted_points(curves: dict, bs: list[int]) -> list[dict]:
    """The prediction's decode tokens/s at ``bs``: what the roofs allow (llm.predict.curves' memory and
    compute lines, each op's FLOPs on its own roof: a 4-bit GEMV's on the dequantize-and-FMA roof)."""
    at = {p["batch"]: p for p in curves["vs_batch"]}
    return [{"batch": B, "tokens_per_s": min(at[B]["memory_tokens_per_s"], at[B]["compute_tokens_per_s"])}
            for B in bs if B in at]  # fmt: skip


def sweep(decode_seconds, curves: dict, cap: int) -> dict:
    """``decode_seconds(batches) -> {batch: seconds}`` of one decode step in the runtime (verified and
    timed by it); ``curves`` the prediction's (llm.predict.curves at the same context and threads).
    The batches run to PAST_TURN x the prediction's knee. Returns {"points", "knee", "predicted_points",
    "predicted_knee", "predicted_gemm_turn", "check"}: the knees found by the same rule on both curves,
    over the same batches."""
    first = knee(predicted_points(curves, batches(None, cap)))  # every power of 2 up to the cap
    bs = batches(math.ceil(first["batch"]) if first.get("batch") else None, cap)
    got = decode_seconds(bs)
    points = [{"batch": B, "seconds": got[B], "tokens_per_s": B / got[B]} for B in bs]
    k = {**knee(points), "top_batch": points[-1]["batch"]}
    pred = predicted_points(curves, bs)
    pk = {**knee(pred), "top_batch": bs[-1]}
    return {
        "points": points, "knee": k, "predicted_points": pred, "predicted_knee": pk,
        "predicted_gemm_turn": curves.get("gemm_compute_bound_batch"),
        "check": check(pk.get("batch") if pk.get("flat") else None, k),
    }  # fmt: skip


def line(runtime: str, threads: int, t: dict) -> str:
    k, pk, c = t["knee"], t["predicted_knee"], t["check"]
    pts = ", ".join(f"b{p['batch']} {p['tokens_per_s']:.3g}" for p in t["points"])

    def at(x):
        return f"{x['batch']:.1f}" if x.get("batch") is not None else "-"

    verdict = (
        f"within one batch step ({c['ratio']:.2f}x)"
        if c.get("ok")
        else (f"off by {c['ratio']:.2f}x" if c.get("ok") is False else c["why"])
    )
    return (
        f"    turn to compute-bound, {runtime} {threads}T: measured tokens/s flattens at batch {at(k)}, "
        f"the prediction's at {at(pk)} ({verdict}; its weight GEMMs are compute-bound on their roofs from "
        f"batch {t['predicted_gemm_turn']}); measured tokens/s: {pts}"
    )
