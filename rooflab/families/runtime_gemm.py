"""Family `runtime_gemm`: a runtime's own GEMM kernel, timed op by op so a runtime check predicts that
runtime with the kernels it runs (`rooflab llm --runtime torch|onnxruntime` at float32).

Variants (no rung of a ladder; they take no model op by themselves, op None: the LLM check asks for
them by name):
  cpu.runtime_gemm.torch-linear  torch.nn.functional.linear on float32 tensors, the weight stored
                                 (N, K) as nn.Linear keeps it (made once per weight array)
  cpu.runtime_gemm.ort-matmul    onnxruntime's MatMul (+ Add of the bias) on a constant weight, one
                                 session per weight array (MLAS prepacks it at session start, as in
                                 the exported graph)
The bf16 case needs none of this: the bgemm family's variant 0 already is torch's Linear.

Why: at a 32-token prefill onnxruntime ran SmolLM-135M's weight MatMuls in 60 ms where numpy's
BLAS and rooflab's rungs, which pack B on every call, took 91 ms (+44 % on the prefill). And eager
torch ran SmolLM-135M's fp32 decode GEMVs (M = 1, through MKL's sgemm on W transposed)
in 33.4 ms of a 46 ms profiled step where numpy's BLAS and rooflab's rungs took 18.2 ms on the same
shapes (Zen 5 VM, 1 thread): predicted with the fastest kernels, torch reads 40 % slower than
predicted; the runtime's own kernel is what the check must add up.

Inputs, reference and declared work are the gemm family's (A (M, K), B (K, N), optional bias, fp32).
"""

from __future__ import annotations

import numpy as np

from ..registry import Variant, installed, register
from ..threads import resolve_threads, torch_threads
from . import gemm
from .qgemm import OrtRotation, PerWeight

FAMILY = "runtime_gemm"
TORCH_LINEAR = f"cpu.{FAMILY}.torch-linear"
ORT_MATMUL = f"cpu.{FAMILY}.ort-matmul"
# the gemm family's inputs (float32), reference and work: both variants are checked as its rungs are
_GEMM = dict(
    family=FAMILY,
    device="cpu",
    reference=gemm.reference,
    work=gemm.work,
    inputs=lambda size, dtype="float32", seed=0, threads=None: gemm.inputs(size, "float32", seed, threads),
    result_dtype=gemm.result_dtype,
    dtypes=("float32",),
)


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
    with torch_threads(resolve_threads(threads)), torch.no_grad():
        a, w = torch.from_numpy(A), _weights(B)
        b = None if bias is None else _biases(bias)
        for _ in range(int(reps)):
            c = torch.nn.functional.linear(a, w, b)
        return c.numpy()


if installed("torch"):
    register(Variant(name=TORCH_LINEAR, kernel=_torch_linear, **_GEMM,
                     description="torch.nn.functional.linear on float32, weights (N, K) as nn.Linear keeps them: eager torch's GEMM"))  # fmt: skip


def matmul_model(B: np.ndarray, bias: np.ndarray | None) -> bytes:
    """A MatMul node on the constant B (K, N) (+ an Add of the constant bias), A float32 [M, K]."""
    from onnx import TensorProto, helper, numpy_helper

    K, N = B.shape
    inits = [numpy_helper.from_array(B, "B")]
    nodes = [helper.make_node("MatMul", ["A", "B"], ["P" if bias is not None else "Y"])]
    if bias is not None:
        inits.append(numpy_helper.from_array(bias, "bias"))
        nodes.append(helper.make_node("Add", ["P", "bias"], ["Y"]))
    a = helper.make_tensor_value_info("A", TensorProto.FLOAT, ["M", K])
    y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["M", N])
    g = helper.make_graph(nodes, "runtime_gemm", [a], [y], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def _session(B, bias, threads):
    from ..ort_session import weight_session

    return weight_session(matmul_model(B, bias), threads, ORT_MATMUL)


_ort_sessions = PerWeight(_session)


def _ort_matmul(A, B, bias=None, reps=1, threads=None):
    gemm.check_operands(ORT_MATMUL, A, B, bias, dtypes=("float32",))
    s = _ort_sessions(B, bias, resolve_threads(threads))
    for _ in range(int(reps)):
        (c,) = s.run(None, {"A": A})
    return c


if installed("onnxruntime"):
    _rotate = OrtRotation(lambda B, bias=None: matmul_model(B, bias), ORT_MATMUL)
    register(Variant(name=ORT_MATMUL, kernel=_ort_matmul, rotate=_rotate, **_GEMM,
                     description="onnxruntime MatMul (+ Add of the bias) on a constant float32 weight, prepacked at session start"))  # fmt: skip
