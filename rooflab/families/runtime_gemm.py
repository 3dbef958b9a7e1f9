"""Family `runtime_gemm`: a runtime's own GEMM kernel, timed op by op so a runtime check predicts that
runtime with the kernels it runs (`rooflab llm --runtime torch` at float32).

Variant: ``cpu.runtime_gemm.torch-linear``, torch.nn.functional.linear on float32 tensors with the
weight stored (N, K) as nn.Linear keeps it (made once per weight array), where torch is installed.
It is no rung of a ladder and takes no model op by itself (op None): the LLM check asks for it by
name. The bf16 case needs none of this: the bgemm family's variant 0 already is torch's Linear.

Why: eager torch ran SmolLM-135M's fp32 decode GEMVs (M = 1, through MKL's sgemm on W transposed)
in 33.4 ms of a 46 ms profiled step where numpy's BLAS and rooflab's rungs took 18.2 ms on the same
shapes (Zen 5 VM, 1 thread): predicted with the fastest kernels, torch reads 40 % slower than
predicted; the runtime's own kernel is what the check must add up.

Inputs, reference and declared work are the gemm family's (A (M, K), B (K, N), optional bias, fp32).
"""

from __future__ import annotations

import importlib.util

import numpy as np

from ..registry import Variant, register
from ..threads import resolve_threads
from . import gemm
from .qgemm import PerWeight

FAMILY = "runtime_gemm"
TORCH_LINEAR = f"cpu.{FAMILY}.torch-linear"


def _weight(B):
    import torch

    return torch.from_numpy(np.ascontiguousarray(B.T))


def _bias(bias):
    import torch

    return torch.from_numpy(bias)


_weights, _biases = PerWeight(_weight), PerWeight(_bias)


def _torch_linear(A, B, bias=None, reps=1, threads=None):
    import torch

    gemm.check_operands(TORCH_LINEAR, A, B, bias, dtypes=("float32",))
    before = torch.get_num_threads()
    torch.set_num_threads(resolve_threads(threads))
    try:
        a, w = torch.from_numpy(A), _weights(B)
        b = None if bias is None else _biases(bias)
        with torch.no_grad():
            for _ in range(int(reps)):
                c = torch.nn.functional.linear(a, w, b)
        return c.numpy()
    finally:
        torch.set_num_threads(before)


if importlib.util.find_spec("torch") is not None:
    register(
        Variant(
            name=TORCH_LINEAR,
            family=FAMILY,
            device="cpu",
            description="torch.nn.functional.linear on float32, weights (N, K) as nn.Linear keeps them: eager torch's GEMM",
            kernel=_torch_linear,
            reference=gemm.reference,
            work=gemm.work,
            inputs=lambda size, dtype="float32", seed=0, threads=None: gemm.inputs(size, "float32", seed, threads),
            result_dtype=gemm.result_dtype,
            dtypes=("float32",),
        )
    )
