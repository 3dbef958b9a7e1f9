"""4-bit weights x 8-bit activations GEMV: Y = A @ dequant(W)^T with A quantized per block of 32 to
int8 (symmetric: s = max|a| / 127, a8 = round(a / s)) and the products summed in int32 by the
u8 x s8 dot step: onnxruntime's MatMulNBits at accuracy level 4 ("CompInt8"), llama.cpp's
Q4_0 x Q8_0. W in MatMulNBits's layout (qgemm_w.py: block 32, zero point 8, fp32 scales).

Per weight row r and block b:  y += sw[r,b] * sa[b] * (sum_j q_j a8_j - 8 sum_j a8_j)
The codes q (0..15) are the unsigned operand of ``vpdpbusd`` as they lie in memory: one vector
load of packed bytes holds G = lanes / 4 blocks (16 bytes each); its low nibbles are the blocks'
even elements and its high nibbles their odd ones, so the activations are laid out once per call
as [G blocks' 16 even][G blocks' 16 odd] int8 per group of G blocks. Two dot steps give 4 int32
lanes per block; converted to float, they are scaled by sw x sa (the weight scales spread over
their 4 lanes, simd_q.bscale) and summed. The zero point's term is sum_b sw[r,b] zc[b] with
zc[b] = 8 sa[b] sum a8 (computed once per call), vectorized over b.

Napkin (one Zen 4 core, zmm, per 64 bytes of codes = 128 weights): 1 load, 3 logic ops, 2 vpdpbusd,
1 convert, 1 scale load + shuffle, 1 mul, 1 FMA: ~10 ops where the fp32 path (qgemm_w.py) takes
~32, so ~6 B/cycle ~ 20 GB/s per core: at DRAM speed on two cores.
On AVX2 (Zen 3, ymm: ~40 instructions per 64 B of codes) one row of 4096 weights takes ~200 ns from
L2 or L3 alike, 2-3 instructions a cycle at 2.45-3.5 GHz: compute-bound (scripts/w4_gemv_levels.py).
Tried and left out: two weight rows per pass sharing each group's activation and scale loads (four
accumulators) ran 0.69-0.95x of this loop, slowest from DRAM (interleaved A/B in one process,
K = 4096, N = 2048-44032, 1 and 2 threads, 2026-12-07).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .simd import prefetch, vfma, vhsum, vload, vmul, vzero
from .simd_q import ILANES, bscale, dpbusd2, icvt, iload, inib_hi, inib_lo, izero

BLOCK = 32
G = max(ILANES // 4, 1)  # blocks per vector: 16 packed bytes of a block = 4 int32 lanes
GROUP = G * BLOCK
PREFETCH_WORDS = 1024  # software prefetch distance in int32 words of codes (4 KB: two K = 4096 rows ahead)


def layout(M: int, K: int):
    """Buffers of quantize_a for M rows of K: int8 activations (grouped), lane scales, zero terms."""
    nb = K // BLOCK
    ng = -(-nb // G)
    a8 = np.zeros((M, ng * GROUP), np.int8)
    return a8, np.zeros((M, ng * G * 4), np.float32), np.zeros((M, ng * G), np.float32)


@njit(cache=True)
def quantize_a(A, a8, asl, zc):
    """Per row m, block b: s = max|a| / 127 (1 for an all-zero block), a8 = round(a * (1/s)) (ties to
    even, as MLAS's cvtps2dq), grouped; asl[m, 4b..4b+3] = s; zc[m, b] = 8 s sum(a8)."""
    M, K = A.shape
    nb = K // BLOCK
    for m in range(M):
        for b in range(nb):
            o = b * BLOCK
            amax = np.float32(0.0)
            for j in range(BLOCK):
                amax = max(amax, abs(A[m, o + j]))
            s = amax / np.float32(127.0) if amax > 0 else np.float32(1.0)
            inv = np.float32(1.0) / s
            g, i = b // G, b % G
            base = g * GROUP + i * (BLOCK // 2)
            total = 0
            for j in range(BLOCK // 2):
                e = np.int32(np.rint(A[m, o + 2 * j] * inv))
                d = np.int32(np.rint(A[m, o + 2 * j + 1] * inv))
                a8[m, base + j] = e
                a8[m, base + G * (BLOCK // 2) + j] = d
                total += e + d
            for lane in range(4):
                asl[m, 4 * b + lane] = s
            zc[m, b] = np.float32(8.0) * s * np.float32(total)


@njit(fastmath=True, inline="always")
def _rest(P8, S, r, nb, a8, o8, asl, ol, zc, oz):
    """Row r's blocks past the last full group (scalar) less its zero point's term sum_b sw zc (the
    activation row's buffers at offsets o8, ol, oz of the flat a8, asl, zc)."""
    half = BLOCK // 2
    ng = nb // G
    y = np.float32(0.0)
    for b in range(ng * G, nb):
        i = b - ng * G
        base = o8 + ng * GROUP + i * half
        t = 0
        for j in range(half):
            q = np.int32(P8[(r * nb + b) * half + j])
            t += (q & 15) * np.int32(a8[base + j]) + (q >> 4) * np.int32(a8[base + G * half + j])
        y += S[r * nb + b] * asl[ol + 4 * b] * np.float32(t)
    z = vzero(asl)
    nz = nb // ILANES * ILANES
    for b in range(0, nz, ILANES):
        z = vfma(vload(S, r * nb + b), vload(zc, oz + b), z)
    zs = vhsum(z)
    for b in range(nz, nb):
        zs += S[r * nb + b] * zc[oz + b]
    return y - zs


@njit(fastmath=True, inline="always")
def _group(P32, S, r, nb, g, lo, hi, sa, acc):
    """acc + row r's group g: two dot steps (low nibbles x even activations, high x odd), converted,
    scaled by the blocks' weight scales x their activation scales."""
    v = iload(P32, r * nb * 4 + g * ILANES)
    d = dpbusd2(izero(P32), inib_lo(v), lo, inib_hi(v), hi)
    return vfma(vmul(bscale(S, r * nb + g * G), sa), icvt(d), acc)


@njit(fastmath=True, inline="always")
def _row(P32, P8, S, r, nb, a32, a8, asl, zc, m):
    """y of weight row r against quantized activation row m (the flat buffers of layout(), row m at
    its offsets: slicing a row per weight row cost a reference count per call): two accumulators
    (two groups per step) so the FMA chain does not set the pace."""
    ng = nb // G
    o32, ol = m * (-(-nb // G) * GROUP // 4), m * (-(-nb // G) * G * 4)
    acc0, acc1 = vzero(asl), vzero(asl)
    ahead = r * nb * 4 + PREFETCH_WORDS
    sahead = r * nb + PREFETCH_WORDS // 4  # the scales: 4 bytes a block where the codes take 16
    for g in range(0, ng - 1, 2):
        prefetch(P32, ahead + g * ILANES)
        if g % (16 // G) == 0:  # a line (16 scales) of the scales every 16 // G groups
            prefetch(S, sahead + g * G)
        a = o32 + 2 * g * ILANES
        acc0 = _group(P32, S, r, nb, g, iload(a32, a), iload(a32, a + ILANES), vload(asl, ol + g * ILANES), acc0)
        h = g + 1
        a = o32 + 2 * h * ILANES
        acc1 = _group(P32, S, r, nb, h, iload(a32, a), iload(a32, a + ILANES), vload(asl, ol + h * ILANES), acc1)
    if ng % 2:
        g = ng - 1
        a = o32 + 2 * g * ILANES
        acc0 = _group(P32, S, r, nb, g, iload(a32, a), iload(a32, a + ILANES), vload(asl, ol + g * ILANES), acc0)
    rest = _rest(P8, S, r, nb, a8, o32 * 4, asl, ol, zc, m * -(-nb // G) * G)
    return vhsum(acc0) + vhsum(acc1) + rest


@njit(parallel=True, cache=True)
def gemv(P32, P8, S, a32, a8, asl, zc, Y, nthreads):
    """Y[m, :] for every row m (a32, a8, asl, zc: layout()'s buffers, flat): the N weight rows split
    into ``nthreads`` contiguous ranges."""
    M, N = Y.shape
    nb = S.shape[0] // N
    for t in prange(nthreads):
        lo = N * t // nthreads
        hi = N * (t + 1) // nthreads
        for r in range(lo, hi):
            for m in range(M):
                Y[m, r] = _row(P32, P8, S, r, nb, a32, a8, asl, zc, m)


def matmul_w4a8(A, packed, scales, Y, threads: int = 1):
    """Y = quantize_a(A) @ dequant(packed, scales)^T (4-bit codes, MatMulNBits layout)."""
    M, K = A.shape
    a8, asl, zc = layout(M, K)
    quantize_a(A, a8, asl, zc)
    P8 = packed.reshape(-1)
    a8f = a8.reshape(-1)
    gemv(
        P8.view(np.int32), P8, scales.reshape(-1), a8f.view(np.int32), a8f, asl.reshape(-1), zc.reshape(-1), Y, threads
    )
    return Y
