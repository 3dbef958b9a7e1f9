"""Measure model ops on this machine (CPU or GPU) and place them on its measured roofline.

An op is executed through the variants of its kind (registry: ``Variant.op``), by the one driver:
variant 0 is the framework path (numpy/BLAS on the CPU, cupy/cuBLAS on the GPU); every own variant
of the kind that accepts the shape is measured too, and the fastest verified one is placed beside
the framework's. Each measurement is verified against float64 first, then timed warm (same inputs
back to back, what a steady-state inference loop sees: placed against the roof of the level its
working set fits in) and cold (a buffer larger than the last-level cache is read before each
sample: placed against DRAM/HBM; or, for ops that stream weights in a chain as an LLM's decode does,
a rotation over distinct copies of the streamed operand (weights, KV cache), >= 4x the LLC in all, one call per copy and no
flush: rooflab.models.llm.predict). One bad op (unknown kind, too large, wrong result) is reported
and the others go on. An op of the same kind, dtype and shape as one measured before (a
transformer's repeated layers: an imported BERT's 12 identical layers are timed once) reuses that
measurement under its own name, with ``measured_as`` naming the op that was timed.
"""

from __future__ import annotations

import json

import numpy as np

from ..driver import Driver, Settings
from ..errors import RooflabError
from ..flush import flusher
from ..memory import fmt_bytes, require_fits
from ..registry import list_variants
from ..rotation import ROTATION_MAX_COPIES, STREAMED, rotation_count, rotation_inputs  # noqa: F401 (callers' names)
from ..workloads import ops
from . import place


def driver_for(device: str, quick: bool) -> Driver:
    settings = Settings(budget_s=0.05 if quick else 0.2, target_s=0.0, max_attempts=2, probe_clock=False)
    if device == "cuda":
        from ..cuda.backend import driver_backend

        return Driver(driver_backend(), settings)
    from ..cpu.backend import cpu_backend

    return Driver(cpu_backend(probe=False), settings)


def variants_for(op: dict, device: str):
    """(library variants, own variants) that execute ``op``. Where some variant names the op's dtype
    (a bfloat16 GEMM on a CPU with a BF16 unit: the bgemm family; an 8-bit conv: qconv), those run
    it; else, for a float op, the variants that take any dtype or float32, and the op runs in
    float32 (executed_dtype). An 8-bit op never falls back to a float kernel."""
    vs = list_variants(device=device, op=op["kind"])
    named = [v for v in vs if op["dtype"] in v.dtypes]
    if named:
        vs = named
    else:  # an integer GEMM's variants take any dtype; a float kernel never runs 8-bit codes
        vs = [v for v in vs if not v.dtypes or ("float32" in v.dtypes and op["dtype"] != "int8")]
    return [v for v in vs if v.library], [v for v in vs if not v.library]


def executed_dtype(dtype: str, device: str, kind: str = "gemm") -> str:
    """The one rule for the dtype an op really runs in here (its bytes and FLOPs are counted for
    it; `place`, the models suite and `llm` alike): as asked on a GPU and for every dtype but the
    16-bit floats; a bfloat16 GEMM (linear layers, an LM head) on the CPU's BF16 unit where it has
    one (AMX or AVX-512 BF16: the bgemm family's variants then take model GEMMs); every other
    bfloat16 or float16 op on a CPU in float32, as rooflab's CPU kernels run it, numpy's variant 0
    included (numpy's float16 is a float32 round trip per element, not a unit)."""
    if device == "cuda" or dtype not in ("bfloat16", "float16"):
        return dtype
    if dtype == "bfloat16" and kind == "gemm":
        from ..families import bgemm

        if bgemm.unit():
            return "bfloat16"
    return "float32"


def array_dtype(dtype: str):
    """The numpy dtype a variant's inputs take (None for bfloat16, which numpy lacks: the bgemm
    family makes its own bf16 bit patterns)."""
    try:
        return np.dtype(dtype)
    except TypeError:
        return None


def _footprint(op: dict) -> int:
    """Rough upper bound of the memory an op's inputs and float64 verification need."""
    base = ops.min_bytes(op) / ops.ITEMSIZE[op["dtype"]] * 8
    s = op["shape"]
    if op["kind"] == "conv2d":
        base += s["N"] * s["P"] * s["Q"] * (s["C"] // s["groups"]) * s["R"] * s["S"] * 12
    return int(2 * base + 8 * ops.output_numel(op))


def op_params(variant, shape: dict) -> dict:
    """The variant's parameters an op shape sets: fields named like its defaults, and a conv's
    stride and padding (one number when both axes agree, else a pair)."""
    s = dict(shape)
    for k in ("stride", "pad"):
        if f"{k}_h" in s:
            s[k] = s[f"{k}_h"] if s[f"{k}_h"] == s[f"{k}_w"] else (s[f"{k}_h"], s[f"{k}_w"])
    return {k: s[k] for k in variant.defaults if k in s}


def measure_one(driver, variant, op, *, threads, roofs, flush, cold_samples, stream_llc=None) -> dict:
    """Verify, time warm and cold, place. Raises RooflabError when the variant refuses the op.
    ``stream_llc`` (the LLC's bytes): the cold time rotates over distinct copies of the operands
    (rotation_count) instead of flushing, the way a chain of weight GEMMs streams; the copies'
    count and bytes go in the record (``rotation_copies``, ``rotation_bytes``)."""
    dtype = executed_dtype(op["dtype"], variant.device, op["kind"])
    shape = dict(op["shape"])
    # rooflab's kernels write their own width (a float conv, MatMulInteger's int32), not a graph's
    # 8-bit requantized output: the re-execution is counted for what it writes
    shape.pop("out_itemsize", None)
    op_x = {**op, "dtype": dtype, "shape": shape}
    inputs = variant.inputs(shape, array_dtype(dtype), seed=0, threads=threads)
    params = op_params(variant, shape)
    label = f"{op.get('model') or ''} {op['name']} [{variant.name}]".strip()
    warm = driver.measure(variant, inputs, threads=threads, params=params, label=label, shape=shape, reps=1)
    if warm.status != "ok":
        raise RooflabError(warm.error)
    cold = None
    rotation, cold_flush = None, flush
    if stream_llc and cold_samples:
        from ..memory import available_bytes

        ws = inputs[STREAMED].nbytes
        k = rotation_count(ws, stream_llc, available_bytes() if variant.device == "cpu" else None)
        rotation = rotation_inputs(variant, shape, array_dtype(dtype), threads, inputs, k)
        if k * ws >= 2 * stream_llc:  # the copies alone push each other out of the caches
            cold_flush = None
    if flush is not None and cold_samples:
        cold = driver.measure(
            variant,
            inputs,
            threads=threads,
            params=params,
            label=label,
            reps=1,
            flush=cold_flush,
            min_samples=cold_samples,
            budget_s=0.0,
            rotation=rotation,
        )
        del rotation
    per_call = warm.work["launches"] / max(warm.reps or 1, 1)
    path = f"{'library' if variant.library else 'own'}-{variant.device}"
    sec = warm.time_s["median"]
    p = place.place_op(op_x, sec, int(per_call), roofs, path)
    rec = {
        **p,
        "model": op.get("model"),
        "name": op["name"] + ("" if variant.library else " [rooflab]"),
        "kind": op["kind"],
        "dtype": dtype,
        "dtype_requested": op["dtype"],
        "shape": op["shape"],
        "count": op["count"],
        "impl": variant.description,
        "variant": variant.name,
        "own_kernel": not variant.library,
        "device": variant.device,
        "verification": warm.verification,
        "time_s": warm.time_s,
        "samples_s": warm.samples_s,
        "total_time_s": sec * op["count"],
    }
    if cold is not None and cold.status == "ok":
        c = cold.time_s["median"]
        rec.update(cold_seconds=c, cold_time_s=cold.time_s, cold_samples_s=cold.samples_s)
        rec["cold"] = place.place_op(op_x, c, int(per_call), roofs, path, cold=True)
        if cold.meta.get("rotation_copies"):
            rec.update(rotation_copies=cold.meta["rotation_copies"], rotation_bytes=cold.meta["rotation_bytes"])
    elif cold is not None:
        raise RooflabError(cold.error)
    return rec


def measure_ops(
    ops_list, roofs, *, device, threads, quick, machine, writer=None, progress=None, own=True, stream_llc=None
):
    """Returns (placed, errors): per op the framework path and the fastest verified own variant.
    ``stream_llc``: cold times rotate over copies of the operands (measure_one)."""
    driver = driver_for(device, quick)
    flush = flusher(device, machine)
    placed, errors = [], []

    def fail(op, what, e):
        err = {"op": op["name"], "model": op.get("model"), "impl": what, "error": str(e)}
        errors.append(err)
        if writer:
            writer.add_error(f"{op.get('model')}: {op['name']}", str(e))

    seen: dict[tuple, tuple[str, list[dict]]] = {}  # an op's kind, dtype and shape -> its records
    for op in ops_list:
        if progress:
            progress.step(f"{op.get('model') or ''} {op['name']}")
        key = (op["kind"], op["dtype"], json.dumps(op["shape"], sort_keys=True, default=str))
        if key in seen:  # the same op again (a transformer's layers): its measurement, reused and said so
            first, recs = seen[key]
            for rec in recs:
                copy = {
                    **rec,
                    "name": op["name"] + ("" if not rec["own_kernel"] else " [rooflab]"),
                    "model": op.get("model"),
                    "count": op["count"],
                    "total_time_s": rec["seconds"] * op["count"],
                    "measured_as": first,
                }
                placed.append(copy)
                if writer:
                    writer.data.setdefault("ops_placed", []).append(copy)
            continue
        n_placed = len(placed)
        try:
            need = _footprint(op)
            if device == "cpu":
                require_fits(
                    need,
                    f"op {op['name']!r}",
                    hint="free memory, or place the op at a smaller shape (OPS.json: its shape; a model: a smaller "
                    "batch with `rooflab export --batch` or `place --runtime --batch`)",
                )
            else:
                import cupy

                free = cupy.cuda.runtime.memGetInfo()[0]
                if need > 0.8 * free:
                    raise RooflabError(
                        f"op {op['name']!r} needs {fmt_bytes(need)} but the GPU has {fmt_bytes(free)} free"
                    )
        except RooflabError as e:
            fail(op, "framework", e)
            continue
        library, mine = variants_for(op, device)
        if not library:
            on = " on 8-bit tensors" if op["dtype"] == "int8" else ""
            fail(op, "framework", RooflabError(f"no {device} variant executes {op['kind']!r} ops{on}"))
            continue
        best_own = None
        for v in library + (mine if own else []):
            try:
                rec = measure_one(
                    driver, v, op, threads=threads, roofs=roofs, flush=flush, cold_samples=3 if quick else 5,
                    stream_llc=stream_llc,
                )  # fmt: skip
            except (RooflabError, MemoryError, NotImplementedError) as e:
                if v.library:
                    fail(op, v.name, e)
                continue
            if v.library:
                placed.append(rec)
                if writer:
                    writer.data.setdefault("ops_placed", []).append(rec)
            elif best_own is None or rec["seconds"] < best_own["seconds"]:
                best_own = rec
        if best_own is not None:
            placed.append(best_own)
            if writer:
                writer.data.setdefault("ops_placed", []).append(best_own)
        if len(placed) > n_placed:
            seen[key] = (op["name"], placed[n_placed:])
        if writer:
            writer.save()
    return placed, errors
