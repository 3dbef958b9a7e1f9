"""BF16 GEMM on AVX-512 BF16: C (fp32, M x N) = A (bf16, M x K) @ B (bf16, K x N), fp32 accumulation,
one ``vdpbf16ps`` zmm per 16 x 2 products (pairs of bf16 along K summed into each fp32 lane).

The int8 rung's layout (kernels/cpu/qgemm_i8.py) with K cut into pairs instead of quads: B goes into
NR-column panels of 32-bit words, word (g, j) holding B[2g, j] (low half) and B[2g+1, j] (high
half); A into MR-row panels of words A[i, 2g:2g+2], k-pair major, broadcast one word per row. The
micro-kernel (generated below from qgemm_ukr.ukr_source, kind "bf16") keeps a 12 x 2v tile of fp32
accumulators: 24 accumulators + 2 B vectors + 1 broadcast of the 32 zmm registers, 24 vdpbf16ps per
2 loads and 12 broadcasts.

Loop nest: N panels (NR = 32 columns, split over threads) -> row tiles (MR = 12) -> all of K. A B
panel (K x 32 x 2 bytes: 128 KiB at K = 2048) stays in L2 while every row tile of A passes.

Napkin (Zen 4, 1 core): one zmm vdpbf16ps per cycle (double-pumped, twice its FP32 FMA rate) = 64
FLOP/cycle, 236 GFLOP/s at 3.7 GHz; the 2048^3 product (17.2 GFLOP) in ~73 ms. A Sapphire Rapids
class core: one per 2 cycles (half its FP32 rate). ``rooflab run`` measures the unit's peak here
(kernels/cpu/bf16.py) beside this rung.

Only compiled where numba's target has AVX-512 BF16 at 512 bits (``available()``): the instruction
is inline assembly, which LLVM would refuse to assemble for a CPU without it.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, prange
from numba.extending import intrinsic

from . import simd
from .asm_loop import missing
from .qgemm_ukr import ukr_source
from .simd_q import _VF, _VI, ILANES, ibcast, iload

vstore, vzero = simd.vstore, simd.vzero
MR, NV = 12, 2
NR = NV * ILANES
INSTRUCTION = "vdpbf16ps zmm"


def available(features: str | None = None, bits: int | None = None) -> str | None:
    """None where the rung can be compiled and run here, else why not."""
    why = missing({"+avx512bf16", "+avx512f"}, "AVX-512 BF16", features)
    if why:
        return why
    if (simd.BITS if bits is None else bits) < 512:
        return "numba's vectors are narrower than 512 bits here (ROOFLAB_SIMD_BITS / ROOFLAB_PREFER_256)"
    return None


@intrinsic
def dpbf16ps(typingctx, acc, a, b):
    """acc + per fp32 lane the two products of the bf16 pairs in that lane of a and b."""
    if not (acc == _VF and a == _VI and b == _VI):
        return None

    def codegen(context, builder, sig, args):
        acc_v, a_v, b_v = args
        fnty = ir.FunctionType(acc_v.type, [a_v.type, b_v.type, acc_v.type])
        return builder.asm(fnty, "vdpbf16ps $2, $1, $0", "=v,v,v,0", [a_v, b_v, acc_v], side_effect=False)

    return _VF(acc, a, b), codegen


# ---- packing -----------------------------------------------------------------------------------
@njit(cache=True)
def pack_b(B, Bp, Np):
    """Bp[p][g][j] = B[2g, p*NR + j] | B[2g+1, p*NR + j] << 16 (bf16 bit patterns, zero-padded)."""
    K, N = B.shape
    kg = Bp.shape[0] // Np
    half = Bp.view(np.uint16)
    for n in range(Np):
        p, j = n // NR, n % NR
        for g in range(kg):
            base = ((p * kg + g) * NR + j) * 2
            for t in range(2):
                k = 2 * g + t
                half[base + t] = B[k, n] if (k < K and n < N) else np.uint16(0)


@njit(cache=True)
def pack_a(A, Ap, Mp):
    """Ap[t][g][r] = A[t*MR + r, 2g:2g+2] as one word (zero-padded): an MR-row panel read k-pair by
    k-pair through one pointer, as the micro-kernel broadcasts it."""
    M, K = A.shape
    kg = Ap.shape[0] // Mp
    half = Ap.view(np.uint16)
    for i in range(M):
        t, r = i // MR, i % MR
        for g in range(kg):
            base = ((t * kg + g) * MR + r) * 2
            for u in range(2):
                k = 2 * g + u
                half[base + u] = A[i, k] if k < K else np.uint16(0)


# ---- the loop nest -----------------------------------------------------------------------------
@njit(parallel=True, cache=True)
def gemm_panels(Ap, Bp, C, nthreads):
    """C (Mp x Np fp32) over all N panels, the panels split into nthreads contiguous ranges."""
    Mp, Np = C.shape
    kg = Bp.shape[0] // Np
    npanels = Np // NR
    Cf = C.reshape(-1)
    for t in prange(nthreads):
        p0 = npanels * t // nthreads
        p1 = npanels * (t + 1) // nthreads
        for p in range(p0, p1):
            for i0 in range(0, Mp, MR):
                bukr_12x2v(kg, Ap, i0 * kg, Bp, p * kg * NR, Cf, Np, i0, p * NR)


def _ceil(x: int, m: int) -> int:
    return -(-x // m) * m


def pack(B: np.ndarray) -> np.ndarray:
    """B's panels (K x N bf16 bit patterns): done once per weight, as a library prepacks a constant B."""
    K, N = B.shape
    kg, Np = _ceil(max(K, 1), 2) // 2, _ceil(max(N, 1), NR)
    Bp = np.empty(kg * Np, np.int32)
    pack_b(B, Bp, Np)
    return Bp


def gemm_bf16(A: np.ndarray, Bp: np.ndarray, N: int, C: np.ndarray, threads: int = 1) -> None:
    """C (M x N fp32) = A @ B from B's packing; A bf16 bit patterns (M x K uint16)."""
    M = A.shape[0]
    Np = _ceil(max(N, 1), NR)
    kg = Bp.shape[0] // Np
    Mp = _ceil(max(M, 1), MR)
    Ap = np.zeros(Mp * kg, np.int32)
    pack_a(A, Ap, Mp)
    direct = M == Mp and N == Np and C.flags.c_contiguous
    Cp = C if direct else np.empty((Mp, Np), np.float32)
    gemm_panels(Ap, Bp, Cp, max(1, min(int(threads), Np // NR)))
    if not direct:
        C[...] = Cp[:M, :N]


MARKER = "# ---- generated by ukr_source" + ": do not edit below this line ----"  # split: never matches here


def generated_source() -> str:
    return MARKER + "\n" + ukr_source(MR, NV, "bf16")


if __name__ == "__main__":  # pragma: no cover - developer tool: rewrite the generated part
    from .codegen import rewrite_below_marker

    rewrite_below_marker(__file__, MARKER, generated_source())


# ---- generated by ukr_source: do not edit below this line ----
@njit(inline="always", cache=True)
def bukr_12x2v(kg, Ap, ao, Bp, bo, C, ldc, i0, j0):
    """C[i0:i0+12, j0:j0+2L] = Ap[ao:] . Bp[bo:] over kg k-groups."""
    L = ILANES
    c0_0, c0_1 = vzero(C), vzero(C)
    c1_0, c1_1 = vzero(C), vzero(C)
    c2_0, c2_1 = vzero(C), vzero(C)
    c3_0, c3_1 = vzero(C), vzero(C)
    c4_0, c4_1 = vzero(C), vzero(C)
    c5_0, c5_1 = vzero(C), vzero(C)
    c6_0, c6_1 = vzero(C), vzero(C)
    c7_0, c7_1 = vzero(C), vzero(C)
    c8_0, c8_1 = vzero(C), vzero(C)
    c9_0, c9_1 = vzero(C), vzero(C)
    c10_0, c10_1 = vzero(C), vzero(C)
    c11_0, c11_1 = vzero(C), vzero(C)
    a = ao
    b = bo
    for _ in range(kg):
        b0 = iload(Bp, b + 0 * L)
        b1 = iload(Bp, b + 1 * L)
        x = ibcast(Ap, a + 0)
        c0_0 = dpbf16ps(c0_0, x, b0)
        c0_1 = dpbf16ps(c0_1, x, b1)
        x = ibcast(Ap, a + 1)
        c1_0 = dpbf16ps(c1_0, x, b0)
        c1_1 = dpbf16ps(c1_1, x, b1)
        x = ibcast(Ap, a + 2)
        c2_0 = dpbf16ps(c2_0, x, b0)
        c2_1 = dpbf16ps(c2_1, x, b1)
        x = ibcast(Ap, a + 3)
        c3_0 = dpbf16ps(c3_0, x, b0)
        c3_1 = dpbf16ps(c3_1, x, b1)
        x = ibcast(Ap, a + 4)
        c4_0 = dpbf16ps(c4_0, x, b0)
        c4_1 = dpbf16ps(c4_1, x, b1)
        x = ibcast(Ap, a + 5)
        c5_0 = dpbf16ps(c5_0, x, b0)
        c5_1 = dpbf16ps(c5_1, x, b1)
        x = ibcast(Ap, a + 6)
        c6_0 = dpbf16ps(c6_0, x, b0)
        c6_1 = dpbf16ps(c6_1, x, b1)
        x = ibcast(Ap, a + 7)
        c7_0 = dpbf16ps(c7_0, x, b0)
        c7_1 = dpbf16ps(c7_1, x, b1)
        x = ibcast(Ap, a + 8)
        c8_0 = dpbf16ps(c8_0, x, b0)
        c8_1 = dpbf16ps(c8_1, x, b1)
        x = ibcast(Ap, a + 9)
        c9_0 = dpbf16ps(c9_0, x, b0)
        c9_1 = dpbf16ps(c9_1, x, b1)
        x = ibcast(Ap, a + 10)
        c10_0 = dpbf16ps(c10_0, x, b0)
        c10_1 = dpbf16ps(c10_1, x, b1)
        x = ibcast(Ap, a + 11)
        c11_0 = dpbf16ps(c11_0, x, b0)
        c11_1 = dpbf16ps(c11_1, x, b1)
        a += 12
        b += 2 * L
    vstore(C, (i0 + 0) * ldc + j0 + 0 * L, c0_0)
    vstore(C, (i0 + 0) * ldc + j0 + 1 * L, c0_1)
    vstore(C, (i0 + 1) * ldc + j0 + 0 * L, c1_0)
    vstore(C, (i0 + 1) * ldc + j0 + 1 * L, c1_1)
    vstore(C, (i0 + 2) * ldc + j0 + 0 * L, c2_0)
    vstore(C, (i0 + 2) * ldc + j0 + 1 * L, c2_1)
    vstore(C, (i0 + 3) * ldc + j0 + 0 * L, c3_0)
    vstore(C, (i0 + 3) * ldc + j0 + 1 * L, c3_1)
    vstore(C, (i0 + 4) * ldc + j0 + 0 * L, c4_0)
    vstore(C, (i0 + 4) * ldc + j0 + 1 * L, c4_1)
    vstore(C, (i0 + 5) * ldc + j0 + 0 * L, c5_0)
    vstore(C, (i0 + 5) * ldc + j0 + 1 * L, c5_1)
    vstore(C, (i0 + 6) * ldc + j0 + 0 * L, c6_0)
    vstore(C, (i0 + 6) * ldc + j0 + 1 * L, c6_1)
    vstore(C, (i0 + 7) * ldc + j0 + 0 * L, c7_0)
    vstore(C, (i0 + 7) * ldc + j0 + 1 * L, c7_1)
    vstore(C, (i0 + 8) * ldc + j0 + 0 * L, c8_0)
    vstore(C, (i0 + 8) * ldc + j0 + 1 * L, c8_1)
    vstore(C, (i0 + 9) * ldc + j0 + 0 * L, c9_0)
    vstore(C, (i0 + 9) * ldc + j0 + 1 * L, c9_1)
    vstore(C, (i0 + 10) * ldc + j0 + 0 * L, c10_0)
    vstore(C, (i0 + 10) * ldc + j0 + 1 * L, c10_1)
    vstore(C, (i0 + 11) * ldc + j0 + 0 * L, c11_0)
    vstore(C, (i0 + 11) * ldc + j0 + 1 * L, c11_1)
