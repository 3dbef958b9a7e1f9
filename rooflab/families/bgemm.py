"""Family `bgemm`: the BF16 rungs of the GEMM ladder, C (fp32, M x N) = A (bf16, M x K) @ B (bf16, K x N),
fp32 accumulation, on the units a CPU has for it.

Variant 0 is the library, whichever is installed: torch's bf16 GEMM as an ``nn.Linear`` layer runs it
(``00-torch-bf16``: ``F.linear`` on the weights stored (N, K), made once per weight array; oneDNN,
which runs AMX where the CPU has it), else numpy's FP32 BLAS on the same
values (``00-numpy-fp32``, labelled as such: a BLAS with no bf16 path, so "% of library" then says
how the bf16 units compare with the FP32 ones). 01 = kernels/cpu/amx_gemm.py (AMX tdpbf16ps tile
products), where the CPU has AMX BF16 and Linux grants the tile state; 02 = kernels/cpu/bf16_gemm.py
(AVX-512 BF16 vdpbf16ps on a 12 x 32 register tile), where the CPU has AVX-512 BF16 (Zen 4,
Cooper Lake, Sapphire Rapids and later).

Inputs: A and B drawn as small integers in [-3, 3] times powers of two (exact in bf16), so every
product and every fp32 partial sum of K <= 2^16 terms is exact: the result is checked exactly
against the float64 product (a dropped term, a misread layout or a lost tile changes it), with the
``float32`` tolerance only as the comparison's floor. Data are bf16 bit patterns (uint16): numba and
numpy have no bfloat16 type; torch's variant views them as torch.bfloat16.

Work: 2 M N K FLOPs over 2 (M K + K N) bytes read and 4 M N written.

Napkin (1 core at 3 GHz): AMX 1024 bf16 FLOP/cycle = 3.1 TFLOP/s (Intel's figure; measured
here nearer 0.75 of it, ``rooflab run`` prints this machine's), the 2048^3 product 17.2 GFLOP in
5.6 ms at that rate; FP32 FMA zmm 64 FLOP/cycle = 192 GFLOP/s, 90 ms; vdpbf16ps zmm 64 FLOP/cycle
on Zen 4 (twice its FP32 rate), 32 on Intel (half).

Run: ``rooflab run --suite bgemm``.
"""

from __future__ import annotations

import numpy as np

from ..errors import RooflabError
from ..kernels.cpu import amx as AMX
from ..kernels.cpu import amx_gemm as AG
from ..kernels.cpu import bf16_gemm as BG
from ..kernels.cpu.bf16 import from_bf16, to_bf16
from ..memory import aligned_array
from ..registry import Case, Variant, installed, register
from ..threads import resolve_threads, torch_threads, use_threads
from ..work import Work
from .qgemm import PerWeight  # packed once per weight array, as the INT8 rungs are
from .unit_peak import around

FAMILY = "bgemm"


def _torch():
    try:
        import torch
    except ImportError:
        return None
    return torch


def inputs(size, dtype=None, seed: int = 0, **_) -> tuple:
    """(A, B) as bf16 bit patterns; with a model op's ``bias`` (a linear layer's, an LLM's q/k/v),
    also the bias, fp32 (as torch keeps a bf16 Linear's bias in bf16: values exact in both)."""
    s = dict(size) if isinstance(size, dict) else {"M": int(size), "N": int(size), "K": int(size)}
    rng = np.random.default_rng(seed)

    def values(shape):  # small integers x 2^e: exact in bf16, products and sums exact in fp32
        return (rng.integers(-3, 4, shape) * np.exp2(rng.integers(-2, 3, shape))).astype(np.float32)

    out = (to_bf16(values((s["M"], s["K"]))), to_bf16(values((s["K"], s["N"]))))
    return (*out, values((s["N"],))) if s.get("bias") else out


def reference(A, B, bias=None, **_) -> np.ndarray:
    C = from_bf16(A).astype(np.float64) @ from_bf16(B).astype(np.float64)
    return C if bias is None else C + bias


def work(A, B, bias=None, reps=1, **_) -> Work:
    M, K = A.shape
    N = B.shape[1]
    read = 2 * (M * K + K * N) + (4 * N if bias is not None else 0)
    return Work(flops=2.0 * M * N * K + (M * N if bias is not None else 0), bytes_read=read,
                bytes_written=4 * M * N).scaled(reps)  # fmt: skip


def _check(name, A, B):
    for what, x in (("A", A), ("B", B)):
        if not isinstance(x, np.ndarray) or x.dtype != np.uint16 or x.ndim != 2:
            raise RooflabError(f"{name}: {what} must be a 2-D array of bf16 bit patterns (uint16)")
    if A.shape[1] != B.shape[0]:
        raise RooflabError(f"{name}: inner dimensions differ: A is {A.shape}, B is {B.shape}")


def _torch_weight(B):
    """B as torch.nn.Linear keeps its weight, (N, K) row-major bf16, once per weight array: Qwen2-0.5B's
    decode GEMMs took 103 ms through torch.matmul on (K, N) arrays, 74 ms through F.linear on (N, K)
    (the model's own Linear layers: 65-77 ms of aten::mm and addmm in torch's profile)."""
    torch = _torch()
    return torch.from_numpy(np.ascontiguousarray(B.T).view(np.int16)).view(torch.bfloat16)


def _torch_bias(bias):
    return _torch().from_numpy(bias).to(_torch().bfloat16)


_torch_weights, _torch_biases = PerWeight(_torch_weight), PerWeight(_torch_bias)


def _torch_bf16(A, B, bias=None, reps=1, threads=None):
    torch = _torch()
    _check("cpu.bgemm.00-torch-bf16", A, B)
    with torch_threads(resolve_threads(threads)):
        a = torch.from_numpy(A.view(np.int16)).view(torch.bfloat16)
        w = _torch_weights(B)
        bb = None if bias is None else _torch_biases(bias)
        for _ in range(int(reps)):  # bf16 out, as torch gives it (its accumulation is fp32)
            c = torch.nn.functional.linear(a, w, bb)
        return c.float().numpy()


def _numpy_fp32(A, B, bias=None, reps=1, threads=None):
    _check("cpu.bgemm.00-numpy-fp32", A, B)
    a, b = from_bf16(A), from_bf16(B)
    with use_threads(resolve_threads(threads)):
        for _ in range(int(reps)):
            c = a @ b
            if bias is not None:
                c += bias
    return c


def _amx_pack(B):
    """B's AMX tiles, once per weight matrix; the unit is checked here, not in every timed call."""
    why = AMX.available("bf16")
    if why:
        raise RooflabError(f"cpu.bgemm.01-amx-tdpbf16ps: {why}")
    return AG.pack_weights(B, "bf16")


_amx_packed = PerWeight(_amx_pack)


def _amx_bf16(A, B, bias=None, reps=1, threads=None):
    _check("cpu.bgemm.01-amx-tdpbf16ps", A, B)
    Bp = _amx_packed(B)  # raises where the CPU or Linux refuses AMX BF16
    C = aligned_array((A.shape[0], B.shape[1]), np.float32)  # tile and zmm stores start on a line
    for _ in range(int(reps)):
        AG.matmul(A, Bp, B.shape[1], "bf16", threads=resolve_threads(threads), out=C)
        if bias is not None:
            C += bias
    return C


def _avx512_pack(B):
    """B's vdpbf16ps panels, once per weight matrix; the unit is checked here, not in every timed call."""
    why = BG.available()
    if why:
        raise RooflabError(f"cpu.bgemm.02-avx512-dpbf16ps: {why}")
    return BG.pack(B)


_avx512_packed = PerWeight(_avx512_pack)


def _avx512_bf16(A, B, bias=None, reps=1, threads=None):
    _check("cpu.bgemm.02-avx512-dpbf16ps", A, B)
    Bp = _avx512_packed(B)  # raises where the CPU has no AVX-512 BF16
    C = aligned_array((A.shape[0], B.shape[1]), np.float32)  # tile and zmm stores start on a line
    for _ in range(int(reps)):
        BG.gemm_bf16(A, Bp, B.shape[1], C, threads=resolve_threads(threads))
        if bias is not None:
            C += bias
    return C


def unit() -> str | None:
    """The BF16 unit a bfloat16 model GEMM runs on here (AMX where Linux grants it, else AVX-512
    BF16), or None: then no bgemm variant takes model ops and a bf16 GEMM runs in float32, as before."""
    if not AMX.available("bf16"):
        return "amx-bf16"
    if not BG.available():
        return "bf16-avx512"
    return None


def library() -> str:
    """The variant 0 registered here: torch's bf16 Linear when torch is installed, else numpy FP32.
    Found, not imported: torch (its OpenMP and MKL) loads only when its variant first runs, never
    into a run that does not time it."""
    return "00-torch-bf16" if installed("torch") else "00-numpy-fp32"


# a model's bfloat16 GEMM (an LLM's linear layers under `rooflab llm --dtype bfloat16`, a bf16 op of
# OPS.json) runs on these variants where the CPU has a BF16 unit: op "gemm", dtype bfloat16 only
_MODEL_OP = dict(op="gemm", dtypes=("bfloat16",)) if unit() else {}
_COMMON = dict(family=FAMILY, device="cpu", reference=reference, work=work, inputs=inputs, roles=("threaded",),
               **_MODEL_OP)  # fmt: skip
if library() == "00-torch-bf16":
    register(Variant(name=f"cpu.{FAMILY}.00-torch-bf16", number=0, kernel=_torch_bf16,
                     description="torch.nn.functional.linear on bfloat16, weights (N, K) as nn.Linear keeps them (oneDNN: AMX where the CPU has it)", result_dtype=lambda *a, **k: "bfloat16", **_COMMON))  # fmt: skip
else:
    register(Variant(name=f"cpu.{FAMILY}.00-numpy-fp32", number=0, kernel=_numpy_fp32,
                     description="numpy FP32 BLAS on the same bf16 values (torch is not installed: no bf16 library here)", **_COMMON))  # fmt: skip
register(
    Variant(
        name=f"cpu.{FAMILY}.01-amx-tdpbf16ps",
        number=1,
        kernel=_amx_bf16,
        description="AMX tdpbf16ps tile products, 32x32 blocks of four fp32 accumulator tiles, B tiles packed once, L2-blocked",
        **_COMMON,
    )
)
register(
    Variant(
        name=f"cpu.{FAMILY}.02-avx512-dpbf16ps",
        number=2,
        kernel=_avx512_bf16,
        description=f"AVX-512 BF16 vdpbf16ps, {BG.MR}x{BG.NR} fp32 register tile, B packed once in k-pair panels",
        **_COMMON,
    )
)

RUNG_UNIT = {"01-amx-tdpbf16ps": "amx-bf16", "02-avx512-dpbf16ps": "bf16-avx512"}  # lowprec's peak of each

SHAPES = (
    ("square 256", {"M": 256, "N": 256, "K": 256}, True),
    ("square 1024", {"M": 1024, "N": 1024, "K": 1024}, True),
    ("square 2048", {"M": 2048, "N": 2048, "K": 2048}, True),
    ("bert-base s128 FFN1", {"M": 128, "N": 3072, "K": 768}, False),
)


def cases(quick: bool = False, threads: list[int] | None = None, device: str = "cpu") -> list[Case]:
    """Variant 0 and the rungs this CPU runs (AMX, AVX-512 BF16), at every shape and thread count."""
    threads = sorted(set(threads or [1]))
    names = [library(), *(() if AMX.available("bf16") else ("01-amx-tdpbf16ps",))]
    names += [] if BG.available() else ["02-avx512-dpbf16ps"]
    # each rung's unit peak before and after them, at the same thread counts: the report gives
    # "% of unit peak" and flags rungs whose unit a neighbour took meanwhile (unit_peak.around)
    out = []
    for label, s, in_quick in SHAPES:
        if quick and not in_quick:
            continue
        for v in names:
            for t in threads:
                out.append(
                    Case(
                        variant=f"cpu.{FAMILY}.{v}",
                        size=dict(s),
                        dtype="uint16",
                        threads=t,
                        label=f"cpu.{FAMILY}.{v} bf16 {s['M']}x{s['N']}x{s['K']} ({label})",
                        meta={"shape": dict(s), "shape_label": label, "unit": RUNG_UNIT.get(v)},
                    )
                )
    return around((RUNG_UNIT[v] for v in names if v in RUNG_UNIT), threads, out)
