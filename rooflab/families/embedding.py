"""Family `embedding`: the gather of token (and position, segment) embeddings at a model's input.
Variant 0 is the framework path: take() of each table, summed (numpy on the CPU, cupy on the GPU).

Napkin math: BERT-base at 128 tokens gathers 128 rows of 768 float32 (393 KB) per table: 0 FLOPs,
pure data movement; its time is dominated by dispatch (1 + 2 per extra table calls).
"""

from __future__ import annotations

import numpy as np

from ..registry import Variant, register
from ..work import Work
from ._xp import XP_NAME, rand, repeat, xp_for


def _inputs(device):
    def inputs(shape, dtype=np.float32, seed=0, threads=None):
        xp = xp_for(device)
        rng = xp.random.default_rng(seed)
        T, d, V = shape["tokens"], shape["dim"], shape["vocab"]
        extra = shape.get("tables", 1) - 1
        tables = [rand(xp, rng, (V, d), dtype)] + [rand(xp, rng, (max(T, 2), d), dtype) for _ in range(extra)]
        ids = [rng.integers(0, V, T)] + [xp.arange(T) for _ in range(extra)]
        y = xp.empty((T, d), dtype=dtype)
        return (y, xp.empty_like(y), *tables, *ids)

    return inputs


def _split(arrays):
    y, tmp, *rest = arrays
    n = len(rest) // 2
    return y, tmp, rest[:n], rest[n:]


def _gather(*arrays):
    y, tmp, tables, ids = _split(arrays)
    xp = xp_for("cuda" if type(y).__module__.startswith("cupy") else "cpu")
    xp.take(tables[0], ids[0], axis=0, out=y)
    for tab, i in zip(tables[1:], ids[1:]):
        xp.take(tab, i, axis=0, out=tmp)
        xp.add(y, tmp, out=y)
    return y


def _reference(*arrays, **_):
    y, tmp, tables, ids = _split(arrays)
    return sum(t.astype(np.float64)[i] for t, i in zip(tables, ids))


def _work(*arrays, reps=1, **_):
    y, tmp, tables, ids = _split(arrays)
    moved = len(tables) * y.nbytes + sum(i.nbytes for i in ids)
    return Work(bytes_read=moved * reps, bytes_written=y.nbytes * reps, launches=(2 * len(tables) - 1) * int(reps))


for device in ("cpu", "cuda"):
    lib = XP_NAME[device]
    register(
        Variant(
            name=f"{device}.embedding.00-{lib}-take",
            family="embedding",
            device=device,
            number=0,
            op="embedding",
            description=f"{lib}.take of each table (+ add per extra table)",
            kernel=repeat(_gather),
            reference=_reference,
            work=_work,
            inputs=_inputs(device),
            result_dtype=lambda *arrays, **_: arrays[0].dtype,
            dtypes=("float32", "float64"),
        )
    )
