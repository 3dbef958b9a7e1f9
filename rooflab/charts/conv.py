"""The conv suite's own charts (issue 13's three plots), from a result file's records only.

  <stem>.layers     time per call of each ResNet-50 layer in the run, one bar per algorithm (im2col,
                    direct, Winograd, FFT: its fastest verified variant on that case), log time,
                    each bar annotated with its speed as % of im2col + BLAS (cpu.conv.00) on the same
                    case, dtype and thread count (>100 % = faster); one panel per (threads, batch)
  <stem>.crossover  the kernel-size sweep (C = K = 32, 64x64, R = 3..15): time per call and nominal
                    ("effective") GFLOP/s per algorithm against R, with the crossovers marked where
                    FFT overtakes im2col and the best direct variant (log-time interpolation between
                    the two R values that bracket the change of sign)
  <stem>.conv-roofline  every ok case twice on this machine's measured roofline: the effective
                    point (nominal FLOPs 2*N*K*P*Q*C/g*R*S over the compulsory bytes, filled) and the
                    real one (the arithmetic the algorithm does: Winograd's multiplies + transforms,
                    FFT's transforms + complex products, direct's junk columns, hollow), joined; both
                    share the bytes and the time, so the segment runs along a diagonal. Roofs: the
                    FP32 peak and every memory level's fastest kernel at the panel's thread count.

Why not charts.family.chart: rate against problem size mixes algorithms whose "FLOPs" differ (a
Winograd GFLOP/s is nominal work at real speed); these charts keep the algorithm as the series.

"Best verified variant": records with status ok and verified; a failed or unverified record (a
wrong kernel however fast) is never a bar or a point. Crossovers use the same run's records, so the
ratios hold on a shared machine; absolute times across runs do not.

Written by `rooflab run --suite conv` (charts.family.chart calls charts() for the conv suite) and
`rooflab plot RESULT.json` on a conv result. Tests: tests/test_conv_charts.py (synthetic result).
"""

from __future__ import annotations

import math
from pathlib import Path

ALGORITHMS = ("im2col", "direct", "winograd", "fft")
COLORS = {"im2col": "0.25", "direct": "tab:blue", "winograd": "tab:green", "fft": "tab:orange"}
LABELS = {"im2col": "im2col + GEMM", "direct": "direct", "winograd": "Winograd", "fft": "FFT"}
LIBRARY_RUNG = 0


def algorithm_of(rec: dict) -> str | None:
    """im2col / direct / winograd / fft from the record's declared work (else its variant name)."""
    a = (rec.get("work") or {}).get("algorithm") or ""
    if not a:
        tech = rec.get("variant", "").rsplit(".", 1)[-1]
        a = next((k for k in ALGORITHMS if k in tech), "")
    for k in ALGORITHMS:
        if a.startswith(k):
            return k
    return None


def seconds(rec: dict) -> float | None:
    """Median seconds per call (the record's time covers ``reps`` calls)."""
    t = (rec.get("time_s") or {}).get("median")
    return t / max(rec.get("reps") or 1, 1) if t else None


def _usable(rec: dict) -> bool:
    return rec.get("status") == "ok" and bool(rec.get("verified")) and seconds(rec) is not None


def _case(rec: dict) -> tuple:
    return rec.get("layer") or rec.get("label", "").split(" | ")[0], rec.get("threads"), rec.get("dtype")


def best_per_algorithm(records: list[dict], suite: str) -> dict:
    """{(layer, threads, dtype): {algorithm: record}} for one of the suite's shape sets (meta
    ``suite``: resnet50, depthwise, sweep), the fastest usable record per algorithm; the library
    record (rung 0) of each case as "library"; in run order."""
    out: dict = {}
    for r in records:
        if r.get("suite") != suite or not _usable(r):
            continue
        alg = algorithm_of(r)
        if alg is None:
            continue
        row = out.setdefault(_case(r), {})
        if alg not in row or seconds(r) < seconds(row[alg]):
            row[alg] = r
        if r.get("number") == LIBRARY_RUNG:
            row["library"] = r
    return out


def pct_of_library(row: dict, alg: str) -> float | None:
    """Speed of the algorithm's best variant as % of im2col + BLAS on the same case (>100 faster)."""
    lib, r = row.get("library"), row.get(alg)
    if not lib or not r:
        return None
    return 100.0 * seconds(lib) / seconds(r)


def crossovers(curve_a: list[tuple], curve_b: list[tuple]) -> list[dict]:
    """Where a's time per call crosses b's: curves are [(R, seconds)]; at the R values both have,
    between consecutive ones whose log(t_a / t_b) changes sign, the crossing R by linear
    interpolation of that log ratio. Returns [{"R": float, "faster_after": "a" | "b"}]."""
    tb = dict(curve_b)
    common = sorted((R, math.log(t / tb[R])) for R, t in curve_a if R in tb and t > 0 and tb[R] > 0)
    out = []
    for (r0, d0), (r1, d1) in zip(common, common[1:]):
        if d0 == 0 or (d0 > 0) == (d1 > 0) or d1 == 0:
            if d1 == 0 and d0 != 0:
                out.append({"R": float(r1), "faster_after": "a" if d0 > 0 else "b"})
            continue
        out.append({"R": r0 + (r1 - r0) * d0 / (d0 - d1), "faster_after": "a" if d0 > 0 else "b"})
    return out


def sweep_curves(result: dict) -> dict:
    """{(threads, dtype): {algorithm: [(R, seconds, record)]}} of the kernel-size sweep, by R."""
    out: dict = {}
    for (_layer, threads, dtype), row in best_per_algorithm(result.get("records", []), "sweep").items():
        for alg in ALGORITHMS:
            r = row.get(alg)
            if r:
                R = int((r.get("shape") or {}).get("R", 0))
                out.setdefault((threads, dtype), {}).setdefault(alg, []).append((R, seconds(r), r))
    for curves in out.values():
        for pts in curves.values():
            pts.sort(key=lambda p: p[0])
    return out


def sweep_crossovers(curves: dict) -> list[dict]:
    """The crossovers the issue asks about: FFT against im2col and against the best direct variant."""
    out = []
    fft = [(R, t) for R, t, _ in curves.get("fft", [])]
    for other in ("im2col", "direct"):
        pts = [(R, t) for R, t, _ in curves.get(other, [])]
        for c in crossovers(fft, pts):
            out.append(
                {"R": c["R"], "a": "fft", "b": other, "faster_after": "fft" if c["faster_after"] == "a" else other}
            )
    return out


# ---- figures -------------------------------------------------------------------------------------


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _short(layer: str) -> str:
    """'resnet50-b8 layer1.0.conv2' -> 'layer1.0.conv2'."""
    return layer.split(" ", 1)[-1] if layer else "?"


def _shape_note(rec: dict) -> str:
    s = rec.get("shape") or {}
    st = s.get("stride_h", 1)
    return f"{s.get('C')}->{s.get('K')} {s.get('R')}x{s.get('S')}{'/' + str(st) if st != 1 else ''} @{s.get('H')}"


def layers_figure(result: dict):
    """Grouped bars per ResNet-50 layer; None when the result has no ResNet-50 case."""
    rows = best_per_algorithm(result.get("records", []), "resnet50")
    if not rows:
        return None
    plt = _plt()
    panels: dict = {}
    for key, row in rows.items():
        any_rec = next(row[a] for a in ALGORITHMS + ("library",) if a in row)
        batch = (any_rec.get("shape") or {}).get("N")
        panels.setdefault((key[1], batch, key[2]), []).append((key[0], row, any_rec))
    fig, axes = plt.subplots(
        len(panels),
        1,
        figsize=(max(8, 0.75 * max(len(v) for v in panels.values()) + 2), 4.2 * len(panels)),
        squeeze=False,
    )
    width = 0.8 / len(ALGORITHMS)
    for ax, ((threads, batch, dtype), layers) in zip(
        axes[:, 0], sorted(panels.items(), key=lambda kv: (kv[0][0] or 0, kv[0][1] or 0, kv[0][2] or ""))
    ):
        for j, alg in enumerate(ALGORITHMS):
            xs, ts, notes = [], [], []
            for i, (_layer, row, _rec) in enumerate(layers):
                if alg in row:
                    xs.append(i + (j - (len(ALGORITHMS) - 1) / 2) * width)
                    ts.append(seconds(row[alg]))
                    pct = pct_of_library(row, alg)
                    rung = row[alg].get("variant", "").rsplit(".", 1)[-1][:2]
                    notes.append(f"{pct:.0f}% ({rung})" if pct is not None else f"({rung})")
            if not xs:
                continue
            bars = ax.bar(xs, ts, width, color=COLORS[alg], label=LABELS[alg], gid=f"bars-{alg}")
            for b, note in zip(bars, notes):
                ax.annotate(note, (b.get_x() + b.get_width() / 2, b.get_height()), xytext=(0, 2),
                            textcoords="offset points", ha="center", va="bottom", fontsize=5.5, rotation=90,
                            gid=f"pct-{alg}")  # fmt: skip
        ax.set_yscale("log")
        ax.set_xticks(range(len(layers)))
        ax.set_xticklabels([f"{_short(layer)}\n{_shape_note(rec)}" for layer, _row, rec in layers], rotation=60,
                           ha="right", fontsize=6.5)  # fmt: skip
        ax.set_ylabel("time per call (s, log)")
        ax.set_title(f"ResNet-50 convolutions, batch {batch}, {threads} thread(s), {dtype}: best verified variant "
                     "per algorithm\nlabel = its speed as % of im2col + BLAS on the same case (its rung)", fontsize=8.5)  # fmt: skip
        ax.grid(True, axis="y", which="both", alpha=0.3)
        ax.legend(fontsize=7, ncols=len(ALGORITHMS), loc="upper right")
        lo, hi = ax.get_ylim()
        ax.set_ylim(lo, hi * 4)  # room for the vertical labels
    fig.suptitle(_title(result, "time per algorithm per layer"), fontsize=11)
    fig.tight_layout()
    return fig


def crossover_figure(result: dict):
    """Time and effective GFLOP/s against R per algorithm, crossovers marked; None without a sweep."""
    sweeps = sweep_curves(result)
    if not sweeps:
        return None
    plt = _plt()
    fig, axes = plt.subplots(len(sweeps), 2, figsize=(12, 4.4 * len(sweeps)), squeeze=False)
    for (ax_t, ax_g), ((threads, dtype), curves) in zip(
        axes, sorted(sweeps.items(), key=lambda kv: (kv[0][0] or 0, kv[0][1] or ""))
    ):
        for alg in ALGORITHMS:
            pts = curves.get(alg)
            if not pts:
                continue
            Rs = [p[0] for p in pts]
            ax_t.plot(Rs, [p[1] for p in pts], "o-", color=COLORS[alg], label=LABELS[alg], gid=f"time-{alg}")
            gf = [p[2]["work"]["flops"] / max(p[2].get("reps") or 1, 1) / p[1] / 1e9 for p in pts]
            ax_g.plot(Rs, gf, "o-", color=COLORS[alg], label=LABELS[alg], gid=f"gflops-{alg}")
        fft = dict((R, t) for R, t, _ in curves.get("fft", []))
        for c in sweep_crossovers(curves):
            # the crossing time: interpolate FFT's log time at the crossing R
            Rs = sorted(fft)
            r0 = max((R for R in Rs if R <= c["R"]), default=Rs[0])
            r1 = min((R for R in Rs if R >= c["R"]), default=Rs[-1])
            f = 0.0 if r1 == r0 else (c["R"] - r0) / (r1 - r0)
            t = math.exp(math.log(fft[r0]) + f * (math.log(fft[r1]) - math.log(fft[r0])))
            ax_t.plot([c["R"]], [t], marker="*", ms=13, color="crimson", ls="none", gid="crossover")
            ax_t.axvline(c["R"], color="crimson", lw=0.7, ls=":")
            who = LABELS[c["faster_after"]]
            ax_t.annotate(f"R={c['R']:.1f}: FFT vs {LABELS[c['b']]}\n({who} faster above)", (c["R"], t),
                          xytext=(6, 8), textcoords="offset points", fontsize=7, color="crimson")  # fmt: skip
        for ax in (ax_t, ax_g):
            ax.set_xlabel("filter size R = S (C = K = 32, same padding)")
            ax.set_yscale("log")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=7)
        ax_t.set_ylabel("time per call (s, log; lower is better)")
        ax_g.set_ylabel("effective GFLOP/s (nominal 2*N*K*P*Q*C*R*S / time)")
        ax_t.set_title(f"kernel-size sweep, {threads} thread(s), {dtype}: crossovers marked", fontsize=9)
        ax_g.set_title("effective rate: what each algorithm delivers in direct-conv FLOPs", fontsize=9)
    fig.suptitle(_title(result, "crossover versus kernel size"), fontsize=11)
    fig.tight_layout()
    return fig


def roof_lines(ceilings: dict | None, threads: int, dtype: str = "float32") -> tuple[dict | None, list[dict]]:
    """(the dtype's compute peak, the fastest memory roof per level) at ``threads`` from a ceilings
    result; (None, []) without one."""
    if not ceilings:
        return None, []
    from ..roofline import Roofline

    rf = Roofline(ceilings)
    return rf.peak(dtype, threads), rf.memory_roofs(threads)


def roofline_points(rec: dict) -> tuple[tuple, tuple] | None:
    """((I_nominal, GFLOP/s effective), (I_real, GFLOP/s real)) of one usable record."""
    w = rec.get("work") or {}
    t = (rec.get("time_s") or {}).get("median")
    if not _usable(rec) or not w.get("flops") or not w.get("bytes") or not t:
        return None
    real = w.get("algorithm_flops") or w["flops"]
    return (w["flops"] / w["bytes"], w["flops"] / t / 1e9), (real / w["bytes"], real / t / 1e9)


def roofline_figure(result: dict, ceilings: dict | None = None):
    """One panel per thread count: every usable case's effective and real point; None if none."""
    import numpy as np

    recs = [r for r in result.get("records", []) if roofline_points(r) and algorithm_of(r)]
    if not recs:
        return None
    plt = _plt()
    threads = sorted({r.get("threads") or 1 for r in recs})
    fig, axes = plt.subplots(1, len(threads), figsize=(7 * len(threads), 5.4), squeeze=False)
    for ax, th in zip(axes[0], threads):
        mine = [r for r in recs if (r.get("threads") or 1) == th]
        pts = [roofline_points(r) for r in mine]
        xs = [p[i][0] for p in pts for i in (0, 1)]
        dtypes = sorted({r.get("dtype") or "float32" for r in mine})
        peak, roofs = roof_lines(ceilings, th, "float32" if "float32" in dtypes else dtypes[0])
        ridges = [peak["value"] / c["value"] for c in roofs if peak and c["value"] > 0]
        lo, hi = min(xs + ridges) / 3, max(xs + ridges) * 3  # every ridge in view
        grid = np.geomspace(lo, hi, 200)
        if peak:
            ax.axhline(peak["value"], color="0.3", lw=0.9, gid="peak")
            ax.annotate(
                f"{peak['name']} {peak['value']:.0f}", (lo, peak["value"]), fontsize=6, va="bottom", color="0.3"
            )
        for c in roofs:
            top = grid * c["value"]
            keep = top <= (peak["value"] if peak else np.inf)
            ax.plot(grid[keep], top[keep], color="0.45", lw=0.8, ls="--", gid=f"roof-{c['level']}")
            if keep.any():
                ax.annotate(f"{c['level']} {c.get('kernel', '')} {c['value']:.0f} GB/s", (grid[0], top[0]), fontsize=6,
                            color="0.35", rotation=25, va="bottom")  # fmt: skip
        for alg in ALGORITHMS:
            ps = [p for r, p in zip(mine, pts) if algorithm_of(r) == alg]
            if not ps:
                continue
            ax.plot([p[0][0] for p in ps], [p[0][1] for p in ps], "o", color=COLORS[alg], ms=4.5, ls="none",
                    label=f"{LABELS[alg]} effective (nominal FLOPs)", gid=f"effective-{alg}")  # fmt: skip
            ax.plot([p[1][0] for p in ps], [p[1][1] for p in ps], "o", mfc="none", color=COLORS[alg], ms=5,
                    ls="none", label=f"{LABELS[alg]} real (algorithm's FLOPs)", gid=f"real-{alg}")  # fmt: skip
            for e, rl in ps:
                if e != rl:
                    ax.plot([e[0], rl[0]], [e[1], rl[1]], color=COLORS[alg], lw=0.5, alpha=0.6)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("arithmetic intensity (FLOP per compulsory byte: x, w, y once)")
        ax.set_ylabel("GFLOP/s")
        where = "on the measured roofline" if ceilings else "no ceilings result of this machine: no roofs"
        ax.set_title(f"{th} thread(s): filled = effective, hollow = real ({where})", fontsize=8.5)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=6, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncols=2)
    fig.suptitle(_title(result, "conv cases on the roofline"), fontsize=11)
    fig.tight_layout()
    return fig


def _title(result: dict, what: str) -> str:
    m = result.get("machine", {})
    where = m.get("gpu", {}).get("name") if result.get("device") == "cuda" else m.get("cpu", {}).get("model")
    return f"rooflab conv on {where or m.get('id', '?')}: {what}"


def charts(result: dict, out, ceilings: dict | None = None) -> list[Path]:
    """Write the three charts beside ``out`` (a path without suffix); PNG and SVG each."""
    plt = _plt()
    out = Path(out)
    files = []
    for name, fig in (
        ("layers", layers_figure(result)),
        ("crossover", crossover_figure(result)),
        ("conv-roofline", roofline_figure(result, ceilings)),
    ):
        if fig is None:
            continue
        for ext in ("png", "svg"):
            path = out.parent / f"{out.name}.{name}.{ext}"
            fig.savefig(path, dpi=130)
            files.append(path)
        plt.close(fig)
    return files
