"""`rooflab llm CONFIG`: an LLM's prefill and decode placed on this machine's measured roofline.

Each distinct op of a prefill of S tokens (per batch) and of a decode step (per batch and context)
is executed once at its real shape by the one driver (rooflab.models.measure: the library variant
and the best verified own variant, warm and cold), and counted as often as it occurs. An op whose
weights come from memory (the phase's weights exceed the last-level cache, as every real LLM's
do) or that reads the KV cache in decode is charged its streamed cold time: each sample calls it
once on each of several distinct copies of its operands (>= 4x the LLC in all, within a quarter of
the free memory) with no flush between calls, as a step streams one layer's weights after the
other; an op timed alone after a cache flush ran 1.5-1.8x faster per byte here than the same ops
chained (scripts/llm_gemv_chain.py). The rest (norms, RoPE, adds on a few rows) are charged their
warm time. An op that does not fit the memory budget, or that no variant
executes, is predicted from the roofs (max of F/peak, B/BW(DRAM), dispatches x latency) and marked
"predicted". Nothing is materialized beyond one op's operands: Llama-2-7B's 27 GB of fp32 weights
are never allocated, its largest op (the 32000 x 4096 LM head) is 0.5 GB.

Napkin math (decode): time per token ~ weight bytes / DRAM read bandwidth; tokens/s at batch B
rises ~B until F(B) / peak >= bytes(B) / BW, the batch where decode turns compute-bound;
MBU = bytes a step must move / its time / the DRAM roof; MFU = FLOPs / time / peak.
"""

from __future__ import annotations

import sys

from ...errors import RooflabError
from ...flush import flusher, llc_bytes
from ...memory import available_bytes, fmt_bytes
from ...workloads.ops import ITEMSIZE, QGEMM, flops, min_bytes, normalize, output_bytes, weight_bytes
from .. import llm, measure, place


def _ints(text, what: str) -> list[int]:
    out = []
    for part in str(text).split(","):
        part = part.strip()
        if not part.isdigit() or int(part) < 1:
            raise RooflabError(f"{what} {text!r}: give positive integers, e.g. {what} 1,4,16")
        out.append(int(part))
    return sorted(set(out))


def check_inputs(arch: llm.Arch, *, prompt: str, context: str, batch: str, dtype: str, weights: str | None,
                 device: str) -> dict:  # fmt: skip
    """Prompt, contexts, batches and dtype (as the user typed them: "128", "1,4,16"), refused (one
    line naming the option) when unusable; a context above max_position_embeddings is a warning only."""
    prompt = _ints(prompt, "--prompt")
    if len(prompt) != 1:
        raise RooflabError("--prompt takes one length", "e.g. --prompt 128")
    contexts = _ints(context, "--context")
    batches = _ints(batch, "--batch")
    dtype = llm.dtype_name(dtype)
    weights = llm.weights_bits(weights)
    if weights and dtype != "float32":
        raise RooflabError(
            f"--weights int{weights} keeps fp32 activations (MatMulNBits's accuracy level 0); --dtype {dtype} does not apply",
            "drop --dtype",
        )
    for n in (prompt[0], *contexts):
        if arch.max_pos and n > arch.max_pos:
            print(
                f"warning: length {n} is above the model's max_position_embeddings ({arch.max_pos}); placed anyway",
                file=sys.stderr,
            )
    total = _memory_total(device)
    kv = llm.kv_cache_bytes(arch, max(batches), max(contexts + prompt), ITEMSIZE[dtype])
    if total and kv > total:
        raise RooflabError(
            f"--batch {max(batches)}: its KV cache at context {max(contexts + prompt)} is {fmt_bytes(kv)} in "
            f"{dtype}, more than this device's {fmt_bytes(total)} of memory",
            "use a smaller --batch or --context",
        )
    return {"prompt": prompt[0], "contexts": contexts, "batches": batches, "dtype": dtype, "weights": weights}


def _memory_total(device: str) -> int | None:
    if device == "cuda":
        try:
            import cupy

            return cupy.cuda.runtime.memGetInfo()[1]
        except Exception:  # noqa: BLE001 - no GPU: the device check refuses later
            return None
    from ...memory import meminfo

    return meminfo("MemTotal")


def _key(op: dict) -> tuple:
    return (op["kind"], op["dtype"], tuple(sorted(op["shape"].items())))


def mark_phases(phase_sets: list[dict], measured: dict) -> None:
    """Each measured op's ``phases``: the phase sets it occurs in ("prefill 128 b1", "decode @1024
    b1"), so a table of the distinct ops says which phase a row is of (the same name, gate_proj +
    up_proj, is a GEMM in prefill and a GEMV in decode)."""
    for s in phase_sets:
        where = f"prefill {s['prompt']}" if s["phase"] == "prefill" else f"decode @{s['context']}"
        label = f"{where} b{s['batch']}"
        for o in s["ops"]:
            e = measured.get(_key(o))
            if e is not None and label not in e.setdefault("phases", []):
                e["phases"].append(label)


def roof_time(op: dict, roofs: place.Roofs, cold: bool, dtype: str | None = None) -> dict:
    """The roofs' time for ``op`` at the dtype it executes in here (at ``dtype``'s bytes when given):
    max(F/peak, B/BW, latency)."""
    o = dict(op, dtype=dtype or measure.executed_dtype(op["dtype"], roofs.device, op["kind"]))
    F, B = flops(o), min_bytes(o)
    written = min(B, output_bytes(o))
    exec_dtype = measure.executed_dtype(o["dtype"], roofs.device, o["kind"])
    peak = roofs.peak(place.compute_dtype(o, roofs) if o["kind"] in QGEMM else exec_dtype)["value"] * 1e9
    mem = roofs.memory(B - written, written, cold)["value"] * 1e9
    lat = roofs.latency(f"library-{roofs.device}")
    t = max(F / peak, B / mem, (lat["value"] * 1e-9) if lat else 0.0)
    return place.place_op(o, t, 1, roofs, f"library-{roofs.device}", cold) | {"predicted": True}


def _charged_cold(op: dict, phase_cold: bool) -> bool:
    if not phase_cold:
        return False
    if op["kind"] in ("gemm", *QGEMM) and op["shape"].get("weight", True):
        return True
    return op["phase"] == "decode" and op["kind"] == "batched_gemm"


def measure_distinct(ops_all, roofs, *, device, threads, quick, machine, own, execute, progress=None, runtime=None):
    """key -> {"library": rec, "own": rec|None, "runtime": rec|None, "why": reason}. ``runtime`` {op
    kind: variant name}: that runtime's own kernel for those ops too (at float32; the torch check's
    GEMMs, families/runtime_gemm.py), timed as the library is, kept as ``runtime``."""
    out: dict[tuple, dict] = {}
    todo = []
    for o in ops_all:
        k = _key(o)
        if k in out:
            continue
        out[k] = {"library": None, "own": None, "runtime": None, "why": None, "op": o}
        if not execute:
            out[k]["why"] = "not executed (--no-measure)"
            continue
        need = measure._footprint(o)
        avail = available_bytes() if device == "cpu" else None
        if avail is not None and need > 0.5 * avail:
            out[k]["why"] = f"needs {fmt_bytes(need)} to execute and verify, {fmt_bytes(avail)} free"
            continue
        todo.append(o)
    if progress:
        progress.start(len(todo))
    llc = llc_bytes(machine, device)
    for o in todo:
        placed, errors = measure.measure_ops(
            [dict(o, count=1)], roofs, device=device, threads=threads, quick=quick, machine=machine,
            progress=progress, own=own, stream_llc=llc if _charged_cold(o, True) else None,
        )  # fmt: skip
        rec = out[_key(o)]
        for p in placed:
            rec["own" if p["own_kernel"] else "library"] = p
        if rec["library"] is None:
            rec["why"] = "; ".join(e["error"] for e in errors) or "no variant executes it"
        name = (runtime or {}).get(o["kind"])
        if name and rec["library"] is not None and measure.executed_dtype(o["dtype"], device, o["kind"]) == "float32":
            rec["runtime"] = _runtime_record(name, o, roofs, device, threads, quick, machine, llc)
    return out


def _runtime_record(name, op, roofs, device, threads, quick, machine, llc) -> dict | None:
    """A runtime's own kernel on ``op`` (verified, warm and cold as the library), None where it fails."""
    from ...errors import RooflabError
    from ...registry import get_variant

    try:
        return measure.measure_one(
            measure.driver_for(device, quick), get_variant(name), dict(op, dtype="float32", count=1),
            threads=threads, roofs=roofs, flush=flusher(device, machine), cold_samples=3 if quick else 5,
            stream_llc=llc if _charged_cold(op, True) else None,
        )  # fmt: skip
    except (RooflabError, MemoryError):
        return None


def executed_ops(ops_list: list[dict], device: str) -> list[dict]:
    """The ops at the dtype each runs in here (measure.executed_dtype): what their bytes and FLOPs count."""
    return [dict(o, dtype=measure.executed_dtype(o["dtype"], device, o["kind"])) for o in ops_list]


def dtype_note(requested: str, device: str) -> str | None:
    """One line saying how a requested dtype runs here, None where it runs as asked."""
    gemm = measure.executed_dtype(requested, device, "gemm")
    other = measure.executed_dtype(requested, device, "add")
    if gemm == other == requested:
        return None
    if gemm == requested:
        from ...families import bgemm

        return (
            f"{requested} GEMMs on the {bgemm.unit()} unit (the bgemm family's rungs, torch's bf16 Linear as the "
            f"library); the other ops in {other}, as rooflab's CPU kernels run them"
        )
    return f"executed as {other} (no {requested} arithmetic on this device)"


def runtime_kernels(runtime: str | None) -> dict | None:
    """{op kind: variant} of the runtime's own kernels a runtime check times beside the others."""
    from ...families import runtime_gemm

    if runtime == "torch":
        return {"gemm": runtime_gemm.TORCH_LINEAR}
    if runtime in ("onnxruntime", "ort"):
        return {"gemm": runtime_gemm.ORT_MATMUL}
    return None


def runtime_call_floor(roofs, name: str, threads: int) -> dict | None:
    """The ceilings' floor per call of a runtime ("dispatch: torch aten call, T threads") at
    ``threads``, None where these ceilings did not measure it."""
    cands = [c for c in roofs.rf.latency(name) if c.get("threads") == threads and not c.get("implausible")]
    return min(cands, key=lambda c: c["value"]) if cands else None


def dram_read(roofs) -> float:
    """The main-memory roof a decode step's weight stream runs against (STREAM read), bytes/s."""
    return roofs.memory(1.0, 0.0, cold=True)["value"] * 1e9


def _time(entry: dict, cold: bool, roofs) -> tuple[float, float, dict, bool]:
    """(library time, best time, the record placed, predicted?) for one use of an op."""
    if entry["library"] is None:
        p = roof_time(entry["op"], roofs, cold)
        return p["seconds"], p["seconds"], p, True
    recs = [r for r in (entry["library"], entry["own"]) if r is not None]

    def t(r):
        return r.get("cold_seconds", r["seconds"]) if cold else r["seconds"]

    best = min(recs, key=t)
    placed = best.get("cold") if cold and best.get("cold") else best
    return t(entry["library"]), t(best), {**best, **placed}, False


def _runtime_time(entry: dict, cold: bool) -> float | None:
    """The runtime's own kernel's time for one use of an op (measure_distinct's ``runtime``), if timed."""
    r = entry.get("runtime")
    if r is None:
        return None
    return r.get("cold_seconds", r["seconds"]) if cold else r["seconds"]


def stored_weight_bytes(ops_list, device: str) -> float:
    """Bytes of weights a phase reads: float GEMMs at their executed dtype, quantized ones as stored."""
    return sum(o["count"] * o["mult"] * weight_bytes(o) for o in executed_ops(ops_list, device))


def graph_kv_copy_s(arch, context: int, threads: int, roofs, machine, quick: bool, cold: bool, batch: int = 1,
                    runtime: str = "onnxruntime") -> float:  # fmt: skip
    """Seconds of a decode step's KV cache copies, 2 per layer, each writing the whole cache of
    ``context`` positions, where rooflab's decode appends one position in place: an exported graph's
    Concat(past, new) (llm.export, as ONNX exports without a shared KV buffer do) timed with
    onnxruntime's own Concat, or transformers' DynamicCache's torch.cat (``runtime`` "torch") with
    torch's (families/runtime_concat.py); where ``cold`` over a rotation of distinct pasts, as the
    step streams its layers' caches from DRAM. The copies' own call cost is in these times and again
    in the runtime's per-call floor (60 calls x 1-3 us for SmolLM-135M: under 0.2 ms)."""
    from ...families import runtime_concat
    from ...registry import get_variant

    size = runtime_concat.kv_shape(batch, arch.kv_heads, context, arch.head_dim)
    op = normalize(
        {
            "kind": "concat",
            "shape": {"numel": batch * arch.kv_heads * arch.head_dim * context, "inputs": 2, **size},
            "dtype": "float32",
            "name": "graph KV Concat" if runtime != "torch" else "DynamicCache KV cat",
        }
    )
    rec = measure.measure_one(
        measure.driver_for("cpu", quick),
        get_variant(runtime_concat.TORCH_KV_CAT if runtime == "torch" else runtime_concat.ORT_KV_CONCAT),
        op,
        threads=threads,
        roofs=roofs,
        flush=flusher("cpu", machine) if cold else None,
        cold_samples=3 if cold else 0,
        stream_llc=llc_bytes(machine, "cpu") if cold else None,
    )
    return rec.get("cold_seconds", rec["seconds"]) * 2 * arch.layers


def assemble(phase_sets, measured, roofs, machine, device, dtype_req) -> list[dict]:
    """Per phase set: time, tokens/s, MBU, MFU, shares, and the op rows."""
    llc = llc_bytes(machine, device)
    bw = dram_read(roofs)
    rows = []
    for s in phase_sets:
        ops_list = s["ops"]
        exec_dtype = measure.executed_dtype(ops_list[0]["dtype"], device, "gemm")  # the GEMMs': the MFU's peak
        tot = llm.totals(executed_ops(ops_list, device))  # bytes moved at the executed dtypes
        phase_cold = stored_weight_bytes(ops_list, device) > llc
        t_lib = t_best = roof = roof_req = 0.0
        by_cls, by_bound, oprows, predicted = {}, {}, [], []
        for o in ops_list:
            n = o["count"] * o["mult"]
            cold = _charged_cold(o, phase_cold)
            tl, tb, rec, pred = _time(measured[_key(o)], cold, roofs)
            warm = _time(measured[_key(o)], False, roofs)[1] if cold else tb
            t_lib += tl * n
            t_best += tb * n
            roof += roof_time(o, roofs, cold)["seconds"] * n
            roof_req += roof_time(o, roofs, cold, dtype_req)["seconds"] * n
            by_cls[o["cls"]] = by_cls.get(o["cls"], 0.0) + tb * n
            by_bound[rec["class"]] = by_bound.get(rec["class"], 0.0) + tb * n
            if pred:
                predicted.append(o["name"])
            oprows.append(
                {
                    "name": o["name"], "kind": o["kind"], "cls": o["cls"], "count": o["count"], "mult": o["mult"],
                    "shape": o["shape"], "cold": cold, "seconds": tb, "warm_seconds": warm, "library_seconds": tl,
                    "total_s": tb * n, "flops": flops(o), "bytes_min": min_bytes(o), "class": rec["class"],
                    "pct_of_roof": rec["pct_of_roof"], "impl": rec.get("impl", "roofs"), "predicted": pred,
                    "intensity": rec["intensity"],
                    "library_variant": (measured[_key(o)]["library"] or {}).get("variant"),
                    "runtime_seconds": _runtime_time(measured[_key(o)], cold),
                }
            )  # fmt: skip
        peak = roofs.peak(exec_dtype)["value"] * 1e9
        tokens = s["batch"] * (s["prompt"] if s["phase"] == "prefill" else 1)
        row = {
            k: s[k] for k in ("phase", "batch", "prompt", "context") if k in s
        } | {
            "seconds": t_best, "library_seconds": t_lib, "roof_seconds": roof, "roof_seconds_requested_dtype": roof_req,
            "tokens_per_s": tokens / t_best if s["phase"] == "prefill" else s["batch"] / t_best,
            "flops": tot["flops"], "bytes_min": tot["bytes"], "mbu": tot["bytes"] / t_best / bw,
            "mfu": tot["flops"] / t_best / peak, "share_by_op_class": {k: 100 * v / t_best for k, v in by_cls.items()},
            "share_by_bound": {k: 100 * v / t_best for k, v in by_bound.items()}, "predicted_ops": predicted,
            "weights_cold": phase_cold, "weight_bytes": stored_weight_bytes(ops_list, device), "ops": oprows,
        }  # fmt: skip
        rows.append(row)
    return rows


def curves(arch, roofs, dtype: str, batch0: int, context0: int, prompt: int, weights: int | None = None) -> dict:
    """Decode tokens/s against batch and against context as the memory and compute roofs allow
    (analytic: every op's F and B summed; each op's FLOPs on its own compute roof, so a 4-bit GEMV
    on the W4 roof), the batch where decode turns compute-bound, and where its weight GEMMs alone do
    (their FLOPs on their roofs against their bytes from DRAM: what rooflab/models/llm/turn.py checks
    against the runtime's measured tokens/s)."""
    exec_dtype = measure.executed_dtype(dtype, roofs.device, "gemm")
    peak = roofs.peak(exec_dtype)["value"] * 1e9
    bw = dram_read(roofs)

    def compute_s(ops_list) -> float:
        total = 0.0
        for o in ops_list:
            p = roofs.peak(place.compute_dtype(o, roofs) if o["kind"] in QGEMM else o["dtype"])
            total += flops(o) * o["count"] * o["mult"] * o.get("flop_scale", 1.0) / (p["value"] * 1e9)
        return total

    def point(B, L):
        ops_list = llm.phase_ops(arch, "decode", batch=B, context=L, dtype=dtype, weights=weights)
        ops_list = executed_ops(ops_list, roofs.device)
        t = llm.totals(ops_list)
        gemms = [o for o in ops_list if o["kind"] in ("gemm", *QGEMM) and o["shape"].get("weight", True)]
        return {
            "memory_tokens_per_s": B / (t["bytes"] / bw), "compute_tokens_per_s": B / compute_s(ops_list),
            # the weight GEMMs alone: their FLOPs on their roofs against their bytes from DRAM
            "gemm_compute_bound": compute_s(gemms) >= llm.totals(gemms)["bytes"] / bw,
        }  # fmt: skip

    def first(bound) -> int | None:
        """The smallest batch at which ``bound(point)`` holds, refined between the curve's batches."""
        hit = next((p["batch"] for p in vs_batch if bound(p)), None)
        if hit is None:
            return None
        lo = max([b for b in batches if b < hit] or [1])
        return next(B for B in range(lo, hit + 1) if bound(point(B, context0)))

    batches = sorted({int(round(2 ** (i / 2))) for i in range(0, 25)})
    vs_batch = [{"batch": B, **point(B, context0)} for B in batches]
    cross = first(lambda p: p["compute_tokens_per_s"] <= p["memory_tokens_per_s"])
    gemm_turn = first(lambda p: p["gemm_compute_bound"])
    top = arch.max_pos or 4096
    lengths = sorted({min(top, 2**i) for i in range(4, 18)} | {context0})
    vs_context = [{"context": L, **point(batch0, L)} for L in lengths if L >= prompt or L >= 16]
    return {
        "context": context0, "batch": batch0, "vs_batch": vs_batch, "vs_context": vs_context,
        "compute_bound_batch": cross, "gemm_compute_bound_batch": gemm_turn, "peak_gflops": peak / 1e9, "dram_gbps": bw / 1e9, "dtype": exec_dtype,
        "w4_gflops": (roofs.rf.peak("w4", roofs.threads) or {}).get("value") if weights == 4 else None,
    }  # fmt: skip


def op_sets(arch, inp) -> list[dict]:
    sets = []
    for B in inp["batches"]:
        w = inp.get("weights")
        sets.append({"phase": "prefill", "batch": B, "prompt": inp["prompt"],
                     "ops": llm.fold(llm.phase_ops(arch, "prefill", B, inp["prompt"], dtype=inp["dtype"], weights=w))})  # fmt: skip
        for L in inp["contexts"]:
            sets.append({"phase": "decode", "batch": B, "context": L,
                         "ops": llm.fold(llm.phase_ops(arch, "decode", B, context=L, dtype=inp["dtype"], weights=w))})  # fmt: skip
    return sets


def weights_label(bits: int | None) -> str:
    if not bits:
        return "fp32"
    from ...workloads.ops import QUANT_BLOCK

    per = bits / 8 + 4 / QUANT_BLOCK
    return f"int{bits} (weight-only, block {QUANT_BLOCK}, fp32 scales: {per:g} B per weight; a tied LM head stays fp32)"


def state_experts(arch, summary: dict) -> None:
    """A MoE model: the distinct experts each phase reads per layer (llm.expected_experts: k of E per
    token, B tokens), on every row and in one line of the summary; what the ops' ``mult`` used."""
    if arch.experts <= 1:
        return
    for r in summary.get("rows", []):
        tokens = r["batch"] * (r["prompt"] if r["phase"] == "prefill" else 1)
        r["expected_experts"] = llm.expected_experts(arch.experts, arch.top_k, tokens)
    summary["moe"] = {"experts": arch.experts, "top_k": arch.top_k}


def lines(summary: dict) -> list[str]:
    """The human-readable summary."""
    s = summary
    p = s["params"]
    out = [
        f"{s['config']}: {s['arch']}",
        f"  parameters: {p['total']:,} total, {p['active']:,} active per token",
    ]
    if s.get("weights", "fp32") != "fp32":
        out.append(f"  weights: {s['weights']}")
    if s.get("moe") and s.get("rows"):
        m = s["moe"]
        per = ", ".join(
            f"{r['phase']} b{r['batch']} {r['expected_experts']:.2f}" for r in s["rows"] if "expected_experts" in r
        )
        out.append(f"  MoE: {m['top_k']} of {m['experts']} experts per token; distinct experts read per layer: {per}")
    if s.get("unknown_fields"):
        out.append(f"  config fields rooflab does not read (placed without them): {', '.join(s['unknown_fields'])}")
    if s.get("dtype_note") and s.get("rows"):
        out.append(
            f"  requested {s['dtype_requested']}: {s['dtype_note']}; the roofs' prediction at "
            f"{s['dtype_requested']} bytes throughout is given beside"
        )
    for r in s.get("rows", []):
        what = f"prefill {r['prompt']} tokens" if r["phase"] == "prefill" else f"decode at context {r['context']}"
        main = f"TTFT {r['seconds'] * 1e3:.1f} ms" if r["phase"] == "prefill" else f"{r['seconds'] * 1e3:.1f} ms/token"
        shares = ", ".join(
            f"{k} {v:.0f}%" for k, v in sorted(r["share_by_op_class"].items(), key=lambda kv: -kv[1]) if v >= 0.5
        )
        n_pred = len(r["predicted_ops"])
        pred = (
            "; every op predicted from the roofs (--no-measure)"
            if s.get("executed") is False
            else f"; predicted, not executed: {', '.join(r['predicted_ops'])}"
            if n_pred
            else ""
        )
        req = (
            f", roofs at {s['dtype_requested']}: {r['roof_seconds_requested_dtype'] * 1e3:.1f} ms"
            if s.get("dtype_note")
            else ""
        )
        out.append(
            f"  batch {r['batch']} {what}: {main}, {r['tokens_per_s']:.3g} tokens/s, MBU {100 * r['mbu']:.0f}%, "
            f"MFU {100 * r['mfu']:.1f}% (roofs: {r['roof_seconds'] * 1e3:.1f} ms{req}; library only "
            f"{r['library_seconds'] * 1e3:.1f} ms); time: {shares}" + pred
        )
    if s.get("runtime_check"):
        from ..runtimes.llm_check import lines as ort_lines

        out += ort_lines(s["runtime_check"])
    c = s.get("curves")
    if c:
        cb = c["compute_bound_batch"]
        out.append(
            f"  decode at context {c['context']} turns compute-bound at batch {cb if cb else '> ' + str(c['vs_batch'][-1]['batch'])}"
            f" ({c['dtype']} peak {c['peak_gflops']:.0f} GFLOP/s"
            + (f", 4-bit GEMVs on the W4 roof {c['w4_gflops']:.0f} GFLOP/s" if c.get("w4_gflops") else "")
            + f", DRAM {c['dram_gbps']:.1f} GB/s)"
        )
    return out
