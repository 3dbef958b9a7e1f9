"""Family `pool`: max pooling over a window and global average pooling, the model ops of ResNet's
stem and head. Variant 0 is the framework path (numpy on the CPU, cupy on the GPU): one maximum per
tap of the window over strided views (what frameworks' CPU paths do), one mean over H and W.

Napkin math: maxpool 3x3/2 on 64x112x112 (ResNet stem, batch 1) reads 3.2 MB and writes 0.8 MB;
9 passes over strided views make it memory-bound at several times the minimum traffic.
"""

from __future__ import annotations

import numpy as np

from ..registry import Variant, register
from ..work import Work
from ._xp import XP_NAME, rand, repeat, xp_for


def _windows(xp, padded, k, st, P, Q):
    sN, sC, sH, sW = padded.strides
    return xp.lib.stride_tricks.as_strided(
        padded, shape=padded.shape[:2] + (P, Q, k, k), strides=(sN, sC, sH * st, sW * st, sH, sW)
    )


def _maxpool_inputs(device):
    def inputs(shape, dtype=np.float32, seed=0, threads=None):
        xp = xp_for(device)
        s = shape
        x = rand(xp, xp.random.default_rng(seed), (s["N"], s["C"], s["H"], s["W"]), dtype)
        p, k, st = s.get("pad", 0), s["kernel"], s["stride"]
        xpad = xp.pad(x, ((0, 0), (0, 0), (p, p), (p, p)), constant_values=-np.inf)
        P, Q = (s["H"] + 2 * p - k) // st + 1, (s["W"] + 2 * p - k) // st + 1
        y = xp.empty((s["N"], s["C"], P, Q), dtype=dtype)
        return xpad, y

    return inputs


def _maxpool(xpad, y, kernel=3, stride=2):
    P, Q = y.shape[2:]
    xp = xp_for("cuda" if type(y).__module__.startswith("cupy") else "cpu")
    taps = [
        xpad[:, :, i : i + stride * (P - 1) + 1 : stride, j : j + stride * (Q - 1) + 1 : stride]
        for i in range(kernel)
        for j in range(kernel)
    ]
    xp.copyto(y, taps[0])
    for t in taps[1:]:
        xp.maximum(y, t, out=y)
    return y


def _maxpool_reference(xpad, y, kernel=3, stride=2, **_):
    xp = xp_for("cuda" if type(y).__module__.startswith("cupy") else "cpu")
    P, Q = y.shape[2:]
    return _windows(xp, xpad.astype(np.float64), kernel, stride, P, Q).max(axis=(4, 5))


def _avgpool_inputs(device):
    def inputs(shape, dtype=np.float32, seed=0, threads=None):
        xp = xp_for(device)
        s = shape
        x = rand(xp, xp.random.default_rng(seed), (s["N"], s["C"], s["H"], s["W"]), dtype)
        return x, xp.empty((s["N"], s["C"]), dtype=dtype)

    return inputs


def _avgpool(x, y):
    xp = xp_for("cuda" if type(y).__module__.startswith("cupy") else "cpu")
    return xp.mean(x, axis=(2, 3), out=y)


for device in ("cpu", "cuda"):
    lib = XP_NAME[device]
    register(
        Variant(
            name=f"{device}.pool.00-{lib}-maxpool",
            family="pool",
            device=device,
            number=0,
            op="maxpool",
            description=f"{lib}: one maximum per window tap over strided views",
            kernel=repeat(_maxpool),
            reference=_maxpool_reference,
            work=lambda xpad, y, kernel=3, reps=1, **_: Work(
                flops=y.size * kernel * kernel * reps,
                bytes_read=xpad.nbytes * reps,
                bytes_written=y.nbytes * reps,
                launches=kernel * kernel * int(reps),
            ),
            inputs=_maxpool_inputs(device),
            defaults={"kernel": 3, "stride": 2},
            dtypes=("float32", "float64"),
        )
    )
    register(
        Variant(
            name=f"{device}.pool.00-{lib}-avgpool",
            family="pool",
            device=device,
            number=0,
            op="avgpool",
            description=f"{lib}.mean over H and W",
            kernel=repeat(_avgpool),
            reference=lambda x, y, **_: x.astype(np.float64).mean(axis=(2, 3)),
            work=lambda x, y, reps=1, **_: Work(
                flops=x.size * reps, bytes_read=x.nbytes * reps, bytes_written=y.nbytes * reps, launches=int(reps)
            ),
            inputs=_avgpool_inputs(device),
            dtypes=("float32", "float64"),
            tolerance="reduction",
        )
    )
