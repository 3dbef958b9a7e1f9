"""The torch runtime check of `rooflab llm CONFIG --runtime torch` (optional extra `rooflab[torch]`):
the same architecture built by transformers' AutoModelForCausalLM.from_config (random weights,
nothing downloaded), eval, fp32, under torch.no_grad, its KV cache transformers' DynamicCache, on
the CPU (``threads`` intra-op threads) or on a CUDA device, measured against rooflab's per-op
prediction and reported by ort_llm.lines like the onnxruntime check.

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

import importlib.util
import inspect
import sys
import time
import warnings
from pathlib import Path

from ...errors import RooflabError
from ...memory import available_bytes, fmt_bytes
from ...timing import timed_runs
from .. import llm
from . import ort_llm
from .ort_llm import predicted_by_kind

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
# decode after prefill against the longer prefill, largest difference over the largest logit. fp32
# agrees to 5e-7 (SmolLM-135M) and 1.2e-6 (Qwen2-0.5B); bf16 to 0 on the Zen 5 VM (oneDNN rounds
# the last row the same way on both paths), with room left for another CPU's path. A cache fed wrong
# is far outside both: K and V swapped 1.4-1.8, the last key position zeroed 0.022-0.13 (both models,
# both dtypes; tests/test_llm_torch.py)
VERIFY_TOL = {"float32": 1e-3, "bfloat16": 1e-2}
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


def verify(model, vocab: int, prompt: int = 5, mangle=None) -> float:
    """Largest difference between decode-after-prefill and the longer prefill's last logits, over
    the largest logit; an error when above VERIFY_TOL of the model's dtype (1e-3 in fp32).
    ``mangle(cache)`` (tests) alters the cache in between."""
    torch = sys.modules["torch"]
    dev = next(model.parameters()).device
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(0, vocab, (1, prompt + 1), generator=g).to(dev)
    _, cache = step(model, ids[:, :prompt])
    if mangle is not None:
        mangle(cache)
    got, _ = step(model, ids[:, prompt:], cache)
    ref, _ = step(model, ids)
    got, ref = got.float(), ref.float()
    err = float((got - ref).abs().max() / ref.abs().max().clamp_min(1e-30))
    tol = VERIFY_TOL[str(next(model.parameters()).dtype).removeprefix("torch.")]
    if not err < tol:
        raise RooflabError(
            f"the torch model is wrong: decode after prefill differs from the longer prefill by {err:.2g} "
            f"(at most {tol:g})"
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
    """Median seconds of ``runs`` runs of one phase, and the profiled run's self time per aten op."""
    torch = sys.modules["torch"]
    run, after = _phase(model, phase, n, vocab, batch)
    sync = torch.cuda.synchronize if next(model.parameters()).is_cuda else (lambda: None)
    return {**timed_runs(run, runs, warmup=warmup, sync=sync, after=after), **profiled(run, sync)}


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
    """ort_llm.runtime_prediction with torch's kernels (the bgemm family's ``00-torch-bf16``)."""
    return ort_llm.runtime_prediction(row, "torch")


def compare(config, rows: list[dict], threads: int, prompt: int, context: int, runs: int = 10,
            device: str = "cpu", dtype: str = "float32", call_floor: dict | None = None, batch: int = 1,
            phases: tuple = ("prefill", "decode")) -> dict:  # fmt: skip
    """Build, verify, time prefill (``prompt`` tokens) and decode (context ``context``) at ``batch``,
    and put each beside rooflab's prediction (``rows`` of llm.predict.assemble). ``call_floor``: the
    ceilings' "dispatch: torch aten call" at these threads (ns per call); the prediction then adds
    that floor once per aten call the phase makes, counted by torch's own profile of it."""
    torch, transformers = modules()
    arch = llm.arch_of(config)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
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
            row = next(
                r
                for r in rows
                if r["phase"] == phase
                and r["batch"] == batch
                and (r.get("prompt") == prompt if phase == "prefill" else r.get("context") == context)
            )
            pred, torch_ops = runtime_prediction(row)
            overhead, how = ort_llm.overhead(m["aten_calls"], {"node": call_floor})
            pred += overhead
            out[phase] = {
                "batch": batch,
                **({"context": context} if phase == "decode" else {"prompt": prompt}),
                "measured_s": m["median_s"],
                "predicted_s": pred,
                "predicted_how": (
                    f"torch's own kernels for the {torch_ops} op shape(s) rooflab timed in torch, rooflab's best for the rest"
                    if torch_ops
                    else "rooflab's best kernel per op"
                ),
                "predicted_best_s": row["seconds"] + overhead,
                "runtime_overhead_s": overhead,
                "runtime_overhead_how": how,
                "predicted_library_s": row["library_seconds"],
                "roof_s": row["roof_seconds"],
                "error_pct": 100 * (pred - m["median_s"]) / m["median_s"],
                "runtime_by_op_type_s": m["by_op_type_s"],
                "aten_calls": m["aten_calls"],
                "profiled_s": m["profiled_s"],
                "predicted_by_kind_s": predicted_by_kind(row),
            }
    finally:
        torch.set_num_threads(before)
    return out
