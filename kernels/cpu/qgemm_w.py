"""Weight-only quantized GEMV/GEMM: Y = A @ dequant(W)^T, fp32 activations and accumulation, W stored
in onnxruntime's ``MatMulNBits`` layout (blockwise, block 32, symmetric: zero point 2^(bits-1)).

Layout (N output columns, K inputs, nb = K / 32 blocks per column):
  packed  uint8 [N, nb, 32 * bits / 8]  4 bits: byte j of a block holds element 2j (low nibble) and
                                        2j+1 (high nibble); 8 bits: one byte per element
  scales  float32 [N, nb]               w = (q - 2^(bits-1)) * scale

The weights are widened in registers (simd_q.nib_lo/nib_hi/byte_f32: zero-extend, convert), never
to an fp32 copy of W. The zero point is folded out of the inner loop:
  sum_j (q_j - z) s a_j = s (sum_j q_j a_j) - z s (sum_j a_j)
so each block costs its products plus one scalar FMA with the block's activation sum (computed once
per call). For 4 bits the activations are reordered once per call into [block][16 even][16 odd],
matching the low and high nibbles. Four weight rows share each activation load.

Prefill (M > ROWS_GEMV rows): the BLIS loop nest and register-tile micro-kernel of
kernels/cpu/gemm.py, where packing a KC x NC panel of B dequantizes it from the codes (1 MiB of
fp32, never the whole matrix): the dequantize-and-FMA path, the widening paid once per panel and
amortized over the M rows, so at M >= 32 it runs near the FP32 FMA roof.

Napkin (one Zen 4 core, zmm): per 16 bytes of 4-bit weights: 2 widenings (zext + convert), 1 mul,
2 FMA, 1 broadcast: ~8 vector ops at one zmm op per cycle -> ~2 B/cycle ~ 7 GB/s per core, so the
GEMV of a 4096 x 11008 weight (22.5 MB packed + 5.6 MB scales) is bound by the widening on one
core and approaches the DRAM read roof only on several.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .gemm import BLOCKING as _GEMM_BLOCKING
from .gemm import MR, TILE, pack_a, ukr
from .simd import vfma, vhsum, vload, vmul, vsplat, vzero
from .simd_q import ILANES, byte_f32, nib_hi, nib_lo

BLOCK = 32
_GEMM_MC = _GEMM_BLOCKING["float32"]["mc"]
TILE_NR = TILE["float32"][1]
ROWS_GEMV = 4  # rows of A up to which the GEMV path runs per row; above, the dequantize-and-GEMM path


# ---- activations, once per call -------------------------------------------------------------
@njit(cache=True)
def prepare_a(A, bits, aq, asum):
    """aq[m]: row m of A in the order the weights are read (4 bits: per block 16 even then 16 odd
    elements); asum[m, b]: the sum of block b of row m (the zero point's term)."""
    M, K = A.shape
    nb = K // BLOCK
    for m in range(M):
        for b in range(nb):
            s = np.float32(0.0)
            o = b * BLOCK
            for j in range(BLOCK // 2):
                e, d = A[m, o + 2 * j], A[m, o + 2 * j + 1]
                s += e + d
                if bits == 4:
                    aq[m, o + j] = e
                    aq[m, o + BLOCK // 2 + j] = d
                else:
                    aq[m, o + 2 * j] = e
                    aq[m, o + 2 * j + 1] = d
            asum[m, b] = s


# ---- GEMV: four weight rows at a time --------------------------------------------------------
@njit(fastmath=True, inline="always")
def _rows4_w4(P, S, n, nb, a, asum):
    """Dot products of activation row ``a`` (reordered) with the 4-bit weight rows n..n+3."""
    c0 = vzero(a)
    c1 = vzero(a)
    c2 = vzero(a)
    c3 = vzero(a)
    z0 = z1 = z2 = z3 = np.float32(0.0)
    blob = BLOCK // 2
    r0 = n * nb
    r1 = r0 + nb
    r2 = r1 + nb
    r3 = r2 + nb
    for b in range(nb):
        s0, s1, s2, s3 = S[r0 + b], S[r1 + b], S[r2 + b], S[r3 + b]
        sa = asum[b]
        z0 += s0 * sa
        z1 += s1 * sa
        z2 += s2 * sa
        z3 += s3 * sa
        for c in range(0, blob, ILANES):
            ae = vload(a, b * BLOCK + c)
            ao = vload(a, b * BLOCK + blob + c)
            p = (r0 + b) * blob + c
            c0 = vfma(vsplat(s0), vfma(nib_hi(P, p), ao, vmul(nib_lo(P, p), ae)), c0)
            p = (r1 + b) * blob + c
            c1 = vfma(vsplat(s1), vfma(nib_hi(P, p), ao, vmul(nib_lo(P, p), ae)), c1)
            p = (r2 + b) * blob + c
            c2 = vfma(vsplat(s2), vfma(nib_hi(P, p), ao, vmul(nib_lo(P, p), ae)), c2)
            p = (r3 + b) * blob + c
            c3 = vfma(vsplat(s3), vfma(nib_hi(P, p), ao, vmul(nib_lo(P, p), ae)), c3)
    return vhsum(c0) - 8 * z0, vhsum(c1) - 8 * z1, vhsum(c2) - 8 * z2, vhsum(c3) - 8 * z3


@njit(fastmath=True, inline="always")
def _rows4_w8(P, S, n, nb, a, asum):
    """As _rows4_w4 for 8-bit weights (one byte per element, zero point 128)."""
    c0 = vzero(a)
    c1 = vzero(a)
    c2 = vzero(a)
    c3 = vzero(a)
    z0 = z1 = z2 = z3 = np.float32(0.0)
    r0 = n * nb
    r1 = r0 + nb
    r2 = r1 + nb
    r3 = r2 + nb
    for b in range(nb):
        s0, s1, s2, s3 = S[r0 + b], S[r1 + b], S[r2 + b], S[r3 + b]
        sa = asum[b]
        z0 += s0 * sa
        z1 += s1 * sa
        z2 += s2 * sa
        z3 += s3 * sa
        t0 = vzero(a)
        t1 = vzero(a)
        t2 = vzero(a)
        t3 = vzero(a)
        for c in range(0, BLOCK, ILANES):
            x = vload(a, b * BLOCK + c)
            t0 = vfma(byte_f32(P, (r0 + b) * BLOCK + c), x, t0)
            t1 = vfma(byte_f32(P, (r1 + b) * BLOCK + c), x, t1)
            t2 = vfma(byte_f32(P, (r2 + b) * BLOCK + c), x, t2)
            t3 = vfma(byte_f32(P, (r3 + b) * BLOCK + c), x, t3)
        c0 = vfma(vsplat(s0), t0, c0)
        c1 = vfma(vsplat(s1), t1, c1)
        c2 = vfma(vsplat(s2), t2, c2)
        c3 = vfma(vsplat(s3), t3, c3)
    return vhsum(c0) - 128 * z0, vhsum(c1) - 128 * z1, vhsum(c2) - 128 * z2, vhsum(c3) - 128 * z3


@njit(fastmath=True, inline="always")
def _rows4(P, S, n, nb, a, asum, bits):
    if bits == 4:
        return _rows4_w4(P, S, n, nb, a, asum)
    return _rows4_w8(P, S, n, nb, a, asum)


@njit(parallel=True, cache=True)
def gemv_rows(P, S, aq, asum, Y, bits, nthreads, reps=1):
    """Y[m, :] = dequant(W) @ A[m] for every row m of A (few rows): the N weight rows split into
    ``nthreads`` contiguous ranges (each core streams its own part of W); 4 rows per step, the
    last N % 4 through a zero-padded copy of their rows. ``reps`` > 1 repeats it inside the one
    parallel region (the W4 roof on cache-resident weights: no fork/join per repetition)."""
    M = aq.shape[0]
    N = Y.shape[1]
    nb = aq.shape[1] // BLOCK
    n4 = N // 4 * 4
    for t in prange(nthreads):
        lo = (n4 // 4) * t // nthreads * 4
        hi = (n4 // 4) * (t + 1) // nthreads * 4
        for _ in range(reps):
            for n in range(lo, hi, 4):
                for m in range(M):
                    y0, y1, y2, y3 = _rows4(P, S, n, nb, aq[m], asum[m], bits)
                    Y[m, n] = y0
                    Y[m, n + 1] = y1
                    Y[m, n + 2] = y2
                    Y[m, n + 3] = y3


@njit(cache=True)
def gemv_tail(Ptail, Stail, aq, asum, Y, n0, bits):
    """The last N % 4 columns: their rows (zero-padded to 4 by the caller) through the same step."""
    nb = aq.shape[1] // BLOCK
    for m in range(aq.shape[0]):
        y = _rows4(Ptail, Stail, 0, nb, aq[m], asum[m], bits)
        for r in range(Y.shape[1] - n0):
            Y[m, n0 + r] = y[r]


# ---- prefill: the packed fp32 GEMM of gemm.py, its B panels dequantized as they are packed -------
@njit(cache=True)
def dequant_pack_b(P, S, nb, bits, pc, kc, jc, nc, Bp, NR):
    """Bp[(jr/NR)*NR*kc + p*NR + j] = w[jc+jr+j, pc+p] (dequantized; columns past nc zero): the B
    panel format of gemm.pack_b, written straight from the codes (pc, kc multiples of the block)."""
    blob = BLOCK * bits // 8
    for jr in range(0, nc, NR):
        base = jr * kc
        for j in range(NR):
            n = jc + jr + j
            if jr + j >= nc:
                for p in range(kc):
                    Bp[base + p * NR + j] = 0
                continue
            for b in range(pc // BLOCK, (pc + kc) // BLOCK):
                s = S[n * nb + b]
                src = (n * nb + b) * blob
                o = base + (b * BLOCK - pc) * NR + j
                if bits == 4:
                    for i in range(BLOCK // 2):
                        q = P[src + i]
                        Bp[o + 2 * i * NR] = (np.float32(q & 15) - np.float32(8.0)) * s
                        Bp[o + (2 * i + 1) * NR] = (np.float32(q >> 4) - np.float32(8.0)) * s
                else:
                    for i in range(BLOCK):
                        Bp[o + i * NR] = (np.float32(P[src + i]) - np.float32(128.0)) * s


@njit(cache=True)
def _prefill_block(A, P, S, bits, C, n0, n1, Ap, Bp, tmp, mc_blk, kc_blk, nc_blk):
    """C[:, n0:n1] = A @ dequant(W)[n0:n1]^T with gemm.py's loop nest and micro-kernel."""
    M, K = A.shape
    nb = K // BLOCK
    NR = tmp.shape[1]
    for jc in range(n0, n1, nc_blk):
        nc = min(nc_blk, n1 - jc)
        for pc in range(0, K, kc_blk):
            kc = min(kc_blk, K - pc)
            first = pc == 0
            dequant_pack_b(P, S, nb, bits, pc, kc, jc, nc, Bp, NR)
            for ic in range(0, M, mc_blk):
                mc = min(mc_blk, M - ic)
                pack_a(A, ic, mc, pc, kc, Ap, MR)
                for jr in range(0, nc, NR):
                    nr = min(NR, nc - jr)
                    for ir in range(0, mc, MR):
                        mr = min(MR, mc - ir)
                        if mr == MR and nr == NR:
                            ukr(kc, Ap, ir * kc, Bp, jr * kc, C, ic + ir, jc + jr, first)
                        else:
                            ukr(kc, Ap, ir * kc, Bp, jr * kc, tmp, 0, 0, True)
                            for i in range(mr):
                                for j in range(nr):
                                    if first:
                                        C[ic + ir + i, jc + jr + j] = tmp[i, j]
                                    else:
                                        C[ic + ir + i, jc + jr + j] += tmp[i, j]


@njit(parallel=True, cache=True)
def prefill(A, P, S, bits, C, cuts, Ap, Bp, tmp, mc, kc, nc):
    """The N columns split at ``cuts`` (multiples of NR), one slab per thread, private buffers."""
    for t in prange(cuts.shape[0] - 1):
        _prefill_block(A, P, S, bits, C, cuts[t], cuts[t + 1], Ap[t], Bp[t], tmp[t], mc, kc, nc)


PREFILL_BLOCKING = {"mc": _GEMM_MC, "kc": 1024, "nc": 256}  # nc: a 1 MiB dequantized panel at kc 1024


def matmul_nbits(A, packed, scales, bits: int, Y, threads: int = 1) -> None:
    """Y (M x N) = A (M x K, float32) @ dequant(W)^T: the GEMV path for few rows, else the packed
    GEMM of kernels/cpu/gemm.py with B's panels dequantized as they are packed."""
    M, K = A.shape
    N = Y.shape[1]
    nb = K // BLOCK
    P = packed.reshape(-1)
    S = scales.reshape(-1)
    if M <= ROWS_GEMV:
        aq = np.empty((M, K), np.float32)
        asum = np.empty((M, nb), np.float32)
        prepare_a(A, bits, aq, asum)
        n4 = N // 4 * 4
        if n4:
            gemv_rows(P, S, aq, asum, Y, bits, max(1, min(int(threads), n4 // 4)))
        if n4 < N:
            rows = N - n4
            blob = BLOCK * bits // 8
            Pt = np.zeros(4 * nb * blob, np.uint8)
            St = np.zeros(4 * nb, np.float32)
            Pt[: rows * nb * blob] = P[n4 * nb * blob :]
            St[: rows * nb] = S[n4 * nb :]
            gemv_tail(Pt, St, aq, asum, Y, n4, bits)
        return
    NR = TILE_NR
    mc = min(PREFILL_BLOCKING["mc"], -(-M // MR) * MR)
    kc = min(PREFILL_BLOCKING["kc"], K)
    nc = min(PREFILL_BLOCKING["nc"], -(-N // NR) * NR)
    t = max(1, min(int(threads), -(-N // NR)))
    cuts = np.array([min(N, -(-(N * i // t) // NR) * NR) for i in range(t + 1)], np.int64)
    Ap = np.empty((t, mc * kc), np.float32)
    Bp = np.empty((t, kc * nc), np.float32)
    tmp = np.zeros((t, MR, NR), np.float32)
    prefill(A, P, S, bits, Y, cuts, Ap, Bp, tmp, mc, kc, nc)
