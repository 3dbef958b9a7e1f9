"""`rooflab llm CONFIG`: an LLM read from its config.json (or a bundled name), every op of prefill and
decode executed at its real shape (or predicted where it cannot run) and placed on the measured
roofs: TTFT, time per token, tokens/s, MBU, MFU, decode curves against batch and context; with
--runtime, the same model built in onnxruntime or torch and timed beside the prediction (--grid:
over a grid of cells). The library half lives in rooflab/models/llm/ (__init__.py: config and ops;
predict.py: measuring, prediction, report lines; grid.py) and rooflab/models/runtimes/ (ort.py,
pytorch.py: the runtime checks).
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

from ..command_setup import add_arguments
from ..errors import RooflabError

HELP = "an LLM from its config.json: prefill and decode per op on the measured roofline, tokens/s"


def add_parser(sub) -> None:
    p = sub.add_parser("llm", help=HELP)
    p.add_argument("config", help="a Hugging Face config.json (or its folder) or a bundled name, e.g. llama-2-7b")
    p.add_argument("--prompt", default="128", metavar="S", help="prefill length in tokens (default 128)")
    p.add_argument("--context", default="1024", metavar="L[,L...]", help="decode KV length(s) (default 1024)")
    p.add_argument("--batch", default="1", metavar="B[,B...]", help="batch size(s) (default 1)")
    p.add_argument("--dtype", default="float32", help="weights and activations: float32 (default), bfloat16, ...")
    p.add_argument(
        "--weights",
        default="fp32",
        metavar="fp32|int8|int4",
        help="weight storage: fp32 (default), or int8/int4 weight-only (block 32, fp32 scales and activations, "
        "onnxruntime's MatMulNBits layout); weight bytes are counted as stored and the GEMVs run the qgemm rungs",
    )
    add_arguments(p, what="the ops")
    p.add_argument("--json", action="store_true", help="print the summary (parameter counts included) as JSON")
    p.add_argument("--quick", action="store_true", help="shorter timing budgets")
    p.add_argument("--no-own", action="store_true", help="time the library variant only (not rooflab's kernels)")
    p.add_argument("--no-measure", action="store_true", help="roofs only: predict every op, execute none")
    p.add_argument(
        "--runtime",
        default=None,
        metavar="NAME",
        help="also build the model with random weights in this runtime (onnxruntime: exported to ONNX; torch: "
        "transformers' from_config, no download), verify it and time prefill and decode (batch 1, first context) "
        "beside the prediction",
    )
    p.add_argument(
        "--grid",
        default=None,
        metavar="small|full",
        help="with --runtime: the check over a grid of cells (full: batch 1,4,16 x context 128,1024 x prompt "
        "32,512 x threads 1,all; small: batch 1,4, context 128, prompt 32, 1 thread), each measured and "
        "predicted; prints the table and the mean absolute error per runtime and phase",
    )
    p.add_argument("--no-plot", action="store_true", help="do not write charts")


def main(args) -> int:
    from ..command_setup import check_device, from_args
    from ..models.llm import predict

    arch = _load(args.config)
    device = check_device(args.device)
    inp = predict.check_inputs(arch, prompt=args.prompt, context=args.context, batch=args.batch, dtype=args.dtype,
                               weights=args.weights, device=device)  # fmt: skip
    runtime = (args.runtime or "").lower() or None
    if runtime not in (None, "onnxruntime", "ort", "torch"):
        raise RooflabError(f"unknown runtime {args.runtime!r}", "use --runtime onnxruntime or torch")
    grid = _grid_of(args.grid, runtime, arch, inp)
    _check_runtime(runtime, arch, inp, device, args.no_measure)
    summary = _summary_head(arch, inp)
    setup = from_args(args, device, check_out=False)  # the folder is checked when the result is written
    try:
        ceil, src = setup.find_ceilings()
    except RooflabError as e:
        if not args.no_measure:
            raise
        return _counts_only(arch, inp, summary, args.json, why=e.message)
    if grid is not None:
        return _run_grid(arch, args, inp, runtime, grid, summary, setup, ceil, src)
    roofs, measured = _measure(arch, args, inp, runtime, summary, setup, ceil, src)
    if runtime:
        _runtime_check(arch, args, inp, runtime, summary, roofs, setup.machine)
    files = _write_outputs(summary, measured, ceil, src, setup, args)
    _print(summary, files, args.json)
    return 0


def _load(config: str):
    """The parsed config, with a line for a generic architecture and for fields rooflab does not read."""
    from ..models import llm

    arch = llm.load(config)
    if llm.generic_note(arch):
        print(llm.generic_note(arch), file=sys.stderr)
    if arch.unknown:
        print(
            f"note: {arch.name}: config fields rooflab does not read: {', '.join(arch.unknown)} (placed without them)",
            file=sys.stderr,
        )
    return arch


def _grid_of(name: str | None, runtime: str | None, arch, inp) -> dict | None:
    """--grid's cells; its own mistakes are said before the runtime is looked for."""
    if not name:
        return None
    from ..models.llm import grid as llm_grid

    grid = llm_grid.grid_of(name)
    if not runtime:
        raise RooflabError("--grid runs the runtime check over a grid", "add --runtime onnxruntime or torch")
    llm_grid.check_memory(arch, grid, inp["dtype"])
    return grid


def _check_runtime(runtime: str | None, arch, inp, device: str, no_measure: bool) -> None:
    """The runtime can build this model and its check can run (batch 1, measured, on its device)."""
    if runtime == "torch":
        from ..models.runtimes import pytorch

        pytorch.check(arch, device, inp["dtype"])
        if inp["weights"]:
            raise RooflabError("--runtime torch builds the fp32 model", "use --runtime onnxruntime with --weights")
        if no_measure or 1 not in inp["batches"]:
            raise RooflabError("--runtime torch compares measured predictions at batch 1",
                               "drop --no-measure, include batch 1")  # fmt: skip
    elif runtime:
        from ..models.llm import export as llm_export

        llm_export.check(arch, 1, inp["prompt"], None)
        if no_measure or 1 not in inp["batches"] or device != "cpu":
            raise RooflabError("--runtime onnxruntime compares measured predictions at batch 1 on the CPU",
                               "drop --no-measure, include batch 1, use --device cpu")  # fmt: skip


def _summary_head(arch, inp) -> dict:
    from ..models import llm
    from ..models.llm.predict import weights_label

    return {
        "config": arch.name, "arch": llm.describe(arch), "params": llm.param_counts(arch),
        "unknown_fields": arch.unknown, "dtype_requested": inp["dtype"], "prompt": inp["prompt"],
        "batches": inp["batches"], "contexts": inp["contexts"], "weights": weights_label(inp["weights"]),
    }  # fmt: skip


def _counts_only(arch, inp, summary: dict, as_json: bool, why: str) -> int:
    """--no-measure without ceilings here: parameter counts, FLOPs and bytes per phase (said, with
    ``why``, once they are counted: a mistake in the counts is the one line instead)."""
    from ..models import llm
    from ..models.llm.predict import lines

    w, dtype = inp["weights"], inp["dtype"]
    summary["dtype_executed"] = dtype
    summary["phases"] = {
        "prefill": llm.totals(llm.phase_ops(arch, "prefill", 1, inp["prompt"], dtype=dtype, weights=w)),
        "decode": llm.totals(llm.phase_ops(arch, "decode", 1, context=inp["contexts"][0], dtype=dtype, weights=w)),
    }
    print(f"note: {why}: parameter counts, FLOPs and bytes only; nothing is written", file=sys.stderr)
    print(json.dumps(summary, indent=1) if as_json else "\n".join(lines(summary)))
    return 0


def _measure(arch, args, inp, runtime, summary, setup, ceil, src):
    """Every distinct op of every phase set measured (or predicted) on the roofs and assembled into
    the summary's rows and curves; returns the roofs and the measurements."""
    from ..models import measure, place
    from ..models.llm import predict

    device = setup.device
    roofs = place.Roofs(ceil, setup.threads if device == "cpu" else 0, device)
    if roofs.note:  # the ops (and the runtime check) then run at the roofs' threads: place.run_threads
        print(f"note: {roofs.note}", file=sys.stderr)
    threads = place.run_threads(roofs, setup.threads)
    sets = predict.op_sets(arch, inp)
    measured = _measure_sets(sets, roofs, threads, args, runtime, setup.machine, f"llm {arch.name}", device,
                             execute=not args.no_measure)  # fmt: skip
    summary.update(
        executed=not args.no_measure,
        dtype_executed=measure.executed_dtype(inp["dtype"], device, "gemm"),  # the GEMMs'; dtype_note says the rest
        dtype_note=predict.dtype_note(inp["dtype"], device),
        threads=threads if device == "cpu" else roofs.threads,  # what the ops and the runtime run at
        roofs_threads=roofs.threads,
        device=device,
        ceilings_source=src,
    )
    summary["rows"] = predict.assemble(sets, measured, roofs, setup.machine, device, inp["dtype"])
    predict.state_experts(arch, summary)
    summary["curves"] = predict.curves(
        arch, roofs, inp["dtype"], inp["batches"][0], inp["contexts"][0], inp["prompt"], inp["weights"]
    )
    return roofs, measured


def _measure_sets(sets, roofs, threads, args, runtime, machine, title, device, execute=True) -> dict:
    from ..models.llm import predict

    progress = None
    if not args.json:  # minutes at a large model or a full grid's larger cells: say which op runs
        from ..progress import RichProgress

        progress = RichProgress(title)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        measured = predict.measure_distinct(
            [o for s in sets for o in s["ops"]], roofs, device=device, threads=threads, quick=args.quick,
            machine=machine, own=not args.no_own, execute=execute, progress=progress,
            runtime=predict.runtime_kernels(runtime),
        )  # fmt: skip
    if progress:
        progress.close()
    predict.mark_phases(sets, measured)
    return measured


def _runtime_check(arch, args, inp, runtime, summary, roofs, machine) -> None:
    """The model built in the runtime, timed at batch 1 and the first context beside the prediction."""
    T = summary["threads"]
    print(f"{runtime} check of {arch.name} ({T} threads) ...", file=sys.stderr)
    rt, kw = _runtime_compare(arch, args, inp, runtime, roofs, machine, T, summary["rows"][-1]["weights_cold"])
    runs = 5 if args.quick else 10
    summary["runtime_check"] = rt.compare(arch, summary["rows"], T, inp["prompt"], inp["contexts"][0],
                                          runs=runs, **kw)  # fmt: skip


def _runtime_compare(arch, args, inp, runtime, roofs, machine, T, cold: bool):
    """The runtime's module and the keywords its `compare` takes: the call floors measured among the
    ceilings, and the KV-cache copy the runtime makes every decode step (onnxruntime's graph Concats,
    transformers' DynamicCache torch.cat)."""
    from ..models.llm import predict
    from ..models.runtimes import ort, pytorch

    def copy_s(context, batch=1):
        return predict.graph_kv_copy_s(arch, context, T, roofs, machine, args.quick, cold, batch, runtime)

    if runtime == "torch":
        floor = predict.runtime_call_floor(roofs, "torch aten call", T)
        # DynamicCache's cat, timed with torch's on the CPU at float32 (the variant's dtype; a bf16 cache
        # or a GPU's cat is left uncharged, as before)
        cat = copy_s if roofs.device == "cpu" and inp["dtype"] == "float32" else None
        return pytorch, {"device": roofs.device, "dtype": inp["dtype"], "call_floor": floor, "kv_copy": cat}

    floors = {k: predict.runtime_call_floor(roofs, f"onnxruntime {k}", T) for k in ("node", "run")}
    return ort, {"weights": inp["weights"], "graph_kv_copy": copy_s, "call_floors": floors}


def _run_grid(arch, args, inp, runtime, grid, summary, setup, ceil, src) -> int:
    """`--grid`: the runtime check over the grid's cells (llm_grid), the result file, the table."""
    from ..models import measure
    from ..models.llm import grid as llm_grid
    from ..models.llm import predict

    runs = 3 if args.quick else 5
    kept: dict = {}

    def measure_sets(sets, roofs, T):
        kept["measured"] = _measure_sets(sets, roofs, T, args, runtime, setup.machine,
                                         f"llm {arch.name} grid, {T} thread(s)", "cpu")  # fmt: skip
        kept["roofs"] = roofs
        return predict.assemble(sets, kept["measured"], roofs, setup.machine, "cpu", inp["dtype"])

    def compare(rows, T, roofs, B, S, L, phases):
        cold = next(r for r in rows if r["phase"] == "decode" and r["batch"] == B)["weights_cold"]
        rt, kw = _runtime_compare(arch, args, inp, runtime, roofs, setup.machine, T, cold)
        return rt.compare(arch, rows, T, S, L, runs=runs, batch=B, phases=phases, **kw)

    def decode_sweep(T, L, batches):
        from ..models.runtimes import ort, pytorch

        if runtime == "torch":
            return pytorch.decode_sweep(arch, T, L, batches, runs, dtype=inp["dtype"])
        return ort.decode_sweep(arch, T, L, batches, runs, weights=inp["weights"])

    g = llm_grid.run(arch, grid, runtime="onnxruntime" if runtime != "torch" else "torch", dtype=inp["dtype"],
                     weights=inp["weights"], ceil=ceil, measure_sets=measure_sets, compare=compare,
                     decode_sweep=decode_sweep)  # fmt: skip
    roofs = kept["roofs"]
    summary.update(
        executed=True, dtype_executed=measure.executed_dtype(inp["dtype"], "cpu", "gemm"),
        dtype_note=predict.dtype_note(inp["dtype"], "cpu"), threads=roofs.threads, roofs_threads=roofs.threads,
        device="cpu", ceilings_source=src, rows=g.pop("rows"), grid=g,
        batches=list(grid["batches"]), contexts=list(grid["contexts"]), prompt=grid["prompts"][0],
    )  # fmt: skip
    predict.state_experts(arch, summary)
    summary["curves"] = predict.curves(arch, roofs, inp["dtype"], grid["batches"][0], grid["contexts"][0],
                                       grid["prompts"][0], inp["weights"])  # fmt: skip
    files = _write_outputs(summary, kept["measured"], ceil, src, setup, args)
    _print(summary, files, args.json, llm_grid.lines(g))
    return 0


def _write_outputs(summary, measured, ceil, src, setup, args) -> list[Path]:
    """The result file (every op measured, the summary), its roofline, the decode and grid charts."""
    from ..models.result import use_ceilings
    from ..results import ResultWriter, require_writable

    require_writable(setup.out)
    writer = ResultWriter(setup.out, setup.description(), "llm", summary["device"],
                          {"config": args.config, "threads": summary["threads"]})  # fmt: skip
    use_ceilings(writer, ceil, src)
    placed = []
    for e in measured.values():
        for r in (e["library"], e["own"]):
            if r is not None:
                placed.append({**r, "model": summary["config"], "phase": ", ".join(e.get("phases") or []) or None})
    writer.data["ops_placed"] = placed
    writer.data["llm"] = summary
    writer.finish("complete")
    stem = Path(str(writer.path)[:-5])
    files = [writer.path]
    if not args.no_plot:
        from ..charts import llm as llm_charts
        from ..charts import roofline as roofline_chart

        if placed:
            files += roofline_chart.roofline(writer.data, Path(str(stem) + ".roofline"), ops=placed)
        files += llm_charts.decode_charts(summary, stem)
        files += llm_charts.grid_charts(summary, stem)
        files += llm_charts.turn_charts(summary, stem)
    return files


def _print(summary: dict, files: list[Path], as_json: bool, extra: list[str] = ()) -> None:
    from ..models.llm.predict import lines

    if as_json:
        slim = dict(summary, rows=[{k: v for k, v in r.items() if k != "ops"} for r in summary["rows"]])
        print(json.dumps(slim | {"files": [str(f) for f in files]}, indent=1, default=str))
        return
    print("\n".join(lines(summary) + list(extra)))
    for f in files:
        print(f"output: {f}")
