"""Model ops on the GPU through cupy (cuBLAS matmul, cupy elementwise kernels): the same op
implementations as the CPU path (rooflab.models.execute with xp=cupy), verified on the device
against float64, timed with CUDA events warm and with an L2 flush (cold), placed on the newest
CUDA ceilings of this machine. Eager execution: one kernel launch per numpy-style call, so the
latency floor is dispatches x the measured launch (enqueue) latency.
"""

from __future__ import annotations

import time
from pathlib import Path

from ..errors import RooflabError, VerificationError
from ..models import catalog, execute, place
from ..models.measure import _finish_outputs, find_ceilings
from ..verify import check
from . import loader
from . import timing as gtime


def run_suite(
    writer, *, quick, progress, model=None, batch=None, seq=None, ceilings_path=None, out_dir=Path("results")
):
    import cupy as cp

    ceil, src = find_ceilings(out_dir, writer.data["machine"]["id"], "cuda", ceilings_path)
    writer.data.update(ceilings=ceil["ceilings"], ceilings_source=src, classification_rule=place.RULE)
    writer.data["machine"]["gpu"] = ceil["machine"].get("gpu", writer.data["machine"].get("gpu"))
    todo = catalog.suite_for(model, batch, seq)
    groups = [(name, catalog.distinct(catalog.model_ops(name, **kw))) for name, kw in todo]
    progress.start(sum(len(o) for _, o in groups))
    l2 = writer.data["machine"]["gpu"].get("l2_bytes") or (50 << 20)
    flush = gtime.flusher(l2)
    budget = 0.05 if quick else 0.2
    summaries, all_placed = [], []
    for name, ops in groups:
        roofs = place.ceilings_for(ceil, "float32", 0, device="cuda")
        placed = []
        t0 = time.monotonic()
        for op in ops:
            progress.step(f"{name} {op['name']}")
            try:
                impl = execute.build(op, xp=cp)
                expected = impl.reference()
                got = impl.run()
                rep = check(got, expected, dtype="float32", what=f"{op['name']} [{impl.name}]", kind="reduction")
                del expected, got
                warm = gtime.time_gpu(impl.run, budget_s=budget)
                cold = gtime.time_gpu(impl.run, budget_s=budget, min_samples=3, flush=flush)
            except (RooflabError, VerificationError, NotImplementedError) as e:
                writer.add_error(f"{name}: {op['name']}", str(e))
                continue
            except Exception as e:  # CUDA errors: named, recorded, next op
                writer.add_error(f"{name}: {op['name']}", loader.cuda_error(e))
                continue
            finally:
                cp.get_default_memory_pool().free_all_blocks()
            sec = warm.stats()["median"]
            p = place.place_op(op, sec, impl.dispatches, roofs)
            rec = {
                **p,
                "model": op.get("model"),
                "name": op["name"],
                "kind": op["kind"],
                "dtype": op["dtype"],
                "shape": op["shape"],
                "count": op["count"],
                "impl": impl.name,
                "own_kernel": False,
                "verification": rep,
                "time_s": warm.stats(),
                "samples_s": warm.seconds,
                "cold_seconds": cold.stats()["median"],
                "cold_time_s": cold.stats(),
                "total_time_s": sec * op["count"],
                "device": "cuda",
            }
            placed.append(rec)
            writer.data.setdefault("ops_placed", []).append(rec)
            writer.save()
        s = place.summarize_model(placed) if placed else {"share_pct": {}, "total_time_s": 0, "achieved_gflops": 0}
        s["model"] = name
        s["line"] = (
            place.summary_line(name, writer.data["machine"]["gpu"]["name"], s) if placed else f"{name}: no op placed"
        )
        s["placement_seconds"] = time.monotonic() - t0
        summaries.append(s)
        all_placed += placed
        writer.data["model_summaries"] = summaries
        writer.save()
    for f in _finish_outputs(writer, all_placed, summaries):
        print(f"table:  {f}")
    for s in summaries:
        print(s["line"])
    progress.done(None)
