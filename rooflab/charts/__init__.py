"""Every chart rooflab draws, from result records only (read by field name, never from stdout):

roofline   the empirical roofline (ceilings, intensity sweep, placed model ops)
staircase  bandwidth and latency against working-set size
latency    the latency chart (one row per path) and the tiny-op chains
family     a kernel family's ladder: rate against problem size per rung, on the roofline
conv       the conv suite's own charts (time per layer, crossovers, both-rates roofline)
labels     the label placer every chart uses (labels never overlap)
style      colours, titles, saving as PNG + SVG
"""

from __future__ import annotations

from pathlib import Path


def all_plots(result: dict, stem: Path, ops: list[dict] | None = None, roofline_at: Path | None = None) -> list[Path]:
    """The ceilings charts of a result: roofline (at ``roofline_at`` when given, else
    STEM.roofline), bandwidth staircase (when it has a bandwidth sweep or chase records) and the
    latency chart (when it has a latency path), each as PNG and SVG."""
    from .latency import latency
    from .roofline import roofline
    from .staircase import bandwidth, chase_points

    stem = Path(stem)
    files = roofline(result, roofline_at or stem.parent / (stem.name + ".roofline"), ops=ops)
    if result.get("sweeps", {}).get("bandwidth") or chase_points(result):
        files += bandwidth(result, stem.parent / (stem.name + ".bandwidth"))
    files += latency(result, stem.parent / (stem.name + ".latency"))
    return files
