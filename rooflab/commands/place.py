"""`rooflab place OPS.json|MODEL.onnx [--runtime onnxruntime]`: the user's own ops, or an ONNX graph's
nodes, timed on the device asked for (--device cuda runs them on the GPU, --gpu picks it) and placed
on that device's ceilings: a result file, a table (.ops.csv, .ops.md), a roofline with the ops and
one summary line. Under --runtime onnxruntime the runtime's own per-node times are placed instead
(rooflab/models/runtimes/placement.py), beside rooflab's re-execution of each node's ops.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ..command_setup import add_arguments
from ..errors import RooflabError

HELP = "time user-supplied ops (OPS.json or MODEL.onnx) and place them on a roofline"


def add_parser(sub) -> None:
    pc = sub.add_parser("place", help=HELP)
    pc.add_argument("ops", help="OPS.json (see README) or MODEL.onnx")
    add_arguments(pc, what="the ops")
    pc.add_argument("--quick", action="store_true", help="shorter timing per op (and per runtime profile)")
    pc.add_argument(
        "--runtime",
        default=None,
        metavar="NAME",
        help="run MODEL.onnx in this runtime (onnxruntime) and place its own per-node times",
    )
    pc.add_argument("--batch", type=int, default=None, help="--runtime: batch size of a model with a dynamic batch")
    pc.add_argument(
        "--dim", action="append", default=[], metavar="NAME=SIZE", help="--runtime: size of a named dynamic dimension"
    )
    pc.add_argument("--runs", type=int, default=None, help="--runtime: measured runs (default: ~2 s worth, at least 5)")
    pc.add_argument("--no-own", action="store_true", help="--runtime: skip rooflab's own re-execution of the ops")


def main(args) -> int:
    path = Path(args.ops)
    runtime = _runtime(args)
    if not path.exists():
        raise RooflabError(f"no such file: {path}", "give an OPS.json or a MODEL.onnx")
    if runtime:
        return _place_runtime(path, args)
    if path.suffix.lower() == ".onnx":
        from ..models.onnx_import import ops_from_onnx

        ops, unsupported = ops_from_onnx(path)
    else:
        from ..models.userops import load_ops

        ops, unsupported = load_ops(path)
    from ..command_setup import from_args

    return _place_ops(ops, unsupported, from_args(args), source=str(path))


def _runtime(args) -> str | None:
    """--runtime as a name (None: rooflab runs the ops); its options without it are refused."""
    runtime = (args.runtime or "").lower() or None
    if runtime is None:
        given = [f for f, v in (("--batch", args.batch), ("--dim", args.dim), ("--runs", args.runs),
                                ("--no-own", args.no_own)) if v]  # fmt: skip
        if given:
            raise RooflabError(f"{', '.join(given)} apply to a runtime", "add --runtime onnxruntime")
    elif runtime in ("torch", "pytorch"):
        raise RooflabError(
            "--runtime torch places a PyTorch module, not a file", "call rooflab.place_torch(model, example_inputs)"
        )
    elif runtime not in ("onnxruntime", "ort"):
        raise RooflabError(f"unknown runtime {args.runtime!r}", "use --runtime onnxruntime")
    return runtime


def _place_ops(ops_list, unsupported, setup, source: str) -> int:
    """The ops (of an OPS.json or an ONNX graph) run by rooflab and placed: OPS.json and MODEL.onnx alike."""
    from ..models import place
    from ..models.measure import measure_ops
    from ..models.result import model_summary, roofs_for, use_ceilings
    from ..progress import RichProgress

    device = setup.device
    ceil, src = setup.find_ceilings()
    writer = _writer(setup, source)
    use_ceilings(writer, ceil, src)
    for u in unsupported:  # printed once, with the other errors, at the end
        writer.add_error(u.get("op", "?"), u["error"])
    progress = RichProgress(f"placing {Path(source).name}")
    progress.start(len(ops_list))
    roofs = roofs_for(writer, ceil, setup.threads if device == "cpu" else 0, device)
    threads = place.run_threads(roofs, setup.threads)
    writer.data["config"]["threads"] = threads
    try:
        placed, errors = measure_ops(
            ops_list, roofs, device=device, threads=threads, quick=setup.quick, machine=writer.data["machine"],
            writer=writer, progress=progress,
        )  # fmt: skip
    except KeyboardInterrupt:
        progress.close()
        writer.finish("interrupted")
        return 130
    progress.close()
    writer.finish("complete" if not writer.data["errors"] else "complete-with-errors")
    errors += [{"op": u.get("op", "?")} for u in unsupported]
    s = model_summary(Path(source).name, placed, errors, _device_name(setup))
    writer.data["model_summaries"] = [s]
    writer.save()
    _print_outcome(writer, placed, s)
    return 0 if placed else 1


def _writer(setup, source: str):
    from ..results import ResultWriter

    config = {"source": source, "quick": setup.quick, "threads": setup.threads}
    return ResultWriter(setup.out, setup.description(), "place", setup.device, config)


def _device_name(setup) -> str:
    from ..models.result import device_name

    return device_name(setup.machine, setup.device)


def _print_outcome(writer, placed: list[dict], s: dict) -> None:
    """The tables and the roofline beside the result, the ops' table, the summary line, the errors."""
    from ..charts import roofline
    from ..models import place
    from ..models.result import warn_above_roof, write_tables

    files = write_tables(writer, placed, [s])
    files += roofline.roofline(writer.data, Path(str(writer.path)[:-5] + ".roofline"), ops=placed)
    if placed:
        print(place.to_markdown(placed))
    print(s["line"])
    warn_above_roof(writer, placed)
    for e in writer.data["errors"]:
        print(f"error: {e['label']}: {e['error']}")
    print(f"result: {writer.path}")
    for f in files:
        print(f"output: {f}")


def _place_runtime(path: Path, args) -> int:
    from ..command_setup import from_args
    from ..models.runtimes import ort, placement

    if path.suffix.lower() != ".onnx":
        raise RooflabError(
            f"--runtime {args.runtime} runs an ONNX model, not {path.name}",
            "give a MODEL.onnx (`rooflab export MODEL -o MODEL.onnx` writes one)",
        )
    ort.import_ort()
    batch = placement.check_batch(args.batch)
    model = ort.load_model(path)
    dims = {}
    for d in args.dim:
        name, _, size = d.partition("=")
        if not name or not size.isdigit() or int(size) < 1:
            raise RooflabError(f"--dim {d!r} is not NAME=SIZE", "e.g. --dim sequence=128")
        dims[name] = int(size)
    if args.runs is not None and args.runs < 1:
        raise RooflabError(f"--runs must be at least 1, got {args.runs}")
    ort.input_shapes(model, batch, dims)  # a fixed batch that disagrees, a dynamic dim not given
    ready = placement.prepare(from_args(args))
    print(f"running {path.name} in onnxruntime ({ready['threads']} threads) ...", file=sys.stderr)
    profile = ort.profile_onnx(
        path,
        threads=ready["threads"],
        device=ready["device"],
        batch=batch,
        dims=dims,
        quick=args.quick,
        runs=args.runs,
        model=model,
    )
    placement.place_profile(profile, str(path), ready, own=not args.no_own)
    return 0
