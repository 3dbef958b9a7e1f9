"""Family `intensity`: the GPU intensity sweep (FP64, nfma dependent FMAs per element over a
>= 8x-L2 array: 1/8 to 256 FLOP/byte). The CPU sweep runs the `fma` family's ERT kernel on one slice
of a DRAM-sized array per call (rooflab/suites/ceilings_cpu.py).
"""

from __future__ import annotations

import numpy as np

from ..cuda import knobs as kn
from ..cuda import loader
from ..registry import Variant, register
from ..work import Work

# ---- intensity sweep ---------------------------------------------------------------------------


def _coefficients(nfma, reps, alpha, beta):
    """x <- alpha x + beta applied m = nfma x reps times. By default alpha^m = 1/2 and the fixed
    point is 0.25, so the result x0/2 + 0.125 depends on every input value and on the FMA count (a
    fixed point reached after the first sweep point would let a kernel doing no FMAs pass)."""
    if alpha is None:
        alpha = 0.5 ** (1.0 / (int(nfma) * int(reps)))
        beta = 0.25 * (1.0 - alpha)
    return alpha, beta


def _intensity(a, reps=1, threads=None, nfma=1, alpha=None, beta=None):
    alpha, beta = _coefficients(nfma, reps, alpha, beta)
    fn = loader.kernel("intensity.cu", "intensity_f64", kn.INTENSITY_KNOBS)
    for _ in range(int(reps)):
        loader.launch(
            fn,
            kn.grid("intensity_f64"),
            kn.BLOCK,
            (a, np.int64(a.size), np.int32(nfma), np.float64(alpha), np.float64(beta)),
            "intensity_f64",
        )
    return a


def _intensity_reference(a, reps=1, nfma=1, alpha=None, beta=None, **_):
    alpha, beta = _coefficients(nfma, reps, alpha, beta)
    m = nfma * int(reps)
    am = alpha**m
    return a.astype(kn.cp().float64) * am + beta * (1 - am) / (1 - alpha)


register(
    Variant(
        name="cuda.intensity.f64",
        family="intensity",
        device="cuda",
        description="nfma dependent FMAs per element, fp64",
        kernel=_intensity,
        reference=_intensity_reference,
        work=lambda a, reps=1, nfma=1, **_: Work(
            flops=2.0 * nfma * a.size * reps, bytes_read=a.nbytes * reps, bytes_written=a.nbytes * reps
        ),
        inputs=lambda n, dtype=None, seed=0, **_: (
            kn.cp().random.default_rng(seed).random(n, dtype=kn.cp().float64) + 0.5,
        ),
        defaults={"nfma": 1},
    )
)
