"""Measure model ops on this machine and place them on its measured roofline.

For every distinct op shape: build inputs -> verify against float64 -> time warm (same inputs back
to back, caches hot) and cold (a buffer larger than the last-level cache is rewritten before each
sample) -> place the warm time (what a steady-state inference loop sees) and keep both.
One bad op (unknown kind, too large for memory, wrong result) is reported and the others go on.
"""

from __future__ import annotations

import time
import warnings
from pathlib import Path

import numpy as np

from .. import verify as verify_mod
from ..errors import RooflabError, VerificationError
from ..memory import aligned_empty
from ..threads import use_threads
from ..timing import summarize, time_cpu
from . import catalog, execute, place


def _flush_buffer(caches: list[dict]) -> np.ndarray:
    llc = caches[-1]["size_bytes"] if caches else 64 << 20
    n = min(max(2 * llc, 64 << 20), 1 << 30) // 8
    return aligned_empty(n, np.float64)


def time_op(impl, budget: float, cold_samples: int, flush: np.ndarray | None) -> dict:
    warm = time_cpu(impl.run, budget_s=budget, min_samples=5, warmup=1)
    out = {"warm": summarize(warm.seconds), "warm_samples_s": warm.seconds}
    if flush is not None and cold_samples:
        cold = []
        for _ in range(cold_samples):
            flush += 1.0  # rewrite > LLC bytes: the op's inputs are evicted
            t0 = time.perf_counter_ns()
            impl.run()
            cold.append((time.perf_counter_ns() - t0) * 1e-9)
        out["cold"] = summarize(cold)
        out["cold_samples_s"] = cold
    return out


def measure_ops(
    ops: list[dict],
    roofs: dict,
    *,
    threads: int,
    quick: bool,
    caches: list[dict],
    writer=None,
    progress=None,
    own: bool = True,
) -> tuple[list[dict], list[dict]]:
    """Returns (placed ops, errors). Each placed op keeps its record; writer saves after each."""
    budget = 0.05 if quick else 0.2
    flush = _flush_buffer(caches)
    placed, errors = [], []
    for op in ops:
        if progress:
            progress.step(f"{op.get('model') or ''} {op['name']}")
        for use_own in (False, True) if own else (False,):
            try:
                impl = execute.build(op, own=use_own)
                if impl is None:
                    continue
                expected = impl.reference()
                with use_threads(threads):
                    got = impl.run()
                    report = verify_mod.check(
                        got,
                        expected,
                        dtype=got.dtype,
                        what=f"{op['name']} [{impl.name}]",
                        rtol=_rtol(op, got.dtype),
                        atol=_atol(op, got.dtype),
                    )
                    del expected, got
                    t = time_op(impl, budget, 3 if quick else 5, flush)
            except (RooflabError, VerificationError, NotImplementedError, MemoryError) as e:
                err = {
                    "op": op["name"],
                    "model": op.get("model"),
                    "impl": "own" if use_own else "framework",
                    "error": str(e),
                }
                errors.append(err)
                if writer:
                    writer.add_error(f"{op.get('model')}: {op['name']}", str(e))
                continue
            sec = t["warm"]["median"]
            p = place.place_op(op, sec, impl.dispatches, roofs)
            rec = {
                **p,
                "model": op.get("model"),
                "name": op["name"] + (" [rooflab]" if use_own else ""),
                "kind": op["kind"],
                "dtype": op["dtype"],
                "shape": op["shape"],
                "count": op["count"],
                "impl": impl.name,
                "own_kernel": use_own,
                "verification": report,
                "time_s": t["warm"],
                "samples_s": t["warm_samples_s"],
                "cold_seconds": t.get("cold", {}).get("median"),
                "cold_time_s": t.get("cold"),
                "cold_samples_s": t.get("cold_samples_s"),
                "total_time_s": sec * op["count"],
            }
            placed.append(rec)
            if writer:
                writer.data.setdefault("ops_placed", []).append(rec)
                writer.save()
    return placed, errors


def _rtol(op, dtype):
    # long float32 reductions (K up to 50k in GEMMs, 4.6k-term convs) lose ~sqrt(K) ulps
    return 2e-3 if np.dtype(dtype) == np.float32 else 1e-9


def _atol(op, dtype):
    return 2e-3 if np.dtype(dtype) == np.float32 else 1e-10


def find_ceilings(out_dir: Path, machine_id: str, device: str, explicit: str | None) -> tuple[dict, str]:
    from ..results import load

    if explicit:
        data = load(explicit)
        if data.get("suite") != "ceilings":
            raise RooflabError(
                f"{explicit} is a {data.get('suite')!r} result, not a ceilings result",
                "pass a file written by `rooflab run` (suite ceilings)",
            )
        if data["machine"]["id"] != machine_id:
            warnings.warn(
                f"ceilings come from machine {data['machine']['id']!r}, not this one ({machine_id!r}): "
                "the classification is for that machine's roofs",
                stacklevel=2,
            )
            print(f"warning: ceilings from another machine ({data['machine']['id']}); placing against them anyway")
        return data, explicit
    cands = sorted((Path(out_dir) / machine_id).glob(f"rooflab-ceilings-{device}-*.json"))
    for c in reversed(cands):
        try:
            data = load(c)
        except RooflabError:
            continue
        if data.get("status", "").startswith("complete") and data.get("ceilings"):
            return data, str(c)
    raise RooflabError(
        f"no ceilings result for machine {machine_id!r} under {out_dir}/",
        f"run `rooflab run --device {device}` first, or pass --ceilings RESULT.json",
    )


def _finish_outputs(writer, placed, summaries):
    stem = str(writer.path)[:-5]
    Path(stem + ".ops.csv").write_text(place.to_csv(placed))
    md = ["# Model ops placed on the measured roofline", "", f"Rule: {place.RULE}", ""]
    for s in summaries:
        md += [f"- {s['line']}"]
    md += ["", place.to_markdown(placed)]
    Path(stem + ".ops.md").write_text("\n".join(md))
    return [Path(stem + ".ops.csv"), Path(stem + ".ops.md")]


def run_suite(
    writer,
    *,
    device,
    quick,
    threads,
    progress,
    model=None,
    batch=None,
    seq=None,
    ceilings_path=None,
    out_dir=Path("results"),
):
    if device != "cpu":
        from ..cuda import models_gpu

        return models_gpu.run_suite(
            writer,
            quick=quick,
            progress=progress,
            model=model,
            batch=batch,
            seq=seq,
            ceilings_path=ceilings_path,
            out_dir=out_dir,
        )
    ceil, src = find_ceilings(out_dir, writer.data["machine"]["id"], device, ceilings_path)
    writer.data["ceilings"] = ceil["ceilings"]
    writer.data["ceilings_source"] = src
    writer.data["classification_rule"] = place.RULE
    writer.data["machine"]["cpu"]["theoretical"] = ceil["machine"]["cpu"].get("theoretical", {})
    todo = catalog.suite_for(model, batch, seq)
    groups = []
    for name, kw in todo:
        ops = catalog.distinct(catalog.model_ops(name, **kw))
        groups.append((name, ops))
    total = sum(len(o) for _, o in groups) * 2
    progress.start(total)
    caches = writer.data["machine"]["cpu"]["caches"]
    all_placed, summaries = [], []
    for name, ops in groups:
        roofs = place.ceilings_for(ceil, "float32", threads)
        t0 = time.monotonic()
        placed, _ = measure_ops(
            ops, roofs, threads=threads, quick=quick, caches=caches, writer=writer, progress=progress
        )
        framework = [p for p in placed if not p["own_kernel"]]
        s = place.summarize_model(framework)
        s["model"] = framework[0]["model"] if framework else name
        s["line"] = place.summary_line(s["model"], writer.data["machine"]["cpu"]["model"], s)
        s["placement_seconds"] = time.monotonic() - t0
        summaries.append(s)
        all_placed += placed
        writer.data["model_summaries"] = summaries
        writer.save()
    files = _finish_outputs(writer, all_placed, summaries)
    for s in summaries:
        print(s["line"])
    for f in files:
        print(f"table:  {f}")
    progress.done(None)


def place_command(ops, unsupported, args, source: str) -> int:
    """Shared by `rooflab place OPS.json` and `rooflab place MODEL.onnx`."""
    from .. import machine, plots
    from ..progress import RichProgress
    from ..results import ResultWriter
    from ..threads import check_threads, max_threads

    if args.device != "cpu":
        from ..cuda import backend

        backend.require()
    threads = check_threads(args.threads) if args.threads is not None else max_threads()
    desc = machine.describe()
    writer = ResultWriter(
        Path(args.out), desc, "place", args.device, {"source": source, "quick": args.quick, "threads": threads}
    )
    ceil, src = find_ceilings(Path(args.out), desc["id"], args.device, args.ceilings)
    writer.data.update(ceilings=ceil["ceilings"], ceilings_source=src, classification_rule=place.RULE)
    writer.data["machine"]["cpu"]["theoretical"] = ceil["machine"]["cpu"].get("theoretical", {})
    for u in unsupported:
        writer.add_error(u.get("op", "?"), u["error"])
        print(f"skipped: {u.get('op')}: {u['error']}")
    progress = RichProgress(f"placing {Path(source).name}")
    progress.start(len(ops) * 2)
    roofs_by_dtype = {}
    placed = []
    try:
        for op in ops:
            roofs = roofs_by_dtype.setdefault(op["dtype"], place.ceilings_for(ceil, op["dtype"], threads))
            p, errs = measure_ops(
                [op],
                roofs,
                threads=threads,
                quick=args.quick,
                caches=desc["cpu"]["caches"],
                writer=writer,
                progress=progress,
            )
            placed += p
    except KeyboardInterrupt:
        progress.close()
        writer.finish("interrupted")
        return 130
    progress.close()
    writer.finish("complete" if not writer.data["errors"] else "complete-with-errors")
    s = place.summarize_model([p for p in placed if not p["own_kernel"]]) if placed else None
    files = _finish_outputs(
        writer, placed, [dict(s, line=place.summary_line(Path(source).name, desc["cpu"]["model"], s))] if s else []
    )
    files += plots.roofline(writer.data, Path(str(writer.path)[:-5] + ".roofline"), ops=placed)
    if placed:
        print(place.to_markdown(placed))
        print(place.summary_line(Path(source).name, desc["cpu"]["model"], s))
    for e in writer.data["errors"]:
        print(f"error: {e['label']}: {e['error']}")
    print(f"result: {writer.path}")
    for f in files:
        print(f"output: {f}")
    return 0 if placed else 1
