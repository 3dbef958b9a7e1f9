"""Family `qgemm`: the quantized rungs of the GEMM ladder, each beside onnxruntime's own kernel (MLAS)
on the same values as variant 0.

Two ops (``% of library`` compares within each):

  qgemm_int8   C (int32) = (A - za) @ B: A uint8 (M x K, activation zero point za), B int8 (K x N,
               symmetric). 00 = onnxruntime ``MatMulInteger`` (B a constant: MLAS prepacks it);
               01 = kernels/cpu/qgemm_i8.py (vpdpbusd, or the AVX2 pmaddubsw sequence), B packed
               once per weight array as MLAS does; 02 = kernels/cpu/amx_gemm.py (AMX tdpbusd tile
               products, where the CPU has AMX INT8 and Linux grants the tile state). Verified
               exactly against an int64 product.
  qgemm_nbits  Y (fp32) = A @ dequant(W)^T, weight-only 4- or 8-bit (``bits`` in the shape), block 32,
               symmetric, in ``MatMulNBits``'s layout (``quantize`` below). 00 = onnxruntime
               ``MatMulNBits`` (accuracy level 0: fp32 compute); 01 = kernels/cpu/qgemm_w.py
               (widened in registers). Verified against the float64 product of the dequantized
               weights within the ``float32/quant`` tolerance of rooflab/verify.py, which a dropped
               or misplaced block scale exceeds (tests/test_qgemm.py keeps such a kernel).
  qgemm_w4a8   the same 4-bit weights with the activations quantized to int8 per block of 32
               (s = max|a| / 127): int8 dot products of the codes, scaled per block. 00 = onnxruntime
               ``MatMulNBits`` at accuracy level 4 (MLAS's CompInt8); 01 = kernels/cpu/qgemm_w4a8.py
               (the nibbles straight into vpdpbusd). Verified against the float64 product of the
               quantized activations and the dequantized weights (``float32/quant``).

Inputs: activations u8 in [0, 255] and weights s8 in [-64, 63] (7 bits, onnxruntime's reduce_range:
no vpmaddubsw pair saturates on AVX2, in MLAS or here), so every byte moves the result; 4-/8-bit
codes uniform over their range, block scales in [0.5, 1.5) / sqrt(K) so |Y| stays O(10) at any K.

Work: qgemm_int8 2 M N K integer ops over M K + K N bytes read, 4 M N written; qgemm_nbits 2 M N K
FLOPs over the packed bytes (K N bits / 8), the fp32 scales (4 K N / 32) and A read, 4 M N written:
a decode GEMV reads 0.625 B per weight in 4 bits (0.5 + 0.125 of scales), 1.125 in 8, 4 in fp32.

Napkin: the 4096 x 11008 GEMV (a 7B model's FFN up-projection) is 22.5 MB of 4-bit codes + 5.6 MB
of scales: 1.4 ms at 20 GB/s of DRAM, where its fp32 twin reads 180 MB (9 ms).

Run: ``rooflab run --suite qgemm``.
"""

from __future__ import annotations

import weakref
from dataclasses import replace

import numpy as np

from ..errors import RooflabError
from ..kernels.cpu import amx as AMX
from ..kernels.cpu import amx_gemm as AG
from ..kernels.cpu import qgemm_i8 as I8
from ..kernels.cpu import qgemm_w as WQ
from ..kernels.cpu import qgemm_w4a8 as W4A8
from ..kernels.cpu.simd_q import BITS as SIMD_BITS
from ..kernels.cpu.simd_q import DOT_PATH
from ..memory import aligned_array
from ..registry import Case, Variant, get_variant, register
from ..threads import resolve_threads
from ..work import Work
from .unit_peak import around

FAMILY = "qgemm"
BLOCK = WQ.BLOCK
BITS = (4, 8)
ZA = 77  # the activation zero point of the INT8 inputs (any 0..255; not 0, so its term is checked)


# ---- the weight format (MatMulNBits, symmetric, block 32) ----------------------------------------


def quantize(W: np.ndarray, bits: int) -> tuple[np.ndarray, np.ndarray]:
    """(packed, scales) of W (K x N, float): per column n and block b of 32 inputs, scale = max|w| /
    (2^(bits-1) - 1) and q = round(w / scale) + 2^(bits-1), clipped to the code range; packed in
    MatMulNBits's layout [N, K/32, 32 * bits / 8] (4 bits: element 2j in the low nibble of byte j)."""
    K, N = W.shape
    _check_k(K)
    z = 1 << (bits - 1)
    blocks = np.asarray(W, np.float64).T.reshape(N, K // BLOCK, BLOCK)
    scales = np.abs(blocks).max(axis=2) / (z - 1)
    scales[scales == 0] = 1.0
    q = np.clip(np.rint(blocks / scales[..., None]) + z, 0, (1 << bits) - 1).astype(np.uint8)
    return pack_codes(q, bits), scales.astype(np.float32)


def pack_codes(q: np.ndarray, bits: int) -> np.ndarray:
    """Codes [N, nb, 32] (uint8, < 2^bits) in MatMulNBits's byte layout."""
    return (q[..., 0::2] | (q[..., 1::2] << 4)).astype(np.uint8) if bits == 4 else q.astype(np.uint8)


def dequantize(packed: np.ndarray, scales: np.ndarray, bits: int) -> np.ndarray:
    """The float64 weights W^T (N x K) a packed matrix stands for."""
    N, nb, _ = packed.shape
    if bits == 4:
        q = np.empty((N, nb, BLOCK), np.float64)
        q[..., 0::2] = packed & 15
        q[..., 1::2] = packed >> 4
    else:
        q = packed.astype(np.float64)
    return ((q - (1 << (bits - 1))) * scales.astype(np.float64)[..., None]).reshape(N, nb * BLOCK)


def bits_of(packed: np.ndarray) -> int:
    return packed.shape[2] * 8 // BLOCK


def bytes_per_weight(bits: int) -> float:
    """Stored bytes per weight: the code plus its share of the block's fp32 scale."""
    return bits / 8 + 4 / BLOCK


def _check_k(K: int) -> None:
    if K % BLOCK:
        raise RooflabError(f"qgemm: K={K} is not a multiple of the block size {BLOCK}", "pad K to a multiple of 32")


# ---- shapes, inputs, references, work ------------------------------------------------------------


def _shape(size) -> dict:
    if not isinstance(size, dict) or any(k not in size for k in ("M", "N", "K")):
        raise RooflabError(f"qgemm shape {size!r} is not understood", "pass {'M': .., 'N': .., 'K': ..[, 'bits': 4|8]}")
    s = {k: int(size[k]) for k in ("M", "N", "K")}
    if min(s.values()) < 1:
        raise RooflabError(f"qgemm shape {size!r}: M, N and K must be >= 1")
    if "bits" in size:
        s["bits"] = int(size["bits"])
        if s["bits"] not in BITS:
            raise RooflabError(f"qgemm: {s['bits']}-bit weights are not modelled", "use 4 or 8")
    return s


def int8_inputs(size, dtype=None, seed: int = 0, **_) -> tuple:
    s = _shape(size)
    rng = np.random.default_rng(seed)
    A = rng.integers(0, 256, (s["M"], s["K"]), dtype=np.uint8)
    B = rng.integers(-64, 64, (s["K"], s["N"]), dtype=np.int8)
    return A, B, np.array(ZA, np.uint8)


def int8_reference(A, B, za, **_) -> np.ndarray:
    return (A.astype(np.int64) - int(za)) @ B.astype(np.int64)


def int8_work(A, B, za, reps=1, **_) -> Work:
    M, K = A.shape
    N = B.shape[1]
    return Work(flops=2.0 * M * N * K, bytes_read=M * K + K * N, bytes_written=4 * M * N).scaled(reps)


def nbits_inputs(size, dtype=None, seed: int = 0, **_) -> tuple:
    s = _shape(size)
    bits = s.get("bits", 4)
    M, N, K = s["M"], s["N"], s["K"]
    _check_k(K)
    rng = np.random.default_rng(seed)
    A = rng.random((M, K), dtype=np.float32)
    codes = rng.integers(0, 1 << bits, (N, K // BLOCK, BLOCK), dtype=np.uint8)
    scales = ((rng.random((N, K // BLOCK)) + 0.5) / np.sqrt(K)).astype(np.float32)
    return A, pack_codes(codes, bits), scales


def nbits_reference(A, packed, scales, **_) -> np.ndarray:
    return A.astype(np.float64) @ dequantize(packed, scales, bits_of(packed)).T


def nbits_work(A, packed, scales, reps=1, **_) -> Work:
    M, K = A.shape
    N = packed.shape[0]
    read = A.nbytes + packed.nbytes + scales.nbytes
    return Work(flops=2.0 * M * N * K, bytes_read=read, bytes_written=4 * M * N).scaled(reps)


def _nbits_dtype(*_, **__):
    return "float32/quant"


def _int8_dtype(*_, **__):
    return "int32"


def _check(name, x, dtype, ndim, what):
    if not isinstance(x, np.ndarray) or x.dtype != np.dtype(dtype) or x.ndim != ndim or not x.flags.c_contiguous:
        raise RooflabError(
            f"{name}: {what} must be a C-contiguous {ndim}-D {dtype} array, got "
            f"{getattr(x, 'dtype', type(x).__name__)} {getattr(x, 'shape', '')}"
        )


def _check_int8(name, A, B, za):
    _check(name, A, "uint8", 2, "A")
    _check(name, B, "int8", 2, "B")
    if A.shape[1] != B.shape[0]:
        raise RooflabError(f"{name}: inner dimensions differ: A is {A.shape}, B is {B.shape}")
    return int(np.asarray(za).reshape(-1)[0]) if np.size(za) else 0


def _check_nbits(name, A, packed, scales):
    _check(name, A, "float32", 2, "A")
    _check(name, packed, "uint8", 3, "the packed weights")
    _check(name, scales, "float32", 2, "the scales")
    N, nb, blob = packed.shape
    if blob * 8 // BLOCK not in BITS or blob * 8 % BLOCK:
        raise RooflabError(f"{name}: blocks of {blob} bytes are neither 4- nor 8-bit blocks of {BLOCK}")
    if A.shape[1] != nb * BLOCK or scales.shape != (N, nb):
        raise RooflabError(f"{name}: A {A.shape}, weights {packed.shape} and scales {scales.shape} disagree")
    return bits_of(packed)


# ---- per-weight state: packed once per weight array, as MLAS prepacks a constant ----------------


class PerWeight:
    """A value computed once per weight array object (the array must not change afterwards)."""

    def __init__(self, make):
        self.make = make
        self.cache: dict = {}

    def __call__(self, w, *more):
        k = (id(w), *(id(x) if isinstance(x, np.ndarray) else x for x in more))  # arrays by identity
        hit = self.cache.get(k)
        if hit is not None and hit[0]() is w:
            return hit[1]
        value = self.make(w, *more)
        self.cache = {kk: v for kk, v in self.cache.items() if v[0]() is not None}
        self.cache[k] = (weakref.ref(w), value)
        return value


def _ort():
    from ..ort_session import import_ort

    return import_ort("variant 0 of qgemm")


def _session(model_bytes: bytes, threads: int):
    """One session per weight array (rooflab/ort_session.py: weight_session)."""
    from ..ort_session import weight_session

    return weight_session(model_bytes, threads, "variant 0 of qgemm")


def _graph(node, inputs, output, inits) -> bytes:
    from onnx import helper

    g = helper.make_graph([node], "qgemm", inputs, [output], inits)
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    return helper.make_model(g, opset_imports=opsets).SerializeToString()


def matmulinteger_model(B: np.ndarray, za: int) -> bytes:
    """One MatMulInteger node: A (uint8 [M, K], M free) x the constant B, activation zero point za."""
    from onnx import TensorProto, helper, numpy_helper

    K, N = B.shape
    node = helper.make_node("MatMulInteger", ["A", "B", "za"], ["Y"])
    inits = [numpy_helper.from_array(B, "B"), numpy_helper.from_array(np.array(za, np.uint8), "za")]
    a = helper.make_tensor_value_info("A", TensorProto.UINT8, ["M", K])
    y = helper.make_tensor_value_info("Y", TensorProto.INT32, ["M", N])
    return _graph(node, [a], y, inits)


def matmulnbits_model(packed: np.ndarray, scales: np.ndarray, accuracy_level: int = 0) -> bytes:
    """One MatMulNBits node over the constant packed weights (accuracy level 0: fp32 compute; 4:
    the activations quantized to int8 per block, int8 dot products)."""
    from onnx import TensorProto, helper, numpy_helper

    N, nb, _ = packed.shape
    bits = bits_of(packed)
    K = nb * BLOCK
    node = helper.make_node(
        "MatMulNBits",
        ["A", "B", "scales"],
        ["Y"],
        domain="com.microsoft",
        K=K,
        N=N,
        bits=bits,
        block_size=BLOCK,
        accuracy_level=accuracy_level,
    )
    inits = [numpy_helper.from_array(packed, "B"), numpy_helper.from_array(scales.reshape(-1), "scales")]
    a = helper.make_tensor_value_info("A", TensorProto.FLOAT, ["M", K])
    y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["M", N])
    return _graph(node, [a], y, inits)


class OrtRotation:
    """The ``rotate`` hook of an onnxruntime weight variant (registry.Variant): one session of every
    copy's node (ort_session.merged_session), fed the copies' shared activations, as a decode step's
    graph runs its layers; the last rotation's session kept (an op's rotation is timed, then the
    next op's). None, so the driver calls the copies one by one, where the copies do not share
    their activations or are too large to merge. A variant whose copies differ in a graph input,
    not a constant, overrides ``build`` and ``feeds`` (families/runtime_concat.py)."""

    def __init__(self, model_of=None, what: str = "rotation"):
        self.model_of, self.what, self.last = model_of, what, None

    def build(self, copies, threads: int, **params):
        """The session that runs every copy once per run (None: the driver's way instead)."""
        from ..ort_session import merged_session

        return merged_session([self.model_of(*c[1:], **params) for c in copies], threads, self.what)

    def feeds(self, copies) -> dict:
        return {"A": copies[0][0]}

    def __call__(self, copies, threads=None, **params):
        A = copies[0][0]
        if any(c[0] is not A for c in copies):
            return None
        t = resolve_threads(threads)
        key = (tuple(id(c[1]) for c in copies), t)
        if self.last is None or self.last[0] != key or any(ref() is None for ref in self.last[2]):
            self.last = None  # the previous rotation's session freed before the next is built
            self.last = (key, self.build(copies, t, **params), [weakref.ref(c[1]) for c in copies])
        sess = self.last[1]
        if sess is None:
            return None
        feeds = self.feeds(copies)
        return lambda: sess.run(None, feeds)


_int8_session = PerWeight(lambda B, za, threads: _session(matmulinteger_model(B, za), threads))
_nbits_session = PerWeight(lambda P, S, threads: _session(matmulnbits_model(P, S), threads))
_int8_packed = PerWeight(lambda B, za: I8.pack(B, za))


# the AMX tiles of B and the zero point's column term -za * colsum(B), once per weight
def _amx_pack(B, za):
    """B's AMX tiles and the zero point's column term -za * colsum(B), once per weight: the unit is
    checked here, not in every timed call (the check reads numba's feature string: ~16 us, a third
    of a 256^3 product)."""
    why = AMX.available("int8")
    if why:
        raise RooflabError(f"cpu.qgemm.02-amx-tdpbusd: {why}")
    return AG.pack_weights(B, "int8"), (-int(za) * B.astype(np.int64).sum(axis=0)).astype(np.int32)


_amx_packed = PerWeight(_amx_pack)
_a8_session = PerWeight(lambda P, S, threads: _session(matmulnbits_model(P, S, accuracy_level=4), threads))


# ---- the variants --------------------------------------------------------------------------------


def _ort_int8(A, B, za, reps=1, threads=None):
    z = _check_int8("cpu.qgemm.00-ort-matmulinteger", A, B, za)
    s = _int8_session(B, z, resolve_threads(threads))
    for _ in range(int(reps)):
        C = s.run(None, {"A": A})[0]
    return C


def _own_int8(A, B, za, reps=1, threads=None):
    z = _check_int8("cpu.qgemm.01-packed-dpbusd", A, B, za)
    Bp, corr = _int8_packed(B, z)
    C = aligned_array((A.shape[0], B.shape[1]), np.int32)  # tile and zmm stores start on a line
    for _ in range(int(reps)):
        I8.gemm_u8s8(A, z, Bp, corr, B.shape[1], C, threads=resolve_threads(threads))
    return C


def _amx_int8(A, B, za, reps=1, threads=None):
    z = _check_int8("cpu.qgemm.02-amx-tdpbusd", A, B, za)
    Bp, corr = _amx_packed(B, z)  # raises where the CPU or Linux refuses AMX INT8
    C = aligned_array((A.shape[0], B.shape[1]), np.int32)  # tile and zmm stores start on a line
    for _ in range(int(reps)):  # the zero point's term is where the tiles start
        AG.matmul(A, Bp, B.shape[1], "int8", threads=resolve_threads(threads), out=C, init=corr)
    return C


def _ort_nbits(A, packed, scales, reps=1, threads=None):
    _check_nbits("cpu.qgemm.00-ort-matmulnbits", A, packed, scales)
    s = _nbits_session(packed, scales, resolve_threads(threads))
    for _ in range(int(reps)):
        Y = s.run(None, {"A": A})[0]
    return Y


def _own_nbits(A, packed, scales, reps=1, threads=None):
    bits = _check_nbits("cpu.qgemm.01-dequant-in-registers", A, packed, scales)
    Y = np.empty((A.shape[0], packed.shape[0]), np.float32)
    for _ in range(int(reps)):
        WQ.matmul_nbits(A, packed, scales, bits, Y, threads=resolve_threads(threads))
    return Y


def w4a8_inputs(size, dtype=None, seed: int = 0, **_) -> tuple:
    s = _shape(size)
    if s.get("bits", 4) != 4:
        raise RooflabError("qgemm_w4a8 is 4-bit weights (bits=4)")
    return nbits_inputs({**s, "bits": 4}, dtype, seed)


def w4a8_reference(A, packed, scales, **_) -> np.ndarray:
    """float64: A quantized per block of 32 (s = max|a| / 127, round half to even) times the
    dequantized weights: what an exact int8-activation kernel computes (up to a rounding tie)."""
    M, K = A.shape
    blocks = A.astype(np.float64).reshape(M, K // BLOCK, BLOCK)
    s = np.abs(blocks).max(axis=-1, keepdims=True) / 127
    s[s == 0] = 1.0
    return (np.rint(blocks / s) * s).reshape(M, K) @ dequantize(packed, scales, 4).T


def _ort_w4a8(A, packed, scales, reps=1, threads=None):
    if _check_nbits("cpu.qgemm.00-ort-matmulnbits-a8", A, packed, scales) != 4:
        raise RooflabError("cpu.qgemm.00-ort-matmulnbits-a8: 4-bit weights only")
    s = _a8_session(packed, scales, resolve_threads(threads))
    for _ in range(int(reps)):
        Y = s.run(None, {"A": A})[0]
    return Y


def _own_w4a8(A, packed, scales, reps=1, threads=None):
    if _check_nbits("cpu.qgemm.01-w4a8-dpbusd", A, packed, scales) != 4:
        raise RooflabError("cpu.qgemm.01-w4a8-dpbusd: 4-bit weights only")
    Y = np.empty((A.shape[0], packed.shape[0]), np.float32)
    for _ in range(int(reps)):  # each call quantizes its activations, as MatMulNBits does
        W4A8.matmul_w4a8(A, packed, scales, Y, threads=resolve_threads(threads))
    return Y


_INT8 = dict(inputs=int8_inputs, reference=int8_reference, work=int8_work, result_dtype=_int8_dtype, op="qgemm_int8")
_NBITS = dict(
    inputs=nbits_inputs, reference=nbits_reference, work=nbits_work, result_dtype=_nbits_dtype, op="qgemm_nbits"
)
_W4A8 = dict(inputs=w4a8_inputs, reference=w4a8_reference, work=nbits_work, result_dtype=_nbits_dtype, op="qgemm_w4a8")
_ROTATE = {
    "00-ort-matmulinteger": OrtRotation(lambda B, za: matmulinteger_model(B, int(np.asarray(za))), "qgemm rotation"),
    "00-ort-matmulnbits": OrtRotation(lambda P, S: matmulnbits_model(P, S), "qgemm rotation"),
    "00-ort-matmulnbits-a8": OrtRotation(lambda P, S: matmulnbits_model(P, S, accuracy_level=4), "qgemm rotation"),
}
for _name, _num, _kernel, _desc, _kw in (
    ("00-ort-matmulinteger", 0, _ort_int8, "onnxruntime MatMulInteger (MLAS, B prepacked)", _INT8),
    (
        "01-packed-dpbusd",
        1,
        _own_int8,
        f"packed panels, {I8.MR}x{I8.NR} int32 register tile, {DOT_PATH} dot steps, zero point by column sums",
        _INT8,
    ),
    (
        "02-amx-tdpbusd",
        2,
        _amx_int8,
        "AMX tdpbusd tile products, 32x32 blocks of four accumulator tiles, B tiles packed once, L2-blocked",
        _INT8,
    ),
    ("00-ort-matmulnbits", 0, _ort_nbits, "onnxruntime MatMulNBits (MLAS, accuracy level 0: fp32)", _NBITS),
    (
        "01-dequant-in-registers",
        1,
        _own_nbits,
        "codes widened to fp32 in registers, 4 weight rows per activation load; prefill: an L2 panel + the fp32 GEMM",
        _NBITS,
    ),
    ("00-ort-matmulnbits-a8", 0, _ort_w4a8, "onnxruntime MatMulNBits (MLAS, accuracy level 4: int8 compute)", _W4A8),
    (
        "01-w4a8-dpbusd",
        1,
        _own_w4a8,
        f"activations to int8 per block, the packed nibbles straight into {DOT_PATH} dot steps, scaled per block",
        _W4A8,
    ),
):
    register(
        Variant(
            name=f"cpu.{FAMILY}.{_name}",
            family=FAMILY,
            device="cpu",
            number=_num,
            description=_desc,
            kernel=_kernel,
            roles=("threaded",),
            rotate=_ROTATE.get(_name),
            **_kw,
        )
    )


def rate_of(rec: dict) -> tuple[float | None, str]:
    """The figure a qgemm record is judged by: GOPS for INT8, GB/s of weights (codes + scales) and
    activations read for a weight-only GEMV (M <= qgemm_w.ROWS_GEMV), GFLOP/s for its prefill."""
    shape = rec.get("shape") or {}
    if "bits" in shape and shape.get("M", 1) <= WQ.ROWS_GEMV and (rec.get("gbps") or {}).get("median"):
        return rec["gbps"]["median"], "GB/s"
    value = (rec.get("gflops") or {}).get("median")
    return (value, "GOPS" if "bits" not in shape else "GFLOP/s") if value else (None, "")


# ---- the suite -----------------------------------------------------------------------------------

INT8_SHAPES = (
    ("square 256", {"M": 256, "N": 256, "K": 256}, True),
    ("square 1024", {"M": 1024, "N": 1024, "K": 1024}, True),
    ("square 2048", {"M": 2048, "N": 2048, "K": 2048}, False),
    ("bert-base s128 FFN1", {"M": 128, "N": 3072, "K": 768}, False),
)
NBITS_SHAPES = (
    ("7B FFN up GEMV", {"M": 1, "N": 11008, "K": 4096}, True),
    ("7B FFN down GEMV", {"M": 1, "N": 4096, "K": 11008}, False),
    ("7B FFN up, 32-token prefill", {"M": 32, "N": 11008, "K": 4096}, False),
)


# the lowprec unit whose peak an INT8 rung runs on (rooflab/families/lowprec.py); the AVX2 sequence
# at 512 bits (an AVX-512 CPU without VNNI) has no peak kernel of its width
RUNG_UNIT = {
    "01-packed-dpbusd": {"vnni-512": "int8-vnni", "avx2": "int8-avx2" if SIMD_BITS == 256 else None}.get(DOT_PATH),
    "02-amx-tdpbusd": "amx-int8",
}


def cases(quick: bool = False, threads: list[int] | None = None, device: str = "cpu") -> list[Case]:
    """INT8 GEMMs and the 4-/8-bit GEMVs (prefill too in the full run) at every thread count."""
    threads = sorted(set(threads or [1]))
    int8 = ("00-ort-matmulinteger", "01-packed-dpbusd", *(() if AMX.available("int8") else ("02-amx-tdpbusd",)))
    # each INT8 rung's unit peak before and after them, at the same thread counts: the report gives
    # "% of unit peak" and flags rungs whose unit a neighbour took meanwhile (unit_peak.around)
    rungs = []
    for name, s, in_quick in INT8_SHAPES:
        if quick and not in_quick:
            continue
        for v in int8:
            rungs += [_case(v, s, "uint8", t, name, "int8 x int8") for t in threads]
    out = around(filter(None, map(RUNG_UNIT.get, int8)), threads, rungs)
    for name, s, in_quick in NBITS_SHAPES:
        if quick and not in_quick:
            continue
        for bits in (4,) if quick else BITS:
            for v in ("00-ort-matmulnbits", "01-dequant-in-registers"):
                out += [_case(v, {**s, "bits": bits}, "float32", t, name, f"{bits}-bit weights") for t in threads]
        if s["M"] <= WQ.ROWS_GEMV:  # a GEMV at accuracy level 4: int8 activations
            for v in ("00-ort-matmulnbits-a8", "01-w4a8-dpbusd"):
                out += [
                    _case(v, {**s, "bits": 4}, "float32", t, name, "4-bit weights x int8 activations") for t in threads
                ]
        if s["M"] <= WQ.ROWS_GEMV and in_quick:  # and from DRAM: streamed over copies of the weights
            for v, what in (
                ("00-ort-matmulnbits", "4-bit weights"),
                ("01-dequant-in-registers", "4-bit weights"),
                ("00-ort-matmulnbits-a8", "4-bit weights x int8 activations"),
                ("01-w4a8-dpbusd", "4-bit weights x int8 activations"),
            ):
                out += [
                    _streamed(_case(v, {**s, "bits": 4}, "float32", t, f"{name}, from DRAM", what)) for t in threads
                ]
    return out


STREAM_MAX_COPIES = 16  # each copy is made from its own seed and held in memory: a cap on a host with a huge LLC


def _stream_copies(case: Case, inputs: tuple) -> list[tuple]:
    """The further copies a streamed case rotates over: distinct weights (codes and scales) from other
    seeds, the activations shared, together >= 4x what the last-level cache holds as this host's DRAM
    probe measured it (as `llm` times a decode step's weight GEMVs, rooflab/rotation.py), at most
    STREAM_MAX_COPIES."""
    from .. import rotation
    from ..cpu import caches
    from ..memory import available_bytes

    v = get_variant(case.variant)
    ws = sum(x.nbytes for x in inputs[rotation.STREAMED :])
    llc = int(caches.host_measured().llc_effective())
    n = min(rotation.rotation_count(ws, llc, available_bytes()), STREAM_MAX_COPIES)
    return rotation.rotation_inputs(v, case.size, np.dtype(case.dtype), case.threads, inputs, n)


def _streamed(c: Case) -> Case:
    """A GEMV timed from DRAM as a decode step streams its layers: each sample calls it once on each
    of its weight copies in turn (>= 4x the LLC; the kernel verified on up to 8 of them,
    driver.checked_copies), no flush between the calls, charged per call; an onnxruntime rung runs
    the copies as one graph (OrtRotation), its output checked on every copy."""
    timing = {"rotation": _stream_copies, "min_samples": 5, "budget_s": 0.0}
    return replace(c, timing=timing, meta={**c.meta, "cold": True, "streamed": True})


def _case(v, s, dtype, t, name, what) -> Case:
    M, N, K = s["M"], s["N"], s["K"]
    return Case(
        variant=f"cpu.{FAMILY}.{v}",
        size=dict(s),
        dtype=dtype,
        threads=t,
        label=f"cpu.{FAMILY}.{v} {what} {M}x{N}x{K} ({name})",
        meta={"shape": dict(s), "shape_label": name, "unit": RUNG_UNIT.get(v)},
    )
