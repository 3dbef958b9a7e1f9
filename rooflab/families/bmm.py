"""Family `bmm`: batched matrix products with a separate right operand per batch entry (attention's
Q K^T and P V): C[b] = A[b] @ B[b]. Variant 0 is the framework path, one matmul on 3-D arrays
(numpy/BLAS looping over the batch on the CPU, cupy/cuBLAS batched on the GPU).

Napkin math: BERT-base attention scores at seq 128 are 12 heads x 128 x 128 x 64: 25 MFLOP over
1.2 MB, ~20 FLOP/B; GPT-2 decode's are 12 x 1 x 1024 x 64: a batched GEMV, memory-bound.
Unlike a linear layer's batch (shared weights, folded into M by the gemm family), every batch
entry here reads its own B, which is what the op's minimum bytes count.
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
        b, M, N, K = shape.get("batch", 1), shape["M"], shape["N"], shape["K"]
        a = rand(xp, rng, (b, M, K), dtype)
        w = rand(xp, rng, (b, K, N), dtype, 1 / np.sqrt(max(K, 1)))
        return a, w, xp.empty((b, M, N), dtype=dtype)

    return inputs


def _bmm(a, w, c):
    xp = xp_for("cuda" if type(c).__module__.startswith("cupy") else "cpu")
    return xp.matmul(a, w, out=c)


def _work(a, w, c, reps=1, **_):
    b, M, K = a.shape
    N = w.shape[2]
    return Work(
        flops=2.0 * b * M * N * K * reps,
        bytes_read=(a.nbytes + w.nbytes) * reps,
        bytes_written=c.nbytes * reps,
        launches=int(reps),
    )


for device in ("cpu", "cuda"):
    lib = XP_NAME[device]
    register(
        Variant(
            name=f"{device}.bmm.00-{lib}-matmul",
            family="bmm",
            device=device,
            number=0,
            op="batched_gemm",
            description=f"{lib}.matmul on (batch, M, K) @ (batch, K, N) ({'BLAS' if device == 'cpu' else 'cuBLAS'})",
            kernel=repeat(_bmm),
            reference=lambda a, w, c, **_: a.astype(np.float64) @ w.astype(np.float64),
            work=_work,
            inputs=_inputs(device),
            dtypes=("float32", "float64"),
            tolerance="reduction",
        )
    )
