"""What both runtime checks of `rooflab llm CONFIG --runtime onnxruntime|torch` share (ort.py,
pytorch.py time the model): the prediction with the runtime's own kernels where rooflab timed them,
the runtime's per-call overhead at the ceilings' measured floors, rooflab's prediction summed per
kind of op beside the runtime's per-node-type times, and the summary lines of a check.
"""

from __future__ import annotations


def phase_row(rows: list[dict], phase: str, batch: int, prompt: int, context: int) -> dict:
    """rooflab's prediction row (llm.predict.assemble) of the phase the runtime just ran."""
    return next(
        r
        for r in rows
        if r["phase"] == phase
        and r["batch"] == batch
        and (r.get("prompt") == prompt if phase == "prefill" else r.get("context") == context)
    )


def measured_fields(phase: str, batch: int, prompt: int, context: int, m: dict) -> dict:
    """The runtime's side of a checked phase: where it ran and what the driver timed (``m``:
    Driver.time_runs, its noise checks with it)."""
    return {
        "batch": batch,
        **({"context": context} if phase == "decode" else {"prompt": prompt}),
        "measured_s": m["median_s"],
        "measured_noise": m["noise_reasons"],  # the driver's checks of the timed runs (spread, clock)
    }


def runtime_prediction(row: dict, own: str) -> tuple[float, int]:
    """(seconds, ops) of a phase predicted with the runtime's own kernels wherever rooflab timed
    them: an op timed with the runtime's kernel beside the others (``runtime_seconds``: the fp32
    GEMMs, families/runtime_gemm.py) or whose library variant is the runtime's (its name holds
    ``own``: torch's bf16 Linear, onnxruntime's MatMulNBits and MatMulInteger) counts that time,
    every other op rooflab's best. A runtime runs its own GEMMs, not numpy's or rooflab's: on the
    Zen 5 VM torch's decode GEMMs took 1.55x the AVX-512 BF16 rung's time (Qwen2-0.5B, bf16) and
    1.8x numpy's (SmolLM-135M, fp32); onnxruntime's prefill MatMuls at 32 tokens 0.66x numpy's."""
    total, mine = 0.0, 0
    for o in row["ops"]:
        t, is_own = _runtime_op_s(o, own)
        total += t
        mine += is_own
    return total, mine


def _runtime_op_s(o: dict, own: str) -> tuple[float, bool]:
    """(seconds of all of an op's uses in the runtime's prediction, the runtime's own kernel?)."""
    if o.get("runtime_seconds") is not None:
        t, is_own = o["runtime_seconds"], True
    else:
        is_own = own in (o.get("library_variant") or "")
        t = o["library_seconds"] if is_own else o["seconds"]
    return t * o["count"] * o["mult"], is_own


def overhead(calls: int, floors: dict | None) -> tuple[float, str]:
    """(seconds, how) a run's calls cost at the ceilings' floors: ``floors`` {"node": ceiling,
    "run": ceiling} (onnxruntime: per node and per session.run) or {"node": ceiling} (torch: per
    aten call); (0, why not) where the ceilings did not measure them."""
    if not floors or not floors.get("node"):
        return 0.0, "no call floor in these ceilings (a `rooflab run` with the runtime installed measures it)"
    node, run = floors["node"], floors.get("run")
    s = calls * node["value"] * 1e-9 + (max(run["value"], 0.0) * 1e-9 if run else 0.0)
    how = f"{calls} calls (the runtime's profile) x {node['value']:.0f} ns ({node['name']})"
    return s, how + (f" + {run['value'] / 1e3:.1f} us per run ({run['name']})" if run else "")


def kv_reread_s(row: dict) -> float:
    """Seconds (<= 0) a decode row's attention ops change by when charged warm: the runtime's KV copy
    writes the whole present cache just before its attention reads it, so those reads come from the
    caches (SmolLM-135M at context 1024, 1 thread, Zen 3: attention charged streamed 11.8 ms,
    onnxruntime's profile 6.4 ms)."""
    return sum(
        (o["warm_seconds"] - o["seconds"]) * o["count"] * o["mult"]
        for o in row["ops"]
        if o["kind"] == "batched_gemm" and o.get("cold") and o.get("warm_seconds") is not None
    )


def kv_copy(row: dict, copy_s: float, by_kind: dict) -> tuple[float, dict]:
    """(seconds added, fields) where a decode step copies its whole KV cache (``copy_s``: the
    runtime's own copy at that size, llm.predict.graph_kv_copy_s) where rooflab's decode appends one
    position in place: onnxruntime's exported graph (Concat(past, new)) and transformers'
    DynamicCache (torch.cat) both do. The copy replaces the append, and the attention that reads the
    copy just written is charged warm (kv_reread_s). ``by_kind`` (predicted_by_kind) is updated."""
    append = sum(o["total_s"] for o in row["ops"] if o["kind"] == "concat")
    reread = kv_reread_s(row)
    key, att = KIND_TO_ORT["concat"], KIND_TO_ORT["batched_gemm"]
    by_kind[key] = by_kind.get(key, 0.0) - append + copy_s
    by_kind[att] = by_kind.get(att, 0.0) + reread
    fields = {"predicted_in_place_s": row["seconds"], "kv_append_s": append, "graph_kv_copy_s": copy_s,
              "kv_reread_warm_s": reread}  # fmt: skip
    return copy_s - append + reread, fields


KIND_TO_ORT = {
    "gemm": "MatMul/Gemm (weights)",
    "qgemm_nbits": "MatMulNBits (weights)",
    "batched_gemm": "MatMul (attention)",
    "softmax": "Softmax",
    "rmsnorm": "RMSNorm (6 nodes or fused)",
    "rope": "RoPE (Slice, Neg, Concat, Mul, Add)",
    "concat": "Concat (KV cache)",
    "add": "Add (residual)",
    "silu": "SiLU (Sigmoid, Mul)",
    "mul": "Mul (gate x up)",
    "embedding": "Gather",
}


def predicted_by_kind(row: dict, own: str | None = None) -> dict:
    """The prediction summed per kind of op (named as onnxruntime's nodes): with ``own`` (as
    runtime_prediction), the one the runtime check compares, the runtime's kernels where timed;
    without, rooflab's best kernels."""
    out: dict = {}
    for o in row["ops"]:
        k = KIND_TO_ORT.get(o["kind"], o["kind"])
        out[k] = out.get(k, 0.0) + (o["total_s"] if own is None else _runtime_op_s(o, own)[0])
    return out


def lines(c: dict) -> list[str]:
    """The check's summary lines; a torch check (runtimes.pytorch) carries its own name and per-op key."""
    name = c.get("check_name", "onnxruntime")
    what = "model" if name == "torch" else "graph"
    weights = f", {c['weights']}" if c.get("weights") else ""
    out = [
        f"  {name} check ({c['runtime']}{weights}, {c['threads']} threads; the {what}'s outputs checked against "
        f"rooflab's own execution: largest relative difference {c['verified_rel_err']:.1e}):"
    ]
    for phase in ("prefill", "decode"):
        p = c[phase]
        out.append(
            f"    {phase}: {name} measured {p['measured_s'] * 1e3:.2f} ms, rooflab predicted {p['predicted_s'] * 1e3:.2f} ms "
            f"({p['error_pct']:+.0f}%: {'slower' if p['error_pct'] >= 0 else 'faster'} than measured), roofs {p['roof_s'] * 1e3:.2f} ms"
            + (
                f"; predicted with {p['predicted_how']} (rooflab's best kernels: {p['predicted_best_s'] * 1e3:.2f} ms)"
                if p.get("predicted_best_s") is not None and abs(p["predicted_best_s"] - p["predicted_s"]) > 1e-9
                else ""
            )
        )
        if p.get("measured_noise"):
            out.append(f"      noisy: {name}'s timed runs were disturbed ({'; '.join(p['measured_noise'])})")
        if p.get("runtime_overhead_how"):
            out.append(
                f"      runtime overhead in the prediction: {p['runtime_overhead_s'] * 1e3:.2f} ms = "
                f"{p['runtime_overhead_how']}"
            )
        copies = "the graph's KV Concats copy" if name != "torch" else "DynamicCache's torch.cat copies"
        if "graph_kv_copy_s" in p:
            out.append(
                f"      ({copies} the whole cache each step: {p['graph_kv_copy_s'] * 1e3:.2f} ms "
                f"measured at their size, where rooflab's in-place append takes {p['kv_append_s'] * 1e3:.2f} ms; "
                f"in place: {p['predicted_in_place_s'] * 1e3:.2f} ms)"
            )
        if p.get("kv_reread_warm_s"):
            out.append(
                f"      (its attention reads the cache the copies just wrote: charged warm, "
                f"{p['kv_reread_warm_s'] * 1e3:+.2f} ms against streamed from DRAM)"
            )
        theirs = p.get("runtime_by_op_type_s", p.get("ort_by_op_type_s", {}))
        ort_top = ", ".join(f"{k} {v * 1e3:.2f}" for k, v in list(theirs.items())[:6])
        calls = f" ({p['aten_calls']} aten calls)" if "aten_calls" in p else ""
        ours = ", ".join(
            f"{k} {v * 1e3:.2f}" for k, v in sorted(p["predicted_by_kind_s"].items(), key=lambda kv: -kv[1])[:6]
        )
        out.append(f"      {c.get('by_label', 'onnxruntime by node type (ms)')}{calls}: {ort_top}")
        out.append(f"      rooflab by op kind (ms): {ours}")
    return out
