"""What every chart shares: colours per memory level, dtype and class, the title line, the
duration format, saving a figure as PNG (150 dpi) and SVG side by side, and a figure inlined into
an HTML page as a PNG data URI (the report, the fleet page and the LLM section)."""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

LEVEL_COLORS = {
    "L1": "#1b9e77",
    "L2": "#7570b3",
    "L3": "#e7298a",
    "L4": "#a6761d",
    "DRAM": "#d95f02",
    "HBM": "#d95f02",
    "shared": "#1b9e77",
    "host": "#666666",
}
DTYPE_COLORS = {
    "float64": "#222222",
    "float32": "#377eb8",
    "float16": "#4daf4a",
    "bfloat16": "#984ea3",
    "tf32": "#ff7f00",
    "int8": "#a65628",
}
DTYPE_SHORT = {
    "float64": "FP64",
    "float32": "FP32",
    "float16": "FP16",
    "bfloat16": "BF16",
    "tf32": "TF32",
    "int8": "INT8",
}
CLASS_COLORS = {"compute-bound": "#e41a1c", "memory-bound": "#377eb8", "latency-bound": "#999999"}
MODEL_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">", "h", "p")
FLAGGED_COLOR = "#aaaaaa"  # a ceiling that cannot be true: drawn grey and dashed, never as a roof
KERNEL_STYLE = {"read": "-o", "copy": "-s", "triad": "-^", "update": "-D"}


def title(result: dict, what: str) -> str:
    m = result["machine"]
    name = m.get("gpu", {}).get("name") if result.get("device") == "cuda" else m["cpu"]["model"]
    date = (result.get("finished") or result.get("started") or "")[:10]
    status = result.get("status") or ""
    partial = f" ({status.upper()}: only what finished)" if status in ("interrupted", "failed", "running") else ""
    return f"{what}: {name} ({m['id']}), {date}{partial}"


def save(fig, path: Path) -> list[Path]:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    stem = str(path.with_suffix("")) if path.suffix in (".png", ".svg") else str(path)
    outs = [Path(stem + ".png"), Path(stem + ".svg")]
    fig.savefig(outs[0], dpi=150, bbox_inches="tight")
    fig.savefig(outs[1], bbox_inches="tight")
    plt.close(fig)
    return outs


def fmt_ns(v: float) -> str:
    """A duration given in ns, in the unit that reads best (ns, us, ms)."""
    if v < 1e3:
        return f"{v:.3g} ns"
    if v < 1e6:
        return f"{v / 1e3:.3g} us"
    return f"{v / 1e6:.3g} ms"


def inline_png(fig, alt: str, dpi: int = 110) -> str:
    """``fig`` as an <img> whose PNG is in the page itself (a report opens offline); closes it."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    plt.close(fig)
    data = base64.b64encode(buf.getvalue()).decode()
    return f'<img alt="{html.escape(str(alt))}" src="data:image/png;base64,{data}">'
