"""What a kernel-family run shows: every rung against the library (variant 0) on the same case,
as a table (its chart is rooflab.charts.family).

"% of unit peak" divides a rung that declares the unit it runs on (``meta["unit"]``: the bf16 and
int8 GEMM rungs) by that unit's peak (rooflab/families/lowprec.py) measured at the same thread count
in the same run: how much of the instruction's rate the loop nest keeps.

"% of library" divides a rung's rate by variant 0's on the same shape, dtype and thread count in
the same run (ratios measured in one run survive a shared machine; absolute times across runs do
not). The rate is GFLOP/s where the case does arithmetic, GB/s where it only moves data, and the
time per call (lower is better) for latency cases (ns per load for a pointer chase, ns per chain
for the tiny-op chains).
"""

from __future__ import annotations

import json

from .memory import fmt_bytes


def _group(rec: dict) -> tuple:
    """Records that compute the same thing: the variant name without its rung, and the op."""
    from .registry import get_variant

    try:
        v = get_variant(rec["variant"])
        op = v.op or ""
    except Exception:  # a result file from another version: fall back to the name
        op = ""
    prefix = rec["variant"].rsplit(".", 1)[0]
    return prefix, op


def _case_key(rec: dict) -> tuple:
    """Shape, dtype and thread count: what a rung and the library must share to be compared."""
    cold = bool((rec.get("meta") or {}).get("cold") or rec.get("cold"))  # from DRAM: its own case
    return json.dumps(rec.get("shape") or {}, sort_keys=True), rec.get("dtype"), rec.get("threads"), cold


def _same_params(a: dict, b: dict) -> bool:
    """The parameters both records carry agree (layout, n_ops, eps, ...); a tuning knob only one
    rung has (softmax's ``block``, ``stream``) and ``reps`` do not make another case."""
    pa, pb = a.get("params") or {}, b.get("params") or {}
    return all(pa[k] == pb[k] for k in pa.keys() & pb.keys() if k != "reps")


def rate(rec: dict) -> tuple[float | None, str]:
    """The figure a record is judged by: (value, unit); higher is better except for 'ns'. A pointer
    chase is judged by its ns per load, a tiny-op chain by its ns per chain (latency cases)."""
    if rec.get("family") == "chase" and rec.get("time_s"):
        from .families.chase import ns_per_hop

        return ns_per_hop(rec), "ns"
    if rec.get("family") in ("latency", "launch") and rec.get("ns_per_launch"):
        return rec["ns_per_launch"]["median"], "ns"
    if rec.get("family") == "qconv" and (rec.get("gflops") or {}).get("median"):  # integer ops
        return rec["gflops"]["median"], "GOPS"
    if rec.get("family") == "qgemm":  # integer ops as GOPS, a weight-only GEMV by the bytes it reads
        from .families.qgemm import rate_of

        return rate_of(rec)
    if rec.get("family") == "lowprec" and rec.get("gflops"):  # a unit's peak: INT8 units count GOPS
        from .cpu.machine import LOWPREC_UNIT

        unit = LOWPREC_UNIT.get(_unit(rec) or rec["variant"].rsplit(".", 1)[-1], "GFLOP/s")
        return rec["gflops"]["median"], unit
    if rec.get("group") == "tiny_chain" and rec.get("time_s"):
        return rec["time_s"]["median"] / max(int(rec.get("reps") or 1), 1) * 1e9, "ns"
    if rec.get("gflops") and rec["gflops"].get("median"):
        return rec["gflops"]["median"], "GFLOP/s"
    if rec.get("gbps") and rec["gbps"].get("median"):
        return rec["gbps"]["median"], "GB/s"
    if rec.get("ns_per_launch"):
        return rec["ns_per_launch"]["median"], "ns"
    return None, ""


def add_pct_of_library(records: list[dict]) -> list[dict]:
    """Set ``pct_of_library`` on every ok record whose variant 0 ran the same case."""
    ok = [r for r in records if r.get("status") == "ok"]
    library: dict = {}
    for r in ok:
        if r.get("library"):
            library.setdefault((_group(r), _case_key(r)), []).append(r)
    for r in ok:
        group = _group(r)
        cands = library.get((group, _case_key(r)), [])
        if not group[1]:  # a rung that declares no op (gemm 01-03) computes its family library's op
            cands = [b for (g, k), bs in library.items() if g[0] == group[0] and k == _case_key(r) for b in bs]
            if len({_group(b)[1] for b in cands}) > 1:  # several ops in the family: ambiguous, none
                cands = []
        lib = next((b for b in cands if _same_params(r, b)), None)
        value, unit = rate(r)
        base, _ = rate(lib) if lib else (None, "")
        if value and base:
            r["pct_of_library"] = 100 * (base / value if unit == "ns" else value / base)
    return add_pct_of_unit_peak(records)


def _unit(rec: dict) -> str | None:
    """The unit a record ran on: its case's meta, which a record carries at its top level."""
    return rec.get("unit") or (rec.get("meta") or {}).get("unit")


def add_pct_of_unit_peak(records: list[dict]) -> list[dict]:
    """Set ``pct_of_unit_peak`` on every ok rung whose unit's peak ran at its thread count, against
    the faster of the peak's passes; where the passes (before and after the rungs) differ by more
    than unit_peak.PEAK_DRIFT, the unit was shared meanwhile: each such rung is flagged noisy."""
    from .families.unit_peak import PEAK_DRIFT

    ok = [r for r in records if r.get("status") == "ok"]
    passes: dict = {}
    for r in ok:
        if r.get("family") == "lowprec" and rate(r)[0]:
            passes.setdefault((_unit(r), r.get("threads")), []).append(rate(r)[0])
    for r in ok:
        unit = _unit(r)
        seen = passes.get((unit, r.get("threads"))) if unit and r.get("family") != "lowprec" else None
        value, _ = rate(r)
        if not (value and seen):
            continue
        r["pct_of_unit_peak"] = 100 * value / max(seen)
        if max(seen) > (1 + PEAK_DRIFT) * min(seen):
            why = (
                f"the {unit} peak moved {100 * (max(seen) / min(seen) - 1):.0f}% between its passes before and "
                f"after the rungs ({', '.join(f'{p:.4g}' for p in seen)}): the unit was shared meanwhile"
            )
            if why not in r.setdefault("noise_reasons", []):
                r["noise_reasons"].append(why)
            r["noisy"] = True
    return records


def has_unit_peaks(records: list[dict]) -> bool:
    """Whether a table of these records needs the "% of unit peak" column."""
    return any(r.get("pct_of_unit_peak") is not None for r in records)


def table(records: list[dict]) -> list[tuple]:
    """Rows (variant, case, threads, figure, unit, % of library, % of unit peak, status) in run order; the case
    label without the variant's name, which the labels repeat at their start or end. The thread
    count tells apart the rows of a rung run at 1 thread and at all cores."""
    rows = []
    for r in records:
        value, unit = rate(r)
        pct = r.get("pct_of_library")
        label = (r.get("label") or r["variant"]).removeprefix(r["variant"]).removesuffix(r["variant"]).strip() or "-"
        if r.get("status") != "ok":
            rows.append(
                (r["variant"], label, r.get("threads"), None, "", None, None, f"failed: {r.get('error', '')[:80]}")
            )
        else:
            status = "noisy" if r.get("noisy") else "ok"
            rows.append((r["variant"], label, r.get("threads"), value, unit, pct, r.get("pct_of_unit_peak"), status))
    return rows


def describe_size(rec: dict) -> str:
    return fmt_bytes(rec.get("working_set_bytes") or 0)
