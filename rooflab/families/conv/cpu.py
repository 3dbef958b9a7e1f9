"""CPU variants of the conv family (numba + numpy/BLAS): the ladder, each rung one technique.

  cpu.conv.00-im2col-blas         numpy: im2col (strided windows, one copy) + one BLAS GEMM per image
                                  and group (today's model-op path, extended to groups; 1x1 s1 convs
                                  skip im2col); NCHW and NHWC
  cpu.conv.01-direct-naive        numba: one output at a time, taps bounds-checked; NCHW and NHWC
  cpu.conv.02-direct-blocked-simd numba explicit SIMD: implicit GEMM on padded, stride-phase-split
                                  rows, KB x NV register tile (kernels/cpu/conv.py); NCHW
  cpu.conv.03-direct-depthwise    numba: groups == C == K, a padded plane per channel in cache; NCHW
                                  and NHWC (vectorized over channels)
  cpu.conv.04-im2col-own-gemm     im2col as 00 + rooflab's best registered CPU GEMM (gemm family,
                                  verified once per dtype before first use); refuses without one
  cpu.conv.05-winograd-f2x2-3x3   Winograd F(2x2,3x3): SIMD transforms + 16 batched BLAS GEMMs
  cpu.conv.06-winograd-f4x4-3x3   Winograd F(4x4,3x3): SIMD transforms + 36 batched BLAS GEMMs
  cpu.conv.07-fft                 rfft2 tiles, complex GEMM per frequency, irfft2 (overlap-save)

Call: ``y = v(x, w, stride=1, pad=0, groups=1, layout="NCHW")`` with x (N, C, H, W) (or (N, H, W, C)
for NHWC) and w (K, C/groups, R, S), C-contiguous float32/float64; y is a new array (N, K, P, Q)
(NHWC: (N, P, Q, K)). Bad input raises RooflabError naming the variant and the constraint; a shape an
algorithm does not apply to (Winograd: not 3x3 or stride 2; depthwise: groups != C) is refused with
the reason, never computed some other way. Filter-side work that depends only on the weights
(Winograd U = G g G^T, the FFT of the weights, the blocked kernel's packed weights) is done once
outside the timed call: it is cached per weights array and reused only while the weights are
unchanged (compared on every call). Workspaces (padded input, im2col matrix, V, M, spectra) are
allocated once per shape and reused, as the model-op path does. ``threads``: the caller sets the
numba and BLAS pools (rooflab.threads.use_threads); the kernels use what is set.

Measured accuracy (float32, max|y - ref| / max|ref| on unit-variance outputs, ResNet 3x3 layers):
see the closing report / README; F(4x4,3x3) is checked against its own looser row
("float32/conv-winograd-f4x4" in rooflab/verify.py).

Run: ``python -m pytest -q tests/test_conv_cpu.py``; ``rooflab run --suite conv``.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from ...errors import RooflabError, VerificationError
from ...kernels.cpu import conv as kc
from ...kernels.cpu import fft_conv as kf
from ...kernels.cpu import simd
from ...kernels.cpu import winograd as kw
from ...memory import aligned_array
from ...registry import Variant, best_variant, register
from . import (
    FAMILY,
    conv_shape,
    fft_flops,
    make_inputs,
    reference,
    result_key,
    winograd_flops,
    work_for,
)

DTYPES = ("float32", "float64")

# Tile of 02 (KB output channels x NV vectors of L lanes): 8 x 2 (16 accumulators, 2 vloads + 8
# broadcasts per 16 FMAs) was the best or within 3 % of it on all three ResNet 3x3 layers at batch 8
# among 4x3, 8x2, 8x3, 6x4, 12x2 (Zen 4, AVX-512, interleaved, thread CPU time: 76 / 81 / 85 GFLOP/s).
# NV = 2 also wastes less on small images: 14 rows x 16 wide = 224 px = 7 strips of 32, no padding.
BLOCK_KB, BLOCK_NV = 8, 2

# ---- caches: workspaces per shape, filter transforms per weights ---------------------------------

_WS: OrderedDict = OrderedDict()
_WS_MAX_BYTES = 1 << 30


def workspace(name: str, shape: tuple, dtype, zero: bool = False, tag: tuple = ()) -> np.ndarray:
    """A buffer reused across calls of the same shape (allocation and first-touch page faults stay
    out of the timed call). ``zero``: zero-filled when created; callers that rely on parts staying
    zero (padding) must put whatever decides where those parts are (pads, sizes) into ``tag``: two
    convs with equal padded sizes but different pads must not share a buffer."""
    key = (name, tuple(int(s) for s in shape), np.dtype(dtype).str, tuple(tag))
    buf = _WS.get(key)
    if buf is None:
        buf = aligned_array(shape, dtype, zero=zero)
        _WS[key] = buf
        while sum(b.nbytes for b in _WS.values()) > _WS_MAX_BYTES and len(_WS) > 1:
            _WS.popitem(last=False)
    else:
        _WS.move_to_end(key)
    return buf


_PREP: OrderedDict = OrderedDict()
_PREP_MAX = 16


def prepared(tag: str, w: np.ndarray, build, *extra):
    """build(w) computed once per weights array; reused while w is unchanged (checked each call)."""
    key = (tag, id(w), w.shape, w.dtype.str, *extra)
    hit = _PREP.get(key)
    if hit is not None and kc.same_values(hit[0].reshape(-1), w.reshape(-1)):
        _PREP.move_to_end(key)
        return hit[1]
    value = build(w)
    _PREP[key] = (w.copy(), value)
    while len(_PREP) > _PREP_MAX:
        _PREP.popitem(last=False)
    return value


# ---- common wrapper -------------------------------------------------------------------------------


def _variant_kernel(name: str, run, supports=None, layouts=("NCHW",)):
    """The public call: validate, refuse what the algorithm does not do, run ``reps`` times."""

    def why_not(s: dict) -> str | None:
        if s.get("layout", "NCHW") not in layouts:
            return f"layout {s.get('layout')} is not supported (this variant takes {', '.join(layouts)})"
        return supports(s) if supports else None

    def kernel(x, w, stride=1, pad=0, groups=1, layout="NCHW", reps=1, threads=None):
        s = conv_shape(x, w, stride, pad, groups, layout, variant=name)
        reason = why_not(s)
        if reason:
            raise RooflabError(f"{name}: {reason}", "use a variant this shape applies to (list_variants('conv'))")
        y = _out(s, x.dtype)  # once per call: repetitions overwrite it
        # a run with a .plan does its per-call set-up (weights, workspaces) once, not per repetition
        step = run.plan(x, w, s) if hasattr(run, "plan") else (lambda out: run(x, w, s, out))
        for _ in range(int(reps)):
            step(y)
        return y

    kernel.__name__ = name.replace(".", "_").replace("-", "_")
    kernel.supports = why_not
    return kernel


def _out(s: dict, dtype) -> np.ndarray:
    """A new, cache-line aligned output array (a misaligned one makes every vector store split)."""
    if s["layout"] == "NCHW":
        return aligned_array((s["N"], s["K"], s["P"], s["Q"]), dtype)
    return aligned_array((s["N"], s["P"], s["Q"], s["K"]), dtype)


# ---- 00 / 04: im2col + GEMM -----------------------------------------------------------------------


def _is_pointwise(s):
    return s["R"] == s["S"] == 1 and s["stride_h"] == s["stride_w"] == 1 and s["pad_h"] == s["pad_w"] == 0


def _im2col(x, s):
    """NCHW: cols (N, C*R*S, P*Q) (group g = rows g*Cg*R*S ...); NHWC: cols (N, P*Q, g, R*S*Cg)."""
    N, C, H, W, R, S, P, Q, g = (s[k] for k in ("N", "C", "H", "W", "R", "S", "P", "Q", "groups"))
    sh, sw, ph, pw = s["stride_h"], s["stride_w"], s["pad_h"], s["pad_w"]
    if _is_pointwise(s):
        return x.reshape(N, C, H * W) if s["layout"] == "NCHW" else x.reshape(N, H * W, C)
    if s["layout"] == "NCHW":
        xpad = workspace("im2col.xpad", (N, C, H + 2 * ph, W + 2 * pw), x.dtype, zero=True, tag=(ph, pw))
        xpad[:, :, ph : ph + H, pw : pw + W] = x
        sN, sC, sH, sW = xpad.strides
        win = np.lib.stride_tricks.as_strided(
            xpad, shape=(N, C, R, S, P, Q), strides=(sN, sC, sH, sW, sH * sh, sW * sw), writeable=False
        )
        cols = workspace("im2col.cols", (N, C, R, S, P, Q), x.dtype)
        np.copyto(cols, win)
        return cols.reshape(N, C * R * S, P * Q)
    Cg = C // g
    xpad = workspace("im2col.xpad", (N, H + 2 * ph, W + 2 * pw, C), x.dtype, zero=True, tag=(ph, pw))
    xpad[:, ph : ph + H, pw : pw + W, :] = x
    sN, sH, sW, sC = xpad.strides
    win = np.lib.stride_tricks.as_strided(
        xpad,
        shape=(N, P, Q, g, R, S, Cg),
        strides=(sN, sH * sh, sW * sw, sC * Cg, sH, sW, sC),
        writeable=False,
    )
    cols = workspace("im2col.cols", (N, P, Q, g, R, S, Cg), x.dtype)
    np.copyto(cols, win)
    return cols.reshape(N, P * Q, g, R * S * Cg)


def _wmat(w, s):
    """NCHW: (g, Kg, Cg*R*S); NHWC: (g, R*S*Cg, Kg)."""
    K, Cg, R, S = w.shape
    g = s["groups"]
    Kg = K // g
    if s["layout"] == "NCHW":
        return np.ascontiguousarray(w.reshape(g, Kg, Cg * R * S))
    return np.ascontiguousarray(w.reshape(g, Kg, Cg, R, S).transpose(0, 3, 4, 2, 1).reshape(g, R * S * Cg, Kg))


def _im2col_blas(x, w, s, y):
    g = s["groups"]
    Kg = s["K"] // g
    wm = prepared("im2col.w", w, lambda a: _wmat(a, s), s["layout"])
    cols = _im2col(x, s)
    N, K, PQ = s["N"], s["K"], s["P"] * s["Q"]
    if s["layout"] == "NCHW":
        y3 = y.reshape(N, K, PQ)
        CgRS = cols.shape[1] // g
        if g == 1:
            np.matmul(wm[0], cols, out=y3)
        else:
            for gi in range(g):
                np.matmul(wm[gi], cols[:, gi * CgRS : (gi + 1) * CgRS], out=y3[:, gi * Kg : (gi + 1) * Kg])
    else:
        y3 = y.reshape(N, PQ, K)
        if _is_pointwise(s) and g == 1:
            np.matmul(cols, wm[0], out=y3)
        elif _is_pointwise(s):
            Cg = s["C"] // g
            for gi in range(g):
                np.matmul(cols[:, :, gi * Cg : (gi + 1) * Cg], wm[gi], out=y3[:, :, gi * Kg : (gi + 1) * Kg])
        else:
            for gi in range(g):
                np.matmul(cols[:, :, gi], wm[gi], out=y3[:, :, gi * Kg : (gi + 1) * Kg])


def own_gemm(dtype) -> Variant:
    """rooflab's best CPU GEMM: the gemm family's variant with the "best" role (else its highest
    non-library rung), verified once per dtype against float64 on an odd-sized product before conv uses it."""
    best = best_variant("gemm", "cpu")
    if best is None:
        raise RooflabError(
            "cpu.conv.04-im2col-own-gemm: no own CPU GEMM is registered (family 'gemm' has no variant "
            "besides the library)",
            "install/merge the gemm family, or use cpu.conv.00-im2col-blas",
        )
    return _verified_gemm(best.name, np.dtype(dtype).name)


_GEMM_OK: dict = {}


def _verified_gemm(name: str, dtype: str) -> Variant:
    from ...registry import get_variant
    from ...verify import check

    v = get_variant(name)
    if (name, dtype) not in _GEMM_OK:
        a, b = v.inputs({"M": 37, "N": 53, "K": 29}, dtype)[:2]
        try:
            check(v(a, b), v.reference(a, b), dtype=v.result_dtype(a, b) if v.result_dtype else dtype, what=name)
        except VerificationError as e:
            raise RooflabError(f"cpu.conv.04-im2col-own-gemm: the own GEMM {name} failed verification: {e}") from e
        _GEMM_OK[(name, dtype)] = True
    return v


def _im2col_own(x, w, s, y):
    gemm = own_gemm(x.dtype)
    wm = prepared("im2col.w", w, lambda a: _wmat(a, s), s["layout"])
    cols = _im2col(x, s)
    N, K, PQ = s["N"], s["K"], s["P"] * s["Q"]
    y3 = y.reshape(N, K, PQ)
    if not cols.flags.c_contiguous:  # pragma: no cover - NCHW cols are contiguous
        cols = np.ascontiguousarray(cols)
    for n in range(N):
        gemm(wm[0], cols[n], out=y3[n])


def _own_supports(s):
    if s["groups"] != 1:
        return "groups > 1 is not supported (the own GEMM takes whole matrices; use 00-im2col-blas)"
    return None


# ---- 01 naive, 02 blocked, 03 depthwise ------------------------------------------------------------


def _naive(x, w, s, y):
    f = kc.direct_naive_nchw if s["layout"] == "NCHW" else kc.direct_naive_nhwc
    f(x, w, y, s["stride_h"], s["stride_w"], s["pad_h"], s["pad_w"], s["groups"])


def _blocked(x, w, s, y):
    L = simd.lanes(x.dtype)
    geo = kc.blocked_geometry(s, BLOCK_KB, BLOCK_NV, L)
    kern = kc.direct_kernel(BLOCK_KB, BLOCK_NV, L, s["R"], s["S"])
    wp = prepared("direct.wp", w, lambda a: kc.pack_weights(a, s["groups"], BLOCK_KB), BLOCK_KB)
    xp = workspace("direct.xp", (geo["xp_len"],), x.dtype, zero=True)
    kc.pack_phases(x, xp, s["stride_h"], s["stride_w"], s["pad_h"], s["pad_w"], geo["Hs"], geo["Ws"])
    kern(
        xp,
        wp,
        y.reshape(-1),
        geo["toff"],
        s["N"],
        s["C"],
        s["K"],
        s["groups"],
        s["P"],
        s["Q"],
        geo["Ws"],
        geo["CPL"],
        geo["nkb"],
        geo["nstr"],
    )


def _blocked_flops(s):
    geo = kc.blocked_geometry(s, BLOCK_KB, BLOCK_NV, simd.LANES_F32)
    Kpad = s["groups"] * geo["nkb"] * BLOCK_KB
    return 2.0 * Kpad * geo["computed_pixels"] * (s["C"] // s["groups"]) * s["R"] * s["S"]


SMALL_PLANE = 32 * 32  # NHWC depthwise: planes up to this many pixels are padded first


def _chunks(items: int) -> int:
    import numba

    return max(1, min(items, numba.get_num_threads()))


def _depthwise_supports(s):
    if not (s["groups"] == s["C"] == s["K"]):
        return f"needs a depthwise conv (groups == C == K), got C={s['C']} K={s['K']} groups={s['groups']}"
    return None


def _depthwise_plan(x, w, s):
    """The depthwise call for one (x, w): weights transposed, zero rows and the padded workspace
    looked up once; the returned step(y) is the kernel alone (the look-ups cost ~3 us, a third of a
    7x7 plane's whole conv)."""
    args = (s["stride_h"], s["stride_w"], s["pad_h"], s["pad_w"])
    if s["layout"] == "NCHW":
        chunks = _chunks(s["N"] * s["C"])
        return lambda y: kc.depthwise_nchw(x, w, y, *args, chunks)
    wt = prepared("depthwise.wt", w, lambda a: np.ascontiguousarray(a[:, 0].transpose(1, 2, 0)))
    N, H, W, Cc = x.shape
    ph, pw = s["pad_h"], s["pad_w"]
    window = kc.dw3_window.py_func(s["R"], s["S"], s["stride_w"], pw, W)  # borders handled inside the kernel
    if (ph or pw) and H * W <= SMALL_PLANE and not window:
        # small planes: most pixels touch the border, whose tap-by-tap path is ~4x slower than
        # the interior one; one padded copy (L2-resident) makes every pixel interior
        xpad = workspace("depthwise.xpad", (N, H + 2 * ph, W + 2 * pw, Cc), x.dtype, zero=True, tag=(ph, pw))
        z = _zeros(xpad.shape[2] * Cc, x.dtype)

        def padded(y):
            xpad[:, ph : ph + H, pw : pw + W, :] = x
            kc.depthwise_nhwc(xpad, wt, y, s["stride_h"], s["stride_w"], 0, 0, z)

        return padded
    z = _zeros(W * Cc, x.dtype)
    return lambda y: kc.depthwise_nhwc(x, wt, y, *args, z)


def _depthwise(x, w, s, y):
    _depthwise_plan(x, w, s)(y)


_depthwise.plan = _depthwise_plan


def _zeros(n: int, dtype) -> np.ndarray:
    """A cached zero vector of n elements (stands in for the rows of padding); never written."""
    return workspace("zeros", (n,), dtype, zero=True)


# ---- 05 / 06 Winograd -------------------------------------------------------------------------------


def _winograd_supports(s):
    if (s["R"], s["S"]) != (3, 3):
        return f"Winograd F(mxm,3x3) needs a 3x3 filter, got {s['R']}x{s['S']}"
    if (s["stride_h"], s["stride_w"]) != (1, 1):
        return f"Winograd needs stride 1, got stride ({s['stride_h']}, {s['stride_w']})"
    return None


_CONSTANTS: dict = {}


def _winograd(m):
    a2 = (m + 2) ** 2
    fin, fout = (kw.input_f23, kw.output_f23) if m == 2 else (kw.input_f43, kw.output_f43)

    def run(x, w, s, y):
        L = simd.lanes(x.dtype)
        N, C, K, g = s["N"], s["C"], s["K"], s["groups"]
        Cp, Kp = -(-C // L) * L, -(-K // L) * L
        tH, tW = -(-s["P"] // m), -(-s["Q"] // m)
        T = N * tH * tW
        U = prepared(f"winograd{m}.U", w, lambda a: kw.filter_transform(a, m, g, Cp, Kp), Cp, Kp)
        cst = _CONSTANTS.setdefault(x.dtype.str, kw.constants(x.dtype))
        V = workspace(f"winograd{m}.V", (a2, T, Cp), x.dtype)
        M = workspace(f"winograd{m}.M", (a2, T, Kp), x.dtype, zero=True)
        nhwc = s["layout"] == "NHWC"
        fin(x, V.reshape(-1), cst, L, s["pad_h"], s["pad_w"], tH, tW, Cp, nhwc)
        if g == 1:
            np.matmul(V, U, out=M)
        else:
            Cg, Kg = C // g, K // g
            for gi in range(g):
                M[:, :, gi * Kg : (gi + 1) * Kg] = np.matmul(V[:, :, gi * Cg : (gi + 1) * Cg], U[gi])
        fout(M.reshape(-1), y, cst, L, tH, tW, Kp, nhwc)

    return run


# ---- 07 FFT -----------------------------------------------------------------------------------------


def _fft(x, w, s, y):
    L, To, th, tw, _ = kf.plan(s)
    Wc = prepared("fft.W", w, lambda a: kf.weight_transform(a, L, s["groups"]), L)
    kf.fft_conv(x, Wc, s, L, To, th, tw, workspace, y)


def _fft_flops(s):
    L, _To, _th, _tw, tiles = kf.plan(s)
    return fft_flops(s, (L, L, tiles))["total"]


# ---- registration -----------------------------------------------------------------------------------


def _result(algorithm):
    return lambda x, w, **_: result_key(x.dtype, algorithm)


RUNGS = [
    (
        0,
        "im2col-blas",
        _im2col_blas,
        None,
        ("NCHW", "NHWC"),
        "im2col",
        None,
        "conv",
        "im2col (strided windows, one copy) + one BLAS GEMM per image and group; 1x1/s1 skips im2col (the library)",
    ),
    (
        1,
        "direct-naive",
        _naive,
        None,
        ("NCHW", "NHWC"),
        "direct",
        None,
        "conv",
        "direct loops, one output at a time, taps bounds-checked (the floor)",
    ),
    (
        2,
        "direct-blocked-simd",
        _blocked,
        None,
        ("NCHW",),
        "direct",
        _blocked_flops,
        "conv",
        f"direct on padded, stride-phase-split rows: {BLOCK_KB} out-channels x {BLOCK_NV} vectors register tile in "
        f"explicit {simd.BITS}-bit SIMD, 1x1/3x3 taps unrolled (weights packed once, outside)",
    ),
    (
        3,
        "direct-depthwise",
        _depthwise,
        _depthwise_supports,
        ("NCHW", "NHWC"),
        "direct",
        None,
        "conv",
        "depthwise (groups == C == K): a padded plane per channel in cache, 9 FMAs per output vector; "
        "NHWC vectorizes over channels",
    ),
    (
        4,
        "im2col-own-gemm",
        _im2col_own,
        _own_supports,
        ("NCHW",),
        "im2col",
        None,
        "conv",
        "im2col as 00 + rooflab's best verified CPU GEMM (gemm family) instead of BLAS",
    ),
    (
        5,
        "winograd-f2x2-3x3",
        _winograd(2),
        _winograd_supports,
        ("NCHW", "NHWC"),
        "winograd-f2x2",
        lambda s: winograd_flops(s, 2)["total"],
        "conv",
        "Winograd F(2x2,3x3): SIMD input/output transforms + 16 batched BLAS GEMMs "
        "(filter transform U precomputed outside the timed call)",
    ),
    (
        6,
        "winograd-f4x4-3x3",
        _winograd(4),
        _winograd_supports,
        ("NCHW", "NHWC"),
        "winograd-f4x4",
        lambda s: winograd_flops(s, 4)["total"],
        "conv-winograd-f4x4",
        "Winograd F(4x4,3x3): SIMD input/output transforms + 36 batched BLAS GEMMs "
        "(filter transform U precomputed outside the timed call; looser declared tolerance)",
    ),
    (
        7,
        "fft",
        _fft,
        None,
        ("NCHW",),
        "fft",
        _fft_flops,
        "conv",
        "FFT: rfft2 of 5-smooth padded tiles, complex GEMM per frequency over channels, irfft2, crop "
        "(weight spectra precomputed outside the timed call)",
    ),
]

VARIANTS: dict[int, Variant] = {}
for number, tech, run, supports, layouts, algorithm, real, tol, desc in RUNGS:
    name = f"cpu.{FAMILY}.{number:02d}-{tech}"
    VARIANTS[number] = register(
        Variant(
            name=name,
            family=FAMILY,
            device="cpu",
            number=number,
            description=desc,
            kernel=_variant_kernel(name, run, supports, layouts),
            reference=reference,
            work=work_for(algorithm, real),
            inputs=make_inputs,
            defaults={"stride": 1, "pad": 0, "groups": 1, "layout": "NCHW"},
            result_dtype=_result(tol),
            # model ops: the library and the rungs that can win (blocked direct, depthwise, Winograd
            # F(4x4)); naive and FFT (slow at model sizes, see the kernel-size sweep) are not tried
            op="conv2d" if number in (0, 2, 3, 6) else None,
            dtypes=DTYPES,
        )
    )
