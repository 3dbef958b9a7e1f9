"""onnxruntime, imported and configured in one place for every session rooflab makes: a graph placed
by `place --runtime`, the LLM check's prefill and decode graphs, the qgemm and runtime_gemm library
rungs (one single-node session per weight array; a rotation over weight copies: one session of all
the copies, merged_session), the runtime call floor's chain of Adds.

Every session: ``threads`` intra-op workers, one inter-op, sequential, warnings only from severity 3
(onnxruntime's own log would interleave with the progress lines). The knobs that differ say why
where they are asked for: ``optimize=False`` keeps each node (a call floor counts nodes),
``spin="stop"`` ends the workers' spin after each call (hundreds of sessions in a cold rotation),
``spin="off"`` leaves no spinning worker behind in the run's process.
"""

from __future__ import annotations

from pathlib import Path

from .errors import RooflabError


def import_ort(what: str = "this"):
    """onnxruntime, or one line saying what needs it and how to install it."""
    try:
        import onnxruntime
    except ImportError:
        raise RooflabError(f"onnxruntime is not installed: {what} needs it", "pip install 'rooflab[onnx]'") from None
    return onnxruntime


def options(
    threads: int,
    *,
    optimize: bool = True,
    spin: str | None = None,
    profile_prefix: str | Path | None = None,
    what: str = "this",
):
    """SessionOptions as every rooflab session has them (above), plus the knobs asked for."""
    ort = import_ort(what)
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.log_severity_level = 3
    so.graph_optimization_level = (
        ort.GraphOptimizationLevel.ORT_ENABLE_ALL if optimize else ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    )
    if spin == "stop" and threads > 1:
        so.add_session_config_entry("session.force_spinning_stop", "1")
    elif spin == "off":
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if profile_prefix:
        so.enable_profiling = True
        so.profile_file_prefix = str(profile_prefix)
    return so


def weight_session(model: bytes, threads: int, what: str):
    """A single-node session on a constant weight (a library rung: qgemm's MatMulInteger and
    MatMulNBits, runtime_gemm's MatMul), one per weight array, prepacked as in a real graph. A cold
    rotation cycles through one session per weight copy, hundreds for a small decode GEMV: with
    onnxruntime's default, each session's workers spin on after their call and take the cores the
    next session needs (measured on 2 cores: 9.5 ms for a 0.02 ms GEMV, 52 s to build the 512
    sessions). ``spin="stop"`` ends the spin with each call; a warm call then pays the workers'
    wake-up (0.04 ms instead of 0.02 for 576 x 576), which a graph's session does not."""
    return session(model, options(threads, spin="stop", what=what))


def session(model, so, providers=None):
    """An InferenceSession of ``model`` (a path, or a serialized ModelProto) with ``so``, on the CPU
    unless ``providers`` says otherwise."""
    ort = import_ort()
    src = model if isinstance(model, bytes) else str(model)
    return ort.InferenceSession(src, so, providers=providers or ["CPUExecutionProvider"])


MERGED_MAX_BYTES = 1 << 30  # a merged model stays well inside protobuf's 2 GB


def merged_session(models: list[bytes], threads: int, what: str):
    """One session that runs every model once per run, side by side on their shared inputs (each
    model's inputs named alike; its nodes, constants and outputs renamed apart): a rotation over
    weight copies timed as a graph runs its layers, the intra-op workers spinning from node to node.
    One weight_session per copy pays a worker wake-up per call instead: a 4-bit 1536 x 576 GEMV
    took 506 us a call over 100 such sessions at 2 threads, 147 us a node in one graph of the same
    100 (Zen 3). None when the models together are too large for one protobuf."""
    import onnx
    from onnx import helper

    if sum(len(m) for m in models) > MERGED_MAX_BYTES:
        return None
    protos = [onnx.load_from_string(m) for m in models]
    shared = {i.name for i in protos[0].graph.input}
    nodes, inits, outs = [], [], []
    for k, proto in enumerate(protos):

        def rename(name, k=k):
            return name if (not name or name in shared) else f"c{k}_{name}"

        for n in proto.graph.node:
            node = onnx.NodeProto()
            node.CopyFrom(n)
            node.input[:] = [rename(x) for x in n.input]
            node.output[:] = [rename(x) for x in n.output]
            node.name = f"c{k}_{n.name or len(nodes)}"
            nodes.append(node)
        for t in proto.graph.initializer:
            tensor = onnx.TensorProto()
            tensor.CopyFrom(t)
            tensor.name = rename(t.name)
            inits.append(tensor)
        for o in proto.graph.output:
            out = onnx.ValueInfoProto()
            out.CopyFrom(o)
            out.name = rename(o.name)
            outs.append(out)
    graph = helper.make_graph(nodes, "rotation", list(protos[0].graph.input), outs, inits)
    model = helper.make_model(graph, opset_imports=protos[0].opset_import)
    return session(model.SerializeToString(), options(threads, what=what))
