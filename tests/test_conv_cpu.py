"""conv family, CPU: every variant against the float64 direct reference on small random shapes
(stride 2, padding, groups, depthwise, 1x1, 5x5, NHWC, float64), the checker rejecting wrong
kernels (flipped filter, lost padding, a Winograd transcription slip, an output just outside the
declared F(4x4,3x3) tolerance), bad input naming its constraint, algorithms refusing shapes they do
not apply to, declared work, shapes and the suite.

Compile cost: the numba kernels are cached on disk (cache=True; the blocked direct kernels are
generated once and checked in, kernels/cpu/conv_direct.py). A cold cache costs ~2-3 min for this file on 2 busy cores, mostly
Winograd F(4x4) (~30 s), the blocked 1x1 and runtime-tap kernels and the float64 builds (~10-20 s
each): those cases are marked slow.

Run: python -m pytest -q tests/test_conv_cpu.py   (-m "not slow" for the quick part)
"""

import dataclasses

import numpy as np
import pytest

import rooflab
from rooflab.cpu.backend import cpu_backend
from rooflab.driver import Driver, Settings
from rooflab.errors import RooflabError, VerificationError
from rooflab.families import conv as F
from rooflab.families.conv import cpu as C
from rooflab.verify import check, tolerance

RUNNER = Driver(cpu_backend(), Settings(budget_s=0.0, min_samples=1, probe_clock=False, max_attempts=1))
NAMES = [v.name for v in rooflab.list_variants(family="conv", device="cpu")]
HAVE_OWN_GEMM = any(not v.library for v in rooflab.list_variants(family="gemm", device="cpu"))

# small shapes that hit every code path: remainders of the 8x2 tile and the 16-lane vectors,
# odd sizes, stride 2 (phase split), groups, depthwise, 1x1, 5x5, batch > 1
SHAPES = {
    "3x3-p1": F.shape(2, 8, 9, 11, 12, 3, pad=1),
    "3x3-s2": F.shape(1, 8, 13, 11, 10, 3, pad=1, stride=2),
    "3x3-p0": F.shape(1, 5, 8, 7, 3, 3, pad=0),
    "groups2": F.shape(2, 6, 9, 9, 4, 3, pad=1, groups=2),
    "depthwise": F.shape(1, 16, 10, 10, 16, 3, pad=1, groups=16),
    "depthwise-s2": F.shape(1, 24, 11, 10, 24, 3, pad=1, groups=24, stride=2),
    "depthwise-wide-s2": F.shape(1, 3, 37, 71, 3, 3, pad=1, groups=3, stride=2),  # vector de-interleave
    "depthwise-rows": F.shape(2, 3, 13, 45, 3, 3, pad=0, groups=3),  # four-rows path (pad 0, Q >= 16)
    # the flat path (3x3, stride 1, pad 1): four-row blocks + the one-vector rest
    "depthwise-flat": F.shape(2, 3, 13, 45, 3, 3, pad=1, groups=3),  # rows run into the next, 13 = 3x4 + 1
    "depthwise-flat-w16": F.shape(1, 2, 8, 16, 2, 3, pad=1, groups=2),  # W == L: no tails at all
    "depthwise-flat-narrow": F.shape(1, 5, 7, 7, 5, 3, pad=1, groups=5),  # W < L: one vector a step
    "depthwise-flat-odd": F.shape(1, 2, 5, 19, 2, 3, pad=1, groups=2),  # mask period 19 vectors
    "1x1": F.shape(1, 5, 12, 12, 7, 1),
    "1x1-s2": F.shape(1, 5, 12, 12, 7, 1, stride=2),
    "rect-stride": F.shape(1, 3, 12, 10, 4, 3, S=2, pad=1, stride=2),
}
SLOW_SHAPES = {
    "5x5-p2": F.shape(1, 4, 12, 12, 5, 5, pad=2),
    "9x9-p4": F.shape(1, 4, 14, 13, 5, 9, pad=4),  # blocked: the runtime-tap kernel (R > 7)
}


def _strides(s: dict, sh: int, sw: int) -> dict:
    """The shape ``s`` with row stride sh and column stride sw."""
    return dict(
        s,
        stride_h=sh,
        stride_w=sw,
        P=(s["H"] + 2 * s["pad_h"] - s["R"]) // sh + 1,
        Q=(s["W"] + 2 * s["pad_w"] - s["S"]) // sw + 1,
    )


NHWC = {
    "3x3-p1": F.shape(2, 8, 9, 11, 12, 3, pad=1, layout="NHWC"),
    "groups2": F.shape(2, 6, 9, 9, 4, 3, pad=1, groups=2, layout="NHWC"),
    "depthwise-s2": F.shape(1, 24, 11, 10, 24, 3, pad=1, groups=24, stride=2, layout="NHWC"),
    "depthwise-s1": F.shape(2, 40, 9, 12, 40, 3, pad=1, groups=40, layout="NHWC"),
    "depthwise-5x5": F.shape(1, 16, 9, 9, 16, 5, pad=2, groups=16, layout="NHWC"),
    # the 3x3 sliding window's edges: pad 0, odd widths at stride 2, a 2-pixel row, no channel
    # tail, only a tail, float64 via _cases
    "depthwise-s2-p0-oddW": F.shape(1, 32, 9, 11, 32, 3, pad=0, groups=32, stride=2, layout="NHWC"),
    "depthwise-s2-7x7": F.shape(2, 16, 7, 7, 16, 3, pad=1, groups=16, stride=2, layout="NHWC"),
    "depthwise-s1-p0": F.shape(2, 16, 5, 6, 16, 3, pad=0, groups=16, layout="NHWC"),
    "depthwise-s1-W2": F.shape(1, 48, 4, 2, 48, 3, pad=1, groups=48, layout="NHWC"),
    "depthwise-s1-C5": F.shape(1, 5, 6, 7, 5, 3, pad=1, groups=5, layout="NHWC"),
    # unequal row and column strides: one output row per pass (the two-row window assumes sh == sw)
    "depthwise-s2x1": _strides(F.shape(1, 16, 9, 8, 16, 3, pad=1, groups=16, layout="NHWC"), 2, 1),
    "depthwise-s1x2": _strides(F.shape(2, 32, 7, 10, 32, 3, pad=1, groups=32, layout="NHWC"), 1, 2),
    "depthwise-s3": F.shape(1, 16, 11, 11, 16, 3, pad=1, groups=16, stride=3, layout="NHWC"),
    "1x1": F.shape(1, 5, 12, 12, 7, 1, layout="NHWC"),
}
SLOW_VARIANTS = ("06-winograd-f4x4-3x3",)


def _run_and_check(name, s, dtype="float32"):
    v = rooflab.get_variant(name)
    if v.kernel.supports(s):
        pytest.skip(f"{name}: {v.kernel.supports(s)}")
    if name.endswith("04-im2col-own-gemm") and not HAVE_OWN_GEMM:
        pytest.skip("no own GEMM registered")
    x, w = v.inputs(s, dtype, seed=7)
    params = F.params_for(s)
    return RUNNER.verify(v, (x, w), v.params(**params), threads=1)


def _cases(shapes, slow=()):
    """(variant, shape) pairs the variant applies to (the refusals are tested below)."""
    out = []
    for name in NAMES:
        for label, s in shapes.items():
            if rooflab.get_variant(name).kernel.supports(s):
                continue
            if name.endswith("04-im2col-own-gemm") and (s["groups"] > 1 or s["layout"] != "NCHW"):
                continue
            slow_case = name.endswith(SLOW_VARIANTS) or (name.split(".")[-1], label) in slow
            marks = [pytest.mark.slow] if slow_case else []
            out.append(pytest.param(name, s, id=f"{name.split('.')[-1]}-{label}", marks=marks))
    return out


# own compiled kernels that cost > 15 s cold: the blocked 1x1 and runtime-tap (non-square, > 3x3) kernels
SLOW_PAIRS = {
    ("02-direct-blocked-simd", "1x1"),
    ("02-direct-blocked-simd", "1x1-s2"),
    ("02-direct-blocked-simd", "rect-stride"),
}


@pytest.mark.parametrize("name,s", _cases(SHAPES, SLOW_PAIRS))
def test_variant_matches_reference(name, s):
    rep = _run_and_check(name, s)
    assert rep["elements"] == s["N"] * s["K"] * s["P"] * s["Q"]


@pytest.mark.slow
@pytest.mark.parametrize("name,s", _cases(SLOW_SHAPES))
def test_variant_matches_reference_large_filters(name, s):
    _run_and_check(name, s)


@pytest.mark.parametrize("name,s", _cases(NHWC))
def test_variant_matches_reference_nhwc(name, s):
    _run_and_check(name, s)


@pytest.mark.parametrize(
    "name",
    [
        # own float64 builds cost 10-35 s each with a cold cache (depthwise: every NCHW path again)
        pytest.param(
            n,
            marks=[pytest.mark.slow]
            if n.endswith(("02-direct-blocked-simd", "winograd-f2x2-3x3", "03-direct-depthwise"))
            else [],
        )
        for n in NAMES
        if not n.endswith(("01-direct-naive", "04-im2col-own-gemm", *SLOW_VARIANTS))
    ],
)
def test_variant_matches_reference_float64(name):
    s = F.shape(1, 8, 9, 10, 16, 3, pad=1)
    if name.endswith("03-direct-depthwise"):
        s = F.shape(1, 16, 9, 10, 16, 3, pad=1, groups=16)
    _run_and_check(name, s, "float64")


@pytest.mark.slow
def test_winograd_f4x4_float64():
    _run_and_check("cpu.conv.06-winograd-f4x4-3x3", F.shape(2, 8, 9, 10, 16, 3, pad=1), "float64")


def test_blocked_kernels_are_checked_in_and_match_their_generator():
    """The blocked direct kernels are module functions of the package (nothing is generated into the
    user's cache at run time), and the checked-in text is what the generator writes today."""
    import inspect
    from pathlib import Path

    from rooflab.kernels.cpu import conv as kc
    from rooflab.kernels.cpu import conv_direct

    for R, name in ((3, "direct_8x2v_r3"), (1, "direct_8x2v_r1"), (5, "direct_8x2v_rt"), (0, "direct_8x2v_rt")):
        kern = kc.direct_kernel(8, 2, 16, R, R)
        assert kern is getattr(conv_direct, name)
        assert Path(inspect.getsourcefile(kern.py_func)) == Path(conv_direct.__file__)
    assert kc.direct_kernel(8, 2, 16, 3, 2) is conv_direct.direct_8x2v_rt  # non-square: runtime taps
    text = inspect.getsource(conv_direct)
    assert text.rstrip("\n").endswith(conv_direct.generated_source().rstrip("\n")), (
        "regenerate with: python -m rooflab.kernels.cpu.conv_direct"
    )
    with pytest.raises(ValueError, match="conv_direct.TILES"):
        kc.direct_kernel(4, 3, 16, 3, 3)


def test_public_call_and_repetitions():
    v = rooflab.get_variant("cpu.conv.02-direct-blocked-simd")
    x, w = v.inputs(F.shape(1, 4, 6, 6, 8, 3, pad=1), "float32")
    y1 = v(x, w, pad=1)
    y3 = v(x, w, pad=1, reps=3)
    assert y1.shape == (1, 8, 6, 6) and y1.flags.c_contiguous
    np.testing.assert_array_equal(y1, y3)


def test_changed_weights_are_not_served_from_the_transform_cache():
    """Filter transforms are precomputed once per weights array; an in-place change must be seen."""
    s = F.shape(1, 8, 8, 8, 16, 3, pad=1)
    for name in ("cpu.conv.05-winograd-f2x2-3x3", "cpu.conv.07-fft", "cpu.conv.02-direct-blocked-simd"):
        v = rooflab.get_variant(name)
        x, w = v.inputs(s, "float32", seed=3)
        check(v(x, w, pad=1), F.reference(x, w, pad=1), dtype=v.result_dtype(x, w), what=name)
        w *= -0.5
        check(v(x, w, pad=1), F.reference(x, w, pad=1), dtype=v.result_dtype(x, w), what=name)


def test_one_changed_weight_is_seen_by_the_depthwise_cache():
    """The cached (R, S, C) weights of the NHWC depthwise path are rebuilt when any one weight changes."""
    v = rooflab.get_variant("cpu.conv.03-direct-depthwise")
    s = F.shape(1, 32, 9, 9, 32, 3, pad=1, groups=32, layout="NHWC")
    x, w = v.inputs(s, "float32", seed=4)
    kw = {"pad": 1, "groups": 32, "layout": "NHWC"}
    check(v(x, w, **kw), F.reference(x, w, **kw), dtype=v.result_dtype(x, w), what=v.name)
    w[31, 0, 2, 1] += 1.0  # the last channel's bottom-middle tap only
    check(v(x, w, **kw), F.reference(x, w, **kw), dtype=v.result_dtype(x, w), what=v.name)


def test_inputs_and_outputs_start_on_a_cache_line():
    """numpy's large arrays start 16 B into a line here; zmm loads from them split (1.3-1.6x slower
    NHWC depthwise): the family's inputs, outputs and workspaces are 64 B aligned."""
    for layout in ("NCHW", "NHWC"):
        s = F.shape(1, 48, 30, 30, 48, 3, pad=1, groups=48, layout=layout)
        x, w = F.make_inputs(s, np.float32)
        y = rooflab.get_variant("cpu.conv.03-direct-depthwise")(x, w, pad=1, groups=48, layout=layout)
        assert x.ctypes.data % 64 == w.ctypes.data % 64 == y.ctypes.data % 64 == 0
        assert x.flags.c_contiguous and w.flags.c_contiguous
    assert C.workspace("t.align", (3, 1001), np.float32, zero=True).ctypes.data % 64 == 0


def test_workspaces_are_not_shared_between_different_paddings():
    """Padded-input buffers are reused per shape: two convs with equal padded sizes but different pads
    (64x64 R=7 pad 3 and R=9 pad 4 both pad to 70/72 -> one FFT size 72) must not see each other's data."""
    for name in ("cpu.conv.00-im2col-blas", "cpu.conv.07-fft", "cpu.conv.02-direct-blocked-simd"):
        v = rooflab.get_variant(name)
        for s in (
            F.shape(1, 2, 64, 64, 2, 7, pad=3),
            F.shape(1, 2, 64, 64, 2, 9, pad=4),
            F.shape(1, 2, 66, 66, 2, 9, pad=3),
        ):
            x, w = v.inputs(s, "float32", seed=s["R"])
            check(v(x, w, **F.params_for(s)), F.reference(x, w, **F.params_for(s)), dtype="float32/conv", what=name)


# ---- the checker rejects wrong kernels -------------------------------------------------------------


def _wrong(name, base, run):
    v = rooflab.get_variant(base)
    return dataclasses.replace(v, name=name, kernel=run)


def _flipped_filter(x, w, stride=1, pad=0, groups=1, layout="NCHW", reps=1, threads=None):
    """Convolution instead of cross-correlation: the classic flipped-kernel bug."""
    return C.VARIANTS[2].kernel(x, np.ascontiguousarray(w[:, :, ::-1, ::-1]), stride, pad, groups, layout)


def _lost_padding(x, w, stride=1, pad=0, groups=1, layout="NCHW", reps=1, threads=None):
    """Pads the wrong side: computes the shifted window (pad on top/left only)."""
    s = F.conv_shape(x, w, stride, pad, groups, layout)
    ph, pw = s["pad_h"], s["pad_w"]
    xs = np.zeros_like(x)
    xs[:, :, : x.shape[2] - 1, : x.shape[3] - 1] = x[:, :, 1:, 1:]
    return C.VARIANTS[0].kernel(xs, w, stride, (ph, pw), groups, layout)


def _winograd_slip(x, w, stride=1, pad=0, groups=1, layout="NCHW", reps=1, threads=None):
    """F(4x4,3x3) with one G entry mistyped (1/24 -> 1/25), everything else the real kernel."""
    from rooflab.kernels.cpu import winograd as kw

    saved = kw.G[4].copy()
    C._PREP.clear()
    try:
        kw.G[4][3, 0] = kw.G[4][4, 0] = 1 / 25
        return C.VARIANTS[6].kernel(x, w, stride, pad, groups, layout)
    finally:
        kw.G[4][:] = saved
        C._PREP.clear()


@pytest.mark.parametrize(
    "wrong",
    [
        _wrong("wrong.conv_flipped_filter", "cpu.conv.02-direct-blocked-simd", _flipped_filter),
        _wrong("wrong.conv_lost_padding", "cpu.conv.00-im2col-blas", _lost_padding),
        pytest.param(
            _wrong("wrong.winograd_g_typo", "cpu.conv.06-winograd-f4x4-3x3", _winograd_slip), marks=pytest.mark.slow
        ),
    ],
    ids=lambda v: v.name,
)
def test_runner_refuses_wrong_kernels(wrong):
    s = F.shape(1, 8, 10, 10, 16, 3, pad=1)
    x, w = wrong.inputs(s, "float32", seed=11)
    rec = RUNNER.measure(wrong, (x, w), threads=1, params=F.params_for(s))
    assert rec["status"] == "failed" and not rec["verified"]
    assert "outside" in rec["error"] and "worst at index" in rec["error"]


def _tol(key):
    from rooflab.verify import tolerance

    t = tolerance(key)  # "float32/conv-winograd-f4x4": a dtype and a kind of the one table
    return t["atol"], t["rtol"]


@pytest.mark.slow
def test_winograd_f4x4_tolerance_is_declared_and_tight():
    """F(4x4,3x3) passes its own row, is visibly less accurate than direct and F(2x2,3x3), fails the
    plain conv row at a realistic layer; an output just outside its row fails, just inside passes."""
    s = F.shape(2, 64, 12, 12, 64, 3, pad=1)
    x, w = F.make_inputs(s, "float32", seed=5)
    ref = F.reference(x, w, pad=1)
    scale = np.abs(ref).max()
    errs = {}
    for n in (2, 5, 6):
        v = C.VARIANTS[n]
        y = v(x, w, pad=1)
        errs[n] = np.abs(y - ref).max() / scale
        check(y, ref, dtype=v.result_dtype(x, w), what=v.name)
    assert C.VARIANTS[6].result_dtype(x, w) == "float32/conv-winograd-f4x4"
    assert errs[6] > 3 * max(errs[2], errs[5])
    y6 = C.VARIANTS[6](x, w, pad=1)
    atol, rtol = _tol("float32/conv-winograd-f4x4")
    assert atol > tolerance("float32/conv")["atol"]
    i = np.unravel_index(np.argmax(np.abs(ref)), ref.shape)
    limit = atol + rtol * abs(ref[i])
    for factor, ok in ((1.05, False), (0.95, True)):
        bad = y6.astype(np.float64)
        bad[i] = ref[i] + factor * limit
        if ok:
            check(bad, ref, dtype="float32/conv-winograd-f4x4")
        else:
            with pytest.raises(VerificationError, match="1 of"):
                check(bad, ref, dtype="float32/conv-winograd-f4x4")


def test_plain_float32_tolerance_rejects_a_one_tap_error():
    """The conv row is loose on near-zero outputs only: dropping one tap of one output fails it."""
    s = F.shape(1, 8, 8, 8, 8, 3, pad=1)
    x, w = F.make_inputs(s, "float32", seed=2)
    ref = F.reference(x, w, pad=1)
    y = C.VARIANTS[0](x, w, pad=1).astype(np.float64)
    y[0, 3, 4, 4] -= x[0, 2, 4, 4] * w[3, 2, 1, 1]
    with pytest.raises(VerificationError):
        check(y, ref, dtype="float32/conv")


# ---- bad input ----------------------------------------------------------------------------------------


V2 = "cpu.conv.02-direct-blocked-simd"


@pytest.mark.parametrize(
    "xshape,wshape,kw,match",
    [
        ((1, 4, 8, 8), (8, 3, 3, 3), {}, "C/groups=3 channels per group but the input has C=4"),
        ((1, 6, 8, 8), (8, 3, 3, 3), {"groups": 4}, "not divisible by groups=4"),
        ((1, 6, 8, 8), (9, 3, 3, 3), {"groups": 2}, "K=9 output channels are not divisible by groups=2"),
        ((1, 4, 8, 8), (8, 4, 3, 3), {"groups": 0}, "groups=0 must be a positive integer"),
        ((1, 0, 8, 8), (8, 0, 3, 3), {}, "sizes must be positive"),
        ((1, 4, 8, 8), (8, 4, 3, 3), {"pad": -1}, "must not be negative"),
        ((1, 4, 8, 8), (8, 4, 3, 3), {"pad": 3}, "must be smaller than the 3x3 filter"),
        ((1, 4, 8, 8), (8, 4, 3, 3), {"stride": 0}, "stride=.0, 0. must be at least 1"),
        ((1, 4, 8, 8), (8, 4, 3, 3), {"stride": (1, 2, 3)}, "must be an int or a pair"),
        ((1, 4, 2, 2), (8, 4, 3, 3), {}, "does not fit the padded 2x2 input"),
        ((4, 8, 8), (8, 4, 3, 3), {}, "x must be NCHW .N, C, H, W., got 3-D"),
        ((1, 4, 8, 8), (8, 4, 3), {}, r"w must be \(K, C/groups, R, S\), got 3-D"),
        ((1, 4, 8, 8), (8, 4, 3, 3), {"layout": "CHWN"}, "layout 'CHWN' is not supported"),
    ],
)
def test_bad_input_names_the_constraint(xshape, wshape, kw, match):
    x = np.ones(xshape, np.float32)
    w = np.ones(wshape, np.float32)
    with pytest.raises(RooflabError, match=match) as e:
        rooflab.get_variant(V2)(x, w, **kw)
    assert V2 in str(e.value)


def test_bad_dtypes_and_layouts_named():
    v = rooflab.get_variant(V2)
    x = np.ones((1, 4, 8, 8), np.float32)
    w = np.ones((8, 4, 3, 3), np.float32)
    with pytest.raises(RooflabError, match="x is float32 but w is float64"):
        v(x, w.astype(np.float64))
    with pytest.raises(RooflabError, match="dtype int64"):
        v(x.astype(np.int64), w.astype(np.int64))
    with pytest.raises(RooflabError, match="x must be C-contiguous"):
        v(np.asfortranarray(x), w)
    with pytest.raises(RooflabError, match=f"{V2}: layout NHWC is not supported .this variant takes NCHW."):
        v(x.transpose(0, 2, 3, 1).copy(), w, layout="NHWC")


def test_an_accepted_call_does_not_let_a_look_alike_through():
    """conv_shape remembers accepted argument sets; what compares equal to one (1.0 == 1 == True, a
    Fortran copy of the same shape) must still be refused, every time."""
    v = rooflab.get_variant(V2)
    x = np.ones((1, 4, 8, 8), np.float32)
    w = np.ones((8, 4, 3, 3), np.float32)
    v(x, w, stride=(1, 1), groups=1)
    v(x, w, stride=(1, 1), groups=1)  # the remembered path
    for kw, match in (
        ({"stride": (1.0, 1.0)}, "must be an int or a pair"),
        ({"stride": 1.0}, "must be an int or a pair"),
        ({"groups": True}, "groups=True must be a positive integer"),
    ):
        for _ in range(2):
            with pytest.raises(RooflabError, match=match):
                v(x, w, **kw)
    for _ in range(2):
        with pytest.raises(RooflabError, match="x must be C-contiguous"):
            v(x[:, :, :, ::-1], w)  # same shape and dtype, not contiguous
    s = F.conv_shape(x, w)
    s["P"] = -1  # a caller's edit of its copy does not reach the next call
    assert F.conv_shape(x, w)["P"] == 6


@pytest.mark.parametrize("number", [5, 6])
@pytest.mark.parametrize(
    "wshape,kw,match",
    [
        ((8, 4, 5, 5), {"pad": 2}, "needs a 3x3 filter, got 5x5"),
        ((8, 4, 3, 3), {"pad": 1, "stride": 2}, r"needs stride 1, got stride \(2, 2\)"),
    ],
)
def test_winograd_refuses_shapes_it_does_not_apply_to(number, wshape, kw, match):
    v = C.VARIANTS[number]
    with pytest.raises(RooflabError, match=match) as e:
        v(np.ones((1, 4, 9, 9), np.float32), np.ones(wshape, np.float32), **kw)
    assert v.name in str(e.value)


def test_depthwise_refuses_a_dense_conv():
    with pytest.raises(RooflabError, match=r"needs a depthwise conv \(groups == C == K\), got C=4 K=8 groups=1"):
        C.VARIANTS[3](np.ones((1, 4, 9, 9), np.float32), np.ones((8, 4, 3, 3), np.float32), pad=1)


def test_own_gemm_variant_refuses_cleanly_or_runs():
    v = C.VARIANTS[4]
    x, w = v.inputs(F.shape(1, 4, 8, 8, 8, 3, pad=1), "float32")
    if HAVE_OWN_GEMM:
        check(v(x, w, pad=1), F.reference(x, w, pad=1), dtype="float32/conv")
    else:
        with pytest.raises(RooflabError, match="no own CPU GEMM is registered"):
            v(x, w, pad=1)


# ---- reference, work, shapes, suite --------------------------------------------------------------------


def test_reference_chunking_does_not_change_the_result(monkeypatch):
    s = F.shape(2, 6, 11, 9, 4, 3, pad=1, groups=2, stride=2)
    x, w = F.make_inputs(s, "float64", seed=4)
    whole = F.reference(x, w, **F.params_for(s))
    monkeypatch.setattr(F, "REF_CHUNK_BYTES", 1)
    np.testing.assert_allclose(F.reference(x, w, **F.params_for(s)), whole, rtol=1e-13, atol=1e-13)
    # a tiny hand example: 1 channel, 2x2 filter of ones = sums of 2x2 windows
    xi = np.arange(9.0).reshape(1, 1, 3, 3)
    np.testing.assert_array_equal(F.reference(xi, np.ones((1, 1, 2, 2))), [[[[8.0, 12.0], [20.0, 24.0]]]])


def test_declared_work():
    from rooflab.workloads import ops

    s = F.resnet50_3x3_targets(8)[0]
    x, w = F.make_inputs(F.shape(1, 4, 6, 6, 8, 3, pad=1), "float32")
    nominal = F.nominal_flops(s)
    assert nominal == ops.flops({"kind": "conv2d", "shape": s, "dtype": "float32"}) == 2 * 8 * 64 * 56 * 56 * 64 * 9
    wg = F.winograd_flops(s, 4)
    assert wg["tiles"] == 8 * 14 * 14 and wg["gemm"] == nominal / 4
    assert F.winograd_flops(s, 2)["gemm"] == nominal / 2.25
    assert wg["input_transform"] == wg["tiles"] * 64 * 2 * 6 * 22
    # the hand-counted 1-D transforms never exceed the matrices' naive cost
    for m in (2, 4):
        from rooflab.kernels.cpu import winograd as kw

        fin, fout = F.WINOGRAD_1D[m]
        assert fin <= F._row_flops(kw.BT[m]) and fout <= F._row_flops(kw.AT[m])
    wk = C.VARIANTS[6].work(x, w, reps=3, pad=1)
    assert isinstance(wk, F.ConvWork) and wk.algorithm == "winograd-f4x4"
    assert wk.flops == 3 * F.nominal_flops(F.conv_shape(x, w, pad=1)) and wk.algorithm_flops > 0
    assert wk.bytes == 3 * 4 * (4 * 36 + 8 * 4 * 9 + 8 * 36)
    assert "algorithm_flops" in wk.as_dict()
    wf = C.VARIANTS[7].work(x, w, pad=1)
    L, To, th, tw, tiles = C.kf.plan(F.conv_shape(x, w, pad=1))
    assert (
        wf.algorithm == "fft" and wf.algorithm_flops == F.fft_flops(F.conv_shape(x, w, pad=1), (L, L, tiles))["total"]
    )
    assert C.VARIANTS[2].work(x, w, pad=1).algorithm_flops >= C.VARIANTS[0].work(x, w, pad=1).algorithm_flops


def test_fft_plan_is_valid_and_tiles_large_images():
    from rooflab.kernels.cpu import fft_conv as kf

    for s in [F.shape(1, 32, 64, 64, 32, r, pad=(r - 1) // 2) for r in (3, 9, 15)] + F.resnet50_layers(1)[:3]:
        L, To, th, tw, tiles = kf.plan(s)
        assert L in kf.smooth_sizes() and To == L - max(s["R"], s["S"]) + 1
        assert th * To >= s["H"] + 2 * s["pad_h"] - s["R"] + 1 and tiles == th * tw
    big = F.shape(1, 4, 1000, 1000, 4, 3, pad=1)
    assert kf.plan(big)[4] > 1  # a 1000x1000 image is tiled


def test_shapes_from_the_models():
    r1 = F.resnet50_layers(1)
    assert len(r1) == 23 and {(s["R"], s["S"]) for s in r1} == {(7, 7), (1, 1), (3, 3)}
    assert all(s["N"] == 8 for s in F.resnet50_layers(8))
    dw = F.mobilenet_v2_depthwise(1)
    assert len(dw) == 10 and sum(s["count"] for s in dw) == 17
    assert all(s["groups"] == s["C"] == s["K"] and s["R"] == 3 for s in dw)
    assert [s["R"] for s in F.kernel_sweep()] == [3, 5, 7, 9, 11, 13, 15]
    assert [(s["C"], s["H"]) for s in F.resnet50_3x3_targets()] == [(64, 56), (128, 28), (256, 14)]


def test_suite_cases_are_registered_and_applicable():
    from rooflab.registry import check_cases

    quick = F.cases(quick=True, threads=[1])
    assert check_cases(quick) and all(isinstance(c, rooflab.registry.Case) for c in quick)
    for c in quick:
        v = rooflab.get_variant(c.variant)
        s = F.normalize_shape(c.size)
        assert v.kernel.supports(s) is None, (c.variant, c.label)
        assert c.params == F.params_for(s)
    assert {c.variant.split(".")[-1] for c in quick} >= {"00-im2col-blas", "02-direct-blocked-simd", "07-fft"}
    full = F.cases(quick=False, threads=[1])
    assert not any("winograd" in c.variant and F.normalize_shape(c.size)["stride_h"] != 1 for c in full)
    assert any(c.variant.endswith("03-direct-depthwise") for c in full)


def test_one_case_through_the_driver():
    c = F.cases(quick=True, threads=[1])[0]
    v = rooflab.get_variant(c.variant)
    small = dict(c.size, N=1, H=8, W=8)
    rec = RUNNER.measure(v, v.inputs(small, c.dtype), threads=1, params=c.params, reps=1)
    assert rec["status"] == "ok" and rec["work"]["algorithm_flops"] > 0 and rec["verification"]["max_abs_err"] < 1e-4
