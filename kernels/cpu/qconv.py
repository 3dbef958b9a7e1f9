"""INT8 convolution, as a quantized graph's QLinearConv runs it: y (uint8, NCHW) =
clamp(rint(acc * m) + zy, 0, 255), acc = sum over the window of (x - zx) * w, x uint8 NCHW with zero
point zx, w int8 (K, C/groups, R, S) symmetric, one requantization multiplier m (x_scale * w_scale /
y_scale) in float32, rounded half to even: what onnxruntime's QLinearConv (MLAS) computes.

Two paths:

  im2col + INT8 GEMM  x is copied once into a padded NHWC buffer (the border holds zx, so it adds 0;
                      channels padded to a multiple of 4 so a tap's channels are whole 32-bit
                      words); the patches (one row per output pixel, taps major, channels minor)
                      are then word copies straight into the packed-A words of the INT8 GEMM
                      (kernels/cpu/qgemm_i8.py: no separate im2col matrix); the weights are B (R S
                      C4 x K/g) in the same order, packed once per weight with the zero point's
                      column term; the int32 tile product (N P Q x K/g) is requantized and
                      transposed to NCHW in one tiled pass. Groups (1 < g) run group by group.
  depthwise direct    groups = C = K: per plane, x - zx widened once to a zero-bordered float32
                      plane, 4 output rows x a vector of columns per pass, one FMA per tap and row
                      (exact: integer sums below 2^24; stride 2 by even-lane loads), requantized
                      at the store.

Napkin: a ResNet-50 3x3 64 -> 64 at 56x56, batch 1: 231 M integer ops over 0.2 MB of x and 37 KB of
w; the patches are 3136 x 576 bytes (1.8 MB, L2/L3) and the tile product 3136 x 64 int32 (0.8 MB).
At the AVX2 dot path's ~64 int8 ops/cycle/core that is ~1.2 ms at 3 GHz, plus the patch pass
(~1.8 MB written, ~0.1 ms). A MobileNetV2 depthwise 3x3 at 144 x 56 x 56 does 8.1 M ops over
0.45 MB in and 0.45 MB out: bandwidth-bound in L2/L3.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

import rooflab._numba_env  # noqa: F401

from .conv_simd import vload_even
from .qgemm_i8 import MR, NR, gemm_panels, pack
from .simd import vfma, vlanes, vload, vsplat, vstore, vstore2, vsub, vzero
from .simd_q import byte_f32


@njit(parallel=True, cache=True)
def to_padded_nhwc(x, zx, ph, pw, groups, out):
    """out[g, n, ph + h, pw + v, c] = x[n, g C/g + c, h, v]; the border and the channels past C/g
    (up to a multiple of 4: whole words) hold zx. One pass over x."""
    N, C, H, W = x.shape
    Cg = C // groups
    G, _, Hp, Wp, C4 = out.shape
    for gnh in prange(G * N * Hp):
        g, n, h = gnh // (N * Hp), (gnh // Hp) % N, gnh % Hp
        for v in range(Wp):
            for c in range(C4):
                out[g, n, h, v, c] = zx
        if ph <= h < ph + H:
            for c in range(Cg):
                src = x[n, g * Cg + c, h - ph]
                for v in range(W):
                    out[g, n, h, pw + v, c] = src[v]


@njit(parallel=True, cache=True)
def patches_packed(xw, R, S, sh, sw, P, Q, lanes, Mp):
    """The im2col rows of one group (row i = n P Q + p Q + q; column (r S + s) C4w + c, in words of
    the padded NHWC input ``xw``, (N, Hp, Wp, C4w) int32) written as the INT8 GEMM's packed-A words:
    lanes[(t kg + k) MR + rr] = word k of row t MR + rr; rows past N P Q are 0. A filter row's S
    taps are S C4w consecutive words of xw; the MR rows of a tile are read side by side, so the
    stores run contiguously."""
    N, Hp, Wp, C4w = xw.shape
    flat = xw.reshape(-1)
    PQ = P * Q
    M = N * PQ
    run = S * C4w
    kg = R * run
    for t in prange(Mp // MR):
        base = t * kg * MR
        src = np.zeros(MR, np.int64)
        live = min(MR, M - t * MR)  # rows of this tile inside the product
        for rr in range(live):
            i = t * MR + rr
            n, p, q = i // PQ, (i % PQ) // Q, i % Q
            src[rr] = ((n * Hp + p * sh) * Wp + q * sw) * C4w
        out = lanes[base : base + kg * MR]
        if live < MR:
            out[:] = 0
        for r in range(R):
            o = r * run * MR
            for k in range(run):
                for rr in range(live):
                    out[o + rr] = flat[src[rr] + k]
                o += MR
            for rr in range(live):
                src[rr] += Wp * C4w


TILE = 64  # rows of the int32 product requantized together (a tile of TILE x K/g bytes stays in L1)


@njit(parallel=True, cache=True)
def requantize_nchw(Cp, M, Kg, k0, m, zy, y):
    """y[n, k0 + k, j] = clamp(rint(Cp[n PQ + j, k] m) + zy) (y viewed N x K x PQ): per tile of TILE
    rows, requantized along the rows (contiguous: vectorized) into a small buffer, then written
    out column by column."""
    N, _, PQ = y.shape
    mf = np.float32(m)
    zf = np.float32(zy)
    tiles = -(-PQ // TILE)
    for nt in prange(N * tiles):
        n, j0 = nt // tiles, (nt % tiles) * TILE
        rows = min(PQ, j0 + TILE) - j0
        buf = np.empty((TILE, Kg), np.uint8)
        for j in range(rows):
            src = Cp[n * PQ + j0 + j]
            for k in range(Kg):
                v = np.rint(np.float32(src[k]) * mf) + zf
                buf[j, k] = np.uint8(min(max(v, np.float32(0.0)), np.float32(255.0)))
        for k in range(Kg):
            dst = y[n, k0 + k]
            for j in range(rows):
                dst[j0 + j] = buf[j, k]


EXACT_TAPS = (1 << 24) // (255 * 64)  # taps whose float32 sum of |x - zx| |w| products stays exact
ROWS = 4  # output rows per pass: four independent FMA chains (one chain is latency-bound)


@njit(inline="always")
def _rows_unit(buf, wc, R, S, b0, Wq, step, Q, rows):
    """ROWS output rows at column stride 1 into ``rows``: a tap's L inputs are one vector load."""
    L = vlanes(rows)
    for q in range(0, Q, L):
        a0, a1, a2, a3 = vzero(rows), vzero(rows), vzero(rows), vzero(rows)
        for r in range(R):
            for s in range(S):
                wv = vsplat(wc[r * S + s])
                b = b0 + r * Wq + q + s
                a0 = vfma(wv, vload(buf, b), a0)
                a1 = vfma(wv, vload(buf, b + step), a1)
                a2 = vfma(wv, vload(buf, b + 2 * step), a2)
                a3 = vfma(wv, vload(buf, b + 3 * step), a3)
        vstore2(rows, 0, q, a0)
        vstore2(rows, 1, q, a1)
        vstore2(rows, 2, q, a2)
        vstore2(rows, 3, q, a3)


@njit(inline="always")
def _rows_even(buf, wc, R, S, b0, Wq, step, Q, rows):
    """The same at column stride 2: a tap's L inputs are the even lanes of 2 L (2 loads, 1 shuffle)."""
    L = vlanes(rows)
    for q in range(0, Q, L):
        a0, a1, a2, a3 = vzero(rows), vzero(rows), vzero(rows), vzero(rows)
        for r in range(R):
            for s in range(S):
                wv = vsplat(wc[r * S + s])
                b = b0 + r * Wq + 2 * q + s
                a0 = vfma(wv, vload_even(buf, b), a0)
                a1 = vfma(wv, vload_even(buf, b + step), a1)
                a2 = vfma(wv, vload_even(buf, b + 2 * step), a2)
                a3 = vfma(wv, vload_even(buf, b + 3 * step), a3)
        vstore2(rows, 0, q, a0)
        vstore2(rows, 1, q, a1)
        vstore2(rows, 2, q, a2)
        vstore2(rows, 3, q, a3)


@njit(inline="always")
def _rows_gather(buf, wc, R, S, b0, Wq, step, Q, sw, rows):
    """Any other column stride: scalar sums (rare: no model here has one)."""
    for k in range(ROWS):
        for q in range(Q):
            acc = np.float32(0.0)
            for r in range(R):
                for s in range(S):
                    acc += wc[r * S + s] * buf[b0 + k * step + r * Wq + q * sw + s]
            rows[k, q] = acc


@njit(parallel=True, cache=True)
def depthwise(x, w, zx, m, zy, sh, sw, ph, pw, y, nchunks):
    """groups = C = K. The N C planes are split into ``nchunks`` (one per thread), each with its own
    buffers. Per plane, x - zx is widened once into a zero-bordered float32 plane (vector loads and
    stores); ROWS output rows x L columns per pass, one FMA per tap and row (float32 is exact:
    integer sums below 2^24, EXACT_TAPS; _rows_unit, _rows_even, _rows_gather by column stride); the
    rows are requantized at the store."""
    N, C, H, W = x.shape
    R, S = w.shape[2], w.shape[3]
    P, Q = y.shape[2], y.shape[3]
    Hp = H + 2 * ph + ROWS * sh  # slack rows: the last pass may run past P
    wf = w.reshape(-1).astype(np.float32)
    mf, zf, zxf = np.float32(m), np.float32(zy), np.float32(zx)
    planes = N * C
    for t in prange(nchunks):
        rows = np.zeros((ROWS, Q + 64), np.float32)
        L = vlanes(rows)
        Qv = (Q + L - 1) // L * L
        Wq = (max(W + 2 * pw, sw * Qv + S) + 3 * L - 1) // L * L  # slack: the last (double) vector
        buf = np.zeros(Hp * Wq + 2 * L, np.float32)  # borders stay 0: only the interior is written
        zv = vsplat(zxf)
        for nc in range(planes * t // nchunks, planes * (t + 1) // nchunks):
            n, c = nc // C, nc % C
            for h in range(H):
                src = x[n, c, h]
                seg = buf[(h + ph) * Wq + pw :]
                v = 0
                while v + L <= W:
                    vstore(seg, v, vsub(byte_f32(src, v), zv))
                    v += L
                for u in range(v, W):
                    seg[u] = np.float32(src[u]) - zxf
            wc = wf[c * R * S :]
            step = sh * Wq
            dst = y[n, c]
            for p in range(0, P, ROWS):
                if sw == 1:
                    _rows_unit(buf, wc, R, S, p * step, Wq, step, Q, rows)
                elif sw == 2:
                    _rows_even(buf, wc, R, S, p * step, Wq, step, Q, rows)
                else:
                    _rows_gather(buf, wc, R, S, p * step, Wq, step, Q, sw, rows)
                for k in range(min(ROWS, P - p)):
                    out, acc = dst[p + k], rows[k]
                    for q in range(Q):
                        v = np.rint(acc[q] * mf) + zf
                        out[q] = np.uint8(min(max(v, np.float32(0.0)), np.float32(255.0)))


_SCRATCH: dict = {}


def scratch(name: str, shape: tuple, dtype) -> np.ndarray:
    """A work buffer kept between calls (by name, shape and dtype), as a library keeps its
    workspace: a fresh multi-MB allocation each call is page faults the op does not have."""
    key = (name, shape, np.dtype(dtype).str)
    buf = _SCRATCH.get(key)
    if buf is None:
        if len(_SCRATCH) > 32:
            _SCRATCH.clear()
        buf = _SCRATCH[key] = np.empty(shape, dtype)
    return buf


def _ceil(x: int, to: int) -> int:
    return -(-x // to) * to


def pack_weights(w: np.ndarray, zx: int, groups: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per group, (Bp, corr) of B (R S C4 x K/g): row (r S + s) C4 + c holds w[g K/g + k, c, r, s],
    0 for the channels past C/g. Packed once per weight, as MLAS prepacks a constant filter."""
    K, Cg, R, S = w.shape
    Kg, C4 = K // groups, _ceil(Cg, 4)
    taps = np.zeros((K, R, S, C4), np.int8)
    taps[..., :Cg] = w.transpose(0, 2, 3, 1)
    flat = taps.reshape(K, -1)
    return [pack(np.ascontiguousarray(flat[g * Kg : (g + 1) * Kg].T), zx) for g in range(groups)]


def conv_gemm(x, packed, R, S, zx, m, zy, stride, pad, groups, y, threads=1) -> None:
    """y (uint8, N K P Q) by im2col + INT8 GEMM, group by group, from pack_weights's panels."""
    N, C, H, W = x.shape
    K, P, Q = y.shape[1:]
    Cg, Kg = C // groups, K // groups
    (sh, sw), (ph, pw) = stride, pad
    C4 = _ceil(Cg, 4)
    xt = scratch("nhwc", (groups, N, H + 2 * ph, W + 2 * pw, C4), np.uint8)
    to_padded_nhwc(x, zx, ph, pw, groups, xt)
    xw = xt.view(np.int32)
    M = N * P * Q
    Mp = _ceil(M, MR)
    y3 = y.reshape(N, K, P * Q)
    for g, (Bp, corr) in enumerate(packed):
        Np = corr.shape[0]
        lanes = scratch("patches", (Mp * (Bp.shape[0] // Np),), np.int32)
        patches_packed(xw[g], R, S, sh, sw, P, Q, lanes, Mp)
        Cp = scratch("product", (Mp, Np), np.int32)
        gemm_panels(lanes, Bp, Cp, corr, max(1, min(int(threads), Np // NR)))
        requantize_nchw(Cp, M, Kg, g * Kg, m, zy, y3)
