"""`rooflab run --suite models`: the catalog's networks (ResNet-50, MobileNetV2, BERT, GPT-2 ...)
op by op, each distinct op measured once (rooflab/models/measure.py) and placed on the setup's
ceilings, a summary line per model and the ops tables beside the result.

Napkin: the default suite is six (model, size) pairs, 984 ops of which 142 are distinct (ResNet-50:
174 ops, 48 distinct; BERT: 171, 11; GPT-2: 147, 12); each distinct op is verified and timed warm and
cold through its variants, so the op count, not the network's size, sets the suite's time.
"""

from __future__ import annotations

import time

from ..workloads import catalog
from . import place
from .measure import measure_ops
from .result import device_name, model_summary, roofs_for, use_ceilings, warn_above_roof, write_tables


def run_suite(writer, setup, progress, *, model=None, batch=None, seq=None) -> None:
    """`rooflab run --suite models`: the catalog's networks (or ``model``), each op measured and
    placed on the setup's ceilings, a summary line per model and the tables beside the result."""
    device, threads, quick = setup.device, setup.threads, setup.quick
    ceil, src = setup.find_ceilings()
    use_ceilings(writer, ceil, src)
    groups = [
        (name, catalog.distinct(catalog.model_ops(name, **kw))) for name, kw in catalog.suite_for(model, batch, seq)
    ]
    progress.start(sum(len(o) for _, o in groups))
    roofs = roofs_for(writer, ceil, threads if device == "cpu" else 0, device)
    threads = place.run_threads(roofs, threads)
    all_placed, summaries = [], []
    for name, ops_list in groups:
        t0 = time.monotonic()
        placed, errors = measure_ops(
            ops_list, roofs, device=device, threads=threads, quick=quick, machine=writer.data["machine"],
            writer=writer, progress=progress,
        )  # fmt: skip
        s = model_summary(
            placed[0]["model"] if placed else name, placed, errors, device_name(writer.data["machine"], device)
        )
        s["placement_seconds"] = time.monotonic() - t0
        summaries.append(s)
        all_placed += placed
        writer.data["model_summaries"] = summaries
        writer.save()
    files = write_tables(writer, all_placed, summaries)
    for s in summaries:
        print(s["line"])
    warn_above_roof(writer, all_placed)
    for f in files:
        print(f"table:  {f}")
    progress.done(None)
