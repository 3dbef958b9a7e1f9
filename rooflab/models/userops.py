"""User-supplied ops: the OPS.json format of `rooflab place`.

    {"ops": [
      {"kind": "gemm", "shape": {"M": 128, "N": 3072, "K": 768, "bias": true}, "dtype": "float32",
       "name": "FFN1", "count": 12},
      {"kind": "conv2d", "shape": {"N": 1, "C": 64, "H": 56, "W": 56, "K": 64, "R": 3, "S": 3,
                                   "stride": 1, "pad": 1}},
      {"kind": "softmax", "shape": {"rows": 1536, "cols": 128}},
      {"kind": "layernorm", "shape": {"rows": 128, "cols": 768}},
      {"kind": "relu", "shape": {"numel": 200704}},
      {"kind": "embedding", "shape": {"tokens": 128, "dim": 768, "vocab": 30522}}
    ]}
A bare list of ops is accepted too. kind: gemm (alias matmul, linear, gemv), batched_gemm (bmm),
conv2d, batchnorm, relu, gelu, add, softmax, layernorm, embedding, maxpool, avgpool; dtype defaults
to float32; name and count are optional. Bad ops are listed and skipped; the rest are placed.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import RooflabError
from ..workloads.ops import normalize


def parse_ops(doc) -> tuple[list[dict], list[dict]]:
    items = doc.get("ops") if isinstance(doc, dict) else doc
    if not isinstance(items, list):
        raise RooflabError(
            'OPS.json must be a list of ops or {"ops": [...]}', "see `rooflab place --help` and the README"
        )
    ok, bad = [], []
    for i, raw in enumerate(items):
        try:
            op = normalize(raw)
            op["model"] = op.get("model") or "user"
            if isinstance(raw, dict) and not raw.get("name"):
                op["name"] = f"#{i} {op['kind']}"
            ok.append(op)
        except RooflabError as e:
            name = raw.get("name") if isinstance(raw, dict) else None
            kind = raw.get("kind") if isinstance(raw, dict) else None
            bad.append({"op": str(name) if name else f"op {i} ({kind or type(raw).__name__})", "error": str(e)})
    return ok, bad


def load_ops(path) -> tuple[list[dict], list[dict]]:
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise RooflabError(f"{path} is not JSON (line {e.lineno}: {e.msg})") from None
    return parse_ops(doc)
