"""onnxruntime's profile and optimized graph mapped back to the model's own nodes and ops, for
`rooflab place MODEL.onnx --runtime onnxruntime` (rooflab/models/runtimes/ort.py runs the sessions).

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
(ops_from_model) on the original graph, and placement.py places it. Original nodes no row covers were
folded into constants or removed, and are listed as such.
"""

from __future__ import annotations

import math
import re
from collections import Counter

from ...errors import RooflabError
from ...workloads import ops as opsmod
from ..onnx_import import ELEM_DTYPE
from .placement import median, parts_work

LAYOUT = ("ReorderInput", "ReorderOutput")

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


def map_optimized(index: GraphIndex, opt_nodes: list[tuple], opt_inits: set) -> tuple[list[dict], list[dict]]:
    """Rows of optimized nodes and the original nodes each covers (see the module docstring);
    ``opt_nodes``: (name, op_type, inputs, outputs) in the optimized graph's (topological) order.
    Returns (groups, not_executed)."""

    def layout(name, op_type):  # copies its input (NCHWc reorders; the NHWC Transposes of 8-bit convs)
        return op_type in LAYOUT or (op_type == "Transpose" and name not in index.label_index)

    claimed, derived = _claimed(index, opt_nodes, layout)
    tmap, passthrough = _tensor_map(index, opt_nodes, opt_inits, claimed, derived, layout)

    def mapped(t):  # the original graph's tensor an optimized one stands for, or None
        return tmap[t] if t in tmap else (t if t in index.tensors else None)

    made_by = {o: i for i, n in enumerate(opt_nodes) for o in n[3]}
    assigned: dict[int, int] = {}
    out = []
    for gid, members in _joined(opt_nodes, made_by, mapped):
        mset = set(members)
        ins = {x for i in members for x in opt_nodes[i][2] if x and made_by.get(x) not in mset}
        starts = [mapped(o) for i in members for o in opt_nodes[i][3] if mapped(o)]
        covered = []
        if not (len(members) == 1 and members[0] in passthrough):
            stop = {mapped(x) for x in ins if mapped(x)}
            mine = set(starts) | {derived[i] for i in members if i in derived}
            covered = _cover(index, starts, stop, mine, claimed, assigned, gid)
        passes = passthrough.get(members[0]) if len(members) == 1 else None
        out.append({"id": gid, "members": members, "covered": sorted(covered), "passthrough": passes})
    not_executed = [
        {"node": n[0], "op_type": n[1], "why": "folded into a constant or removed by the runtime's graph optimizations"}
        for k, n in enumerate(index.nodes)
        if k not in assigned
    ]
    return out, not_executed


def _claimed(index: GraphIndex, opt_nodes: list[tuple], layout) -> tuple[set, dict[int, str]]:
    """The original tensors some optimized node computes (a layout conversion only copies its input:
    it claims nothing), and for each node renamed by the runtime (``_nchwc``, ``_token_N``) the
    original tensor it stands for."""
    orig = index.tensors
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
    return claimed, derived


def _tensor_map(index: GraphIndex, opt_nodes, opt_inits, claimed, derived, layout) -> tuple[dict, dict[int, str]]:
    """Optimized-only tensors mapped to the original tensor they hold: a renamed node's output
    forwarded through the original nodes the runtime fused in (residual Add, Relu), a layout
    conversion's output to its input's; and the layout conversions (``passthrough``: what each copies)."""
    orig, tmap, passthrough = index.tensors, {}, {}

    def mapped(t):
        return tmap[t] if t in tmap else (t if t in orig else None)

    for i, (name, op_type, ins, outs) in enumerate(opt_nodes):
        acts = [x for x in ins if x and x not in opt_inits]
        if i in derived:
            t = derived[i]
            avail = {mapped(x) for x in ins if mapped(x)} | index.consts
            while True:  # forward through the original nodes the runtime fused in
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
        elif layout(name, op_type) and len(acts) == 1 and mapped(acts[0]):
            if not any(o in orig for o in outs):
                tmap[outs[0]] = mapped(acts[0])
            passthrough[i] = mapped(acts[0])
    return tmap, passthrough


def _joined(opt_nodes: list[tuple], made_by: dict, mapped) -> list[tuple[int, list[int]]]:
    """Nodes joined by tensors that exist only in the optimized graph, as one row each: (id, members)
    in graph order."""
    parent = list(range(len(opt_nodes)))

    def find(a):
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    for i, (_name, _op, ins, _outs) in enumerate(opt_nodes):
        for x in ins:
            p = made_by.get(x)
            if p is not None and mapped(x) is None:
                parent[find(i)] = find(p)
    groups: dict[int, list[int]] = {}
    for i in range(len(opt_nodes)):
        groups.setdefault(find(i), []).append(i)
    return sorted(groups.items(), key=lambda kv: min(kv[1]))


def _cover(index: GraphIndex, starts, stop, mine, claimed, assigned: dict[int, int], gid: int) -> list[int]:
    """The original nodes a row covers: walked back from its outputs to its inputs, never into
    another row's node or output (``assigned`` is filled as rows take nodes)."""
    covered, stack = [], list(starts)
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
    return covered


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
    """parts_work with the tensors that stay inside the row (placement.parts_work's rule)."""
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
