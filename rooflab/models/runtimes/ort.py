"""onnxruntime, the engine, for both of its uses: `rooflab place MODEL.onnx --runtime onnxruntime` (its
own per-node times, mapped to the graph's ops by ort_nodes.py and placed by placement.py) and the
runtime check of `rooflab llm CONFIG --runtime onnxruntime` (the exported LLM timed beside rooflab's
prediction, reported by llm_check.py). Optional extra `rooflab[onnx]`.

Placing a graph. How it measures: two sessions of the model with the same options (all graph
optimizations, as a user gets them; ``--threads`` intra-op threads; CPU execution provider, CUDA
where asked and the installed build has it): one with ``enable_profiling``, one without. Runs
alternate between them (warm-up runs first, then enough runs for about 2 s of each, at least 5;
--quick: 0.5 s, 3), run by run on one thread; on more, in eight blocks each, 50 ms apart (a
session's idle workers spin after its run and would slow the other session's: interleaving run by
run doubled MobileNetV2's time on 2 threads); the profiled session's JSON trace gives each node's
``kernel_time`` per run (runs delimited by the ``model_run`` events, warm-ups dropped, median per
node over runs), the other session the end-to-end time of a whole run (median), which the per-node
sum is compared with.

The LLM check. Checked first: the exported graph is verified end to end before it is timed (a decode
step fed the prefill's KV cache gives the logits of a prefill one token longer, to 1e-3 relative),
so RoPE positions, the causal mask, GQA and the cache are right. Then each phase is run in a session
with all graph optimizations and ``threads`` intra-op threads: warm-up runs, then the median of
timed runs (end to end, what a user sees), and one profiled session for onnxruntime's own per-node
times, summed by operator type, which the comparison lists beside rooflab's per-kind prediction."""

from __future__ import annotations

import functools
import json
import math
import os
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

from ... import ort_session
from ...cpu.backend import step_driver
from ...errors import RooflabError, first_line
from ...idle_threads import wait_until_idle
from .. import llm
from ..llm import export as llm_export
from .llm_check import kv_copy, measured_fields, overhead, phase_row, predicted_by_kind, runtime_prediction
from .ort_nodes import GraphIndex, map_optimized, parse_profile, rows_for, skeleton
from .placement import median


def import_ort():
    from ...ort_session import import_ort

    return import_ort("--runtime onnxruntime")


def load_model(path):
    from ..onnx_import import _import_onnx

    onnx, _ = _import_onnx()
    path = Path(path)
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as e:
        raise RooflabError(f"{path} is not a readable ONNX model ({type(e).__name__})") from None
    if not len(model.graph.node):
        raise RooflabError(f"{path} is not an ONNX model with a graph (no nodes)", "give a MODEL.onnx")
    return model


def input_shapes(model, batch: int | None, dims: dict | None) -> dict:
    """name -> (shape, elem_type) of every graph input: symbolic dims from ``dims`` (by name), a
    symbolic first dim from ``batch`` (default 1); a fixed first dim must agree with ``batch``."""
    inits = {i.name for i in model.graph.initializer}
    dims = dict(dims or {})
    out = {}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        t = vi.type.tensor_type
        shape = []
        for k, d in enumerate(t.shape.dim):
            if d.HasField("dim_value"):
                if k == 0 and batch is not None and d.dim_value != batch:
                    raise RooflabError(
                        f"--batch {batch}: input {vi.name!r} has a fixed batch dimension of {d.dim_value}",
                        f"export the model at batch {batch} (rooflab export MODEL --batch {batch}) or drop --batch",
                    )
                shape.append(d.dim_value)
            elif d.dim_param and d.dim_param in dims:
                shape.append(dims[d.dim_param])
            elif k == 0:
                shape.append(batch or 1)
            else:
                name = d.dim_param or f"dim {k}"
                raise RooflabError(
                    f"input {vi.name!r} has a dynamic dimension {name!r}",
                    f"give its size with --dim {d.dim_param or 'NAME'}=SIZE",
                )
        out[vi.name] = (shape, t.elem_type)
    return out


def make_feeds(model, shapes: dict, seed: int = 0) -> dict:
    """Random inputs: floats N(0, 1); integer inputs that index a Gather table stay below its rows."""
    from onnx import TensorProto, helper

    rng = np.random.default_rng(seed)
    rows = {i.name: i.dims[0] for i in model.graph.initializer if len(i.dims) >= 1}
    bound: dict[str, int] = {}
    for n in model.graph.node:
        if n.op_type == "Gather" and len(n.input) == 2 and n.input[0] in rows:
            bound[n.input[1]] = min(bound.get(n.input[1], 1 << 62), rows[n.input[0]])
    feeds = {}
    for name, (shape, elem) in shapes.items():
        dt = helper.tensor_dtype_to_np_dtype(elem) if elem else np.float32
        if elem == TensorProto.BOOL:
            feeds[name] = np.ones(shape, bool)
        elif np.issubdtype(dt, np.integer):
            feeds[name] = rng.integers(0, max(1, bound.get(name, 1)), size=shape).astype(dt)
        else:
            feeds[name] = rng.standard_normal(shape).astype(dt)
    return feeds


def _named(path, tmp, unnamed: bool) -> Path:
    """The model itself, or a copy in ``tmp`` whose unnamed nodes get onnx_import's labels
    (``OpType_index``): the profile names nodes, and every node needs its own name."""
    if not unnamed:
        return Path(path)
    import onnx

    full = onnx.load(str(path))
    for idx, n in enumerate(full.graph.node):
        if not n.name:
            n.name = f"{n.op_type}_{idx}"
    out = Path(tmp) / "named.onnx"
    onnx.save(full, str(out), save_as_external_data=full.ByteSize() > (1 << 30))
    return out


def _session(ort, path, threads, providers, profile_dir=None, optimized=None):
    from ...ort_session import options

    so = options(threads, profile_prefix=Path(profile_dir) / "ort-profile" if profile_dir else None)
    if optimized:
        so.optimized_model_filepath = str(optimized)
        so.add_session_config_entry("session.optimized_model_external_initializers_file_name", "weights.bin")
        so.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", "256")
    try:
        return ort.InferenceSession(str(path), so, providers=providers)
    except Exception as e:
        raise RooflabError(f"onnxruntime cannot run {Path(path).name}: {first_line(e)}") from None


def profile_onnx(
    path, *, threads: int, device: str = "cpu", batch: int | None = None, dims: dict | None = None,
    quick: bool = False, runs: int | None = None, model=None,
) -> dict:  # fmt: skip
    """Run the model in onnxruntime and return the rows (one per node the runtime ran) and the
    end-to-end samples: the ``profile`` dict placement.place_profile places (``model``: the loaded
    ModelProto, when the caller has it already)."""
    ort = import_ort()
    model = model if model is not None else load_model(path)
    shapes = input_shapes(model, batch, dims)
    index = GraphIndex(skeleton(model, shapes))
    feeds = make_feeds(model, shapes)
    unnamed = any(not n.name for n in model.graph.node)
    del model
    providers = _providers(ort, device)
    warmup = 1 if quick else 2
    with tempfile.TemporaryDirectory(prefix="rooflab-ort-") as tmp:
        path = _named(path, tmp, unnamed)
        optimized = Path(tmp) / "optimized.onnx"
        prof = _session(ort, path, threads, providers, profile_dir=tmp, optimized=optimized)
        plain = _session(ort, path, threads, providers)
        try:
            e2e = _alternate(prof, plain, feeds, threads, warmup, quick, runs)
        except Exception as e:
            raise RooflabError(f"onnxruntime failed running {Path(path).name}: {first_line(e)}") from None
        times, measured = _node_times(prof, warmup)
        from onnx import load

        opt = load(str(optimized), load_external_data=False) if optimized.exists() else None
        provider = prof.get_providers()[0]
    rows, not_executed = _rows(index, opt, times, measured)
    return {
        "device": device,
        "runtime": f"onnxruntime {ort.__version__}",
        "runtime_label": f"onnxruntime {ort.__version__} ({provider.replace('ExecutionProvider', '')}, {threads} threads)",
        "provider": provider,
        "threads": threads,
        "runs": measured,
        "warmup": warmup,
        "inputs": {k: list(v[0]) for k, v in shapes.items()},
        "rows": rows,
        "e2e_samples_s": e2e["samples_s"],
        "e2e_noise_reasons": e2e["noise_reasons"],  # the end-to-end runs, checked as every timing is
        "run_totals_s": [sum(v[r] for v in times.values()) for r in range(measured)],
        "not_executed": not_executed,
        "unsupported": index.unsupported,
        "profiled_nodes": sorted(times),
    }


def _providers(ort, device: str) -> list[str]:
    if device != "cuda":
        return ["CPUExecutionProvider"]
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        raise RooflabError(
            "this onnxruntime build has no CUDAExecutionProvider", "pip install onnxruntime-gpu, or use --device cpu"
        )
    return ["CUDAExecutionProvider", "CPUExecutionProvider"]


def _alternate(prof, plain, feeds, threads: int, warmup: int, quick: bool, runs: int | None) -> dict:
    """Warm-up runs of both sessions, then the profiled and the plain session alternately (a noisy
    neighbour hits both alike): run by run on one thread, in blocks on more, each session's block
    started once the other's intra-op workers stopped spinning (idle_threads; the driver waits
    the same way before the plain session's block). The plain session's runs are timed by the
    driver (``Driver.time_runs``)."""
    t0 = time.perf_counter()
    for _ in range(warmup):
        prof.run(None, feeds)
        plain.run(None, feeds)
    per = max((time.perf_counter() - t0) / (2 * warmup), 1e-6)
    n = runs or min(100, max(3 if quick else 5, math.ceil((0.5 if quick else 2.0) / per)))
    block = 1 if threads == 1 else max(1, math.ceil(n / 8))

    def profiled(k):
        if threads > 1:
            wait_until_idle()
        for _ in range(k):
            prof.run(None, feeds)

    run = functools.partial(plain.run, None, feeds)
    return step_driver().time_runs(run, n, threads=threads, warmup=0, block=block, between=profiled)


def _node_times(prof, warmup: int) -> tuple[dict, int]:
    """The profiled session's per-node kernel times per measured run (its trace file removed)."""
    trace = prof.end_profiling()
    try:
        events = json.loads(Path(trace).read_text())
    finally:
        if os.path.exists(trace):
            os.unlink(trace)
    return parse_profile(events, warmup)


def _rows(index: GraphIndex, opt, times: dict, measured: int) -> tuple[list[dict], list[dict]]:
    """One row per node the runtime ran, tied to the graph's ops through the optimized graph (by
    name alone when there is none); profiled nodes the optimized graph does not name are listed."""
    if opt is not None:
        opt_nodes = [(n.name, n.op_type, list(n.input), list(n.output)) for n in opt.graph.node]
        groups, not_executed = map_optimized(index, opt_nodes, {i.name for i in opt.graph.initializer})
    else:
        opt_nodes = [(n[0], n[1], n[2], n[3]) for n in index.nodes if n[0] in times]
        groups, not_executed = map_optimized(index, opt_nodes, set())
    rows = rows_for(index, opt_nodes, groups, times, measured)
    known = {nm for r in rows for nm in r["runtime_nodes"]}
    for nm, samples in times.items():
        if nm not in known:
            rows.append({"node": nm, "op_type": "?", "runtime_nodes": [nm], "samples_s": samples,
                         "runtime_s": median(samples), "dispatches": 1, "graph_nodes": [], "parts": [], "timed": True,
                         "note": "not in the optimized graph"})  # fmt: skip
    return [r for r in rows if r["timed"] or r.get("parts") or r.get("graph_nodes")], not_executed


# ---- the LLM check ----------------------------------------------------------------------------------


def _ort():
    return ort_session.import_ort("the runtime check")


def llm_session(path: Path, threads: int, profile_dir: str | None = None):
    prefix = Path(profile_dir) / "ort" if profile_dir else None
    return ort_session.session(path, ort_session.options(threads, profile_prefix=prefix, what="the runtime check"))


def llm_feeds(sess, seed: int = 0) -> dict:
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
    sa, sb, sc = llm_session(a, 1), llm_session(b, 1), llm_session(c, 1)
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
    s = llm_session(path, threads)
    f = llm_feeds(s)
    measured = step_driver().time_runs(functools.partial(s.run, None, f), runs, threads=threads, warmup=warmup)
    del s
    with tempfile.TemporaryDirectory() as d:
        p = llm_session(path, threads, d)
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


def decode_sweep(config, threads: int, context: int, batches: list[int], runs: int,
                 weights: int | None = None) -> dict:  # fmt: skip
    """{batch: {"median_s", ...}}: one decode step at KV ``context`` exported at each batch (int4/int8
    MatMulNBits weights where ``weights``), timed as the grid's cells are (llm.turn's measured curve).
    Verified before anything is timed: the exporter end to end at batch 1 (``verify``: decode after
    prefill against the longer prefill); then per batch, the last sequence of the batch gives the
    logits the batch-1 graph (the same weights: the exporter's are fixed by name) gives for it
    alone, so a graph that mixes up sequences fails here, never reaches a figure."""
    out = {}
    with tempfile.TemporaryDirectory(prefix="rooflab-turn-") as d:
        tmp = Path(d)
        (tmp / "verify").mkdir()
        exporter_err = verify(config, tmp / "verify")

        def graph(B):
            path = llm_export.export(config, tmp / f"decode-b{B}.onnx", batch=B, cache=context)
            return quantize(path, weights) if weights else path

        one = llm_session(graph(1), threads)
        for B in batches:
            path = graph(B) if B > 1 else None
            s = llm_session(path, threads) if path else one
            f = llm_feeds(s, seed=B)
            got = s.run(None, f)[0][-1:]
            want = one.run(None, {k: v[-1:] for k, v in f.items()})[0]
            # batch 1: the graph against itself proves nothing; the exporter's own check stands for it
            err = float(np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-30)) if path else exporter_err
            if not err < 1e-3:
                raise RooflabError(f"the exported decode graph at batch {B} is wrong: its last sequence differs "
                                   f"from the batch-1 graph's by {err:.2g}")  # fmt: skip
            out[B] = {**step_driver().time_runs(functools.partial(s.run, None, f), runs, threads=threads),
                      "verified_rel_err": err}  # fmt: skip
            if path:
                del s
                for g in (path, Path(str(path) + ".data")):
                    g.unlink(missing_ok=True)
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
            row = phase_row(rows, phase, batch, prompt, context)
            predicted, ort_ops = runtime_prediction(row, "-ort-")
            by_kind, extra, graph = predicted_by_kind(row, "-ort-"), {}, 0.0  # graph: what the graph's KV handling adds
            if phase == "decode" and graph_kv_copy is not None:
                graph, extra = kv_copy(row, graph_kv_copy(context, batch), by_kind)
                predicted += graph
            cost, how = overhead(m["node_calls"], call_floors)
            best = row["seconds"] + cost + graph
            predicted += cost
            out[phase] = {
                **measured_fields(phase, batch, prompt, context, m),
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
