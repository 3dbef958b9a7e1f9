"""PyTorch's own per-operator times on the measured roofline: ``rooflab.place_torch(model,
example_inputs)`` (optional extra `rooflab[torch]`).

The module runs eagerly under ``torch.inference_mode`` on ``threads`` intra-op threads
(torch.set_num_threads): warm-up runs, then blocks of runs under ``torch.profiler`` (CPU activity,
input shapes recorded, every leaf module's forward wrapped in a record_function with its qualified
name, so rows read "layer1.0.conv1: aten::conv2d") alternating with blocks of plain runs, which
give the end-to-end time (median). Each run's operator tree is walked from the top: the first
operator with a formula (aten::linear, addmm, mm, bmm, matmul, conv2d/convolution, batch_norm,
layer_norm, softmax, the activations, add/mul/sub/div, embedding, max_pool2d, adaptive_avg_pool2d,
reshape views and copies) is one row, timed by its total CPU time (its own and its children's self
times: the kernel it dispatches to included); operators with no formula are listed with their self
time, and the Python between operators (the self time of the module and run markers) is one listed
row, so the rows add up to the profiled run. Rows are matched across runs by label and occurrence,
median per row; runtime.py places them exactly like onnxruntime's nodes. Convolution and pooling
parameters come from the nn.Module that ran them (nn.Conv2d, nn.MaxPool2d) or from the profiler's
concrete inputs.
"""

from __future__ import annotations

import math
import time

from ...errors import RooflabError
from ...workloads import ops as opsmod
from .placement import median, parts_work

MODULE = "rooflab.module: "
RUN = "rooflab.run"
UNARY = {
    "relu": "relu",
    "gelu": "gelu",
    "sigmoid": "sigmoid",
    "tanh": "tanh",
    "silu": "silu",
    "hardswish": "hardswish",
    "hardsigmoid": "hardsigmoid",
    "hardtanh": "relu6",
    "relu6": "relu6",
}
BINARY = {"add": "add", "sub": "sub", "mul": "mul", "div": "div"}


def import_torch():
    try:
        import torch
    except ImportError:
        raise RooflabError("torch is not installed", "pip install 'rooflab[torch]'") from None
    return torch


def _pair(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v, v)


def _module_info(torch, m) -> dict:
    if isinstance(m, torch.nn.Conv2d):
        if isinstance(m.padding, str):
            pad = (m.kernel_size[0] // 2, m.kernel_size[1] // 2) if m.padding == "same" else (0, 0)
        else:
            pad = _pair(m.padding)
        return {"type": "Conv2d", "stride": _pair(m.stride), "pad": pad, "groups": m.groups}
    if isinstance(m, torch.nn.MaxPool2d):
        return {"type": "MaxPool2d", "kernel": _pair(m.kernel_size), "stride": _pair(m.stride or m.kernel_size),
                "pad": _pair(m.padding)}  # fmt: skip
    return {"type": type(m).__name__}


class _Markers:
    """record_function around every leaf module's forward, named after the module."""

    def __init__(self, torch, model):
        self.torch, self.info, self.handles = torch, {}, []
        self.model = model

    def __enter__(self):
        for name, m in self.model.named_modules():
            if any(True for _ in m.children()):
                continue
            label = name or type(m).__name__
            self.info[label] = _module_info(self.torch, m)
            stack = []

            def pre(mod, args, label=label, stack=stack):
                rf = self.torch.profiler.record_function(MODULE + label)
                rf.__enter__()
                stack.append(rf)

            def post(mod, args, out, stack=stack):
                if stack:
                    stack.pop().__exit__(None, None, None)

            self.handles += [m.register_forward_pre_hook(pre), m.register_forward_hook(post)]
        return self

    def __exit__(self, *exc):
        for h in self.handles:
            h.remove()
        self.handles = []


def _numel(s) -> int:
    return math.prod(s) if s else 1


def op_for(name: str, shapes: list, module: dict | None, concrete: list | None = None) -> dict | None:
    """The rooflab op of one aten operator call (None: no formula)."""
    base = name.removeprefix("aten::").rstrip("_")
    sh = [list(s) if isinstance(s, (list, tuple)) else [] for s in shapes]
    get = lambda i: sh[i] if i < len(sh) else []  # noqa: E731
    x = get(0)
    if base == "linear" and len(get(1)) == 2:
        w = get(1)
        return {"kind": "gemm", "shape": {"M": _numel(x[:-1]), "N": w[0], "K": w[1], "bias": bool(get(2))}}
    if base == "addmm" and len(get(1)) == 2 and len(get(2)) == 2:
        a, b = get(1), get(2)
        return {"kind": "gemm", "shape": {"M": a[0], "N": b[1], "K": a[1], "bias": True}}
    if base == "mm" and len(x) == 2 and len(get(1)) == 2:
        return {"kind": "gemm", "shape": {"M": x[0], "N": get(1)[1], "K": x[1]}}
    if base in ("bmm", "matmul") and len(x) >= 2 and len(get(1)) >= 2:
        b = get(1)
        if len(b) == 2:
            return {"kind": "gemm", "shape": {"M": _numel(x[:-1]), "N": b[1], "K": x[-1]}}
        if len(x) >= 3:
            return {"kind": "batched_gemm", "shape": {"batch": _numel(x[:-2]), "M": x[-2], "N": b[-1], "K": x[-1]}}
        return None
    if base in ("conv2d", "convolution", "_convolution", "mkldnn_convolution") and len(x) == 4 and len(get(1)) == 4:
        w = get(1)
        if module and module.get("type") == "Conv2d":
            stride, pad, groups = module["stride"], module["pad"], module["groups"]
        elif concrete and len(concrete) > 6 and concrete[3] and concrete[4]:
            stride, pad = _pair(_literal(concrete[3])), _pair(_literal(concrete[4]))
            groups = int(_literal(concrete[6]) or 1) if base == "conv2d" else x[1] // max(1, w[1])
        else:
            return None
        return {
            "kind": "conv2d",
            "shape": {"N": x[0], "C": x[1], "H": x[2], "W": x[3], "K": w[0], "R": w[2], "S": w[3],
                      "stride_h": stride[0], "stride_w": stride[1], "pad_h": pad[0], "pad_w": pad[1],
                      "groups": groups, "bias": bool(get(2))},
        }  # fmt: skip
    if base in ("batch_norm", "native_batch_norm", "_native_batch_norm_legit_no_training") and len(x) == 4:
        return {"kind": "batchnorm", "shape": {"N": x[0], "C": x[1], "H": x[2], "W": x[3]}}
    if base in ("layer_norm", "native_layer_norm") and x:
        return {"kind": "layernorm", "shape": {"rows": _numel(x[:-1]), "cols": x[-1]}}
    if base in ("softmax", "_softmax") and x:
        return {"kind": "softmax", "shape": {"rows": _numel(x[:-1]), "cols": x[-1]}}
    if base in UNARY and x:
        return {"kind": UNARY[base], "shape": {"numel": _numel(x)}}
    if base in BINARY and x:
        a, b = _numel(x), _numel(get(1)) if get(1) else 1
        n, small = max(a, b), min(a, b)
        if base in ("mul", "div") and small == 1:
            return {"kind": "scale", "shape": {"numel": n}}
        shape = {"numel": n}
        if small != n:
            shape["broadcast_numel"] = small
        return {"kind": BINARY[base], "shape": shape}
    if base == "embedding" and len(x) == 2:
        return {"kind": "embedding", "shape": {"tokens": _numel(get(1)), "dim": x[1], "vocab": x[0]}}
    if base in ("max_pool2d", "max_pool2d_with_indices") and len(x) == 4 and module and module["type"] == "MaxPool2d":
        if module["kernel"][0] != module["kernel"][1] or module["stride"][0] != module["stride"][1]:
            return None
        return {"kind": "maxpool", "shape": {"N": x[0], "C": x[1], "H": x[2], "W": x[3], "kernel": module["kernel"][0],
                                             "stride": module["stride"][0], "pad": module["pad"][0]}}  # fmt: skip
    if base in ("adaptive_avg_pool2d", "_adaptive_avg_pool2d") and len(x) == 4:
        out = _literal(concrete[1]) if concrete and len(concrete) > 1 and concrete[1] else None
        if out is None or tuple(_pair(out)) == (1, 1):
            return {"kind": "avgpool", "shape": {"N": x[0], "C": x[1], "H": x[2], "W": x[3]}}
        return None
    if base in ("flatten", "view", "reshape", "_unsafe_view", "unsqueeze", "squeeze", "dropout") and x:
        return {"kind": "reshape", "shape": {"numel": _numel(x)}}
    if base in ("contiguous", "clone") and x:
        return {"kind": "transpose", "shape": {"numel": _numel(x)}}
    return None


def _literal(v):
    if isinstance(v, str):
        import ast

        try:
            return ast.literal_eval(v)
        except (ValueError, SyntaxError):
            return None
    return v


def _walk(run_event, info: dict, dtype: str) -> tuple[list[dict], float]:
    """Rows of one run (label, aten name, op, seconds) and the Python time between operators."""
    rows, python = [], 0.0

    def visit(e, module):
        nonlocal python
        if e.name.startswith(MODULE):
            python += e.self_cpu_time_total * 1e-6
            for c in e.cpu_children:
                visit(c, e.name[len(MODULE) :])
            return
        shapes = list(getattr(e, "input_shapes", None) or [])
        concrete = list(getattr(e, "concrete_inputs", None) or [])
        op = op_for(e.name, shapes, info.get(module), concrete)
        label = f"{module}: {e.name}" if module else e.name
        if op is not None:
            try:
                op = opsmod.normalize({**op, "dtype": dtype, "name": label, "model": "torch"})
            except RooflabError:
                op = None
        if op is not None:
            rows.append({"label": label, "aten": e.name, "op": op, "s": e.cpu_time_total * 1e-6})
            return
        rows.append({"label": label, "aten": e.name, "op": None, "s": e.self_cpu_time_total * 1e-6})
        for c in e.cpu_children:
            visit(c, module)

    python += run_event.self_cpu_time_total * 1e-6
    for c in run_event.cpu_children:
        visit(c, None)
    return rows, python


def profile_torch(model, example_inputs, *, threads: int, quick: bool = False, runs: int | None = None) -> dict:
    """Run ``model(*example_inputs)`` under the PyTorch profiler; the ``profile`` dict of runtime.py."""
    torch = import_torch()
    from torch.profiler import ProfilerActivity, profile, record_function

    if not isinstance(model, torch.nn.Module):
        raise RooflabError(f"place_torch needs a torch.nn.Module, got {type(model).__name__}")
    inputs = tuple(example_inputs) if isinstance(example_inputs, (tuple, list)) else (example_inputs,)
    dtypes = [t.dtype for t in inputs if torch.is_tensor(t) and t.is_floating_point()]
    dtypes += [p.dtype for p in model.parameters()][:1]
    dtype = str(dtypes[0]).removeprefix("torch.") if dtypes else "float32"
    old_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    model.eval()
    try:
        with torch.inference_mode():
            t0 = time.perf_counter()
            for _ in range(2):
                model(*inputs)
            per = max((time.perf_counter() - t0) / 2, 1e-6)
            n = runs or min(50, max(3 if quick else 5, math.ceil((0.5 if quick else 2.0) / per)))
            blocks = [n // 2 + n % 2, n // 2] if n > 1 else [1]
            per_run, e2e, info = [], [], {}
            for k in blocks:
                if not k:
                    continue
                with _Markers(torch, model) as marks:
                    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
                        for i in range(k + 1):  # the first run under the profiler warms it up: dropped
                            with record_function(f"{RUN} {i}"):
                                model(*inputs)
                    info.update(marks.info)
                events = [e for e in prof.events() if e.name.startswith(RUN) and e.cpu_parent is None]
                events.sort(key=lambda e: e.time_range.start)
                per_run += [_walk(e, info, dtype) for e in events[1:]]
                for _ in range(k):
                    t = time.perf_counter()
                    model(*inputs)
                    e2e.append(time.perf_counter() - t)
    except RooflabError:
        raise
    except Exception as e:
        from ...errors import first_line

        raise RooflabError(f"the model failed under torch: {first_line(e)}") from None
    finally:
        torch.set_num_threads(old_threads)
    return {
        "device": "cpu",
        "runtime": f"torch {torch.__version__}",
        "runtime_label": f"torch {torch.__version__} (eager, CPU, {threads} threads)",
        "provider": "eager CPU",
        "threads": threads,
        "runs": len(per_run),
        "warmup": 3,
        "inputs": {f"input {i}": list(t.shape) for i, t in enumerate(inputs) if torch.is_tensor(t)},
        "rows": _rows(per_run),
        "e2e_samples_s": e2e,
        "run_totals_s": [sum(r["s"] for r in rows) + python for rows, python in per_run],
        "not_executed": [],
        "unsupported": [],
    }


def _rows(per_run: list[tuple[list[dict], float]]) -> list[dict]:
    """Rows matched across runs by (label, occurrence); median per row over runs."""
    order, samples, ops = [], {}, {}
    for rows, _python in per_run:
        seen: dict[str, int] = {}
        for r in rows:
            k = (r["label"], seen.get(r["label"], 0))
            seen[r["label"]] = k[1] + 1
            if k not in samples:
                order.append(k)
                samples[k], ops[k] = [], (r["aten"], r["op"])
            samples[k].append(r["s"])
    out = []
    for k in order:
        aten, op = ops[k]
        label = k[0] if k[1] == 0 else f"{k[0]} #{k[1] + 1}"
        row = {"node": label, "op_type": aten, "runtime_nodes": [label], "samples_s": samples[k],
               "runtime_s": median(samples[k]), "dispatches": 1, "graph_nodes": [label], "timed": True,
               "parts": [op] if op else []}  # fmt: skip
        if op:
            row.update(parts_work([op], written=opsmod.output_bytes(op)))
        else:
            row["note"] = f"no formula for {aten}"
        out.append(row)
    py = [p for _, p in per_run]
    out.append({"node": "Python between operators", "op_type": "(module code, hooks, dispatch)",
                "runtime_nodes": [], "samples_s": py, "runtime_s": median(py), "dispatches": 0, "graph_nodes": [],
                "timed": True, "parts": [], "note": "not an operator"})  # fmt: skip
    return out


def place_torch(
    model, example_inputs, *, out=None, ceilings=None, threads=None, quick=False, own=True, runs=None
) -> dict:  # fmt: skip
    """Run a PyTorch module under the profiler and place each operator's measured time on this
    machine's measured roofline (the newest ceilings result under ``out``, or ``ceilings``), beside
    rooflab's own re-execution of the same ops. Writes the result like `rooflab place --runtime`
    and returns its summary (``line``, ``share_pct``, ``most_time_above_roof``, ``result`` ...)."""
    import_torch()
    from ...command_setup import setup
    from ...results import RUNS_DIR
    from .placement import place_profile, prepare

    ready = prepare(setup("cpu", threads=threads, out=out or RUNS_DIR, ceilings=ceilings, quick=quick))
    profile = profile_torch(model, example_inputs, threads=ready["threads"], quick=quick, runs=runs)
    return place_profile(profile, type(model).__name__, ready, own=own)
