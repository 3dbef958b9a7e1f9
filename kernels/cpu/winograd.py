"""Winograd minimal-filtering convolution F(2x2,3x3) and F(4x4,3x3) (Lavin & Gray, arXiv:1509.09308).

What it computes: a 3x3, stride-1 conv2d as Y_tile = A^T [ (G g G^T) . (B^T d B) ] A per m x m output
tile (alpha = m + 2): 16 (F(2,3)) or 36 (F(4,3)) multiplies per tile and channel pair instead of
36 or 144. Three phases:

  input transform   per tile row (n, th): the alpha input rows are gathered into a zero-padded
                    channels-last buffer (alpha, tiles*m + 2, Cp) in L2 (a transposing copy for NCHW,
                    a row copy for NHWC), then V[xi*alpha + nu, t, c] = (B^T d B)[xi, nu] vectorized
                    over channels with explicit SIMD (simd.py): alpha column + alpha row 1-D transforms
                    of alpha vectors each, the B^T constants folded (+-1 are adds)
  batched GEMM      M[f] = V[f] @ U[f] for the alpha^2 frequencies: one np.matmul over (alpha^2, T, Cp)
                    x (alpha^2, Cp, Kp) (BLAS; the filter transform U is computed once outside)
  output transform  Y = A^T M A vectorized over output channels into a tile-row buffer
                    (m, tiles*m, Kp), then copied (NCHW: transposed) into y, edge tiles cropped.

Napkin (ResNet 64@56x56, N=8, F(4,3)): T = 8*14*14 = 1568 tiles; GEMM 36 x 2*1568*64*64 = 0.46 GFLOP
(vs 1.85 nominal: 4x fewer); transforms 1568*64*(2*6*22) + 1568*64*(10*13) = 40 MFLOP but ~4 x 14 MB
of V and M traffic (L3/DRAM). With K = 64 the 36 GEMMs are skinny (K-dim 64): BLAS runs them at
~half its large-GEMM rate, so the transforms and that traffic are a large part of the time.

Accuracy: F(4,3)'s transform constants (up to 8 in A^T, 1/24 in G) amplify rounding: float32 error
is ~1e-5 of max|y| against ~1e-6 for direct (research/model-ops.md 2.2); its tolerance row in
rooflab/verify.py is looser and declared. F(2,3) is as accurate as direct.

Run: pytest tests/test_conv_cpu.py -k winograd, or via rooflab.get_variant('cpu.conv.06-winograd-f4x4-3x3').
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

import rooflab._numba_env  # noqa: F401

from .simd import vadd, vbcast, vfma, vload, vstore, vsub

# Lavin & Gray's matrices (verified exactly in research/model-ops.md 2.2).
BT = {
    2: np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], dtype=np.float64),
    4: np.array(
        [
            [4, 0, -5, 0, 1, 0],
            [0, -4, -4, 1, 1, 0],
            [0, 4, -4, -1, 1, 0],
            [0, -2, -1, 2, 1, 0],
            [0, 2, -1, -2, 1, 0],
            [0, 4, 0, -5, 0, 1],
        ],
        dtype=np.float64,
    ),
}
G = {
    2: np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]], dtype=np.float64),
    4: np.array(
        [
            [1 / 4, 0, 0],
            [-1 / 6, -1 / 6, -1 / 6],
            [-1 / 6, 1 / 6, -1 / 6],
            [1 / 24, 1 / 12, 1 / 6],
            [1 / 24, -1 / 12, 1 / 6],
            [0, 0, 1],
        ],
        dtype=np.float64,
    ),
}
AT = {
    2: np.array([[1, 1, 1, 0], [0, 1, -1, -1]], dtype=np.float64),
    4: np.array([[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]], dtype=np.float64),
}


def filter_transform(w: np.ndarray, m: int, groups: int, Cp: int, Kp: int) -> np.ndarray:
    """U = G g G^T in float64, cast to w's dtype. groups == 1: (alpha^2, Cp, Kp), zero-padded;
    groups > 1: (groups, alpha^2, C/g, K/g)."""
    K, Cg = w.shape[:2]
    g = G[m]
    a = m + 2
    u = np.einsum("ar,kcrs,bs->abck", g, w.astype(np.float64), g).reshape(a * a, Cg, K)
    if groups == 1:
        out = np.zeros((a * a, Cp, Kp), dtype=w.dtype)
        out[:, :Cg, :K] = u
        return out
    Kg = K // groups
    return np.ascontiguousarray(u.reshape(a * a, Cg, groups, Kg).transpose(2, 0, 1, 3)).astype(w.dtype)


# ---- 1-D transforms on vectors (inlined; constants are broadcast vectors) -------------------------


@njit(inline="always", fastmath=True)
def _bt4(d0, d1, d2, d3):
    return vsub(d0, d2), vadd(d1, d2), vsub(d2, d1), vsub(d1, d3)


@njit(inline="always", fastmath=True)
def _at4(m0, m1, m2, m3):
    return vadd(vadd(m0, m1), m2), vsub(vsub(m1, m2), m3)


@njit(inline="always", fastmath=True)
def _bt6(d0, d1, d2, d3, d4, d5, c4, cm4, cm5, c2, cm2):
    t0 = vfma(c4, d0, vfma(cm5, d2, d4))
    t1 = vfma(cm4, vadd(d1, d2), vadd(d3, d4))
    t2 = vfma(c4, vsub(d1, d2), vsub(d4, d3))
    f = vsub(d4, d2)
    h = vsub(d3, d1)
    t3 = vfma(c2, h, f)
    t4 = vfma(cm2, h, f)
    t5 = vfma(c4, d1, vfma(cm5, d3, d5))
    return t0, t1, t2, t3, t4, t5


@njit(inline="always", fastmath=True)
def _at6(m0, m1, m2, m3, m4, m5, c2, c4, c8):
    a = vadd(m1, m2)
    b = vsub(m1, m2)
    c = vadd(m3, m4)
    d = vsub(m3, m4)
    return vadd(vadd(m0, a), c), vfma(c2, d, b), vfma(c4, c, a), vadd(vfma(c8, d, b), m5)


# ---- input side: tile-row gather ------------------------------------------------------------------


@njit(inline="always")
def _gather_rows(x, xbuf, n, h0, a, Wb, Cp, ph_unused, pw, nhwc):
    """xbuf[i, col, c] = x at input row h0 + i, column col - pw (zero outside); channels last."""
    for i in range(xbuf.size):
        xbuf[i] = 0
    if nhwc:
        H, W, C = x.shape[1], x.shape[2], x.shape[3]
    else:
        C, H, W = x.shape[1], x.shape[2], x.shape[3]
    for i in range(a):
        h = h0 + i
        if h < 0 or h >= H:
            continue
        rb = i * Wb * Cp
        if nhwc:
            for wi in range(W):
                o = rb + (wi + pw) * Cp
                for c in range(C):
                    xbuf[o + c] = x[n, h, wi, c]
        else:
            for c in range(C):
                for wi in range(W):
                    xbuf[rb + (wi + pw) * Cp + c] = x[n, c, h, wi]


@njit(fastmath=True, parallel=True, cache=True, boundscheck=False)
def input_f23(x, V, cst, lanes, ph, pw, tH, tW, Cp, nhwc):
    """V (16 * T * Cp,) flat: V[f, t, c] for t = (n*tH + th)*tW + tw."""
    N = x.shape[0]
    T = N * tH * tW
    Wb = tW * 2 + 2
    for it in prange(N * tH):
        n = it // tH
        th = it - n * tH
        xbuf = np.empty(4 * Wb * Cp, dtype=x.dtype)
        _gather_rows(x, xbuf, n, th * 2 - ph, 4, Wb, Cp, ph, pw, nhwc)
        for tw in range(tW):
            t = it * tW + tw
            for cv in range(0, Cp, lanes):
                b = (tw * 2) * Cp + cv
                r = Wb * Cp
                c0 = _bt4(vload(xbuf, b), vload(xbuf, b + r), vload(xbuf, b + 2 * r), vload(xbuf, b + 3 * r))
                c1 = _bt4(
                    vload(xbuf, b + Cp),
                    vload(xbuf, b + r + Cp),
                    vload(xbuf, b + 2 * r + Cp),
                    vload(xbuf, b + 3 * r + Cp),
                )
                c2 = _bt4(
                    vload(xbuf, b + 2 * Cp),
                    vload(xbuf, b + r + 2 * Cp),
                    vload(xbuf, b + 2 * r + 2 * Cp),
                    vload(xbuf, b + 3 * r + 2 * Cp),
                )
                c3 = _bt4(
                    vload(xbuf, b + 3 * Cp),
                    vload(xbuf, b + r + 3 * Cp),
                    vload(xbuf, b + 2 * r + 3 * Cp),
                    vload(xbuf, b + 3 * r + 3 * Cp),
                )
                o = t * Cp + cv
                S = T * Cp
                for xi in range(4):
                    if xi == 0:
                        v = _bt4(c0[0], c1[0], c2[0], c3[0])
                    elif xi == 1:
                        v = _bt4(c0[1], c1[1], c2[1], c3[1])
                    elif xi == 2:
                        v = _bt4(c0[2], c1[2], c2[2], c3[2])
                    else:
                        v = _bt4(c0[3], c1[3], c2[3], c3[3])
                    f = xi * 4
                    vstore(V, f * S + o, v[0])
                    vstore(V, (f + 1) * S + o, v[1])
                    vstore(V, (f + 2) * S + o, v[2])
                    vstore(V, (f + 3) * S + o, v[3])


@njit(fastmath=True, parallel=True, cache=True, boundscheck=False)
def input_f43(x, V, cst, lanes, ph, pw, tH, tW, Cp, nhwc):
    """V (36 * T * Cp,) flat; cst = constants(dtype); lanes = the vector width in elements."""
    N = x.shape[0]
    T = N * tH * tW
    Wb = tW * 4 + 2
    c4 = vbcast(cst, 0)
    cm4 = vbcast(cst, 1)
    cm5 = vbcast(cst, 2)
    c2 = vbcast(cst, 3)
    cm2 = vbcast(cst, 4)
    for it in prange(N * tH):
        n = it // tH
        th = it - n * tH
        xbuf = np.empty(6 * Wb * Cp, dtype=x.dtype)
        _gather_rows(x, xbuf, n, th * 4 - ph, 6, Wb, Cp, ph, pw, nhwc)
        r = Wb * Cp
        S = T * Cp
        for tw in range(tW):
            t = it * tW + tw
            for cv in range(0, Cp, lanes):
                b = (tw * 4) * Cp + cv
                k0 = _bt6(
                    vload(xbuf, b),
                    vload(xbuf, b + r),
                    vload(xbuf, b + 2 * r),
                    vload(xbuf, b + 3 * r),
                    vload(xbuf, b + 4 * r),
                    vload(xbuf, b + 5 * r),
                    c4,
                    cm4,
                    cm5,
                    c2,
                    cm2,
                )
                b += Cp
                k1 = _bt6(
                    vload(xbuf, b),
                    vload(xbuf, b + r),
                    vload(xbuf, b + 2 * r),
                    vload(xbuf, b + 3 * r),
                    vload(xbuf, b + 4 * r),
                    vload(xbuf, b + 5 * r),
                    c4,
                    cm4,
                    cm5,
                    c2,
                    cm2,
                )
                b += Cp
                k2 = _bt6(
                    vload(xbuf, b),
                    vload(xbuf, b + r),
                    vload(xbuf, b + 2 * r),
                    vload(xbuf, b + 3 * r),
                    vload(xbuf, b + 4 * r),
                    vload(xbuf, b + 5 * r),
                    c4,
                    cm4,
                    cm5,
                    c2,
                    cm2,
                )
                b += Cp
                k3 = _bt6(
                    vload(xbuf, b),
                    vload(xbuf, b + r),
                    vload(xbuf, b + 2 * r),
                    vload(xbuf, b + 3 * r),
                    vload(xbuf, b + 4 * r),
                    vload(xbuf, b + 5 * r),
                    c4,
                    cm4,
                    cm5,
                    c2,
                    cm2,
                )
                b += Cp
                k4 = _bt6(
                    vload(xbuf, b),
                    vload(xbuf, b + r),
                    vload(xbuf, b + 2 * r),
                    vload(xbuf, b + 3 * r),
                    vload(xbuf, b + 4 * r),
                    vload(xbuf, b + 5 * r),
                    c4,
                    cm4,
                    cm5,
                    c2,
                    cm2,
                )
                b += Cp
                k5 = _bt6(
                    vload(xbuf, b),
                    vload(xbuf, b + r),
                    vload(xbuf, b + 2 * r),
                    vload(xbuf, b + 3 * r),
                    vload(xbuf, b + 4 * r),
                    vload(xbuf, b + 5 * r),
                    c4,
                    cm4,
                    cm5,
                    c2,
                    cm2,
                )
                o = t * Cp + cv
                for xi in range(6):
                    if xi == 0:
                        v = _bt6(k0[0], k1[0], k2[0], k3[0], k4[0], k5[0], c4, cm4, cm5, c2, cm2)
                    elif xi == 1:
                        v = _bt6(k0[1], k1[1], k2[1], k3[1], k4[1], k5[1], c4, cm4, cm5, c2, cm2)
                    elif xi == 2:
                        v = _bt6(k0[2], k1[2], k2[2], k3[2], k4[2], k5[2], c4, cm4, cm5, c2, cm2)
                    elif xi == 3:
                        v = _bt6(k0[3], k1[3], k2[3], k3[3], k4[3], k5[3], c4, cm4, cm5, c2, cm2)
                    elif xi == 4:
                        v = _bt6(k0[4], k1[4], k2[4], k3[4], k4[4], k5[4], c4, cm4, cm5, c2, cm2)
                    else:
                        v = _bt6(k0[5], k1[5], k2[5], k3[5], k4[5], k5[5], c4, cm4, cm5, c2, cm2)
                    f = xi * 6
                    vstore(V, f * S + o, v[0])
                    vstore(V, (f + 1) * S + o, v[1])
                    vstore(V, (f + 2) * S + o, v[2])
                    vstore(V, (f + 3) * S + o, v[3])
                    vstore(V, (f + 4) * S + o, v[4])
                    vstore(V, (f + 5) * S + o, v[5])


# ---- output side ----------------------------------------------------------------------------------


@njit(inline="always")
def _scatter_rows(y, ybuf, n, p0, m, Qb, Kp, nhwc):
    """y rows p0 .. p0+m-1 (cropped to P, Q) from ybuf[i, q, k]."""
    if nhwc:
        P, Q, K = y.shape[1], y.shape[2], y.shape[3]
    else:
        K, P, Q = y.shape[1], y.shape[2], y.shape[3]
    for i in range(m):
        p = p0 + i
        if p >= P:
            break
        rb = i * Qb * Kp
        if nhwc:
            for q in range(Q):
                o = rb + q * Kp
                for k in range(K):
                    y[n, p, q, k] = ybuf[o + k]
        else:
            for k in range(K):
                for q in range(Q):
                    y[n, k, p, q] = ybuf[rb + q * Kp + k]


@njit(fastmath=True, parallel=True, cache=True, boundscheck=False)
def output_f23(M, y, cst, lanes, tH, tW, Kp, nhwc):
    N = y.shape[0]
    T = N * tH * tW
    S = T * Kp
    Qb = tW * 2
    for it in prange(N * tH):
        n = it // tH
        th = it - n * tH
        ybuf = np.empty(2 * Qb * Kp, dtype=y.dtype)
        for tw in range(tW):
            t = it * tW + tw
            for kv in range(0, Kp, lanes):
                o = t * Kp + kv
                k0 = _at4(vload(M, o), vload(M, 4 * S + o), vload(M, 8 * S + o), vload(M, 12 * S + o))
                k1 = _at4(vload(M, S + o), vload(M, 5 * S + o), vload(M, 9 * S + o), vload(M, 13 * S + o))
                k2 = _at4(vload(M, 2 * S + o), vload(M, 6 * S + o), vload(M, 10 * S + o), vload(M, 14 * S + o))
                k3 = _at4(vload(M, 3 * S + o), vload(M, 7 * S + o), vload(M, 11 * S + o), vload(M, 15 * S + o))
                r0 = _at4(k0[0], k1[0], k2[0], k3[0])
                r1 = _at4(k0[1], k1[1], k2[1], k3[1])
                b = (tw * 2) * Kp + kv
                vstore(ybuf, b, r0[0])
                vstore(ybuf, b + Kp, r0[1])
                vstore(ybuf, b + Qb * Kp, r1[0])
                vstore(ybuf, b + Qb * Kp + Kp, r1[1])
        _scatter_rows(y, ybuf, n, th * 2, 2, Qb, Kp, nhwc)


@njit(fastmath=True, parallel=True, cache=True, boundscheck=False)
def output_f43(M, y, cst, lanes, tH, tW, Kp, nhwc):
    """y from M (36 * T * Kp,) flat; cst = constants(dtype)."""
    N = y.shape[0]
    T = N * tH * tW
    S = T * Kp
    Qb = tW * 4
    c4 = vbcast(cst, 0)
    c2 = vbcast(cst, 3)
    c8 = vbcast(cst, 5)
    for it in prange(N * tH):
        n = it // tH
        th = it - n * tH
        ybuf = np.empty(4 * Qb * Kp, dtype=y.dtype)
        for tw in range(tW):
            t = it * tW + tw
            for kv in range(0, Kp, lanes):
                o = t * Kp + kv
                k0 = _at6(
                    vload(M, o),
                    vload(M, 6 * S + o),
                    vload(M, 12 * S + o),
                    vload(M, 18 * S + o),
                    vload(M, 24 * S + o),
                    vload(M, 30 * S + o),
                    c2,
                    c4,
                    c8,
                )
                k1 = _at6(
                    vload(M, S + o),
                    vload(M, 7 * S + o),
                    vload(M, 13 * S + o),
                    vload(M, 19 * S + o),
                    vload(M, 25 * S + o),
                    vload(M, 31 * S + o),
                    c2,
                    c4,
                    c8,
                )
                k2 = _at6(
                    vload(M, 2 * S + o),
                    vload(M, 8 * S + o),
                    vload(M, 14 * S + o),
                    vload(M, 20 * S + o),
                    vload(M, 26 * S + o),
                    vload(M, 32 * S + o),
                    c2,
                    c4,
                    c8,
                )
                k3 = _at6(
                    vload(M, 3 * S + o),
                    vload(M, 9 * S + o),
                    vload(M, 15 * S + o),
                    vload(M, 21 * S + o),
                    vload(M, 27 * S + o),
                    vload(M, 33 * S + o),
                    c2,
                    c4,
                    c8,
                )
                k4 = _at6(
                    vload(M, 4 * S + o),
                    vload(M, 10 * S + o),
                    vload(M, 16 * S + o),
                    vload(M, 22 * S + o),
                    vload(M, 28 * S + o),
                    vload(M, 34 * S + o),
                    c2,
                    c4,
                    c8,
                )
                k5 = _at6(
                    vload(M, 5 * S + o),
                    vload(M, 11 * S + o),
                    vload(M, 17 * S + o),
                    vload(M, 23 * S + o),
                    vload(M, 29 * S + o),
                    vload(M, 35 * S + o),
                    c2,
                    c4,
                    c8,
                )
                b = (tw * 4) * Kp + kv
                for i in range(4):
                    if i == 0:
                        v = _at6(k0[0], k1[0], k2[0], k3[0], k4[0], k5[0], c2, c4, c8)
                    elif i == 1:
                        v = _at6(k0[1], k1[1], k2[1], k3[1], k4[1], k5[1], c2, c4, c8)
                    elif i == 2:
                        v = _at6(k0[2], k1[2], k2[2], k3[2], k4[2], k5[2], c2, c4, c8)
                    else:
                        v = _at6(k0[3], k1[3], k2[3], k3[3], k4[3], k5[3], c2, c4, c8)
                    o2 = b + i * Qb * Kp
                    vstore(ybuf, o2, v[0])
                    vstore(ybuf, o2 + Kp, v[1])
                    vstore(ybuf, o2 + 2 * Kp, v[2])
                    vstore(ybuf, o2 + 3 * Kp, v[3])
        _scatter_rows(y, ybuf, n, th * 4, 4, Qb, Kp, nhwc)


def constants(dtype) -> np.ndarray:
    """The transform constants the kernels broadcast: index 0 -> 4, 1 -> -4, 2 -> -5, 3 -> 2,
    4 -> -2, 5 -> 8."""
    return np.array([4, -4, -5, 2, -2, 8], dtype=dtype)
