"""onnxruntime's own per-node times, mapped to the graph's ops (`rooflab place MODEL.onnx --runtime
onnxruntime`; optional extra `rooflab[onnx]`).

How it measures: two sessions of the model with the same options (all graph optimizations, as a
user gets them; ``--threads`` intra-op threads; CPU execution provider, CUDA where asked and the
installed build has it): one with ``enable_profiling``, one without. Runs alternate between them
(warm-up runs first, then enough runs for about 2 s of each, at least 5; --quick: 0.5 s, 3), run by
run on one thread; on more, in eight blocks each, 50 ms apart (a session's idle workers spin after
its run and would slow the other session's: interleaving run by run doubled MobileNetV2's time on
2 threads); the profiled session's JSON trace gives each node's ``kernel_time`` per run (runs delimited by the
``model_run`` events, warm-ups dropped, median per node over runs), the other session the end-to-end
time of a whole run (median), which the per-node sum is compared with.

How nodes are mapped: onnxruntime rewrites the graph before it runs it (constant folding, Conv +
BatchNormalization folding, Conv + activation and residual-Add fusion, the NCHWc layout of its CPU
convolutions, MatMul + Add -> Gemm between two added Reshapes, FusedMatMul, Gelu / BiasGelu,
SkipLayerNormalization, Attention ...). The session writes its optimized graph
(``optimized_model_filepath``), whose node names are the profile's. Each optimized node is tied to
the original graph's tensors: an output keeping its original name is that tensor; a renamed output
of an NCHWc node ``X_nchwc`` is tensor X, extended forward through the original nodes no other
node claims whose other inputs the node reads (the residual Add and Relu it fused); layout
conversions (ReorderInput/Output) pass their input's tensor on; optimized nodes joined by tensors
that exist only in the optimized graph (the Reshapes around a fused Gemm) are one row, their times
summed. A row stands for the original nodes found walking back from its output tensors to its
input tensors, so a fused node covers every node it replaced; its ops are those of onnx_import
(ops_from_model) on the original graph, and runtime.py places it. Original nodes no row covers were
folded into constants or removed, and are listed as such.
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

from ...errors import RooflabError, first_line
from ...workloads import ops as opsmod
from ..onnx_import import ELEM_DTYPE
from .placement import median, parts_work

LAYOUT = ("ReorderInput", "ReorderOutput")
SETTLE_S = 0.05  # a session's idle intra-op workers spin after a run: they would slow the other's
# what a runtime fuses into the node before it (Conv + Add + Relu, FusedConv's Clip): the forward
# extension of a renamed node's output passes through these only
FUSABLE = (
    "Relu",
    "Clip",
    "Add",
    "Sum",
    "Sigmoid",
    "HardSigmoid",
    "HardSwish",
    "LeakyRelu",
    "Tanh",
    "Mul",
    "QuantizeLinear",  # the 8-bit output of a QDQ op (QLinearConv writes it)
    "Sub",
    "Div",
)
ITEMSIZE = {1: 4, 2: 1, 3: 1, 5: 2, 6: 4, 7: 8, 9: 1, 10: 2, 11: 8, 16: 2}


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


# ---- inputs --------------------------------------------------------------------------------------


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


def skeleton(model, shapes: dict):
    """A copy of the graph with every large initializer's data dropped (shape inference and the op
    mapping need dims only: fast on a 400 MB model) and the inputs' dims fixed to ``shapes``."""
    import onnx

    m = onnx.ModelProto()
    m.CopyFrom(model)
    for t in m.graph.initializer:
        if math.prod(t.dims) > 64:
            for field in ("raw_data", "float_data", "double_data", "int32_data", "int64_data"):
                t.ClearField(field)
            del t.external_data[:]
            t.data_location = onnx.TensorProto.EXTERNAL
            e = t.external_data.add()
            e.key, e.value = "location", "stripped-by-rooflab"
    for vi in m.graph.input:
        if vi.name in shapes:
            dims = vi.type.tensor_type.shape.dim
            for d, v in zip(dims, shapes[vi.name][0]):
                d.Clear()
                d.dim_value = v
    return m


# ---- the original graph --------------------------------------------------------------------------


class GraphIndex:
    """Producers, consumers, constants, tensor sizes and ops of the original graph."""

    def __init__(self, model):
        from ..onnx_import import inferred as infer
        from ..onnx_import import ops_from_model

        inferred = infer(model)  # the contrib ops' outputs too (QLinearGlobalAveragePool, MatMulNBits)
        g = inferred.graph
        self.ops, self.unsupported = ops_from_model(inferred)
        self.nodes = []  # (label, op_type, inputs, outputs) of every node but Constants
        self.consts = {i.name for i in g.initializer}
        for idx, n in enumerate(g.node):
            if n.op_type == "Constant":
                self.consts.update(n.output)
                continue
            self.nodes.append((n.name or f"{n.op_type}_{idx}", n.op_type, [i for i in n.input if i], list(n.output)))
        self.producer = {o: k for k, n in enumerate(self.nodes) for o in n[3]}
        self.consumers: dict[str, list[int]] = {}
        for k, n in enumerate(self.nodes):
            for i in n[2]:
                self.consumers.setdefault(i, []).append(k)
        self.graph_inputs = {i.name for i in g.input} - self.consts
        self.graph_outputs = {o.name for o in g.output}
        self.tensors = set(self.producer) | self.graph_inputs | self.consts
        self.label_index = {n[0]: k for k, n in enumerate(self.nodes)}
        self.bytes: dict[str, float] = {}
        self.numel: dict[str, int] = {}
        self.dtype: dict[str, str] = {}
        for vi in list(g.input) + list(g.value_info) + list(g.output):
            t = vi.type.tensor_type
            dims = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]
            if t.HasField("shape") and None not in dims:
                self.numel[vi.name] = math.prod(dims)
                self.bytes[vi.name] = math.prod(dims) * ITEMSIZE.get(t.elem_type, 4)
                self.dtype[vi.name] = ELEM_DTYPE.get(t.elem_type, "float32")
        self.op_of_node: dict[int, int] = {}
        for j, op in enumerate(self.ops):
            for label in op["nodes"]:
                if label in self.label_index:
                    self.op_of_node[self.label_index[label]] = j


# ---- mapping the optimized graph -----------------------------------------------------------------


def map_optimized(index: GraphIndex, opt_nodes: list[tuple], opt_inits: set) -> tuple[list[dict], list[dict]]:
    """Rows of optimized nodes and the original nodes each covers (see the module docstring);
    ``opt_nodes``: (name, op_type, inputs, outputs) in the optimized graph's (topological) order.
    Returns (groups, not_executed)."""
    orig = index.tensors

    def layout(name, op_type):  # copies its input (NCHWc reorders; the NHWC Transposes of 8-bit convs)
        return op_type in LAYOUT or (op_type == "Transpose" and name not in index.label_index)

    # tensors a node computes (a layout conversion only copies its input: it claims nothing)
    claimed = {o for n in opt_nodes if not layout(n[0], n[1]) for o in n[3] if o in orig}
    derived: dict[int, str] = {}
    for i, (name, op_type, _ins, outs) in enumerate(opt_nodes):
        if any(o in orig for o in outs):
            continue
        base = name[: -len("_nchwc")] if name.endswith("_nchwc") else None
        label = re.sub(r"_token_\d+$", "", name)  # a node onnxruntime rewrote (QDQ -> QLinearConv)
        if base in orig:
            derived[i] = base
        elif label in index.label_index and index.nodes[index.label_index[label]][1] in op_type:
            derived[i] = index.nodes[index.label_index[label]][3][0]  # Conv in QLinearConv, Gemm in QGemm
        if i in derived:
            claimed.add(derived[i])
    tmap: dict[str, str] = {}

    def mapped(t):
        if t in tmap:
            return tmap[t]
        return t if t in orig else None

    passthrough: dict[int, str] = {}
    for i, (_name, op_type, ins, outs) in enumerate(opt_nodes):
        acts = [x for x in ins if x and x not in opt_inits]
        if i in derived:
            t = derived[i]
            avail = {mapped(x) for x in ins if mapped(x)} | index.consts
            while True:  # forward through the original nodes the runtime fused in (residual Add, Relu)
                cons = index.consumers.get(t, [])
                if len(cons) != 1 or t in index.graph_outputs:
                    break
                c = index.nodes[cons[0]]
                if c[1] not in FUSABLE or len(c[3]) != 1 or c[3][0] in claimed:
                    break
                if not all(x == t or x in avail for x in c[2]) or index.numel.get(c[3][0]) != index.numel.get(t):
                    break
                t = c[3][0]
            tmap[outs[0]] = t
        elif layout(_name, op_type) and len(acts) == 1 and mapped(acts[0]):
            if not any(o in orig for o in outs):
                tmap[outs[0]] = mapped(acts[0])
            passthrough[i] = mapped(acts[0])

    # nodes joined by tensors that exist only in the optimized graph are one row
    parent = list(range(len(opt_nodes)))

    def find(a):
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    made_by = {o: i for i, n in enumerate(opt_nodes) for o in n[3]}
    for i, (_name, _op, ins, _outs) in enumerate(opt_nodes):
        for x in ins:
            p = made_by.get(x)
            if p is not None and mapped(x) is None:
                parent[find(i)] = find(p)
    groups: dict[int, list[int]] = {}
    for i in range(len(opt_nodes)):
        groups.setdefault(find(i), []).append(i)

    assigned: dict[int, int] = {}
    out = []
    for gid, members in sorted(groups.items(), key=lambda kv: min(kv[1])):
        mset = set(members)
        ins = {x for i in members for x in opt_nodes[i][2] if x and made_by.get(x) not in mset}
        outs = {o for i in members for o in opt_nodes[i][3]}
        stop = {mapped(x) for x in ins if mapped(x)}
        starts = [mapped(o) for o in outs if mapped(o)]
        mine = set(starts) | {derived[i] for i in members if i in derived}
        covered = []
        if not (len(members) == 1 and members[0] in passthrough):
            stack = list(starts)
            while stack:
                t = stack.pop()
                if t in stop or t in index.consts or t in index.graph_inputs:
                    continue
                k = index.producer.get(t)
                if k is None or k in assigned:
                    continue
                if t not in mine and t in claimed:  # another node's output: its row, not ours
                    continue
                assigned[k] = gid
                covered.append(k)
                stack.extend(index.nodes[k][2])
        out.append(
            {
                "id": gid,
                "members": members,
                "covered": sorted(covered),
                "passthrough": passthrough.get(members[0]) if len(members) == 1 else None,
            }
        )
    not_executed = [
        {"node": n[0], "op_type": n[1], "why": "folded into a constant or removed by the runtime's graph optimizations"}
        for k, n in enumerate(index.nodes)
        if k not in assigned
    ]
    return out, not_executed


def join_split_ops(index: GraphIndex, groups: list[dict]) -> list[dict]:
    """``groups`` with every set of groups covering nodes of one op merged (in graph order)."""
    parent = {g["id"]: g["id"] for g in groups}

    def find(a):
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    first_group: dict[int, int] = {}
    for g in groups:
        for k in g["covered"]:
            j = index.op_of_node.get(k)
            if j is None:
                continue
            if j in first_group:
                parent[find(g["id"])] = find(first_group[j])
            else:
                first_group[j] = g["id"]
    merged: dict[int, dict] = {}
    for g in groups:
        root = find(g["id"])
        if root not in merged:
            merged[root] = {**g, "id": root, "members": list(g["members"]), "covered": list(g["covered"])}
            continue
        m = merged[root]
        m["members"] = sorted(m["members"] + g["members"])
        m["covered"] = sorted(m["covered"] + g["covered"])
        m["passthrough"] = None
    return sorted(merged.values(), key=lambda g: min(g["members"]))


def rows_for(index: GraphIndex, opt_nodes, groups, times: dict[str, list[float]], runs: int) -> list[dict]:
    """One row per group: times summed per run (median over runs), ops, work (runtime.parts_work).
    Groups that share an op (rooflab's one op run as several kernels: a MatMulInteger, its Cast and
    its scale Mul left unfused) are first joined into one row."""
    groups = join_split_ops(index, groups)
    group_of = {k: g["id"] for g in groups for k in g["covered"]}
    op_group: dict[int, int] = {}
    for j, op in enumerate(index.ops):  # an op split over rows goes to the row with most of its nodes
        ks = [index.label_index[label] for label in op["nodes"] if label in index.label_index]
        gs = [group_of[k] for k in ks if k in group_of]
        if gs:
            top = Counter(gs).most_common()
            best = [g for g, c in top if c == top[0][1]]
            op_group[j] = next(g for g in reversed(gs) if g in best)
    rows = []
    for g in groups:
        names = [opt_nodes[i][0] for i in g["members"]]
        types = [opt_nodes[i][1] for i in g["members"]]
        per_run = [0.0] * runs
        timed = False
        for nm in names:
            for r, v in enumerate(times.get(nm, [])[:runs]):
                per_run[r] += v
                timed = True
        main = max(
            range(len(names)), key=lambda k: (types[k] not in ("Reshape", *LAYOUT), sum(times.get(names[k], [])))
        )
        others = Counter(t for k, t in enumerate(types) if k != main)
        op_type = types[main] + ("" if not others else " (+" + ", ".join(f"{c} {t}" for t, c in others.items()) + ")")
        row = {
            "node": names[main],
            "op_type": op_type,
            "runtime_nodes": names,
            "timed": timed,
            "samples_s": per_run if timed else [],
            "runtime_s": median(per_run) if timed else 0.0,
            "dispatches": len(names),
            "graph_nodes": [index.nodes[k][0] for k in g["covered"]],
        }
        parts = [index.ops[j] for j in sorted(j for j, gg in op_group.items() if gg == g["id"])]
        covered = set(g["covered"])
        missing = [index.nodes[k][0] for k in g["covered"] if k not in index.op_of_node]
        if g["passthrough"] and g["passthrough"] in index.numel:
            t = g["passthrough"]
            parts = [
                opsmod.normalize(
                    {
                        "kind": "transpose",
                        "shape": {"numel": index.numel[t]},
                        "dtype": index.dtype.get(t, "float32"),
                        "name": f"{names[0]} (layout copy of {t})",
                        "model": "onnx",
                    }
                )  # fmt: skip
            ]
            row["note"] = "runtime-added layout conversion, placed as a copy"
        if parts:
            row.update(_work(index, parts, covered))
        if missing:
            row["missing"] = missing
            row["note"] = f"no formula for {', '.join(missing[:3])}" + (" (partial)" if parts else "")
        if not parts and not missing and not g["covered"]:
            row["note"] = "not tied to a graph op"
        if not timed:
            row["note"] = (row.get("note", "") + "; not in the profile").lstrip("; ")
        row["parts"] = parts
        rows.append(row)
    return rows


def _work(index: GraphIndex, parts: list[dict], covered: set[int]) -> dict:
    """parts_work with the tensors that stay inside the row (runtime.py's rule)."""
    if len(parts) == 1:
        op = parts[0]
        return parts_work(parts, written=opsmod.output_bytes(op))
    part_of = {k: index.op_of_node.get(k) for k in covered}
    kind_of = {j: index.ops[j]["kind"] for j in part_of.values() if j is not None}
    internal, written = 0.0, 0.0
    for k in covered:
        for t in index.nodes[k][3]:
            b = index.bytes.get(t)
            if b is None:
                continue
            cons = index.consumers.get(t, [])
            if t in index.graph_outputs or any(c not in covered for c in cons):
                written += b
                continue
            p = part_of.get(k)
            qs = {part_of.get(c) for c in cons} - {p}
            if p is None or None in qs or not qs:
                continue
            internal += b * ((kind_of[p] != "reshape") + sum(kind_of[q] != "reshape" for q in qs))
    return parts_work(parts, internal, written or None)


# ---- the profile ---------------------------------------------------------------------------------


def parse_profile(events, warmup: int) -> tuple[dict[str, list[float]], int]:
    """Per node, seconds per measured run (kernel_time events, runs delimited by model_run events,
    the first ``warmup`` runs dropped); returns (times, number of measured runs)."""
    if isinstance(events, dict):
        events = events.get("traceEvents", [])
    runs = sorted(
        (e["ts"], e["ts"] + e["dur"]) for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"
    )
    runs = runs[warmup:]
    if not runs:
        raise RooflabError("the onnxruntime profile holds no measured run", "run more iterations (drop --quick)")
    starts = [r[0] for r in runs]
    import bisect

    times: dict[str, list[float]] = {}
    for e in events:
        if e.get("cat") != "Node" or not str(e.get("name", "")).endswith("_kernel_time"):
            continue
        r = bisect.bisect_right(starts, e["ts"]) - 1
        if r < 0 or e["ts"] > runs[r][1]:
            continue  # a warm-up run
        name = e["name"][: -len("_kernel_time")]
        times.setdefault(name, [0.0] * len(runs))[r] += e["dur"] * 1e-6
    return times, len(runs)


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
    end-to-end samples: the ``profile`` dict runtime.place_profile places (``model``: the loaded
    ModelProto, when the caller has it already)."""
    ort = import_ort()
    model = model if model is not None else load_model(path)
    shapes = input_shapes(model, batch, dims)
    index = GraphIndex(skeleton(model, shapes))
    feeds = make_feeds(model, shapes)
    unnamed = any(not n.name for n in model.graph.node)
    del model
    if device == "cuda":
        if "CUDAExecutionProvider" not in ort.get_available_providers():
            raise RooflabError(
                "this onnxruntime build has no CUDAExecutionProvider",
                "pip install onnxruntime-gpu, or use --device cpu",
            )
        providers = ["CUDAExecutionProvider", "CPUExecutionProvider"]
    else:
        providers = ["CPUExecutionProvider"]
    with tempfile.TemporaryDirectory(prefix="rooflab-ort-") as tmp:
        path = _named(path, tmp, unnamed)
        optimized = Path(tmp) / "optimized.onnx"
        prof = _session(ort, path, threads, providers, profile_dir=tmp, optimized=optimized)
        plain = _session(ort, path, threads, providers)
        warmup = 1 if quick else 2
        try:
            t0 = time.perf_counter()
            for _ in range(warmup):
                prof.run(None, feeds)
                plain.run(None, feeds)
            per = max((time.perf_counter() - t0) / (2 * warmup), 1e-6)
            n = runs or min(100, max(3 if quick else 5, math.ceil((0.5 if quick else 2.0) / per)))
            e2e = []
            # one thread: run by run; more: blocks with a pause between sessions (see SETTLE_S)
            block, settle = (1, 0.0) if threads == 1 else (max(1, math.ceil(n / 8)), SETTLE_S)
            done = 0
            while done < n:  # alternating: a noisy neighbour hits both alike
                k = min(block, n - done)
                time.sleep(settle)
                for _ in range(k):
                    prof.run(None, feeds)
                time.sleep(settle)
                for _ in range(k):
                    t = time.perf_counter()
                    plain.run(None, feeds)
                    e2e.append(time.perf_counter() - t)
                done += k
        except Exception as e:
            raise RooflabError(f"onnxruntime failed running {Path(path).name}: {first_line(e)}") from None
        trace = prof.end_profiling()
        try:
            events = json.loads(Path(trace).read_text())
        finally:
            if os.path.exists(trace):
                os.unlink(trace)
        times, measured = parse_profile(events, warmup)
        from onnx import load

        opt = load(str(optimized), load_external_data=False) if optimized.exists() else None
        provider = prof.get_providers()[0]
    if opt is not None:
        opt_nodes = [(n.name, n.op_type, list(n.input), list(n.output)) for n in opt.graph.node]
        opt_inits = {i.name for i in opt.graph.initializer}
        groups, not_executed = map_optimized(index, opt_nodes, opt_inits)
    else:  # no optimized graph: nodes tie to the original graph by name only
        opt_nodes = [(n[0], n[1], n[2], n[3]) for n in index.nodes if n[0] in times]
        groups, not_executed = map_optimized(index, opt_nodes, set())
    rows = rows_for(index, opt_nodes, groups, times, measured)
    known = {nm for r in rows for nm in r["runtime_nodes"]}
    for nm, samples in times.items():  # profiled nodes the optimized graph does not name: listed
        if nm not in known:
            rows.append({"node": nm, "op_type": "?", "runtime_nodes": [nm], "samples_s": samples,
                         "runtime_s": median(samples), "dispatches": 1, "graph_nodes": [], "parts": [], "timed": True,
                         "note": "not in the optimized graph"})  # fmt: skip
    rows = [r for r in rows if r["timed"] or r.get("parts") or r.get("graph_nodes")]
    run_totals = [sum(v[r] for v in times.values()) for r in range(measured)]
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
        "e2e_samples_s": e2e,
        "run_totals_s": run_totals,
        "not_executed": not_executed,
        "unsupported": index.unsupported,
        "profiled_nodes": sorted(times),
    }
