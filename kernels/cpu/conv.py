"""Direct 2-D convolution kernels (numba): naive, register-blocked explicit SIMD, depthwise.

What they compute: y = conv2d(x, w, stride, pad, groups), cross-correlation, x NCHW (or NHWC where
said), w (K, C/groups, R, S), float32 or float64. Variants (rooflab/families/conv/cpu.py):

  direct_naive_nchw / _nhwc   one output at a time, taps bounds-checked: the ladder's floor
                              (LLVM vectorizes nothing useful: ~1 GFLOP/s)
  direct_blocked (generated)  "implicit GEMM on padded rows": each input channel is padded and split
                              into stride phases, flattened with row length Ws, so the input of
                              output pixel j = p*Ws + q under tap (r, s) is xflat[j + off(r, s)]: a
                              contiguous, unaligned vector load with no edge handling. A register tile
                              of KB output channels x NV vectors of L pixels (KB*NV accumulators) is
                              carried over all (c, r, s); per step NV vloads + KB broadcasts of packed
                              weights + KB*NV FMAs. The (Ws - Q) junk columns of each wide row are
                              computed and cropped. Square filters up to 3x3 are compile-time
                              constants (taps unrolled); the others loop over a tap-offset table:
                              with 16 accumulators per tap the loop is free (3x3 unrolled: within
                              3 %), and unrolled 5x5 / 7x7 ran 20-30 % slower here and compile for
                              20 s+ (research/numba-gemm-conv.md 3.6: R=15 did not finish in 9 min).
                              Generated once and checked in: kernels/cpu/conv_direct.py.
  depthwise_nchw / _nhwc      groups == C == K: one zero-padded plane per thread in L1/L2, each tap of
                              an output row a contiguous vector load (stride 2: even/odd columns,
                              conv_simd.py), 3x3 unrolled, two rows per pass; NHWC vectorizes over
                              channels instead. 3x3 stride 1 pad 1 (every MobileNet s1 layer): the
                              "flat" path, the plane as one row of H*W pixels, row edges by 0/1 masks.

Napkin (Zen 4, AVX-512 as 2 x 256-bit: 1 zmm FMA/cycle, 2 x 256-bit loads/cycle, 32 zmm):
8x2 tile = 16 zmm accumulators, per (c, r, s) 2 vloads + 8 broadcasts for 16 FMAs: FMA-bound,
512 FLOP per 16 cycles = 32 FLOP/cycle = 112 GFLOP/s at 3.5 GHz. Depthwise 3x3: 9 FMAs per 16
outputs from 6 loads (two rows per pass), 2.25 FLOP/B of compulsory traffic: at 1 thread that is just
right of the L3 ridge (112 GFLOP/s / ~75 GB/s = 1.5 FLOP/B), so the FMA pipes bound it too.

Depthwise against its roof (MobileNetV2, batch 1, 1 thread; rooflab.models.place.Roofs: the level
whose capacity holds x + w + y, the STREAM kernel of its read/write mix). Stride 1: I = 18 FLOP per
(4 + 4) B = 2.25 FLOP/B, working sets 0.4-3.6 MB (L2 at 14x14 and 7x7, L3 above), ridge
115 / 83 = 1.4 FLOP/B: compute-bound, the roof is the FMA peak (t = F / 115 GFLOP/s). Stride 2:
I = 18 / (16 + 4) = 0.9 FLOP/B, left of the ridge: the L2/L3 triad roof. Why the rows kernel sat at
2.1-13x its roof: (1) every tap load but one is unaligned, so a 64-byte zmm load splits two lines
and costs two load slots: 9 taps = ~17 load slots for 9 FMAs (load-bound near 50 % of peak
even at 4 rows a pass); (2) per-row tails: Q = 56, 28, 14 are 3.5, 1.75, 0.875 vectors, so 12.5 % of
every vector row is masked waste, plus a padded copy of each row in and a masked store out; (3) small
planes (14x14, 7x7: 196 and 49 pixels) pay the per-plane set-up (weights splat, buffer borders) over
2-13 vectors. The flat path removes (2) and most of (3): per 4 output vectors 18 tap loads + 2 mask
loads, 44 FP ops (11 per vector, the 2 extra are the mask FMAs: at most 82 % of the FMA peak), no
row tails, one plane copy in, stores straight to y. What remains: the split loads (1), and for
7x7 planes the per-plane cost (49 pixels = 4 vectors); stride 2 is unchanged (wide path).
NHWC avoids all three: vectors run over channels, so every tap load is one aligned line, and a
3x3 window two output rows tall slides along the row (_dw3_nhwc_rows2): per new column 4 loads (5
at stride 2) feed 18 FMAs, borders read zero vectors instead of taking a checked path. Measured
(scripts/conv_compare.py depthwise --layout NHWC, 1 thread, Zen 4, the public call): stride 1 at
46-72 % of the FP32 peak, 1.4-2.2x the attainable time (NCHW flat path 2.2-4.6x); stride 2 at
1.8-2.6x (NCHW 5.5-17x). At 14x14 and 7x7 the fixed costs show: the public call's set-up (~3 us,
now once per call, not per repetition) and ~1.7 us of numba's parallel dispatch are a third of a
7x7 layer. Stride 2 is bound by refilling L1: each output vector needs 4 new input lines, and the
same traversal with loads only (no FMAs) takes 12-20 cycles per output vector of the 23-30 the
kernel takes; software prefetch (next strip, 4 columns ahead) and shorter FMA chains did not help.

Run: python -c "import rooflab; v = rooflab.get_variant('cpu.conv.02-direct-blocked-simd'); ..."
or pytest tests/test_conv_cpu.py.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

import rooflab._numba_env  # noqa: F401

from . import conv_direct, simd
from .conv_simd import vload_even, vload_odd
from .simd import vadd, vfma, vlanes, vload, vloadm, vmul, vsplat, vstore, vstorem, vzero

# ---- naive direct ---------------------------------------------------------------------------------


@njit(parallel=True, cache=True)
def direct_naive_nchw(x, w, y, sh, sw, ph, pw, groups):
    N, C, H, W = x.shape
    K, Cg, R, S = w.shape
    P, Q = y.shape[2], y.shape[3]
    Kg = K // groups
    for nk in prange(N * K):
        n = nk // K
        k = nk % K
        c0 = (k // Kg) * Cg
        for p in range(P):
            for q in range(Q):
                acc = x.dtype.type(0)
                for c in range(Cg):
                    for r in range(R):
                        h = p * sh - ph + r
                        if h < 0 or h >= H:
                            continue
                        for s in range(S):
                            wi = q * sw - pw + s
                            if wi >= 0 and wi < W:
                                acc += x[n, c0 + c, h, wi] * w[k, c, r, s]
                y[n, k, p, q] = acc


@njit(parallel=True, cache=True)
def direct_naive_nhwc(x, w, y, sh, sw, ph, pw, groups):
    N, H, W, C = x.shape
    K, Cg, R, S = w.shape
    P, Q = y.shape[1], y.shape[2]
    Kg = K // groups
    for np_ in prange(N * P):
        n = np_ // P
        p = np_ % P
        for q in range(Q):
            for k in range(K):
                c0 = (k // Kg) * Cg
                acc = x.dtype.type(0)
                for r in range(R):
                    h = p * sh - ph + r
                    if h < 0 or h >= H:
                        continue
                    for s in range(S):
                        wi = q * sw - pw + s
                        if wi >= 0 and wi < W:
                            for c in range(Cg):
                                acc += x[n, h, wi, c0 + c] * w[k, c, r, s]
                y[n, p, q, k] = acc


# ---- depthwise ------------------------------------------------------------------------------------


@njit(inline="always")
def _fill_rows(xf, xb, buf, H, W, Wb, ph, pw, L, lo, hi):
    """Copy input rows into padded rows [lo, hi) of the plane buffer (rows outside the input stay 0);
    a row's input starts at column L (a 64-byte boundary: aligned vector stores)."""
    for hp in range(max(lo, ph), min(hi, ph + H)):
        d = hp * Wb + L
        src = xb + (hp - ph) * W
        for j in range(0, W, L):
            if j + L <= W:
                vstore(buf, d + j, vload(xf, src + j))
            else:
                vstorem(buf, d + j, vloadm(xf, src + j, W - j), W - j)


@njit(fastmath=True, cache=True, boundscheck=False)
def _depthwise_chunk(x, w, y, sh, sw, ph, pw, t, nchunks):
    """groups == C == K. The N*C planes are split into ``nchunks`` (one per thread); each chunk owns
    one zero-padded plane buffer (row stride Wb, L1/L2-resident, borders zeroed once). Input rows are
    copied in just before the output rows that need them, so every tap of an output row is a
    contiguous segment of the buffer: 3x3 stride 1 computes four output rows per pass (6 input rows x
    3 shifts = 18 unaligned vector loads for 36 FMAs: FMA-bound; one row per pass was load-bound at
    9 loads, most of them cache-line splits, per 9 FMAs), 3x3 stride 2 reads even/odd columns
    with vload_even/odd (2 loads + 1 shuffle); other filters and strides take a scalar loop over a
    fully copied plane. Tails are stored masked."""
    N, C, H, W = x.shape
    R, S = w.shape[2], w.shape[3]
    P, Q = y.shape[2], y.shape[3]
    L = vlanes(x)
    Hp = H + 2 * ph
    # row: [L - pw zero][pw zero][W input][slack >= pw + 2L + 2 for the last (stride 2: double) vector],
    # a multiple of L long; padded column 0 is at L - pw
    Wb = (L + W + pw + 2 * L + 2 + L - 1) // L * L
    c0 = L - pw
    xf = x.reshape(-1)
    yf = y.reshape(-1)
    wf = w.reshape(-1)
    planes = N * C
    raw = np.zeros(Hp * Wb + 3 * L, dtype=x.dtype)
    a = (64 - raw.ctypes.data % 64) % 64 // x.itemsize
    buf = raw[a : a + Hp * Wb + 2 * L]
    for nc in range(planes * t // nchunks, planes * (t + 1) // nchunks):
        c = nc % C
        xb = nc * H * W
        yb = nc * P * Q
        wb = c * R * S
        if R == 3 and S == 3 and sw <= 2:
            w0 = vsplat(wf[wb])
            w1 = vsplat(wf[wb + 1])
            w2 = vsplat(wf[wb + 2])
            w3 = vsplat(wf[wb + 3])
            w4 = vsplat(wf[wb + 4])
            w5 = vsplat(wf[wb + 5])
            w6 = vsplat(wf[wb + 6])
            w7 = vsplat(wf[wb + 7])
            w8 = vsplat(wf[wb + 8])
            filled = 0
            p = 0
            if sh == 1 and sw == 1:
                while p + 3 < P:  # four output rows from six input rows: 18 loads, 36 FMAs
                    _fill_rows(xf, xb, buf, H, W, Wb, ph, pw, L, filled, p + 6)
                    filled = p + 6
                    r0 = p * Wb + c0
                    for q in range(0, Q, L):
                        b = r0 + q
                        x0 = vload(buf, b)
                        x1 = vload(buf, b + 1)
                        x2 = vload(buf, b + 2)
                        o0 = vfma(w2, x2, vfma(w1, x1, vmul(w0, x0)))
                        b += Wb
                        x0 = vload(buf, b)
                        x1 = vload(buf, b + 1)
                        x2 = vload(buf, b + 2)
                        o0 = vfma(w5, x2, vfma(w4, x1, vfma(w3, x0, o0)))
                        o1 = vfma(w2, x2, vfma(w1, x1, vmul(w0, x0)))
                        b += Wb
                        x0 = vload(buf, b)
                        x1 = vload(buf, b + 1)
                        x2 = vload(buf, b + 2)
                        o0 = vfma(w8, x2, vfma(w7, x1, vfma(w6, x0, o0)))
                        o1 = vfma(w5, x2, vfma(w4, x1, vfma(w3, x0, o1)))
                        o2 = vfma(w2, x2, vfma(w1, x1, vmul(w0, x0)))
                        b += Wb
                        x0 = vload(buf, b)
                        x1 = vload(buf, b + 1)
                        x2 = vload(buf, b + 2)
                        o1 = vfma(w8, x2, vfma(w7, x1, vfma(w6, x0, o1)))
                        o2 = vfma(w5, x2, vfma(w4, x1, vfma(w3, x0, o2)))
                        o3 = vfma(w2, x2, vfma(w1, x1, vmul(w0, x0)))
                        b += Wb
                        x0 = vload(buf, b)
                        x1 = vload(buf, b + 1)
                        x2 = vload(buf, b + 2)
                        o2 = vfma(w8, x2, vfma(w7, x1, vfma(w6, x0, o2)))
                        o3 = vfma(w5, x2, vfma(w4, x1, vfma(w3, x0, o3)))
                        b += Wb
                        x0 = vload(buf, b)
                        x1 = vload(buf, b + 1)
                        x2 = vload(buf, b + 2)
                        o3 = vfma(w8, x2, vfma(w7, x1, vfma(w6, x0, o3)))
                        o = yb + p * Q + q
                        if q + L <= Q:
                            vstore(yf, o, o0)
                            vstore(yf, o + Q, o1)
                            vstore(yf, o + 2 * Q, o2)
                            vstore(yf, o + 3 * Q, o3)
                        else:
                            vstorem(yf, o, o0, Q - q)
                            vstorem(yf, o + Q, o1, Q - q)
                            vstorem(yf, o + 2 * Q, o2, Q - q)
                            vstorem(yf, o + 3 * Q, o3, Q - q)
                    p += 4
            while p < P:
                _fill_rows(xf, xb, buf, H, W, Wb, ph, pw, L, filled, p * sh + 3)
                filled = max(filled, p * sh + 3)
                r0 = p * sh * Wb + c0
                for q in range(0, Q, L):
                    if sw == 1:
                        b = r0 + q
                        u = vfma(w2, vload(buf, b + 2), vfma(w1, vload(buf, b + 1), vmul(w0, vload(buf, b))))
                        b += Wb
                        u = vfma(w5, vload(buf, b + 2), vfma(w4, vload(buf, b + 1), vfma(w3, vload(buf, b), u)))
                        b += Wb
                        u = vfma(w8, vload(buf, b + 2), vfma(w7, vload(buf, b + 1), vfma(w6, vload(buf, b), u)))
                    else:
                        b = r0 + 2 * q
                        u = vfma(w2, vload_even(buf, b + 2), vfma(w1, vload_odd(buf, b), vmul(w0, vload_even(buf, b))))
                        b += Wb
                        u = vfma(
                            w5, vload_even(buf, b + 2), vfma(w4, vload_odd(buf, b), vfma(w3, vload_even(buf, b), u))
                        )
                        b += Wb
                        u = vfma(
                            w8, vload_even(buf, b + 2), vfma(w7, vload_odd(buf, b), vfma(w6, vload_even(buf, b), u))
                        )
                    if q + L <= Q:
                        vstore(yf, yb + p * Q + q, u)
                    else:
                        vstorem(yf, yb + p * Q + q, u, Q - q)
                p += 1
        else:
            _fill_rows(xf, xb, buf, H, W, Wb, ph, pw, L, 0, Hp)
            for p in range(P):
                for q in range(Q):
                    acc = x.dtype.type(0)
                    for r in range(R):
                        rb = (p * sh + r) * Wb + c0 + q * sw
                        for s_ in range(S):
                            acc += wf[wb + r * S + s_] * buf[rb + s_]
                    yf[yb + p * Q + q] = acc


@njit(fastmath=True, cache=True, boundscheck=False)
def _depthwise_wide_chunk(x, w, y, sh, sw, ph, pw, t, nchunks):
    """3x3 depthwise for small planes and strides > 1: each plane is copied into a zero-padded,
    stride-phase-split buffer with row length Ws (as pack_phases does for the blocked kernel; stride
    2 de-interleaves with vload_even/odd), so output pixel j = p*Ws + q of the "wide" plane reads tap
    (r, s) at j + off(r, s): 9 plain vector loads + 9 FMAs per 16 wide pixels, whatever the stride,
    and a 7x7 plane is 4 vectors instead of 7 one-row vectors. The wide rows' junk columns are
    cropped when the rows are copied to y."""
    N, C, H, W = x.shape
    P, Q = y.shape[2], y.shape[3]
    L = vlanes(x)
    Hs = (H + 2 * ph + sh - 1) // sh
    Ws = (W + 2 * pw + sw - 1) // sw
    HW = Hs * Ws
    nwide = (P * Ws + L - 1) // L * L
    xf = x.reshape(-1)
    yf = y.reshape(-1)
    wf = w.reshape(-1)
    o = np.empty(9, dtype=np.int64)
    for r in range(3):
        for s_ in range(3):
            o[r * 3 + s_] = ((r % sh) * sw + s_ % sw) * HW + (r // sh) * Ws + s_ // sw
    o0, o1, o2, o3, o4, o5, o6, o7, o8 = o[0], o[1], o[2], o[3], o[4], o[5], o[6], o[7], o[8]
    buf = np.zeros(sh * sw * HW + nwide + 2 * Ws + 2 * L, dtype=x.dtype)
    wide = np.empty(nwide, dtype=x.dtype)
    planes = N * C
    for nc in range(planes * t // nchunks, planes * (t + 1) // nchunks):
        c = nc % C
        xb = nc * H * W
        for h in range(H):
            hh = h + ph
            src = xb + h * W
            if sw == 1:
                d = ((hh % sh) * HW) + (hh // sh) * Ws + pw
                for j in range(0, W, L):
                    if j + L <= W:
                        vstore(buf, d + j, vload(xf, src + j))
                    else:
                        vstorem(buf, d + j, vloadm(xf, src + j, W - j), W - j)
            elif sw == 2:
                rb = (hh % sh) * 2 * HW + (hh // sh) * Ws
                d0 = rb + (pw % 2) * HW + pw // 2  # x column 0 lands in phase pw % 2
                d1 = rb + ((pw + 1) % 2) * HW + (pw + 1) // 2
                j = 0
                # 2L columns per step; a row's last step reads past the row (never past x: see
                # the scalar tail) and stores only its own even/odd columns
                while j < W and src + j + 2 * L <= xf.size:
                    ne = min(L, (W - j + 1) // 2)
                    no = min(L, (W - j) // 2)
                    vstorem(buf, d0 + j // 2, vload_even(xf, src + j), ne)
                    vstorem(buf, d1 + j // 2, vload_odd(xf, src + j), no)
                    j += 2 * L
                while j < W:
                    if j % 2 == 0:
                        buf[d0 + j // 2] = xf[src + j]
                    else:
                        buf[d1 + j // 2] = xf[src + j]
                    j += 1
            else:
                rb = (hh % sh) * sw * HW + (hh // sh) * Ws
                for wi in range(W):
                    ww = wi + pw
                    buf[rb + (ww % sw) * HW + ww // sw] = xf[src + wi]
        wb = c * 9
        w0 = vsplat(wf[wb])
        w1 = vsplat(wf[wb + 1])
        w2 = vsplat(wf[wb + 2])
        w3 = vsplat(wf[wb + 3])
        w4 = vsplat(wf[wb + 4])
        w5 = vsplat(wf[wb + 5])
        w6 = vsplat(wf[wb + 6])
        w7 = vsplat(wf[wb + 7])
        w8 = vsplat(wf[wb + 8])
        for j in range(0, nwide, L):
            u = vmul(w0, vload(buf, j + o0))
            u = vfma(w1, vload(buf, j + o1), u)
            u = vfma(w2, vload(buf, j + o2), u)
            u = vfma(w3, vload(buf, j + o3), u)
            u = vfma(w4, vload(buf, j + o4), u)
            u = vfma(w5, vload(buf, j + o5), u)
            u = vfma(w6, vload(buf, j + o6), u)
            u = vfma(w7, vload(buf, j + o7), u)
            u = vfma(w8, vload(buf, j + o8), u)
            vstore(wide, j, u)
        yb = nc * P * Q
        for p in range(P):
            for q in range(0, Q, L):
                if q + L <= Q:
                    vstore(yf, yb + p * Q + q, vload(wide, p * Ws + q))
                else:
                    vstorem(yf, yb + p * Q + q, vload(wide, p * Ws + q), Q - q)


@njit(fastmath=True, cache=True, boundscheck=False)
def _depthwise_flat_chunk(x, w, y, t, nchunks):
    """3x3, stride 1, pad 1 (so P == H, Q == W): the plane is treated as one flat row of H*W pixels.
    Output pixel j = p*W + q needs x at j + (r-1)*W + (s-1): 9 contiguous vector loads per L
    outputs from one base, whatever W is (no per-row tails, no junk columns, no output copy). The
    two cases where a flat neighbour is not the 2-D one are fixed with masks, not branches: a
    zero guard of >= W+1 elements above and below the plane gives the top and bottom padding, and
    the left (s = 0) and right (s = 2) column sums are multiplied by per-position 0/1 masks (0 where
    q == 0, resp. q == W-1), shared by all planes of the call. Per L outputs: 9 loads + 2 mask loads,
    3 vmul + 8 vfma (11 FP ops for the nominal 9 FMAs: at most 82 % of the FMA peak), one store."""
    N, C, H, W = x.shape
    L = vlanes(x)
    HW = H * W
    nvec = (HW + L - 1) // L
    G = (W + 1 + L - 1) // L * L  # guard: the plane starts on a vector boundary of the buffer
    raw = np.zeros(2 * G + nvec * L + 2 * L, dtype=x.dtype)
    a = (64 - raw.ctypes.data % 64) % 64 // x.itemsize
    buf = raw[a : a + 2 * G + nvec * L + L]
    # the masks repeat every lcm(W, L) pixels (W / gcd(W, L) vectors: 7 for every MobileNet width)
    g = L
    while W % g:
        g //= 2
    period = W // g * L
    mask = np.ones(2 * period, dtype=x.dtype)  # [left | right]
    for j in range(period):
        q = j % W
        if q == 0:
            mask[j] = 0
        if q == W - 1:
            mask[period + j] = 0
    xf = x.reshape(-1)
    yf = y.reshape(-1)
    wf = w.reshape(-1)
    planes = N * C
    for nc in range(planes * t // nchunks, planes * (t + 1) // nchunks):
        xb = nc * HW
        for j in range(0, HW, L):
            if j + L <= HW:
                vstore(buf, G + j, vload(xf, xb + j))
            else:
                vstorem(buf, G + j, vloadm(xf, xb + j, HW - j), HW - j)
        wb = (nc % C) * 9
        w0 = vsplat(wf[wb])
        w1 = vsplat(wf[wb + 1])
        w2 = vsplat(wf[wb + 2])
        w3 = vsplat(wf[wb + 3])
        w4 = vsplat(wf[wb + 4])
        w5 = vsplat(wf[wb + 5])
        w6 = vsplat(wf[wb + 6])
        w7 = vsplat(wf[wb + 7])
        w8 = vsplat(wf[wb + 8])
        j0 = 0
        if W >= L:  # four output rows per pass: 6 input rows x 3 shifts = 18 loads + 2 mask loads
            while j0 + 4 * W <= HW:  # for 4 vectors (the masks of j and j + W are the same)
                jm = 0
                for j in range(j0, j0 + W, L):
                    ml = vload(mask, jm)
                    mr = vload(mask, period + jm)
                    jm += L
                    if jm == period:
                        jm = 0
                    b = G + j - W
                    xa = vload(buf, b - 1)
                    xb_ = vload(buf, b)
                    xc = vload(buf, b + 1)
                    l0 = vmul(w0, xa)
                    m0 = vmul(w1, xb_)
                    r0 = vmul(w2, xc)
                    b += W
                    xa = vload(buf, b - 1)
                    xb_ = vload(buf, b)
                    xc = vload(buf, b + 1)
                    l0 = vfma(w3, xa, l0)
                    m0 = vfma(w4, xb_, m0)
                    r0 = vfma(w5, xc, r0)
                    l1 = vmul(w0, xa)
                    m1 = vmul(w1, xb_)
                    r1 = vmul(w2, xc)
                    b += W
                    xa = vload(buf, b - 1)
                    xb_ = vload(buf, b)
                    xc = vload(buf, b + 1)
                    u0 = vfma(vfma(w8, xc, r0), mr, vfma(vfma(w6, xa, l0), ml, vfma(w7, xb_, m0)))
                    l1 = vfma(w3, xa, l1)
                    m1 = vfma(w4, xb_, m1)
                    r1 = vfma(w5, xc, r1)
                    l2 = vmul(w0, xa)
                    m2 = vmul(w1, xb_)
                    r2 = vmul(w2, xc)
                    b += W
                    xa = vload(buf, b - 1)
                    xb_ = vload(buf, b)
                    xc = vload(buf, b + 1)
                    u1 = vfma(vfma(w8, xc, r1), mr, vfma(vfma(w6, xa, l1), ml, vfma(w7, xb_, m1)))
                    l2 = vfma(w3, xa, l2)
                    m2 = vfma(w4, xb_, m2)
                    r2 = vfma(w5, xc, r2)
                    l3 = vmul(w0, xa)
                    m3 = vmul(w1, xb_)
                    r3 = vmul(w2, xc)
                    b += W
                    xa = vload(buf, b - 1)
                    xb_ = vload(buf, b)
                    xc = vload(buf, b + 1)
                    u2 = vfma(vfma(w8, xc, r2), mr, vfma(vfma(w6, xa, l2), ml, vfma(w7, xb_, m2)))
                    l3 = vfma(w3, xa, l3)
                    m3 = vfma(w4, xb_, m3)
                    r3 = vfma(w5, xc, r3)
                    b += W
                    xa = vload(buf, b - 1)
                    xb_ = vload(buf, b)
                    xc = vload(buf, b + 1)
                    u3 = vfma(vfma(w8, xc, r3), mr, vfma(vfma(w6, xa, l3), ml, vfma(w7, xb_, m3)))
                    o = xb + j  # a vector may run into the next row: recomputed there, same values
                    _store_tail(yf, o, u0, xb + HW, L)
                    _store_tail(yf, o + W, u1, xb + HW, L)
                    _store_tail(yf, o + 2 * W, u2, xb + HW, L)
                    _store_tail(yf, o + 3 * W, u3, xb + HW, L)
                j0 += 4 * W
        jm = (j0 % period) if period else 0
        for j in range(j0, HW, L):  # the rest (all of a plane narrower than a vector): one vector a step
            b = G + j
            left = vfma(w6, vload(buf, b + W - 1), vfma(w3, vload(buf, b - 1), vmul(w0, vload(buf, b - W - 1))))
            mid = vfma(w7, vload(buf, b + W), vfma(w4, vload(buf, b), vmul(w1, vload(buf, b - W))))
            right = vfma(w8, vload(buf, b + W + 1), vfma(w5, vload(buf, b + 1), vmul(w2, vload(buf, b - W + 1))))
            u = vfma(right, vload(mask, period + jm), vfma(left, vload(mask, jm), mid))
            jm += L
            if jm == period:
                jm = 0
            _store_tail(yf, xb + j, u, xb + HW, L)


@njit(inline="always")
def _store_tail(a, i, v, end, L):
    """Store v (L lanes) at a[i:i+L], masked to the lanes before ``end``."""
    if i + L <= end:
        vstore(a, i, v)
    elif i < end:
        vstorem(a, i, v, end - i)


WIDE_BELOW = 16  # 3x3 depthwise planes narrower than a vector (or strided) take the wide path


@njit(parallel=True, cache=True)
def depthwise_nchw(x, w, y, sh, sw, ph, pw, nchunks):
    """groups == C == K, NCHW: ``nchunks`` chunks of planes in parallel. 3x3 stride 1 pad 1:
    _depthwise_flat_chunk (faster than the rows kernel on every MobileNetV2 s1 layer: 1.08x at
    112x112 to 2.5x at 7x7, kernel CPU time, interleaved); other 3x3 stride-1 planes at least
    WIDE_BELOW wide: _depthwise_chunk (four output rows per pass); smaller or strided 3x3
    planes: _depthwise_wide_chunk; other filters: the scalar path of _depthwise_chunk. The bodies
    are separate functions because numba's parfor lowering of the inlined body ran ~1.3x slower."""
    k3 = w.shape[2] == 3 and w.shape[3] == 3
    flat = k3 and sh == 1 and sw == 1 and ph == 1 and pw == 1
    wide = k3 and (sh > 1 or sw > 1 or y.shape[3] < WIDE_BELOW)
    for t in prange(nchunks):
        c = np.int64(t)  # prange's index is uint64 in the parallel body: one signature, not two compiles
        if flat:
            _depthwise_flat_chunk(x, w, y, c, nchunks)
        elif wide:
            _depthwise_wide_chunk(x, w, y, sh, sw, ph, pw, c, nchunks)
        else:
            _depthwise_chunk(x, w, y, sh, sw, ph, pw, c, nchunks)


@njit(inline="always")
def _row_src(xf, z, n, h, H, WC):
    """(array, offset) of input row h of image n, or of the zero row where h is padding."""
    if h >= 0 and h < H:
        return xf, (n * H + h) * WC
    return z, 0


@njit(inline="always")
def dw3_window(R, S, sw, pw, W):
    """Whether the 3x3 NHWC sliding window (_dw3_nhwc_row/_rows2) handles this depthwise conv, its
    padding included (the family's wrapper asks too, to skip its padded copy)."""
    return R == 3 and S == 3 and pw <= 1 and sw <= 2 and W >= 2


@njit(fastmath=True, cache=True, boundscheck=False)  # not inlined: the parfor-lowered copy ran 2x slower
def _dw3_nhwc_row(xf, z, wf, yf, n, p, H, W, C, P, Q, sh, sw, ph, pw, Cv, L):
    """One output row of a 3x3 NHWC depthwise conv (stride 1 or 2, pad 0 or 1) over the full
    channel vectors: a sliding window. Per channel vector the 9 weight vectors and 3 input columns
    x 3 rows stay in registers (21 zmm); each output takes its new column(s) only: 3 aligned loads
    for 9 FMAs at stride 1, 6 at stride 2 (the old interior loop loaded all 9 taps per output and
    sent every border pixel through the bounds-checked loop: 17-32 % of the FMA peak). Rows above or
    below the input read the zero row ``z``; columns past the right edge are zero vectors."""
    h0 = p * sh - ph
    WC = W * C
    s0, o0 = _row_src(xf, z, n, h0, H, WC)
    s1, o1 = _row_src(xf, z, n, h0 + 1, H, WC)
    s2, o2 = _row_src(xf, z, n, h0 + 2, H, WC)
    yrow = (n * P + p) * Q * C
    c = -pw
    for cv in range(0, Cv, L):
        k0 = vload(wf, cv)
        k1 = vload(wf, C + cv)
        k2 = vload(wf, 2 * C + cv)
        k3 = vload(wf, 3 * C + cv)
        k4 = vload(wf, 4 * C + cv)
        k5 = vload(wf, 5 * C + cv)
        k6 = vload(wf, 6 * C + cv)
        k7 = vload(wf, 7 * C + cv)
        k8 = vload(wf, 8 * C + cv)
        e0 = o0 + cv
        e1 = o1 + cv
        e2 = o2 + cv
        zv = vzero(xf)
        a0, a1, a2 = zv, zv, zv  # the column left of the first output: padding when pw = 1
        if c >= 0:
            a0, a1, a2 = vload(s0, e0 + c * C), vload(s1, e1 + c * C), vload(s2, e2 + c * C)
        if sw == 1:
            b0, b1, b2 = zv, zv, zv
            if c + 1 < W:
                b0, b1, b2 = vload(s0, e0 + (c + 1) * C), vload(s1, e1 + (c + 1) * C), vload(s2, e2 + (c + 1) * C)
            for q in range(Q):
                cc = (c + q + 2) * C
                d0, d1, d2 = zv, zv, zv
                if c + q + 2 < W:
                    d0, d1, d2 = vload(s0, e0 + cc), vload(s1, e1 + cc), vload(s2, e2 + cc)
                u = vfma(k2, d0, vfma(k1, b0, vmul(k0, a0)))
                v = vfma(k5, d1, vfma(k4, b1, vmul(k3, a1)))
                t = vfma(k8, d2, vfma(k7, b2, vmul(k6, a2)))
                vstore(yf, yrow + q * C + cv, vadd(vadd(u, v), t))
                a0, a1, a2 = b0, b1, b2
                b0, b1, b2 = d0, d1, d2
        else:  # stride 2: output q reads columns c+2q .. c+2q+2; the last is the next output's first
            for q in range(Q):
                cq = c + 2 * q
                b0, b1, b2 = zv, zv, zv
                d0, d1, d2 = zv, zv, zv
                if cq + 1 < W:
                    cc = (cq + 1) * C
                    b0, b1, b2 = vload(s0, e0 + cc), vload(s1, e1 + cc), vload(s2, e2 + cc)
                if cq + 2 < W:
                    cc = (cq + 2) * C
                    d0, d1, d2 = vload(s0, e0 + cc), vload(s1, e1 + cc), vload(s2, e2 + cc)
                u = vfma(k2, d0, vfma(k1, b0, vmul(k0, a0)))
                v = vfma(k5, d1, vfma(k4, b1, vmul(k3, a1)))
                t = vfma(k8, d2, vfma(k7, b2, vmul(k6, a2)))
                vstore(yf, yrow + q * C + cv, vadd(vadd(u, v), t))
                a0, a1, a2 = d0, d1, d2


@njit(fastmath=True, cache=True, boundscheck=False)
def _dw3_nhwc_rows2(xf, z, wf, yf, n, p, H, W, C, P, Q, sh, sw, ph, pw, Cv, L):
    """Output rows p and p+1 of a 3x3 NHWC depthwise conv in one pass (the window of _dw3_nhwc_row
    two rows tall; row stride == column stride, 1 or 2): they share input rows, so per output
    vector 2 loads at stride 1 (4 rows for 2 outputs) and 2.5 at stride 2 (5 rows) instead of 3
    and 6; 9 weights + 12 or 15 window vectors + 2 sums stay in the 32 zmm registers."""
    h0 = p * sh - ph
    WC = W * C
    s0, o0 = _row_src(xf, z, n, h0, H, WC)
    s1, o1 = _row_src(xf, z, n, h0 + 1, H, WC)
    s2, o2 = _row_src(xf, z, n, h0 + 2, H, WC)
    s3, o3 = _row_src(xf, z, n, h0 + 3, H, WC)
    s4, o4 = _row_src(xf, z, n, h0 + 4 if sh == 2 else h0 + 3, H, WC)  # stride 1 needs 4 rows only
    y0 = (n * P + p) * Q * C
    y1 = y0 + Q * C
    c = -pw
    for cv in range(0, Cv, L):
        k0 = vload(wf, cv)
        k1 = vload(wf, C + cv)
        k2 = vload(wf, 2 * C + cv)
        k3 = vload(wf, 3 * C + cv)
        k4 = vload(wf, 4 * C + cv)
        k5 = vload(wf, 5 * C + cv)
        k6 = vload(wf, 6 * C + cv)
        k7 = vload(wf, 7 * C + cv)
        k8 = vload(wf, 8 * C + cv)
        e0, e1, e2, e3, e4 = o0 + cv, o1 + cv, o2 + cv, o3 + cv, o4 + cv
        zv = vzero(xf)
        a0, a1, a2, a3, a4 = zv, zv, zv, zv, zv
        if c >= 0:
            a0, a1, a2 = vload(s0, e0 + c * C), vload(s1, e1 + c * C), vload(s2, e2 + c * C)
            a3, a4 = vload(s3, e3 + c * C), vload(s4, e4 + c * C)
        if sw == 1:
            b0, b1, b2, b3 = zv, zv, zv, zv
            if c + 1 < W:
                cc = (c + 1) * C
                b0, b1, b2, b3 = vload(s0, e0 + cc), vload(s1, e1 + cc), vload(s2, e2 + cc), vload(s3, e3 + cc)
            for q in range(Q):
                d0, d1, d2, d3 = zv, zv, zv, zv
                if c + q + 2 < W:
                    cc = (c + q + 2) * C
                    d0, d1, d2, d3 = vload(s0, e0 + cc), vload(s1, e1 + cc), vload(s2, e2 + cc), vload(s3, e3 + cc)
                u = vfma(k2, d0, vfma(k1, b0, vmul(k0, a0)))
                v = vfma(k5, d1, vfma(k4, b1, vmul(k3, a1)))
                u = vfma(k8, d2, vfma(k7, b2, vfma(k6, a2, u)))
                vstore(yf, y0 + q * C + cv, vadd(u, v))
                u = vfma(k2, d1, vfma(k1, b1, vmul(k0, a1)))
                v = vfma(k5, d2, vfma(k4, b2, vmul(k3, a2)))
                u = vfma(k8, d3, vfma(k7, b3, vfma(k6, a3, u)))
                vstore(yf, y1 + q * C + cv, vadd(u, v))
                a0, a1, a2, a3 = b0, b1, b2, b3
                b0, b1, b2, b3 = d0, d1, d2, d3
        else:  # stride 2: rows 0-2 make output row p, rows 2-4 row p+1
            # interior outputs (both new columns inside the row) first: no branch, offsets carried
            # from one output to the next (the branchy loop kept addresses in spilled registers)
            q_in = min(Q, max(0, (W - 3 - c) // 2 + 1))
            cc = (c + 1) * C
            ya = y0 + cv
            yb = y1 + cv
            for _ in range(q_in):
                b0, b1, b2 = vload(s0, e0 + cc), vload(s1, e1 + cc), vload(s2, e2 + cc)
                b3, b4 = vload(s3, e3 + cc), vload(s4, e4 + cc)
                cc += C
                d0, d1, d2 = vload(s0, e0 + cc), vload(s1, e1 + cc), vload(s2, e2 + cc)
                d3, d4 = vload(s3, e3 + cc), vload(s4, e4 + cc)
                cc += C
                u = vfma(k2, d0, vfma(k1, b0, vmul(k0, a0)))
                v = vfma(k5, d1, vfma(k4, b1, vmul(k3, a1)))
                u = vfma(k8, d2, vfma(k7, b2, vfma(k6, a2, u)))
                vstore(yf, ya, vadd(u, v))
                u = vfma(k2, d2, vfma(k1, b2, vmul(k0, a2)))
                v = vfma(k5, d3, vfma(k4, b3, vmul(k3, a3)))
                u = vfma(k8, d4, vfma(k7, b4, vfma(k6, a4, u)))
                vstore(yf, yb, vadd(u, v))
                ya += C
                yb += C
                a0, a1, a2, a3, a4 = d0, d1, d2, d3, d4
            for q in range(q_in, Q):  # the right edge: columns past W read zero
                cq = c + 2 * q
                b0, b1, b2, b3, b4 = zv, zv, zv, zv, zv
                d0, d1, d2, d3, d4 = zv, zv, zv, zv, zv
                if cq + 1 < W:
                    cc = (cq + 1) * C
                    b0, b1, b2 = vload(s0, e0 + cc), vload(s1, e1 + cc), vload(s2, e2 + cc)
                    b3, b4 = vload(s3, e3 + cc), vload(s4, e4 + cc)
                if cq + 2 < W:
                    cc = (cq + 2) * C
                    d0, d1, d2 = vload(s0, e0 + cc), vload(s1, e1 + cc), vload(s2, e2 + cc)
                    d3, d4 = vload(s3, e3 + cc), vload(s4, e4 + cc)
                u = vfma(k2, d0, vfma(k1, b0, vmul(k0, a0)))
                v = vfma(k5, d1, vfma(k4, b1, vmul(k3, a1)))
                u = vfma(k8, d2, vfma(k7, b2, vfma(k6, a2, u)))
                vstore(yf, y0 + q * C + cv, vadd(u, v))
                u = vfma(k2, d2, vfma(k1, b2, vmul(k0, a2)))
                v = vfma(k5, d3, vfma(k4, b3, vmul(k3, a3)))
                u = vfma(k8, d4, vfma(k7, b4, vfma(k6, a4, u)))
                vstore(yf, y1 + q * C + cv, vadd(u, v))
                a0, a1, a2, a3, a4 = d0, d1, d2, d3, d4


@njit(fastmath=True, parallel=True, cache=True, boundscheck=False)
def depthwise_nhwc(x, wt, y, sh, sw, ph, pw, z):
    """groups == C == K, NHWC: vectorized over channels; wt is the weights as (R, S, C). 3x3 with
    stride <= 2 and pad <= 1 (every MobileNet/EfficientNet depthwise): a sliding window over each
    output row, borders included (_dw3_nhwc_row). Other 3x3: the 9 weight vectors in registers and 9
    loads + 9 FMAs per interior pixel. A channel tail (masked), the other pixels and other filters
    go through a loop that skips the taps outside the input. ``z``: a zero array of at least W*C
    elements (kept by the caller: allocating and zeroing it here cost ~1-2 us per call)."""
    N, H, W, C = x.shape
    R, S = wt.shape[0], wt.shape[1]
    P, Q = y.shape[1], y.shape[2]
    L = vlanes(x)
    xf = x.reshape(-1)
    yf = y.reshape(-1)
    wf = wt.reshape(-1)
    Cv = C // L * L  # channels in full vectors
    # output columns whose 3 taps are all inside the input
    q_lo = min(Q, (pw + sw - 1) // sw)
    q_hi = max(q_lo, min(Q, (W - 3 + pw) // sw + 1))
    WC = W * C
    window = dw3_window(R, S, sw, pw, W)  # z: >= W*C zeros standing in for rows of padding (the caller's)
    if window and Cv:  # full channel vectors: output rows in pairs; the channel tail below
        pairs = sh == sw  # the two-row window assumes the row stride equals the column stride
        P2 = (P + 1) // 2 if pairs else P
        for i in prange(N * P2):
            n = i // P2
            p = 2 * (i % P2) if pairs else i % P2
            if pairs and p + 1 < P:
                _dw3_nhwc_rows2(xf, z, wf, yf, n, p, H, W, C, P, Q, sh, sw, ph, pw, Cv, L)
            else:
                _dw3_nhwc_row(xf, z, wf, yf, n, p, H, W, C, P, Q, sh, sw, ph, pw, Cv, L)
        if Cv == C:
            return
    for np_ in prange(N * P):
        n = np_ // P
        p = np_ % P
        h0 = p * sh - ph
        done_lo, done_hi = 0, 0
        if window:
            done_lo, done_hi = 0, Q
        elif R == 3 and S == 3 and h0 >= 0 and h0 + 3 <= H:
            b0 = (n * H + h0) * WC
            for cv in range(0, Cv, L):
                k0 = vload(wf, cv)
                k1 = vload(wf, C + cv)
                k2 = vload(wf, 2 * C + cv)
                k3 = vload(wf, 3 * C + cv)
                k4 = vload(wf, 4 * C + cv)
                k5 = vload(wf, 5 * C + cv)
                k6 = vload(wf, 6 * C + cv)
                k7 = vload(wf, 7 * C + cv)
                k8 = vload(wf, 8 * C + cv)
                for q in range(q_lo, q_hi):
                    b = b0 + (q * sw - pw) * C + cv
                    acc = vmul(k0, vload(xf, b))
                    acc = vfma(k1, vload(xf, b + C), acc)
                    acc = vfma(k2, vload(xf, b + 2 * C), acc)
                    acc = vfma(k3, vload(xf, b + WC), acc)
                    acc = vfma(k4, vload(xf, b + WC + C), acc)
                    acc = vfma(k5, vload(xf, b + WC + 2 * C), acc)
                    acc = vfma(k6, vload(xf, b + 2 * WC), acc)
                    acc = vfma(k7, vload(xf, b + 2 * WC + C), acc)
                    acc = vfma(k8, vload(xf, b + 2 * WC + 2 * C), acc)
                    vstore(yf, (np_ * Q + q) * C + cv, acc)
            done_lo, done_hi = q_lo, q_hi
        for q in range(Q):
            w0 = q * sw - pw
            c_from = Cv if (q >= done_lo and q < done_hi) else 0
            for cv in range(c_from, C, L):
                m = min(L, C - cv)
                acc = vzero(x)
                for r in range(R):
                    h = h0 + r
                    if h < 0 or h >= H:
                        continue
                    xr = (n * H + h) * W
                    for s_ in range(S):
                        wi = w0 + s_
                        if wi < 0 or wi >= W:
                            continue
                        acc = vfma(vloadm(wf, (r * S + s_) * C + cv, m), vloadm(xf, (xr + wi) * C + cv, m), acc)
                vstorem(yf, (np_ * Q + q) * C + cv, acc, m)


@njit(cache=True)
def same_values(a, b):
    """a == b element by element (1-D, same size): the weights-unchanged check of a cached filter
    transform: ~1 us with the call where np.array_equal takes ~2.5 us on 5k elements."""
    differ = 0
    for i in range(a.size):  # no early exit: the count vectorizes, the branchy loop ran ~3 cycles/element
        differ += a[i] != b[i]
    return differ == 0


# ---- blocked direct: packing ----------------------------------------------------------------------


@njit(parallel=True, cache=True, boundscheck=False)
def pack_phases(x, xp, sh, sw, ph, pw, Hs, Ws):
    """x (N, C, H, W) -> xp[(n*C + c)*CPL + ((h % sh)*sw + w % sw)*Hs*Ws + (h//sh)*Ws + w//sw] for the
    padded coordinates (h, w); zero outside the input. The slack after the last plane stays zero.
    Stride 1: rows copied with vector loads/stores and only the padding zeroed (a zero-everything-
    then-copy scalar loop took 3.2 ms of a 25 ms call at 64@56x56, batch 8)."""
    N, C, H, W = x.shape
    HW = Hs * Ws
    CPL = sh * sw * HW
    L = vlanes(x)
    xf = x.reshape(-1)
    for nc in prange(N * C):
        n = nc // C
        c = nc % C
        base = nc * CPL
        if sh == 1 and sw == 1:
            for hp in range(Hs):
                o = base + hp * Ws
                h = hp - ph
                if h < 0 or h >= H:
                    for i in range(Ws):
                        xp[o + i] = 0
                    continue
                for i in range(pw):
                    xp[o + i] = 0
                for i in range(pw + W, Ws):
                    xp[o + i] = 0
                src = nc * H * W + h * W
                d = o + pw
                for j in range(0, W, L):
                    if j + L <= W:
                        vstore(xp, d + j, vload(xf, src + j))
                    else:
                        vstorem(xp, d + j, vloadm(xf, src + j, W - j), W - j)
        else:
            for i in range(CPL):
                xp[base + i] = 0
            for h in range(H):
                hh = h + ph
                ro = base + ((hh % sh) * sw) * HW + (hh // sh) * Ws
                for wi in range(W):
                    ww = wi + pw
                    xp[ro + (ww % sw) * HW + ww // sw] = x[n, c, h, wi]


def blocked_geometry(s: dict, KB: int, NV: int, L: int) -> dict:
    """Sizes of the packed input and the wide output of the blocked direct kernel for shape s."""
    sh, sw = s["stride_h"], s["stride_w"]
    Hp, Wp = s["H"] + 2 * s["pad_h"], s["W"] + 2 * s["pad_w"]
    Hs, Ws = -(-Hp // sh), -(-Wp // sw)
    CPL = sh * sw * Hs * Ws
    T = NV * L
    nstr = -(-(s["P"] * Ws) // T)
    R, S = s["R"], s["S"]
    toff = np.array(
        [((r % sh) * sw + s_ % sw) * Hs * Ws + (r // sh) * Ws + s_ // sw for r in range(R) for s_ in range(S)],
        dtype=np.int64,
    )
    total = s["N"] * s["C"] * CPL
    need = (s["N"] * s["C"] - 1) * CPL + nstr * T + int(toff.max()) + 1
    Kg = s["K"] // s["groups"]
    return {
        "Hs": Hs,
        "Ws": Ws,
        "CPL": CPL,
        "T": T,
        "nstr": nstr,
        "toff": toff,
        "xp_len": max(total, need),
        "nkb": -(-Kg // KB),
        "wide": s["N"] * s["K"] * s["P"] * Ws,
        "computed_pixels": s["N"] * nstr * T,  # per output channel (junk included)
    }


def pack_weights(w, groups: int, KB: int) -> np.ndarray:
    """w (K, Cg, R, S) -> wp[g, kb, c, r*S + s, k] (KB-wide blocks, zero rows past K/groups)."""
    K, Cg, R, S = w.shape
    Kg = K // groups
    nkb = -(-Kg // KB)
    wp = np.zeros((groups, nkb * KB, Cg, R * S), dtype=w.dtype)
    wp[:, :Kg] = w.reshape(groups, Kg, Cg, R * S)
    wp = wp.reshape(groups, nkb, KB, Cg, R * S).transpose(0, 1, 3, 4, 2)
    return np.ascontiguousarray(wp).reshape(-1)


# ---- blocked direct: generated micro-kernels (checked in: kernels/cpu/conv_direct.py) --------------

SPECIALIZE_MAX = 3  # square filters up to this are compile-time constants (taps unrolled)


def direct_kernel(KB: int, NV: int, L: int, R: int, S: int):
    """The blocked kernel for this tile and filter: square filters up to SPECIALIZE_MAX get their own
    (taps unrolled); larger or non-square ones share the runtime-tap kernel. ``L`` (the lanes) is the
    vector width the kernel reads from its array's dtype at compile time: it selects nothing here."""
    if R != S or R > SPECIALIZE_MAX:
        R = S = 0
    name = conv_direct.kernel_name(KB, NV, R)
    kern = getattr(conv_direct, name, None)
    if kern is None:
        raise ValueError(
            f"no generated blocked conv kernel {name}: add ({KB}, {NV}) to conv_direct.TILES and run "
            "python -m rooflab.kernels.cpu.conv_direct"
        )
    return kern


def lanes(dtype) -> int:
    return simd.lanes(dtype)
