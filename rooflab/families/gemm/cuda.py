"""CUDA variants of the GEMM ladder: C = A x B on the GPU, row-major, any M, N, K.

What it measures: how far each technique of the classic SGEMM ladder (siboehm's SGEMM_CUDA) and
the two tensor-core instructions take a hand-written kernel towards cuBLAS, on the same arrays.

    cuda.gemm.00-cublas            cupy.matmul (cuBLAS): FP32, FP64, FP16 (and BF16 where cupy has it)
    cuda.gemm.01-naive             a thread per element, warps along rows of C (uncoalesced)
    cuda.gemm.02-coalesced         warps along columns of C (coalesced B loads and C stores)
    cuda.gemm.03-smem-tiling       32 x 32 tiles of A and B in shared memory
    cuda.gemm.04-1d-blocktiling    8 rows of C per thread (a B value reused from a register)
    cuda.gemm.05-2d-blocktiling    8 x 8 of C per thread (outer products of register vectors)
    cuda.gemm.06-vectorized        128-bit global/shared loads and stores, A transposed in smem
    cuda.gemm.07-warptiling        warp tiles + double-buffered shared memory (the best SIMT rung)
    cuda.gemm.08-mma-sync          mma.sync m16n8k16 tensor cores, FP16/BF16 -> FP32, cp.async, ldmatrix
    cuda.gemm.09-wgmma             wgmma m64n128k16 from 128-byte-swizzled shared memory (sm_90a only)

Napkin math (H200, 132 SMs at ~1.98 GHz): FP32 FMA peak 132 x 128 x 2 x 1.98 = 67 TFLOP/s; dense
FP16 tensor peak 132 x 4096 x 1.98 = 1070 TFLOP/s (wgmma; mma.sync reaches part of it). At
M = N = K = 4096 a GEMM is 137 GFLOP over 3 x 64 MiB (FP32): 680 FLOP/byte, far right of the ridge,
so every rung from 05 on is bounded by how well it feeds the FMA or tensor units.

Interface: ``v(A, B)`` returns a new C (cupy arrays, C-contiguous, 2-D, same dtype; C has that
dtype too: FP16/BF16 results are the FP32 accumulators rounded); ``v(A, B, bias)`` adds a bias row
with one cupy pass after the product (not for BF16; a batch is refused). A variant refuses with one
RooflabError what it cannot do (the SIMT rungs compute FP32/FP64 only, the tensor-core rungs
FP16/BF16 only, wgmma needs an sm_90 GPU). Kernels live in kernels/cuda/gemm*.cu, one per rung,
every knob an ``#ifndef`` default; the knobs below are passed with -D (``v(A, B, knobs={...})``
overrides some, CANDIDATES lists the sets worth timing on a new GPU), and the declared work does
not depend on them. Registering imports no cupy; the first call compiles (NVRTC, cached) and needs
a GPU.

Data and checks: inputs are random multiples of 1/4 in [-2, 2] (range narrowed for very large K),
so that every product and every FP32 partial sum is exact (CUTLASS's unit tests use integer data
for the same reason): the FP32/FP64 results must equal the float64 reference exactly, FP16/BF16
ones up to the final rounding, well within rooflab.verify's per-dtype tolerances. The reference
is computed on the device in float64 (cupy/cuBLAS DGEMM). Work: 2 M N K FLOP; minimum bytes: A and
B read once, C written once.

Run: ``python scripts/gemm_ladder_cuda.py`` (GFLOP/s and % of cuBLAS at 4096), the GPU tests
``pytest -m gpu tests/test_cuda_gemm_gpu.py``; without a GPU ``tests/test_cuda_gemm_compile.py``
(nvcc + NVRTC, registers, SASS) and ``tests/test_cuda_gemm_emulated.py`` (every kernel executed on
the CPU through tests/cuda_emu) check the kernels.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from ...cuda import loader
from ...errors import RooflabError, first_line
from ...registry import Variant, register
from . import Rung, result_dtype, shape_of
from . import work as family_work

SIMT_DTYPES = ("float32", "float64")
TC_DTYPES = ("float16", "bfloat16")
STATIC_SMEM_LIMIT = 48 << 10  # above this a kernel must opt in to more dynamic shared memory


# ---- small helpers (shape, work and result dtype are the family's: gemm/__init__.py) ----------------


def _cp():
    import cupy

    return cupy


def _shape(size) -> tuple[int, int, int]:
    """(M, N, K) of the family's shape (shape_of: n, (M, N, K) or a dict; ``"bias": True`` adds a
    bias vector to the inputs); a batch is refused: the ladder computes one matrix product."""
    s = shape_of(size)
    if s["batch"] != 1:
        raise RooflabError(f"gemm shape {size!r}: the CUDA GEMM ladder computes one matrix product (batch 1)")
    if min(s["M"], s["N"], s["K"]) < 1:
        raise RooflabError(f"gemm shape {size!r}: M, N and K must be at least 1")
    return s["M"], s["N"], s["K"]


def _dtype_name(dtype) -> str:
    if isinstance(dtype, str):
        return {"fp32": "float32", "fp64": "float64", "fp16": "float16", "bf16": "bfloat16"}.get(dtype, dtype)
    return np.dtype(dtype).name


def _np_dtype(name: str):
    """numpy dtype object for a name; bfloat16 through ml_dtypes (what cupy uses for it)."""
    if name == "bfloat16":
        try:
            import ml_dtypes
        except ImportError:
            raise RooflabError(
                "bfloat16 arrays need the ml_dtypes package (cupy's bfloat16 dtype)", "pip install ml_dtypes"
            ) from None
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def value_range(k: int) -> int:
    """Inputs are integers in [-R, R] divided by 4. R = 8 (values in [-2, 2]) unless K is so large
    that K (R/4)^2 would pass 32768: then FP16 results could overflow and FP32 sums lose exactness."""
    return max(1, min(8, int(4 * math.sqrt(32768 / max(k, 1)))))


def _bf16_bits_to_f32(x):  # (numpy dtypes throughout: cupy takes them)
    return (x.view(np.uint16).astype(np.uint32) << 16).view(np.float32)


def as_float64(x):
    """A device array of any ladder dtype as float64 (BF16 decoded from its bits, so no bfloat16
    arithmetic is needed from cupy)."""
    if _dtype_name(x.dtype) == "bfloat16":
        return _bf16_bits_to_f32(x).astype(np.float64)
    return x.astype(np.float64)


def _matrix(rng, rows, cols, r, name):
    cp = _cp()
    q = cp.floor(rng.random((rows, cols), dtype=np.float32) * (2 * r + 1)) - r  # integers in [-r, r]
    x = q * np.float32(0.25)
    if name == "bfloat16":  # exact in BF16 (few significant bits): keep the top half of the FP32 bits
        return (x.view(np.uint32) >> 16).astype(np.uint16).view(_np_dtype("bfloat16"))
    return x.astype(name)


def inputs(size, dtype="float32", seed=0, threads=None):
    """(A, B): random M x K and K x N device matrices of multiples of 1/4 (see the module notes)."""
    m, n, k = _shape(size)
    name = _dtype_name(dtype)
    _np_dtype(name)  # bfloat16 without ml_dtypes: say so now
    rng = _cp().random.default_rng(seed)
    r = value_range(k)
    A, B = _matrix(rng, m, k, r, name), _matrix(rng, k, n, r, name)
    if isinstance(size, dict) and size.get("bias"):
        return A, B, _matrix(rng, 1, n, r, name).reshape(n)
    return A, B


def reference(A, B, bias=None, **_):
    """float64 A x B (+ bias) on the device (exact for these inputs)."""
    C = as_float64(A) @ as_float64(B)
    return C if bias is None else C + as_float64(bias)


def work(A, B, bias=None, reps=1, **_):
    """The family's work (gemm.work), with the bias add a second launch per call here."""
    return replace(family_work(A, B, bias, reps), launches=int(reps) * (2 if bias is not None else 1))


def _check_bias(name: str, bias, n: int, dtype) -> None:
    if bias is None:
        return
    bd = getattr(bias, "dtype", None)
    if bd is None or getattr(bias, "shape", None) != (n,) or _dtype_name(bd) != _dtype_name(dtype):
        got = f"{_dtype_name(bd)} {tuple(bias.shape)}" if bd is not None else type(bias).__name__
        raise RooflabError(
            f"{name}: bias must be a {_dtype_name(dtype)} vector of N={n} elements, got {got}",
            "pass bias of shape (N,) in the dtype of A",
        )
    if _dtype_name(dtype) == "bfloat16":
        raise RooflabError(f"{name}: a bias on bfloat16 matrices is not supported (cupy has no bfloat16 add)")


def _add_bias(C, bias):
    """C += bias[col]: one cupy elementwise pass after the product (counted as a second launch)."""
    if bias is not None:
        C += bias


def validate(name: str, dtypes: tuple, A, B) -> tuple[int, int, int]:
    """(M, N, K) of A (M x K) times B (K x N), or a RooflabError naming the variant and the rule."""
    for label, x in (("A", A), ("B", B)):
        if not all(hasattr(x, a) for a in ("shape", "dtype", "ndim", "flags")):
            raise RooflabError(f"{name}: {label} is a {type(x).__name__}, not an array", "pass cupy arrays")
        if x.ndim != 2:
            raise RooflabError(f"{name}: {label} must be a 2-D matrix, got shape {tuple(x.shape)}")
    if A.shape[1] != B.shape[0]:
        raise RooflabError(
            f"{name}: inner dimensions differ: A is {A.shape[0]} x {A.shape[1]}, B is {B.shape[0]} x {B.shape[1]}",
            "A must be M x K and B K x N",
        )
    da, db = _dtype_name(A.dtype), _dtype_name(B.dtype)
    if da != db:
        raise RooflabError(f"{name}: A is {da} and B is {db}", "give both the same dtype")
    if da not in dtypes:
        if set(dtypes) == set(TC_DTYPES):
            raise RooflabError(
                f"{name} runs on tensor cores with FP16/BF16 inputs only; {da} is not computed here (no fallback)",
                "use rungs 01-07 or 00-cublas for float32/float64, or pass float16/bfloat16 arrays",
            )
        raise RooflabError(f"{name} computes {' and '.join(dtypes)} only, got {da}")
    for label, x in (("A", A), ("B", B)):
        if not x.flags.c_contiguous:
            raise RooflabError(f"{name}: {label} must be C-contiguous (row-major)", "pass cupy.ascontiguousarray(x)")
    for label, x in (("A", A), ("B", B)):
        if not callable(getattr(x, "get", None)):  # cupy arrays copy to the host with .get(); numpy's cannot
            raise RooflabError(
                f"{name}: {label} is a {type(x).__module__}.{type(x).__name__}; CUDA variants take cupy arrays",
                "cupy.asarray(x)",
            )
    m, k = (int(s) for s in A.shape)
    n = int(B.shape[1])
    if max(m, n, k) >= 2**31:
        raise RooflabError(f"{name}: dimensions must be below 2^31, got M={m} N={n} K={k}")
    return m, n, k


# ---- the rungs -------------------------------------------------------------------------------


def _one_per_element(k: dict) -> int:
    return k["BM"] * k["BN"]


def _one_per_tile_element(k: dict) -> int:
    return k["TILE"] ** 2


def _rows_per_thread(k: dict) -> int:
    return k["BM"] * k["BN"] // k["TM"]


def _tile_per_thread(k: dict) -> int:
    return (k["BM"] // k["TM"]) * (k["BN"] // k["TN"])


def _warps(k: dict) -> int:
    return (k["BM"] // k["WM"]) * (k["BN"] // k["WN"]) * 32


def _warpgroups(k: dict) -> int:
    return k["BM"] // 64 * 128


def _smem_warptile(k: dict, size: int) -> int:
    """Two buffers of A (transposed, rows padded by 16 bytes) and B."""
    return 2 * k["BK"] * (k["BM"] + 16 // size + k["BN"]) * size


def _smem_mma(k: dict, size: int) -> int:
    """STAGES buffers of A and B, rows padded by 8 halves (ldmatrix without bank conflicts)."""
    return k["STAGES"] * (k["BM"] * (k["BK"] + 8) + k["BK"] * (k["BN"] + 8)) * 2


def _smem_wgmma(k: dict, size: int) -> int:
    """STAGES buffers of 64-wide K slices of A and B (128-byte swizzle rows)."""
    return k["STAGES"] * (k["BM"] + k["BN"]) * 64 * 2


def _rung(number, slug, source, kernel, knobs, *, dtypes=SIMT_DTYPES, block_threads=_one_per_element, **kw) -> Rung:
    """A CUDA rung of the family's one Rung type (``model_op``: the library and the top SIMT and
    tensor-core rungs)."""
    return Rung(
        number, slug, device="cuda", source=source, kernel=kernel, knobs=knobs, dtypes=dtypes,
        block_threads=block_threads, **kw,
    )  # fmt: skip


RUNGS = [
    _rung(1, "naive", "gemm01_naive.cu", "gemm01_naive", {"BM": 32, "BN": 8},
         description="one thread per element of C, a warp along 32 rows (uncoalesced A loads and C stores)",
         max_flops=2.0**34),
    _rung(2, "coalesced", "gemm02_coalesced.cu", "gemm02_coalesced", {"BM": 8, "BN": 32},
         description="a warp along 32 columns of C: coalesced B loads and C stores, A broadcast", max_flops=2.0**34),
    _rung(3, "smem-tiling", "gemm03_smem.cu", "gemm03_smem", {"TILE": 32}, block_threads=_one_per_tile_element,
         description="32 x 32 tiles of A and B staged in shared memory, each element reused 32 times"),
    _rung(4, "1d-blocktiling", "gemm04_blocktile1d.cu", "gemm04_blocktile1d", {"BM": 64, "BN": 64, "BK": 8, "TM": 8},
         block_threads=_rows_per_thread,
         description="8 rows of C per thread: each B value from shared memory reused 8 times from a register"),
    _rung(5, "2d-blocktiling", "gemm05_blocktile2d.cu", "gemm05_blocktile2d",
         {"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8}, block_threads=_tile_per_thread,
         description="8 x 8 of C per thread as outer products of register vectors (128 x 128 block tiles)"),
    _rung(6, "vectorized", "gemm06_vectorized.cu", "gemm06_vectorized",
         {"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8}, block_threads=_tile_per_thread, model_op=True,
         description="128-bit global and shared loads and stores (LDG/LDS/STG.128), A transposed in shared memory"),
    _rung(7, "warptiling", "gemm07_warptile.cu", "gemm07_warptile",
         {"BM": 128, "BN": 128, "BK": 8, "WM": 64, "WN": 32, "TM": 4, "TN": 4, "LANES_N": 4},
         block_threads=_warps, smem=_smem_warptile, model_op=True,
         description="warp tiles (conflict-free 128-bit shared loads) and double-buffered shared memory"),
    _rung(8, "mma-sync", "gemm08_mma.cu", "gemm08_mma",
         {"BM": 128, "BN": 128, "BK": 32, "WM": 64, "WN": 32, "STAGES": 3, "GROUP_M": 8},
         dtypes=TC_DTYPES, block_threads=_warps, smem=_smem_mma, model_op=True,
         description="tensor cores via mma.sync m16n8k16 (FP32 accumulate), 3-stage cp.async pipeline, ldmatrix"),
    _rung(9, "wgmma", "gemm09_wgmma.cu", "gemm09_wgmma", {"BM": 128, "BN": 256, "STAGES": 4, "GROUP_M": 8},
         dtypes=TC_DTYPES, block_threads=_warpgroups, smem=_smem_wgmma, model_op=True,
         description="Hopper wgmma m64n128k16 from 128-byte-swizzled shared memory, 4-stage cp.async pipeline"),
]  # fmt: skip
BY_NUMBER = {r.number: r for r in RUNGS}


# Other knob sets worth timing on a new GPU (scripts/gemm_ladder_cuda.py --sweep): each compiles
# without spills, fits an SM and computes the exact product in the CPU emulation (the tests check).
# Not 07 at BK=16: its FP64 kernel takes 254 of ptxas's 255 registers, and one CI run (NVRTC 13.5)
# came back at 255 with 96 bytes spilled: a candidate that spills by chance is none.
CANDIDATES = {
    7: [{"WM": 32, "WN": 64}],
    8: [{"STAGES": 4}, {"BK": 64}, {"WM": 32, "WN": 64}, {"BN": 256, "WN": 64}],
    9: [{"STAGES": 3}, {"BN": 128, "STAGES": 3}, {"BM": 256, "BN": 128}],
}


def with_knobs(r: Rung, knobs: dict | None) -> Rung:
    """The rung with some knobs changed (names checked: an unknown -D would silently do nothing)."""
    if not knobs:
        return r
    unknown = sorted(set(knobs) - set(r.knobs))
    if unknown:
        raise RooflabError(
            f"{r.name}: unknown knob(s) {', '.join(unknown)}", f"its knobs are {', '.join(sorted(r.knobs))}"
        )
    return replace(r, knobs={**r.knobs, **{k: int(v) for k, v in knobs.items()}})


@dataclass(frozen=True)
class Plan:
    """Everything one launch needs, computed without a GPU (the tests check it)."""

    source: str
    function: str
    knobs: dict
    grid: int
    block: int
    smem: int


def plan(number: int, m: int, n: int, k: int, dtype: str, knobs: dict | None = None) -> Plan:
    r = with_knobs(BY_NUMBER[number], knobs)
    bm, bn = r.tile
    grid = -(-m // bm) * -(-n // bn)
    name = _dtype_name(dtype)
    return Plan(r.source, r.function(name), dict(r.knobs), grid, r.threads, r.dynamic_smem(name))


_OPTED_IN: dict = {}


def _opt_in(fn, smem: int):
    """Kernels over 48 KiB of dynamic shared memory must say so once per function (cudaFuncSetAttribute)."""
    key = id(fn)
    if _OPTED_IN.get(key) != smem:
        fn.max_dynamic_shared_size_bytes = smem
        _OPTED_IN[key] = smem


def _bits(x):
    """BF16 arrays reach the kernels as their 16-bit patterns (a view: no copy, no bf16 support needed)."""
    return x.view(np.uint16) if _dtype_name(x.dtype) == "bfloat16" else x


def _launcher(r: Rung):
    def kernel(A, B, bias=None, reps=1, threads=None, knobs=None):
        """C = A x B (+ bias); ``knobs`` overrides some of the rung's -D knobs (e.g. {"BK": 16})."""
        m, n, k = validate(r.name, r.dtypes, A, B)
        _check_bias(r.name, bias, n, A.dtype)
        cp = _cp()
        C = cp.empty((m, n), dtype=A.dtype)
        p = plan(r.number, m, n, k, _dtype_name(A.dtype), knobs)
        fn = loader.kernel(p.source, p.function, p.knobs)
        if p.smem > STATIC_SMEM_LIMIT:
            _opt_in(fn, p.smem)
        args = (_bits(A), _bits(B), _bits(C), np.int32(m), np.int32(n), np.int32(k))
        for _ in range(int(reps)):
            loader.launch(fn, p.grid, p.block, args, r.name, shared_mem=p.smem)
            _add_bias(C, bias)
        return C

    return kernel


def _cublas(A, B, bias=None, reps=1, threads=None):
    name = "cuda.gemm.00-cublas"
    m, n, k = validate(name, SIMT_DTYPES + TC_DTYPES, A, B)
    _check_bias(name, bias, n, A.dtype)
    cp = _cp()
    C = cp.empty((m, n), dtype=A.dtype)
    for _ in range(int(reps)):
        try:
            cp.matmul(A, B, out=C)
            _add_bias(C, bias)
        except Exception as e:  # e.g. a cupy without bfloat16 GEMM
            raise RooflabError(
                f"{name}: cupy.matmul cannot multiply {A.dtype} matrices here: {first_line(e)}"
            ) from None
    return C


register(
    Variant(
        name="cuda.gemm.00-cublas",
        family="gemm",
        device="cuda",
        number=0,
        description="cupy.matmul: cuBLAS (SGEMM, DGEMM, FP16/BF16 GEMM with FP32 compute)",
        kernel=_cublas,
        reference=reference,
        work=work,
        inputs=inputs,
        result_dtype=result_dtype,
        op="gemm",
        dtypes=SIMT_DTYPES + TC_DTYPES,
    )
)
for _r in RUNGS:
    register(
        Variant(
            name=_r.name,
            family="gemm",
            device="cuda",
            number=_r.number,
            description=_r.description,
            kernel=_launcher(_r),
            reference=reference,
            work=work,
            inputs=inputs,
            result_dtype=result_dtype,
            op="gemm" if _r.model_op else None,  # model ops: the library and the top SIMT / tensor rungs
            dtypes=_r.dtypes,
        )
    )


def cases(quick: bool, threads=None) -> list:
    """The GPU suite (`rooflab run --device cuda --suite gemm`): every rung at square sizes (4096 in
    a quick run) and the GPT-2 decode GEMV, FP32 for cuBLAS and the SIMT rungs, FP16 for cuBLAS and
    the tensor-core rungs; each case verified on its own shape before it is timed."""
    from ...registry import Case

    squares = (4096,) if quick else (1024, 2048, 4096, 8192)
    shapes = [(f"square {n}", {"M": n, "N": n, "K": n}) for n in squares]
    shapes.append(("gpt2-decode mlp.c_proj (GEMV)", {"M": 1, "N": 768, "K": 3072}))
    out = []
    for label, shape in shapes:
        for dtype in ("float32", "float16"):
            flops = 2.0 * shape["M"] * shape["N"] * shape["K"]
            # a slow rung stops at its max_flops (a naive rung at 8192^3 would take minutes per sample)
            rungs = [r for r in RUNGS if dtype in r.dtypes and (r.max_flops is None or flops <= r.max_flops)]
            for name in ["cuda.gemm.00-cublas"] + [r.name for r in rungs]:
                out.append(
                    Case(
                        name,
                        size=shape,
                        dtype=dtype,
                        threads=0,
                        label=f"{name} {dtype} {label}",
                        timing={"target_s": 0.01},
                    )
                )
    return out
