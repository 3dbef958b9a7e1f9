"""FFT convolution: rfft2 of zero-padded input tiles, a complex GEMM per frequency over channels,
irfft2, crop (overlap-save). numpy.fft (pocketfft; float32 stays complex64) and numpy's BLAS.

What it computes: the cross-correlation y = irfft2( rfft2(x_tile) . conj(rfft2(w)) ) per tile: with a
tile of L >= To + R - 1 input rows/columns, the first To = L - R + 1 outputs of the circular
correlation are exactly the linear ones (the wrap lands in the discarded ones). Stride > 1 computes
the stride-1 output and subsamples it (declared work counts the full stride-1 transforms).

Plan (``plan``): the transform size L is a 5-smooth number (pocketfft's fast sizes); a padded
image up to 128 on a side is one tile (measured faster than any tiling here), larger images are
tiled with the L in 64..128 that minimises the transform + pointwise FLOPs.

Phases of one call: gather tiles and rfft2 (N*C*tiles planes) -> transpose to (F, N*tiles, C) ->
batched complex matmul with Wc (F, C, K) = conj(rfft2(w)) -> transpose -> irfft2 (N*K*tiles planes)
-> crop and subsample. The weight transform Wc depends only on w and L: it is computed once outside
the timed call (cached on the weights by the variant).

Napkin: C=K=32 at 64x64, R=9: L=72, transforms 64 planes x 2.5*5184*12.3 = 10 MFLOP, pointwise
8*2664*32*32 = 22 MFLOP against 2*32*32*64*64*81 = 680 MFLOP direct: FFT's cost hardly depends on R,
direct's grows with R^2, hence the crossover (research/numba-gemm-conv.md 2.4: R ~ 8-9 vs direct).

Run: pytest tests/test_conv_cpu.py -k fft.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np

MAX_L = 512


@cache
def smooth_sizes(limit: int = MAX_L) -> tuple[int, ...]:
    """5-smooth numbers (2^a 3^b 5^c) up to ``limit``: the sizes pocketfft transforms fastest."""
    out = []
    for n in range(1, limit + 1):
        m = n
        for p in (2, 3, 5):
            while m % p == 0:
                m //= p
        if m == 1:
            out.append(n)
    return tuple(out)


def next_fast(n: int) -> int:
    for s in smooth_sizes(max(MAX_L, 2 * n)):
        if s >= n:
            return s
    raise ValueError(n)  # pragma: no cover


def _cost(L: int, tiles: int, C: int, K: int, Cg: int) -> float:
    n = L * L
    return tiles * (2.5 * n * math.log2(n) * (C + K) + 8.0 * L * (L // 2 + 1) * Cg * K)


WHOLE_MAX = 128  # padded images up to this side are one tile
TILE_RANGE = (64, 128)  # tile sizes tried for larger images


def plan(s: dict) -> tuple[int, int, int, int, int]:
    """(L, To, tiles_h, tiles_w, tiles) for shape s: transform size, outputs per tile side, tiles.

    A padded image up to WHOLE_MAX on a side is one tile: measured interleaved at 1 thread, the whole
    image was as fast as or faster than the FLOP-optimal smaller tiles (C=K=32 64x64 R=3: 4.7 vs
    4.5-7.2 ms; ResNet batch 8 128@28x28: 34.5 vs 38-48 ms, 256@14x14: 29.5 vs 57-104 ms): the
    per-tile transposes, spectra copies and tiny per-frequency GEMMs cost more than the FLOPs saved. Larger images are tiled with the 5-smooth L in TILE_RANGE that minimises
    2.5 L^2 log2 L^2 (C + K) transform + 8 L (L/2 + 1) C K pointwise FLOPs per tile."""
    R, S = s["R"], s["S"]
    Hp, Wp = s["H"] + 2 * s["pad_h"], s["W"] + 2 * s["pad_w"]
    P1, Q1 = Hp - R + 1, Wp - S + 1  # stride-1 outputs
    C, K, Cg = s["C"], s["K"], s["C"] // s["groups"]
    r = max(R, S)
    whole = next_fast(max(Hp, Wp))
    cands = [whole] if whole <= WHOLE_MAX else [L for L in smooth_sizes() if TILE_RANGE[0] <= L <= TILE_RANGE[1]]
    best = None
    for L in cands:
        if L < r + 1:
            continue
        To = L - r + 1
        th, tw = -(-P1 // To), -(-Q1 // To)
        c = _cost(L, th * tw, C, K, Cg)
        if best is None or c < best[0]:
            best = (c, L, To, th, tw)
    if best is None:  # a filter wider than every tile size: one tile of the whole image
        To = whole - r + 1
        best = (0, whole, To, -(-P1 // To), -(-Q1 // To))
    _, L, To, th, tw = best
    return L, To, th, tw, th * tw


def weight_transform(w: np.ndarray, L: int, groups: int) -> np.ndarray:
    """Wc = conj(rfft2(w padded to L x L)) as (F, C/g, K) for groups == 1 (F = L*(L//2+1)) or
    (F, groups, C/g, K/g): the right operand of the per-frequency GEMM."""
    K, Cg, R, S = w.shape
    ctype = np.complex64 if w.dtype == np.float32 else np.complex128
    wf = np.conj(np.fft.rfft2(w.astype(np.float64), s=(L, L))).astype(ctype)  # (K, Cg, L, L//2+1)
    F = L * (L // 2 + 1)
    wf = wf.reshape(K, Cg, F)
    if groups == 1:
        return np.ascontiguousarray(wf.transpose(2, 1, 0))
    Kg = K // groups
    return np.ascontiguousarray(wf.reshape(groups, Kg, Cg, F).transpose(3, 0, 2, 1))


def tiles_view(xpad: np.ndarray, L: int, To: int, th: int, tw: int) -> np.ndarray:
    """(N, C, th, tw, L, L) overlapping view of a padded input at least (th-1)*To + L on each side."""
    sN, sC, sH, sW = xpad.strides
    return np.lib.stride_tricks.as_strided(
        xpad,
        shape=xpad.shape[:2] + (th, tw, L, L),
        strides=(sN, sC, sH * To, sW * To, sH, sW),
        writeable=False,
    )


def fft_conv(x, Wc, s: dict, L: int, To: int, th: int, tw: int, ws, y) -> None:
    """One call into y (N, K, P, Q): x NCHW; Wc from weight_transform; ws(name, shape, dtype, zero,
    tag) gives reusable buffers (the padded input's zero border is keyed by pads and sizes)."""
    N, C, H, W = x.shape
    K, g = s["K"], s["groups"]
    Cg, Kg = C // g, K // g
    R, S = s["R"], s["S"]
    ph, pw = s["pad_h"], s["pad_w"]
    tt = th * tw
    Lh = L // 2 + 1
    F = L * Lh
    ctype = np.complex64 if x.dtype == np.float32 else np.complex128
    # 1. zero-padded input big enough for every tile, tiles' spectra
    side_h, side_w = (th - 1) * To + L, (tw - 1) * To + L
    xpad = ws("fft.xpad", (N, C, side_h, side_w), x.dtype, zero=True, tag=(ph, pw, H, W))
    xpad[:, :, ph : ph + H, pw : pw + W] = x  # the rest stays zero between calls
    xt = tiles_view(xpad, L, To, th, tw)
    X = ws("fft.X", (N, C, th, tw, L, Lh), ctype)
    np.fft.rfft2(xt, out=X)
    # 2. per-frequency GEMM over channels: (F, N*tt, C) @ (F, C, K)
    Xt = ws("fft.Xt", (F, N * tt, C), ctype)
    np.copyto(Xt.reshape(F, N, tt, C), X.reshape(N, C, tt, F).transpose(3, 0, 2, 1))
    Yt = ws("fft.Yt", (F, N * tt, K), ctype)
    if g == 1:
        np.matmul(Xt, Wc, out=Yt)
    else:
        for gi in range(g):
            Yt[:, :, gi * Kg : (gi + 1) * Kg] = np.matmul(Xt[:, :, gi * Cg : (gi + 1) * Cg], Wc[:, gi])
    # 3. back to planes, inverse transforms
    Yf = ws("fft.Yf", (N, K, th, tw, L, Lh), ctype)
    np.copyto(Yf.reshape(N, K, tt, F), Yt.reshape(F, N, tt, K).transpose(1, 3, 2, 0))
    # irfft2 as ifft over rows + irfft over columns: numpy 2.4's irfft2(out=) leaves out unwritten
    np.fft.ifft(Yf, axis=-2, out=Yf)
    yt = ws("fft.yt", (N, K, th, tw, L, L), x.dtype)
    np.fft.irfft(Yf, n=L, axis=-1, out=yt)
    # 4. crop the valid To x To of each tile, stitch, subsample by the stride
    P1, Q1 = H + 2 * ph - R + 1, W + 2 * pw - S + 1
    full = yt[:, :, :, :, :To, :To].transpose(0, 1, 2, 4, 3, 5).reshape(N, K, th * To, tw * To)
    sh, sw = s["stride_h"], s["stride_w"]
    np.copyto(y, full[:, :, :P1:sh, :Q1:sw])
