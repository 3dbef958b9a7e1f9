"""INT8 GEMM: C (int32, M x N) = (A - za) @ B, A uint8 (M x K) with zero point za, B int8 (K x N),
symmetric (zero point 0): what onnxruntime's ``MatMulInteger`` computes for u8 activations and s8
weights, and the zero-point handling MLAS uses: C = A @ B - za * colsum(B), the column sums taken
once while B is packed, the correction added as the tile is stored.

Packing: K is cut into groups of 4 (zero-padded). B goes into NR-column panels of int32 words, word
(g, j) holding B[4g:4g+4, j] (Bp[panel][g][NR]); A is copied once into zero-padded rows whose words
are A[i, 4g:4g+4] (the broadcast operand), packed in MR-row panels, k-group major. Per k-group the micro-kernel loads NV vectors of B,
broadcasts MR words of A and runs MR x NV ``dpbusd`` steps (simd_q: vpdpbusd where VNNI exists,
else vpmaddubsw + vpmaddwd + vpaddd) on an MR x NV register tile of int32 accumulators:

  path       tile      registers
  vnni-512   12 x 2v   24 acc + 2 B + 1 broadcast of 32 zmm (24 vpdpbusd per 14 loads)
  vnni-256    6 x 2v   12 acc + 2 B + 1 of 16 ymm
  avx2        4 x 2v    8 acc + 2 B + 1 + 2 temporaries of 16 ymm

Loop nest: N panels (NR columns, split over threads with prange) -> row tiles (MR) -> all of K.
A B panel (K x NR bytes: 64 KiB at K = 2048) stays in L2 while every row tile of A passes.

Edges: M and N are padded to the tile; a padded result is copied into C (one extra pass over C).

Napkin (Zen 4, 1 core): one zmm vpdpbusd per cycle = 128 int8 ops/cycle, 472 GOPS at 3.69 GHz; the
2048^3 product (17.2 G ops) then takes ~36 ms. The AVX2 path: 64 ops/cycle (two multiply pipes).
Inputs are kept so no vpmaddubsw pair saturates (|B| < 64, onnxruntime's reduce_range): both paths
and MLAS's AVX2 kernel then give the exact int32 result.

Micro-kernels: kernels/cpu/qgemm_ukr.py (generated).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from rooflab.memory import aligned_array

from .qgemm_ukr import MR, NR, NV, qukr_for

qukr = qukr_for(MR, NV)


# ---- packing -----------------------------------------------------------------------------------
def word_packers(per: int, mr: int, nr: int):
    """(pack_b, pack_a) for a dot step that sums ``per`` elements of each 32-bit word (vpdpbusd: 4
    int8; vdpbf16ps, kernels/cpu/bf16_gemm.py: 2 bf16), writing into ``lanes``, the int32 panel
    array viewed as the matrix's element type. ``per``, ``mr`` and ``nr`` are constants of the
    compiled closures: a group width read at run time keeps LLVM from unrolling the word loop and
    made the A packing, timed with every product, 6x slower (7.1 ms against 1.0 ms at 2048^2)."""

    @njit(cache=True)
    def pack_b(B, lanes, Np):
        """lanes[p][g][j] = word of B[per*g : per*g + per, p*nr + j] (zero-padded to Np columns)."""
        K, N = B.shape
        kg = lanes.shape[0] // per // Np
        for n in range(Np):
            p, j = n // nr, n % nr
            for g in range(kg):
                base = ((p * kg + g) * nr + j) * per
                for t in range(per):
                    k = per * g + t
                    lanes[base + t] = B[k, n] if (k < K and n < N) else 0

    @njit(cache=True)
    def pack_a(A, lanes, Mp):
        """lanes[t][g][r] = word of A[t*mr + r, per*g : per*g + per] (zero-padded to Mp rows): an
        mr-row panel read k-group by k-group through one pointer, as the micro-kernel broadcasts it."""
        M, K = A.shape
        kg = lanes.shape[0] // per // Mp
        for i in range(M):
            t, r = i // mr, i % mr
            for g in range(kg):
                base = ((t * kg + g) * mr + r) * per
                for u in range(per):
                    k = per * g + u
                    lanes[base + u] = A[i, k] if k < K else 0

    return pack_b, pack_a


pack_b_words, pack_a_words = word_packers(4, MR, NR)


# ---- the loop nest -----------------------------------------------------------------------------
@njit(parallel=True, cache=True)
def gemm_panels(Ap, Bp, C, corr, nthreads):
    """C (Mp x Np int32) over all N panels, the panels split into nthreads contiguous ranges."""
    Mp, Np = C.shape
    kg = Bp.shape[0] // Np
    npanels = Np // NR
    Cf = C.reshape(-1)
    for t in prange(nthreads):
        p0 = npanels * t // nthreads
        p1 = npanels * (t + 1) // nthreads
        for p in range(p0, p1):
            for i0 in range(0, Mp, MR):
                qukr(kg, Ap, i0 * kg, Bp, p * kg * NR, Cf, Np, i0, p * NR, corr)


def _ceil(x: int, m: int) -> int:
    return -(-x // m) * m


def pack(B: np.ndarray, za: int) -> tuple[np.ndarray, np.ndarray]:
    """(Bp, corr) for a weight matrix B (K x N int8) and an activation zero point: done once per
    weight, as onnxruntime prepacks a constant B."""
    K, N = B.shape
    kg, Np = _ceil(max(K, 1), 4) // 4, _ceil(max(N, 1), NR)
    Bp = aligned_array(kg * Np, np.int32)  # every zmm load on one line
    pack_b_words(B, Bp.view(np.int8), Np)
    corr = np.zeros(Np, np.int32)  # -za * the column sums: the zero point's term, once per weight
    corr[:N] = -int(za) * B.sum(axis=0, dtype=np.int64)
    return Bp, corr


def gemm_u8s8(A, za: int, Bp, corr, N: int, C, threads: int = 1) -> None:
    """C (M x N int32) = (A - za) @ B from B's packing; A uint8 (M x K)."""
    M, K = A.shape
    Np = corr.shape[0]
    kg = Bp.shape[0] // Np
    Mp = _ceil(max(M, 1), MR)
    Ap = aligned_array(Mp * kg, np.int32, zero=True)
    pack_a_words(A, Ap.view(np.uint8), Mp)
    direct = M == Mp and N == Np and C.flags.c_contiguous and C.ctypes.data % 64 == 0
    Cp = C if direct else aligned_array((Mp, Np), np.int32)
    gemm_panels(Ap, Bp, Cp, corr, max(1, min(int(threads), Np // NR)))
    if not direct:
        C[...] = Cp[:M, :N]
