"""PyTorch, the engine, for both of its uses (optional extra `rooflab[torch]`):

``rooflab.place_torch(model, example_inputs)``: a module's own per-operator times on the measured
roofline.

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
median per row; placement.py places them exactly like onnxruntime's nodes. Convolution and pooling
parameters come from the nn.Module that ran them (nn.Conv2d, nn.MaxPool2d) or from the profiler's
concrete inputs.

The LLM check of `rooflab llm CONFIG --runtime torch`: the same architecture built by transformers' AutoModelForCausalLM.from_config (random weights,
nothing downloaded), eval, fp32, under torch.no_grad, its KV cache transformers' DynamicCache, on
the CPU (``threads`` intra-op threads) or on a CUDA device, measured against rooflab's per-op
prediction and reported by llm_check.lines like the onnxruntime check.

Checked first: decode after prefill (the prefill's cache fed back) gives the last logits of a
prefill one token longer, to 1e-3 relative, so a cache fed wrong (K and V swapped, a position off)
is an error, never a figure. Then a prefill of S tokens (logits of the last token only, as runtimes
do: logits_to_keep=1) and one decode step at context L (a cache of L - 1 positions, cropped back by
one after each step so that every step sees L) are timed: warm-up runs, the median of timed runs;
then one profiled run of each, torch.profiler's self time per aten op and, as one row, what no
aten op covers (Python, nn.Module calls, the cache's bookkeeping).

Napkin (SmolLM-135M decode, fp32, 1 thread): 135 M weights x 4 B = 538 MB streamed per token, ~20 ms
at 27 GB/s; eager PyTorch makes ~200 aten calls per layer (views, casts and the cache's slicing
included: ~6,200 per step for 30 layers, counted by the profiler), and at ~5-15 us of Python and
dispatch each that is 30-90 ms the roofs do not see (the ONNX export has ~55 nodes per layer).
"""

from __future__ import annotations

import contextlib
import importlib.util
import inspect
import math
import sys
import time
import warnings
from pathlib import Path

from ...errors import RooflabError
from ...memory import available_bytes, fmt_bytes
from ...threads import torch_threads
from ...workloads import ops as opsmod
from .. import llm
from . import llm_check
from .llm_check import predicted_by_kind
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
    """Run ``model(*example_inputs)`` under the PyTorch profiler; the ``profile`` dict placement.place_profile places."""
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
            per_run, info = [], {}

            def profiled_block(k):  # k runs under the profiler (one more first, to warm it up: dropped)
                with _Markers(torch, model) as marks:
                    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
                        for i in range(k + 1):
                            with record_function(f"{RUN} {i}"):
                                model(*inputs)
                    info.update(marks.info)
                events = [e for e in prof.events() if e.name.startswith(RUN) and e.cpu_parent is None]
                events.sort(key=lambda e: e.time_range.start)
                per_run.extend(_walk(e, info, dtype) for e in events[1:])

            from ...cpu.backend import step_driver

            e2e = step_driver().time_runs(
                lambda: model(*inputs), n, threads=threads, warmup=0, block=n // 2 + n % 2, between=profiled_block
            )  # fmt: skip
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
        "e2e_samples_s": e2e["samples_s"],
        "e2e_noise_reasons": e2e["noise_reasons"],  # the end-to-end runs, checked as every timing is
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


# ---- the LLM check ----------------------------------------------------------------------------------

OUTSIDE = "(Python, modules: outside aten ops)"


def _unshadow_kernels() -> None:
    """transformers imports the `kernels` distribution (Hugging Face's hub kernels); a rooflab source
    checkout on sys.path (pytest, `python -m rooflab` from the checkout) holds a kernels/ folder
    (rooflab.kernels) that would shadow it. Import the distribution's with the checkout's root off
    sys.path, once, so transformers finds it in sys.modules."""
    if "kernels" in sys.modules:
        return
    root = Path(__file__).resolve().parents[3]  # the checkout: rooflab/models/runtimes/ lies 3 below it
    spec = importlib.util.find_spec("kernels")
    if spec is None or not spec.origin or Path(spec.origin).resolve() != root / "kernels" / "__init__.py":
        return
    saved = sys.path[:]
    sys.path[:] = [p for p in saved if Path(p or ".").resolve() != root]
    try:
        import kernels  # noqa: F401 - the distribution's, cached in sys.modules for transformers
    except ImportError:
        sys.modules.pop("kernels", None)
    finally:
        sys.path[:] = saved


def modules():
    """(torch, transformers), or one clear refusal when either is not installed."""
    try:
        import torch

        _unshadow_kernels()
        import transformers
    except ImportError as e:
        raise RooflabError(
            f"--runtime torch needs torch and transformers ({e.name or 'one of them'} is not installed)",
            "pip install 'rooflab[torch]'",
        ) from None
    return torch, transformers


DTYPES = ("float32", "bfloat16")  # what the model is built in (--dtype); float16 has no CPU GEMMs in torch

# decode after prefill against the longer prefill, largest difference over the largest logit, always
# in float32 (verify): it agrees to 5e-7 (SmolLM-135M) and 7e-7 to 1.2e-6 (Qwen2-0.5B). A cache fed
# wrong is far outside: K and V swapped 1.4-1.8, the first key position dropped 0.45, the last zeroed
# 0.022-0.13 (tests/test_llm_torch.py). In bf16 the two sides' own rounding is 0 on the Zen 5 VM but
# 0.015 on oneDNN's AMX kernels (Emerald Rapids): a bf16 tolerance cannot tell right from wrong.
VERIFY_TOL = 1e-3  # decode after prefill against the longer prefill, in float32 (verify)

SHORT = {"float32": "fp32", "bfloat16": "bf16"}


def check(arch: llm.Arch, device: str, dtype: str = "float32") -> None:
    """Refuse early (before any measuring): no torch/transformers, --device cuda without CUDA, a
    dtype the check does not build, or the weights above 60 % of the free memory."""
    torch, _ = modules()
    if dtype not in DTYPES:
        raise RooflabError(f"--runtime torch builds the model in {' or '.join(DTYPES)}, not {dtype}",
                           "use --dtype float32 or bfloat16")  # fmt: skip
    if device == "cuda" and not torch.cuda.is_available():
        raise RooflabError("--runtime torch --device cuda: this torch build sees no CUDA device", "use --device cpu")
    need = llm.ITEMSIZE[dtype] * llm.param_counts(arch)["total"]
    free = available_bytes() if device == "cpu" else torch.cuda.mem_get_info()[0]
    if free is not None and need > 0.6 * free:
        raise RooflabError(
            f"--runtime torch: {arch.name}'s {SHORT[dtype]} weights are {fmt_bytes(need)}, {fmt_bytes(free)} free",
            "check a smaller model against torch",
        )


def build(config, device: str = "cpu", dtype: str = "float32"):
    """The model from ``config`` (a bundled name or a config.json), random weights, eval, in ``dtype``."""
    torch, transformers = modules()
    arch = llm.arch_of(config)  # an Arch, a bundled name or a config.json
    check(arch, device, dtype)
    cfg = {k: v for k, v in arch.config.items() if k not in ("torch_dtype", "dtype", "_name_or_path")}
    try:
        hf = transformers.AutoConfig.for_model(**cfg)
    except (ValueError, KeyError, TypeError) as e:
        raise RooflabError(f"transformers cannot build {arch.name}: {str(e).splitlines()[0]}") from None
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = transformers.AutoModelForCausalLM.from_config(hf, dtype=getattr(torch, dtype))
    return model.to(device).eval()


def _cache_kw(model) -> str:
    """The forward argument that takes the KV cache (`cache` in recent transformers)."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def step(model, ids, cache=None):
    """One forward (under no_grad): (last logits, the cache it leaves)."""
    torch = sys.modules["torch"]
    kw = {_cache_kw(model): cache} if cache is not None else {}
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = model(ids, use_cache=True, logits_to_keep=1, **kw)
    fields = getattr(out, "__dataclass_fields__", {})
    return out.logits[:, -1], (out.cache if "cache" in fields else out.past_key_values)


@contextlib.contextmanager
def _in_float32(model):
    """The model in float32 inside the block, each parameter and buffer back to its own dtype after
    (bf16 -> fp32 -> bf16 is exact, so the timed model is bit for bit the one built)."""
    torch = sys.modules["torch"]
    tensors = [*model.parameters(), *model.buffers()]
    dtypes = [t.dtype for t in tensors]
    if all(d in (torch.float32, torch.float64) or not d.is_floating_point for d in dtypes):
        yield
        return
    for t in tensors:
        if t.dtype.is_floating_point:
            t.data = t.data.float()
    try:
        yield
    finally:
        for t, d in zip(tensors, dtypes):
            t.data = t.data.to(d)


def verify(model, vocab: int, prompt: int = 5, mangle=None) -> float:
    """Largest difference between decode-after-prefill and the longer prefill's last logits, over
    the largest logit; an error when above VERIFY_TOL (1e-3). A 16-bit model is checked in float32
    (the cache path is the same in every dtype): in bf16 the two sides' own rounding reached 0.015
    over Qwen2-0.5B's 24 layers on oneDNN's AMX kernels, as large as a zeroed key position's effect
    (0.02-0.13), so no bf16 tolerance tells the two apart. ``mangle(cache)`` (tests) alters the
    cache in between."""
    torch = sys.modules["torch"]
    dev = next(model.parameters()).device
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(0, vocab, (1, prompt + 1), generator=g).to(dev)
    with _in_float32(model):
        _, cache = step(model, ids[:, :prompt])
        if mangle is not None:
            mangle(cache)
        got, _ = step(model, ids[:, prompt:], cache)
        ref, _ = step(model, ids)
    got, ref = got.float(), ref.float()
    err = float((got - ref).abs().max() / ref.abs().max().clamp_min(1e-30))
    if not err < VERIFY_TOL:
        raise RooflabError(
            f"the torch model is wrong: decode after prefill differs from the longer prefill by {err:.2g} "
            f"(at most {VERIFY_TOL:g}, checked in float32)"
        )
    return err


def _phase(model, phase: str, n: int, vocab: int, batch: int = 1):
    """A callable running one prefill of ``n`` tokens or one decode step at context ``n`` (``batch``
    sequences), and what to call after it (decode: crop the cache back to n - 1 positions)."""
    torch = sys.modules["torch"]
    dev = next(model.parameters()).device
    g = torch.Generator().manual_seed(1)
    if phase == "prefill":
        ids = torch.randint(0, vocab, (batch, n), generator=g).to(dev)
        return (lambda: step(model, ids)), (lambda: None)
    _, cache = step(model, torch.randint(0, vocab, (batch, n - 1), generator=g).to(dev))
    new = torch.randint(0, vocab, (batch, 1), generator=g).to(dev)
    return (lambda: step(model, new, cache)), (lambda: cache.crop(-1))


def timed(model, phase: str, n: int, vocab: int, runs: int, warmup: int = 2, batch: int = 1) -> dict:
    """Median seconds of ``runs`` runs of one phase (timed by the driver, noise checked), and the
    profiled run's self time per aten op."""
    from ...cpu.backend import step_driver

    torch = sys.modules["torch"]
    run, after = _phase(model, phase, n, vocab, batch)
    sync = torch.cuda.synchronize if next(model.parameters()).is_cuda else (lambda: None)
    measured = step_driver().time_runs(
        run, runs, threads=torch.get_num_threads(), warmup=warmup, sync=sync, after=after
    )
    return {**measured, **profiled(run, sync)}


def decode_sweep(config, threads: int, context: int, batches: list[int], runs: int, device: str = "cpu",
                 dtype: str = "float32") -> dict:  # fmt: skip
    """{batch: {"median_s", ...}}: one decode step at KV ``context`` per batch in eager torch (one model,
    verified once: decode after prefill against the longer prefill), llm.turn's measured curve."""
    from ...cpu.backend import step_driver

    torch, _ = modules()
    arch = llm.arch_of(config)
    with torch_threads(threads):
        model = build(config, device, dtype)
        err = verify(model, arch.vocab)
        sync = torch.cuda.synchronize if next(model.parameters()).is_cuda else (lambda: None)
        out = {}
        for B in batches:
            run, after = _phase(model, "decode", context, arch.vocab, B)
            out[B] = {**step_driver().time_runs(run, runs, threads=threads, sync=sync, after=after),
                      "verified_rel_err": err}  # fmt: skip
        return out


def profiled(run, sync) -> dict:
    """One run under torch.profiler: self time per aten op (CPU; the device's for CUDA kernels
    show up as the launching op's CPU time), the number of aten calls, and the rest of the wall."""
    from torch.profiler import ProfilerActivity, profile

    sync()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        t0 = time.perf_counter()
        run()
        sync()
        wall = time.perf_counter() - t0
    by_op, calls = {}, 0
    for e in prof.key_averages():
        if e.key.startswith("aten::"):
            by_op[e.key] = by_op.get(e.key, 0.0) + e.self_cpu_time_total * 1e-6
            calls += e.count
    top = sum(by_op.values())
    by_op[OUTSIDE] = max(wall - top, 0.0)
    return {
        "by_op_type_s": dict(sorted(by_op.items(), key=lambda kv: -kv[1])),
        "aten_calls": calls,
        "profiled_s": wall,
    }


def runtime_prediction(row: dict) -> tuple[float, int]:
    """llm_check.runtime_prediction with torch's kernels (the bgemm family's ``00-torch-bf16``)."""
    return llm_check.runtime_prediction(row, "torch")


def compare(config, rows: list[dict], threads: int, prompt: int, context: int, runs: int = 10,
            device: str = "cpu", dtype: str = "float32", call_floor: dict | None = None, batch: int = 1,
            phases: tuple = ("prefill", "decode"), kv_copy=None) -> dict:  # fmt: skip
    """Build, verify, time prefill (``prompt`` tokens) and decode (context ``context``) at ``batch``,
    and put each beside rooflab's prediction (``rows`` of llm.predict.assemble). ``call_floor``: the
    ceilings' "dispatch: torch aten call" at these threads (ns per call); the prediction then adds
    that floor once per aten call the phase makes, counted by torch's own profile of it.
    ``kv_copy(context, batch)``: seconds of a decode step's torch.cat of every layer's keys and
    values (llm.predict.graph_kv_copy_s with torch's cat), which transformers' DynamicCache makes
    where rooflab's decode appends in place: the decode prediction checked is the copying one."""
    torch, transformers = modules()
    arch = llm.arch_of(config)
    with torch_threads(threads):
        model = build(config, device, dtype)
        out = {
            "config": arch.name, "threads": threads, "check_name": "torch",
            "runtime": f"torch {torch.__version__} + transformers {transformers.__version__} "
                       f"({device}, {dtype}, {model.config._attn_implementation} attention)",
            "by_label": "torch self time by aten op (ms)", "verified_rel_err": verify(model, arch.vocab),
        }  # fmt: skip
        for phase, n in (("prefill", prompt), ("decode", context)):
            if phase not in phases:
                continue
            m = timed(model, phase, n, arch.vocab, runs, batch=batch)
            row = llm_check.phase_row(rows, phase, batch, prompt, context)
            pred, torch_ops = runtime_prediction(row)
            by_kind, extra, cache = predicted_by_kind(row, "torch"), {}, 0.0
            if phase == "decode" and kv_copy is not None:
                cache, extra = llm_check.kv_copy(row, kv_copy(context, batch), by_kind)
                pred += cache
            overhead, how = llm_check.overhead(m["aten_calls"], {"node": call_floor})
            pred += overhead
            out[phase] = {
                **llm_check.measured_fields(phase, batch, prompt, context, m),
                "predicted_s": pred,
                "predicted_how": (
                    f"torch's own kernels for the {torch_ops} op shape(s) rooflab timed in torch, rooflab's best for the rest"
                    if torch_ops
                    else "rooflab's best kernel per op"
                ),
                "predicted_best_s": row["seconds"] + overhead + cache,
                "runtime_overhead_s": overhead,
                "runtime_overhead_how": how,
                "predicted_library_s": row["library_seconds"],
                "roof_s": row["roof_seconds"],
                "error_pct": 100 * (pred - m["median_s"]) / m["median_s"],
                "runtime_by_op_type_s": m["by_op_type_s"],
                "aten_calls": m["aten_calls"],
                "profiled_s": m["profiled_s"],
                "predicted_by_kind_s": by_kind,
                **extra,
            }
    return out
