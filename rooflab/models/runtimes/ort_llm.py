"""The runtime check of `rooflab llm`: the same architecture exported to ONNX (llm.export, random
weights) and run in onnxruntime on this machine, measured against rooflab's per-op prediction.

Checked first: the exported graph is verified end to end before it is timed (a decode step fed the
prefill's KV cache gives the logits of a prefill one token longer, to 1e-3 relative), so RoPE
positions, the causal mask, GQA and the cache are right. Then each phase is run in a session with
all graph optimizations and ``threads`` intra-op threads: warm-up runs, then the median of timed
runs (end to end, what a user sees), and one profiled session for onnxruntime's own per-node
times, summed by operator type, which the comparison lists beside rooflab's per-kind prediction.
"""

from __future__ import annotations

import functools
import json
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np

from ... import ort_session
from ...errors import RooflabError
from ...timing import timed_runs
from .. import llm
from ..llm import export as llm_export


def _ort():
    return ort_session.import_ort("the runtime check")


def session(path: Path, threads: int, profile_dir: str | None = None):
    prefix = Path(profile_dir) / "ort" if profile_dir else None
    return ort_session.session(path, ort_session.options(threads, profile_prefix=prefix, what="the runtime check"))


def feeds(sess, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    out = {}
    for i in sess.get_inputs():
        if i.name == "input_ids":
            out[i.name] = rng.integers(0, 100, i.shape).astype(np.int64)
        else:
            out[i.name] = rng.standard_normal(i.shape).astype(np.float32)
    return out


def verify(config, tmp: Path, prompt: int = 5) -> float:
    """Largest relative difference between decode-after-prefill and the longer prefill's logits."""
    arch = llm.arch_of(config)
    a = llm_export.export(config, tmp / "p.onnx", seq=prompt)
    b = llm_export.export(config, tmp / "p1.onnx", seq=prompt + 1)
    c = llm_export.export(config, tmp / "d.onnx", cache=prompt + 1)
    ids = np.random.default_rng(3).integers(0, arch.vocab, (1, prompt + 1)).astype(np.int64)
    sa, sb, sc = session(a, 1), session(b, 1), session(c, 1)
    out_a = sa.run(None, {"input_ids": ids[:, :prompt]})
    names = [o.name for o in sa.get_outputs()]
    past = {n.replace("present", "past"): v for n, v in zip(names, out_a) if n.startswith("present")}
    step = sc.run(None, {"input_ids": ids[:, prompt:], **past})[0]
    ref = sb.run(None, {"input_ids": ids})[0]
    err = float(np.max(np.abs(step - ref)) / max(np.max(np.abs(ref)), 1e-30))
    if not err < 1e-3:
        raise RooflabError(f"the exported {arch.name} graph is wrong: decode after prefill differs by {err:.2g}")
    return err


def timed(path: Path, threads: int, runs: int, warmup: int = 2) -> dict:
    """Median end-to-end seconds of ``runs`` runs, and onnxruntime's per-op-type time (profiled)."""
    s = session(path, threads)
    f = feeds(s)
    measured = timed_runs(functools.partial(s.run, None, f), runs, warmup=warmup)
    del s
    with tempfile.TemporaryDirectory() as d:
        p = session(path, threads, d)
        for _ in range(warmup + 1):
            p.run(None, f)
        trace = json.loads(Path(p.end_profiling()).read_text())
    by_type: Counter = Counter()
    nodes = 0
    last = max((e for e in trace if e.get("name") == "model_run"), key=lambda e: e["ts"])  # a warm run
    for e in trace:
        if (
            e.get("cat") == "Node"
            and e.get("name", "").endswith("_kernel_time")
            and last["ts"] <= e["ts"] <= last["ts"] + last["dur"]
        ):
            by_type[e["args"].get("op_name", "?")] += e["dur"] * 1e-6
            nodes += 1
    return {
        **measured,
        "by_op_type_s": dict(by_type.most_common()),
        "node_calls": nodes,  # the nodes the optimized graph executed in one run (its profile's count)
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
        if o.get("runtime_seconds") is not None:
            t, is_own = o["runtime_seconds"], True
        else:
            is_own = own in (o.get("library_variant") or "")
            t = o["library_seconds"] if is_own else o["seconds"]
        total += t * o["count"] * o["mult"]
        mine += is_own
    return total, mine


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


def predicted_by_kind(row: dict) -> dict:
    out: dict = {}
    for o in row["ops"]:
        k = KIND_TO_ORT.get(o["kind"], o["kind"])
        out[k] = out.get(k, 0.0) + o["total_s"]
    return out


def quantize(path: Path, bits: int) -> Path:
    """The exported graph with every MatMul's constant weights turned into MatMulNBits by onnxruntime's
    own quantizer (block 32, symmetric, accuracy level 0: fp32 compute), as ``rooflab llm --weights``
    models it; written beside ``path`` (its .data too), the fp32 files removed."""
    import logging

    import onnx

    try:
        from onnxruntime.quantization.matmul_nbits_quantizer import (
            DefaultWeightOnlyQuantConfig,
            MatMulNBitsQuantizer,
        )
    except ImportError as e:
        raise RooflabError(
            f"onnxruntime's MatMulNBits quantizer cannot be imported ({e})", "pip install 'rooflab[onnx]'"
        ) from None
    from ...workloads.ops import QUANT_BLOCK

    logging.getLogger("onnxruntime.quantization").setLevel(logging.WARNING)
    cfg = DefaultWeightOnlyQuantConfig(block_size=QUANT_BLOCK, is_symmetric=True, accuracy_level=0, bits=bits)
    q = MatMulNBitsQuantizer(onnx.load(str(path)), algo_config=cfg)
    q.process()
    out = path.with_name(f"{path.stem}-int{bits}.onnx")
    q.model.save_model_to_file(str(out), use_external_data_format=True)
    path.unlink()
    Path(str(path) + ".data").unlink(missing_ok=True)
    return out


def compare(
    config, rows: list[dict], threads: int, prompt: int, context: int, runs: int = 10, weights: int | None = None,
    graph_kv_copy=None, call_floors: dict | None = None, batch: int = 1, phases: tuple = ("prefill", "decode"),
) -> dict:  # fmt: skip
    """Export prefill (``prompt`` tokens) and decode (KV ``context``) at ``batch``, verify, time in
    onnxruntime, and put each beside rooflab's prediction (``rows`` of llm.predict.assemble).
    ``weights`` (4, 8): the fp32 graph verified, then its MatMul weights quantized (``quantize``).
    ``graph_kv_copy(context)``: seconds of the decode graph's KV Concats (llm.predict.graph_kv_copy_s),
    which the graph runs where rooflab's decode appends in place: the decode prediction checked is
    the graph's (the in-place one kept beside it). ``call_floors``: the ceilings' onnxruntime floors
    ({"node", "run"}, llm.predict.runtime_call_floor): the prediction adds them per node the run executed."""
    arch = llm.arch_of(config)
    llm_export.check(arch, batch, prompt, None)
    out = {"config": arch.name, "threads": threads, "runtime": "onnxruntime " + _ort().__version__}
    if weights:
        out["weights"] = f"int{weights} MatMulNBits (onnxruntime's quantizer, block 32, symmetric)"
    with tempfile.TemporaryDirectory(prefix="rooflab-llm-") as d:
        tmp = Path(d)
        out["verified_rel_err"] = verify(config, tmp)
        for f in tmp.iterdir():
            f.unlink()
        for phase, kw in (("prefill", {"seq": prompt}), ("decode", {"cache": context})):
            if phase not in phases:
                continue
            path = llm_export.export(config, tmp / f"{phase}.onnx", batch=batch, **kw)
            if weights:
                path = quantize(path, weights)
            m = timed(path, threads, runs)
            row = next(
                r
                for r in rows
                if r["phase"] == phase
                and r["batch"] == batch
                and (r.get("prompt") == prompt if phase == "prefill" else r.get("context") == context)
            )
            predicted, ort_ops = runtime_prediction(row, "-ort-")
            by_kind, extra = predicted_by_kind(row), {}
            if phase == "decode" and graph_kv_copy is not None:
                append = sum(o["total_s"] for o in row["ops"] if o["kind"] == "concat")
                copy = graph_kv_copy(context, batch)
                predicted += copy - append
                key = KIND_TO_ORT["concat"]
                by_kind[key] = by_kind.get(key, 0.0) - append + copy
                extra = {"predicted_in_place_s": row["seconds"], "kv_append_s": append, "graph_kv_copy_s": copy}
            cost, how = overhead(m["node_calls"], call_floors)
            best = row["seconds"] + cost + (extra.get("graph_kv_copy_s", 0.0) - extra.get("kv_append_s", 0.0))
            predicted += cost
            out[phase] = {
                "batch": batch,
                **({"context": context} if phase == "decode" else {"prompt": prompt}),
                "measured_s": m["median_s"],
                "predicted_s": predicted,
                "runtime_overhead_s": cost,
                "runtime_overhead_how": how,
                "node_calls": m["node_calls"],
                "predicted_how": (
                    f"onnxruntime's own kernels for the {ort_ops} op shape(s) rooflab timed in it, rooflab's best for the rest"
                    if ort_ops
                    else "rooflab's best kernel per op"
                ),
                "predicted_best_s": best,
                "predicted_library_s": row["library_seconds"],
                "roof_s": row["roof_seconds"],
                "error_pct": 100 * (predicted - m["median_s"]) / m["median_s"],
                "ort_by_op_type_s": m["by_op_type_s"],
                "predicted_by_kind_s": by_kind,
                **extra,
            }
            path.unlink()
            Path(str(path) + ".data").unlink()
    return out


def lines(c: dict) -> list[str]:
    """The check's summary lines; a torch check (runtimes.torch_llm) carries its own name and per-op key."""
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
        if p.get("runtime_overhead_how"):
            out.append(
                f"      runtime overhead in the prediction: {p['runtime_overhead_s'] * 1e3:.2f} ms = "
                f"{p['runtime_overhead_how']}"
            )
        if "graph_kv_copy_s" in p:
            out.append(
                f"      (the graph's KV Concats copy the whole cache each step: {p['graph_kv_copy_s'] * 1e3:.2f} ms "
                f"measured at their size, where rooflab's in-place append takes {p['kv_append_s'] * 1e3:.2f} ms; "
                f"in place: {p['predicted_in_place_s'] * 1e3:.2f} ms)"
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
