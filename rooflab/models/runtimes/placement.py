"""A real runtime's measured per-node times placed on the measured roofline (shared by onnxruntime
and the PyTorch profiler: runtimes/ort.py, runtimes/pytorch.py).

A runtime fuses ops, picks its own kernels and pays its own dispatch cost. Its profile gives one
time per node it ran (median over the measured runs, warm-up runs dropped); each node is mapped to
the graph's ops it stands for (``parts``: a fused Conv+BatchNorm+Relu is three ops) and placed with
rooflab's formulas and roofs, exactly as `rooflab place` places its own re-execution:
  F = sum of the parts' FLOPs; B = sum of the parts' minimum bytes less the tensors that stay inside
  the node (written by one part and read by another, never seen outside: a fused kernel need not
  move them), and never less than what the node writes; then place.place_work (the same roofs,
  the same classes; latency roof = the node's kernel dispatches x the measured library-call latency).
Nodes with no formula (a node the mapping cannot tie to the graph, an op rooflab has no formula
for) are listed with their time share, never dropped. rooflab's own time for the same node is the
sum of its parts' times through variant 0 (numpy/BLAS, measure_ops), where every part has one.

End to end is measured as a whole (the model run without profiling, median of the same number of
runs, interleaved with the profiled runs), never summed; the summary line says how far the
per-node times' sum is from it, the share of time by class, the share in nodes more than 2x below
their roof (below_roof: under 50 % of the roof that explains them), and the three nodes with the
most time above their roof's time.
"""

from __future__ import annotations

import csv
import io
import math
import statistics
from pathlib import Path

from ...errors import RooflabError
from ...workloads import catalog, ops
from .. import place

LISTED = "no formula"
SUM_TOLERANCE = 0.15  # the per-node sum should be within 15 % of the end-to-end time
RUNTIME_COLUMNS = [
    "node",
    "op_type",
    "kind",
    "graph_nodes",
    "runtime_s",
    "rooflab_s",
    "runtime_over_rooflab",
    "flops",
    "bytes_min",
    "intensity",
    "achieved_gflops",
    "attainable_gflops",
    "pct_of_roof",
    "class",
    "below_roof",
    "memory_level",
    "memory_kernel",
    "share_pct",
    "note",
]


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else 0.0


def parts_work(parts: list[dict], internal_bytes: float = 0.0, written: float | None = None) -> dict:
    """F, B and bytes written of a node standing for ``parts`` (see the module docstring)."""
    F = sum(ops.flops(p) for p in parts)
    B = sum(ops.min_bytes(p) for p in parts)
    if written is None:
        last = parts[-1]
        written = ops.output_bytes(last)
    B = max(B - internal_bytes, written, 0.0)
    return {"flops": F, "bytes_min": B, "written": min(written, B)}


def place_rows(rows: list[dict], roofs, path: str) -> None:
    """Adds the placement (class, % of roof, ...) to every row that has parts; the others are listed."""
    for r in rows:
        if not r.get("parts") or r["runtime_s"] <= 0:
            r["class"] = LISTED if not r.get("parts") else "under the profiler's 1 us resolution"
            continue
        # the roof of the part doing most of the arithmetic (a DynamicQuantizeMatMul: its INT8 GEMM)
        main = max(r["parts"], key=ops.flops)
        dtype = place.compute_dtype(main, roofs) if ops.flops(main) else r["parts"][0]["dtype"]
        p = place.place_work(
            r["flops"], r["bytes_min"], r["written"], dtype, r["runtime_s"], max(1, r.get("dispatches", 1)), roofs, path
        )
        r.update(p)
        r["kind"] = "+".join(dict.fromkeys(q["kind"] for q in r["parts"]))
        r["dtype"] = dtype


def _op_key(op: dict) -> tuple:
    return (op["kind"], op["dtype"], tuple(sorted((k, v) for k, v in op["shape"].items() if k != "extra_params")))


def own_times(rows, roofs, *, device, threads, quick, machine, progress=None) -> list[dict]:
    """rooflab's re-execution (variant 0: numpy/BLAS) of every distinct part, summed per row into
    ``rooflab_s``; returns the measured records (the second point set of the roofline)."""
    from ..measure import measure_ops

    parts = [p for r in rows for p in r.get("parts", [])]
    distinct = catalog.distinct([dict(p, count=1) for p in parts])
    if progress:
        progress.start(len(distinct))
    placed, errors = measure_ops(
        distinct, roofs, device=device, threads=threads, quick=quick, machine=machine, progress=progress, own=False
    )
    by_name = {p["name"]: p for p in placed}
    by_key = {}
    for d in distinct:
        if d["name"] in by_name:
            by_key[_op_key(d)] = by_name[d["name"]]
    for r in rows:
        if not r.get("parts"):
            continue
        recs = [by_key.get(_op_key(p)) for p in r["parts"]]
        if all(recs):
            r["rooflab_s"] = sum(x["seconds"] for x in recs)
            if r["rooflab_s"] > 0 and r["runtime_s"] > 0:
                r["runtime_over_rooflab"] = r["runtime_s"] / r["rooflab_s"]
        else:
            missing = [p["name"] for p, x in zip(r["parts"], recs) if x is None]
            r["rooflab_note"] = f"rooflab could not run {', '.join(missing[:3])}"
    for p in placed:
        p["total_time_s"] = p["seconds"] * p["count"]
    return placed


def summarize(
    rows: list[dict], e2e_samples: list[float], label: str, runtime: str, device_name: str,
    run_totals: list[float] | None = None,
) -> dict:  # fmt: skip
    """The one-line summary and the figures behind it. ``run_totals``: the per-node times summed per
    profiled run, paired with ``e2e_samples`` run by run (interleaved): the sum-to-end-to-end ratio
    is then the median of the paired ratios, which a noisy neighbour hits in both alike."""
    total = sum(r["runtime_s"] for r in rows) or 1e-30
    e2e = median(e2e_samples)
    paired = run_totals and len(run_totals) == len(e2e_samples)
    ratio = (
        median([a / b for a, b in zip(run_totals, e2e_samples) if b > 0]) if paired else (total / e2e if e2e else None)
    )
    by: dict[str, float] = {}
    for r in rows:
        by[r["class"]] = by.get(r["class"], 0.0) + r["runtime_s"]
    for r in rows:
        r["share_pct"] = 100 * r["runtime_s"] / total
    placed = [r for r in rows if r.get("parts") and "pct_of_roof" in r]
    for r in placed:
        roof_t = max(r["predicted_s"].values())
        r["time_above_roof_s"] = max(0.0, r["runtime_s"] - roof_t)
    worst = sorted((r for r in placed if r["time_above_roof_s"] > 0), key=lambda r: -r["time_above_roof_s"])[:3]
    below = sum(r["runtime_s"] for r in placed if r["below_roof"])
    listed = [r for r in rows if not r.get("parts")]
    s = {
        "model": label,
        "runtime": runtime,
        "e2e_s": e2e,
        "e2e_samples_s": e2e_samples,
        "nodes_sum_s": median(run_totals) if paired else total,
        "nodes_over_e2e": ratio,
        "nodes_over_e2e_how": "median of per-run ratios (interleaved runs)"
        if paired
        else "sum of node medians / median",
        "share_pct": {k: 100 * v / total for k, v in sorted(by.items())},
        "below_roof_pct": 100 * below / total,
        "nodes": len(rows),
        "nodes_placed": len(placed),
        "nodes_listed": len(listed),
        "listed": [{"node": r["node"], "op_type": r["op_type"], "share_pct": r["share_pct"]} for r in listed],
        "most_time_above_roof": [
            {
                "node": r["node"],
                "kind": r["kind"],
                "runtime_s": r["runtime_s"],
                "roof_s": max(r["predicted_s"].values()),
                "time_above_roof_s": r["time_above_roof_s"],
                "pct_of_roof": r["pct_of_roof"],
                "class": r["class"],
            }
            for r in worst
        ],
        "flops": sum(r.get("flops", 0.0) for r in placed),
    }
    s["achieved_gflops"] = s["flops"] / e2e / 1e9 if e2e else 0.0
    s["line"] = summary_line(s, device_name)
    return s


def summary_line(s: dict, device_name: str) -> str:
    parts = ", ".join(
        f"{v:.0f}% {k}" if v >= 0.5 else f"<1% {k}"
        for k, v in sorted(s["share_pct"].items(), key=lambda kv: -kv[1])
        if v > 0
    )
    ratio = f"{100 * s['nodes_over_e2e']:.0f}%" if s["nodes_over_e2e"] else "n/a"
    worst = "; ".join(
        f"{w['node']} {w['time_above_roof_s'] * 1e3:.2f} ms slower than its roof allows (at {w['pct_of_roof']:.0f}% of its "
        f"{w['class']} roof)"
        for w in s["most_time_above_roof"]
    )
    line = (
        f"{s['model']} in {s['runtime']} on {device_name}: {s['e2e_s'] * 1e3:.2f} ms end to end "
        f"(median of {len(s['e2e_samples_s'])}, {s['achieved_gflops']:.1f} GFLOP/s), nodes sum to "
        f"{s['nodes_sum_s'] * 1e3:.2f} ms ({ratio} of it); {parts}; {s['below_roof_pct']:.0f}% of the time in nodes "
        f"more than 2x below their roof; {s['nodes_placed']} nodes placed, {s['nodes_listed']} listed"
    )
    if s["listed"]:
        top = sorted(s["listed"], key=lambda r: -r["share_pct"])
        line += " (" + ", ".join(f"{r['node']} {r['share_pct']:.1f}%" for r in top[:4])
        line += " ..." if len(top) > 4 else ""
        line += ")"
    if worst:
        line += f"; most time lost against the roofs: {worst}"
    return line


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.6g}" if math.isfinite(v) else ""  # a view's FLOP/B (0 over 0 bytes): none
    if isinstance(v, (list, tuple)):
        return " ".join(map(str, v))
    return "" if v is None else str(v)


def to_csv(rows: list[dict]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=RUNTIME_COLUMNS, extrasaction="ignore")
    w.writeheader()
    for r in rows:
        w.writerow({k: _fmt(r.get(k)) for k in RUNTIME_COLUMNS})
    return buf.getvalue()


def to_markdown(rows: list[dict]) -> str:
    head = (
        "| node | runtime op | rooflab ops | runtime (us) | rooflab (us) | share | GFLOP/s | attainable | "
        "% of roof | class |\n|---|---|---|---|---|---|---|---|---|---|\n"
    )
    out = []
    for r in rows:
        own = f"{r['rooflab_s'] * 1e6:.1f}" if r.get("rooflab_s") else "-"
        if r.get("parts") and "pct_of_roof" in r:
            perf = f"{r['achieved_gflops']:.3g} | {r['attainable_gflops']:.3g} | {r['pct_of_roof']:.0f}%"
            cls = r["class"] + (" (below roof)" if r["below_roof"] else "")
            cls += " (ABOVE its roof: roof or work count wrong)" if r.get("above_roof") else ""
        else:
            perf, cls = "- | - | -", r["class"] + (f": {r['note']}" if r.get("note") else "")
        out.append(
            f"| {r['node']} | {r['op_type']} | {r.get('kind', '-')} | {r['runtime_s'] * 1e6:.1f} | {own} | "
            f"{r.get('share_pct', 0):.1f}% | {perf} | {cls} |"
        )
    return head + "\n".join(out) + "\n"


def plot_points(rows: list[dict], own: list[dict], runtime_label: str, threads: int | None) -> list[dict]:
    """Both point sets for charts.roofline: the runtime's nodes and rooflab's re-execution of the
    same ops (marker = set, colour = class, size = share of its set's time)."""
    pts = []
    for r in rows:
        if r.get("parts") and r.get("achieved_gflops"):
            pts.append(dict(r, model=runtime_label, name=r["node"], total_time_s=r["runtime_s"], threads=threads))
    for p in own:
        pts.append(dict(p, model="rooflab re-execution (numpy/BLAS)", threads=threads))
    return pts


def record_row(r: dict) -> dict:
    """A row as stored in the result JSON (parts by name and kind, not the whole op dicts)."""
    out = {k: v for k, v in r.items() if k != "parts"}
    out["parts"] = [
        {"name": p["name"], "kind": p["kind"], "shape": p["shape"], "dtype": p["dtype"]} for p in r.get("parts", [])
    ]
    return out


def prepare(setup) -> dict:
    """Everything a runtime placement needs that can fail on the user's input, checked before the
    model runs (the setup checked threads, the output folder and the device; here the ceilings)."""
    from .. import place

    ceil, src = setup.find_ceilings()
    device = setup.device
    # the runtime runs at the threads of the roofs its nodes are placed on (place.run_threads)
    threads = place.run_threads(place.Roofs(ceil, setup.threads if device == "cpu" else 0, device), setup.threads)
    return {"machine": setup.description(), "threads": threads, "ceilings": ceil, "ceilings_source": src,
            "device": device, "out": setup.out, "quick": setup.quick}  # fmt: skip


def place_profile(profile: dict, source: str, ready: dict, own: bool = True) -> dict:
    """Shared by `rooflab place MODEL.onnx --runtime onnxruntime` and place_torch: placement,
    rooflab's own times, result file, table, plot and the summary line. Returns the summary (with
    ``result``: the result file, ``outputs``: the table and plot files); ``own``: rooflab re-runs
    each node's ops too."""
    from ...results import ResultWriter
    from ..result import device_name, roofs_for, use_ceilings

    device, desc, label = ready["device"], ready["machine"], Path(source).name
    config = {
        "source": source,
        "runtime": profile["runtime"],
        "provider": profile.get("provider"),
        "threads": profile["threads"],
        "runs": profile["runs"],
        "warmup": profile["warmup"],
        "quick": bool(ready["quick"]),
        "own": own,
        "inputs": profile.get("inputs"),
    }
    writer = ResultWriter(ready["out"], desc, "runtime", device, config)
    use_ceilings(writer, ready["ceilings"], ready["ceilings_source"])
    roofs = roofs_for(writer, ready["ceilings"], profile["threads"] if device == "cpu" else 0, device)
    rows = profile["rows"]
    place_rows(rows, roofs, f"runtime-{device}")
    own_rows = _own_rows(rows, roofs, profile, writer, label, ready["quick"]) if own else []
    s = summarize(
        rows, profile["e2e_samples_s"], label, profile["runtime_label"], device_name(desc, device),
        profile.get("run_totals_s"),
    )  # fmt: skip
    for u in profile.get("unsupported", []):
        writer.add_error(u.get("op", "?"), u["error"])
    writer.data["runtime"] = {
        "summary": s,
        "nodes": [record_row(r) for r in rows],
        "not_executed": profile.get("not_executed", []),
        "unsupported": profile.get("unsupported", []),  # graph nodes rooflab has no formula for, with why
        "runtime_version": profile["runtime"],
        "provider": profile.get("provider"),
        "e2e_noise_reasons": profile.get("e2e_noise_reasons", []),  # the driver's checks of the timed runs
    }
    if profile.get("e2e_noise_reasons"):
        note = f"noisy: the end-to-end runs were disturbed ({'; '.join(profile['e2e_noise_reasons'])})"
        writer.data.setdefault("notes", []).append(note)
    writer.data["model_summaries"] = [s]
    writer.data["ops_placed"] = plot_points(rows, own_rows, profile["runtime_label"], profile["threads"])
    writer.finish("complete")
    files = _write_outputs(writer, rows, s, label, profile)
    _print_outcome(writer, rows, s, profile, files)
    s["result"], s["outputs"] = str(writer.path), [str(f) for f in files]
    return s


def _own_rows(rows: list[dict], roofs, profile: dict, writer, label: str, quick: bool) -> list[dict]:
    """rooflab's own re-execution of each node's ops (an interrupt keeps the result, marked)."""
    from ...progress import RichProgress

    progress = RichProgress(f"rooflab re-execution of {label}")
    try:
        return own_times(
            rows, roofs, device=roofs.device, threads=profile["threads"], quick=quick,
            machine=writer.data["machine"], progress=progress,
        )  # fmt: skip
    except KeyboardInterrupt:
        writer.finish("interrupted")
        raise
    finally:
        progress.close()


def _write_outputs(writer, rows: list[dict], s: dict, label: str, profile: dict) -> list[Path]:
    """The nodes table (.nodes.csv, .nodes.md) and the roofline beside the result file."""
    from ...charts import roofline

    stem = str(writer.path)[:-5]
    files = [Path(stem + ".nodes.csv"), Path(stem + ".nodes.md")]
    files[0].write_text(to_csv(rows))
    md = [f"# {label} in {profile['runtime_label']} on the measured roofline", "", f"Rule: {place.RULE}", ""]
    md += [f"- {s['line']}", ""]
    if profile.get("not_executed"):
        md += [f"Graph nodes the runtime never ran as nodes (folded or removed): {len(profile['not_executed'])}", ""]
    md.append(to_markdown(rows))
    files[1].write_text("\n".join(md))
    return files + roofline.roofline(writer.data, Path(stem + ".roofline"), ops=writer.data["ops_placed"])


def _print_outcome(writer, rows: list[dict], s: dict, profile: dict, files: list[Path]) -> None:
    from ..result import warn_above_roof

    print(to_markdown(rows))
    print(s["line"])
    warn_above_roof(writer, rows, "node")
    if profile.get("not_executed"):
        names = [n["node"] for n in profile["not_executed"]]
        print(f"not run as nodes ({len(names)}, folded or removed by the runtime): {', '.join(names[:6])}"
              + (" ..." if len(names) > 6 else ""))  # fmt: skip
    if profile.get("e2e_noise_reasons"):
        print(f"note: noisy: the end-to-end runs were disturbed ({'; '.join(profile['e2e_noise_reasons'])})")
    ratio = s["nodes_over_e2e"]
    if ratio and abs(ratio - 1) > SUM_TOLERANCE:
        why = (
            "the runtime spends time outside its profiled kernels (input/output copies, waking its threads on a "
            "loaded machine: try --threads 1)"
            if ratio < 1
            else "the profiler's own cost inflates the per-node times (many small operators)"
        )
        print(f"note: the per-node times sum to {100 * ratio:.0f}% of the end-to-end time: {why}")
    print(f"result: {writer.path}")
    for f in files:
        print(f"output: {f}")


def check_batch(batch) -> int | None:
    if batch is None:
        return None
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise RooflabError(f"--batch must be a positive integer, got {batch!r}")
    return batch
