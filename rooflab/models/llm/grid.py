"""`rooflab llm CONFIG --runtime NAME --grid small|full`: the runtime check over a grid of cells
instead of one point, each cell measured in the runtime and predicted op by op on the roofs.

Grid (issue 40): batch {1, 4, 16} x context {128, 1024} (decode) and prompt {32, 512} (prefill),
threads {1, all}; ``small`` keeps batch {1, 4}, context 128, prompt 32, 1 thread (CI-sized: four
cells per runtime). Per thread count the ops of every cell are measured once (measure_distinct,
shared between the cells that share an op), then per batch each prefill and each decode is timed in
the runtime (its own compare, one phase at a time). Out: one row per cell (measured, predicted,
error), the mean absolute percentage error per runtime and phase, the worst cells.

Napkin (SmolLM-135M, small grid, 1 thread): ~40 distinct ops x ~0.5 s + 4 runtime phases x ~5 runs
of 20-200 ms + a model build and verification per batch: about a minute.

A cell that does not fit in memory is refused before anything runs, naming it and the bytes.
"""

from __future__ import annotations

import statistics
import sys

from ...errors import RooflabError
from ...memory import available_bytes, fmt_bytes
from ...workloads.ops import ITEMSIZE
from .. import llm, place

GRIDS = {  # turn_cap: the largest batch of the decode sweep that finds the turn to compute-bound (turn.py)
    "small": {"batches": (1, 4), "prompts": (32,), "contexts": (128,), "threads": ("1",), "turn_cap": 32},
    "full": {"batches": (1, 4, 16), "prompts": (32, 512), "contexts": (128, 1024), "threads": ("1", "all"),
             "turn_cap": 256},
}  # fmt: skip
MEMORY_SHARE = 0.6  # a cell may take this share of the free memory


def grid_of(name: str) -> dict:
    if name not in GRIDS:
        raise RooflabError(f"--grid {name!r} is not a grid rooflab runs", f"use {' or '.join(GRIDS)}")
    return GRIDS[name]


def cell_bytes(arch: llm.Arch, batch: int, prompt: int, context: int, dtype: str) -> int:
    """What one cell holds at once, roughly: the weights twice (the runtime's copy and rooflab's
    operands or the exported file's), the KV cache twice (the runtime's and a copy), and a prefill's
    activations (hidden, 3 projections, the MLP's intermediate, per token, fp32)."""
    e = ITEMSIZE[dtype]
    weights = llm.param_counts(arch)["total"] * e
    kv = llm.kv_cache_bytes(arch, batch, max(prompt, context), e)
    act = batch * prompt * (8 * arch.hidden + 3 * arch.inter) * 4
    return int(2 * weights + 2 * kv + act)


def check_memory(arch: llm.Arch, grid: dict, dtype: str) -> None:
    free = available_bytes()
    if free is None:
        return
    for B in grid["batches"]:
        for S in grid["prompts"]:
            for L in grid["contexts"]:
                need = cell_bytes(arch, B, S, L, dtype)
                if need > MEMORY_SHARE * free:
                    raise RooflabError(
                        f"--grid: the cell batch {B}, prompt {S}, context {L} of {arch.name} needs about "
                        f"{fmt_bytes(need)}, {fmt_bytes(free)} free",
                        "use --grid small or a smaller model",
                    )


def _threads(grid: dict) -> list[int]:
    from ...threads import max_threads

    return sorted({max_threads() if t == "all" else int(t) for t in grid["threads"]})


def turn_batches_that_fit(arch: llm.Arch, grid: dict, dtype: str) -> int:
    """The decode sweep's largest batch: ``turn_cap``, halved until a step at the first context fits."""
    free, cap = available_bytes(), grid.get("turn_cap", 16)
    while cap > 1 and free is not None and cell_bytes(arch, cap, 1, grid["contexts"][0], dtype) > MEMORY_SHARE * free:
        cap //= 2
    return cap


def run(arch, grid: dict, *, runtime: str, dtype: str, weights, ceil, measure_sets, compare, decode_sweep=None) -> dict:
    """Every cell of ``grid``: ``measure_sets(sets, roofs, threads) -> rows`` (llm.predict's measuring and
    assembling), ``compare(rows, threads, roofs, batch, prompt, context, phases) -> check`` (the
    runtime's). ``decode_sweep(threads, context, batches) -> {batch: {"median_s"}}``: the runtime's
    decode step against batch, per thread count, checked against the predicted turn to compute-bound
    (turn.py). Returns {"cells", "mape", "worst", "turns", "rows" (the last thread count's)}."""
    from . import predict, turn

    cells, rows, turns = [], [], []
    for T in _threads(grid):
        roofs = place.Roofs(ceil, T, "cpu")
        T = place.run_threads(roofs, T)
        sets = []
        for B in grid["batches"]:
            for S in grid["prompts"]:
                sets.append({"phase": "prefill", "batch": B, "prompt": S,
                             "ops": llm.fold(llm.phase_ops(arch, "prefill", B, S, dtype=dtype, weights=weights))})  # fmt: skip
            for L in grid["contexts"]:
                sets.append({"phase": "decode", "batch": B, "context": L,
                             "ops": llm.fold(llm.phase_ops(arch, "decode", B, context=L, dtype=dtype, weights=weights))})  # fmt: skip
        print(f"grid: {arch.name} at {T} thread(s): {len(sets)} phases measured op by op ...", file=sys.stderr)
        rows = measure_sets(sets, roofs, T)
        for B in grid["batches"]:
            todo = [("prefill", S, grid["contexts"][0]) for S in grid["prompts"]]
            todo += [("decode", grid["prompts"][0], L) for L in grid["contexts"]]
            for phase, S, L in todo:
                print(f"grid: {runtime} {phase} batch {B} " + (f"prompt {S}" if phase == "prefill" else f"context {L}")
                      + f", {T} thread(s) ...", file=sys.stderr)  # fmt: skip
                c = compare(rows, T, roofs, B, S, L, (phase,))
                p = c[phase]
                cells.append({
                    "runtime": runtime, "threads": T, "phase": phase, "batch": B,
                    **({"prompt": S} if phase == "prefill" else {"context": L}),
                    "measured_s": p["measured_s"], "predicted_s": p["predicted_s"], "error_pct": p["error_pct"],
                    "runtime_overhead_s": p.get("runtime_overhead_s", 0.0),
                    # the op-level breakdown a worst cell is read by: rooflab's per op kind, the runtime's own
                    "predicted_by_kind_s": p.get("predicted_by_kind_s", {}),
                    "runtime_by_op_type_s": p.get("runtime_by_op_type_s", p.get("ort_by_op_type_s", {})),
                    **({"kv_copy_s": p["graph_kv_copy_s"]} if "graph_kv_copy_s" in p else {}),
                })  # fmt: skip
        if decode_sweep is not None:
            L = grid["contexts"][0]
            curves = predict.curves(arch, roofs, dtype, 1, L, grid["prompts"][0], weights)

            def sweep(bs, T=T, L=L):
                print(f"grid: {runtime} decode against batch {', '.join(map(str, bs))} (context {L}, {T} thread(s)) "
                      "for the turn to compute-bound ...", file=sys.stderr)  # fmt: skip
                got = decode_sweep(T, L, bs)
                return {B: got[B]["median_s"] for B in bs}

            t = turn.sweep(sweep, curves, turn_batches_that_fit(arch, grid, dtype))
            turns.append({"runtime": runtime, "threads": T, "context": L, **t})
    return {"grid": grid, "cells": cells, "mape": mape(cells), "worst": worst(cells), "turns": turns, "rows": rows}


def mape(cells: list[dict]) -> dict:
    """{runtime: {phase: mean absolute percentage error}} over the cells."""
    out: dict = {}
    for c in cells:
        out.setdefault(c["runtime"], {}).setdefault(c["phase"], []).append(abs(c["error_pct"]))
    return {r: {ph: statistics.fmean(v) for ph, v in by.items()} for r, by in out.items()}


def worst(cells: list[dict], n: int = 3) -> list[dict]:
    return sorted(cells, key=lambda c: -abs(c["error_pct"]))[:n]


def _cell_name(c: dict) -> str:
    what = f"prompt {c['prompt']}" if c["phase"] == "prefill" else f"context {c['context']}"
    return f"{c['phase']} b{c['batch']} {what} {c['threads']}T"


def _top(by: dict, n: int = 5) -> str:
    return ", ".join(f"{k} {v * 1e3:.2f}" for k, v in sorted(by.items(), key=lambda kv: -kv[1])[:n])


def _breakdown(c: dict) -> list[str]:
    """A worst cell's op-level breakdown (ms): rooflab's prediction per op kind beside the runtime's
    own profile per node type or aten op (its profiled run, so its sum exceeds the timed one)."""
    if not c.get("predicted_by_kind_s"):
        return []
    return [
        f"      {_cell_name(c)}: rooflab by op kind (ms): {_top(c['predicted_by_kind_s'])}",
        f"      {' ' * len(_cell_name(c))}  {c['runtime']}'s profile (ms): {_top(c.get('runtime_by_op_type_s', {}))}",
    ]


def lines(g: dict) -> list[str]:
    out = ["  grid (measured in the runtime, predicted op by op on the roofs):"]
    out.append(f"    {'runtime':<12} {'cell':<30} {'measured':>12} {'predicted':>12} {'error':>8}")
    for c in g["cells"]:
        out.append(
            f"    {c['runtime']:<12} {_cell_name(c):<30} {c['measured_s'] * 1e3:>9.2f} ms "
            f"{c['predicted_s'] * 1e3:>9.2f} ms {c['error_pct']:>+7.0f}%"
        )
    for r, by in g["mape"].items():
        out.append(f"    MAPE {r}: " + ", ".join(f"{ph} {v:.1f}%" for ph, v in by.items()))
    out.append("    worst: " + "; ".join(f"{c['runtime']} {_cell_name(c)} {c['error_pct']:+.0f}%" for c in g["worst"]))
    for c in g["worst"]:
        out += _breakdown(c)
    from .turn import line

    out += [line(t["runtime"], t["threads"], t) for t in g.get("turns", [])]
    return out
