"""Checks of the CUDA family variants (conv, elementwise, chase, launch, transfer), written once and
run twice: on the CPU emulation of the real kernels (tests/test_cuda_families_emu.py, every commit)
and on a GPU (tests/test_cuda_families_gpu.py, scripts/device_check.sh). Each check uses whatever
``cupy`` is importable: the real one, or the emulated stand-in the emu tests install.

Shapes are tiny on purpose (the emulation runs one OS thread per CUDA thread) but cover every code
path: groups, depthwise, strides, asymmetric padding, odd sizes, partial tiles, the FFT's tiled and
untiled plans, float4 and scalar paths, warp- and block-per-row kernels.
"""

from __future__ import annotations

import numpy as np
import pytest

import rooflab
from rooflab.errors import RooflabError, VerificationError
from rooflab.families.chase import cuda as chase
from rooflab.families.conv import cuda as conv
from rooflab.families.elementwise import cuda as ew
from rooflab.families.launch import cuda as launch
from rooflab.families.transfer import cuda as transfer
from rooflab.verify import check_device


def _s(N, C, H, W, K, R, S, sh=1, sw=1, ph=0, pw=0, g=1):
    return {"N": N, "C": C, "H": H, "W": W, "K": K, "R": R, "S": S, "stride_h": sh, "stride_w": sw,
            "pad_h": ph, "pad_w": pw, "groups": g}  # fmt: skip


CONV_SHAPES = [
    _s(2, 8, 12, 12, 8, 3, 3, ph=1, pw=1),  # 3x3 same, partial Winograd tiles
    _s(1, 6, 11, 13, 20, 3, 3, ph=1),  # odd sizes, K > DT_KB (two channel blocks), asymmetric pad
    _s(1, 4, 17, 15, 5, 5, 3, sh=2, ph=2, pw=1),  # 5x3 filter, stride (2, 1)
    _s(2, 6, 9, 9, 6, 3, 3, ph=1, pw=1, g=6),  # depthwise
    _s(1, 6, 9, 9, 12, 3, 3, ph=1, pw=1, g=6),  # depthwise, channel multiplier 2
    _s(1, 8, 10, 10, 12, 3, 3, ph=1, pw=1, g=2),  # grouped
    _s(1, 3, 70, 66, 4, 7, 7, sh=2, sw=2, ph=3, pw=3),  # stem-like: 7x7 s2, FFT tiled (> 64 px)
    _s(1, 16, 6, 6, 8, 1, 1),  # 1x1 (the library's GEMM-only path)
]


def _applies(name, shape):
    try:
        conv.check_applies(name, conv.spec_from_shape(name, shape))
        return True
    except RooflabError:
        return False


def verify_conv(v, got, expected) -> dict:
    """The driver's check of a conv result: the one tolerance table's entry the variant declares."""
    from rooflab.verify import check

    return check(got, expected, dtype=got.dtype, what=v.name, kind=v.tolerance)


def check_conv_variants():
    """Every conv variant on every shape it accepts, against the float64 reference with its declared
    tolerance; shapes it refuses are refused by inputs() with a RooflabError."""
    errors = {}
    for v in rooflab.list_variants(family="conv", device="cuda"):
        for shape in CONV_SHAPES:
            if not _applies(v.name, shape):
                with pytest.raises(RooflabError, match=v.name):
                    v.inputs(shape)
                continue
            x, w, out = v.inputs(shape, "float32", seed=3)
            p = conv.conv_params(shape)
            expected = v.reference(x, w, out, **p)
            got = v(x, w, out, **p)
            rep = verify_conv(v, got, expected)
            errors[v.name, str(shape)] = rep["max_err_over_max_ref"]
            got2 = v(x, w, **p)  # without out: allocated, same result
            check_device(got2, got, np.float32, v.name, rtol=0, atol=0)
    assert {n for n, _ in errors} == {v.name for v in rooflab.list_variants(family="conv", device="cuda")}
    return errors


def check_conv_library_float64():
    v = rooflab.get_variant(conv.NAMES["cupy-im2col-cublas"])
    shape = CONV_SHAPES[2]
    x, w, out = v.inputs(shape, "float64")
    p = conv.conv_params(shape)
    verify_conv(v, v(x, w, out, **p), v.reference(x, w, out, **p))


def check_conv_rejects_bad_input():
    v = rooflab.get_variant(conv.NAMES["direct-tiled"])
    x, w, out = v.inputs(CONV_SHAPES[0])
    p = conv.conv_params(CONV_SHAPES[0])
    cases = [
        ((x, w[:, :4].copy(), None), p, "input channels"),  # filter for 4 channels, input has 8
        ((x.astype(np.float64), w.astype(np.float64), None), p, "float32"),  # own kernels: FP32 only
        ((x.transpose(0, 1, 3, 2), w, None), p, "contiguous"),
        ((x[0], w, None), p, "4-D"),
        ((x, w, out[:1]), p, "shape"),  # out of the wrong shape
        ((x, w, None), {**p, "pad": 3}, "smaller than the 3x3 filter"),
        ((x, w, None), {**p, "stride": 0}, "stride"),
        ((x, w, None), {**p, "groups": 3}, "multiples of groups"),
    ]
    for arrays, params, match in cases:
        with pytest.raises(RooflabError, match=match):
            v(*arrays, **params)
    wino = rooflab.get_variant(conv.NAMES["winograd-f4x4"])
    with pytest.raises(RooflabError, match="stride 1"):
        wino(x, w, stride=2, pad=1)
    with pytest.raises(RooflabError, match="3x3 filter"):
        wino.inputs(_s(1, 4, 9, 9, 4, 5, 5, ph=2, pw=2))
    dw = rooflab.get_variant(conv.NAMES["direct-depthwise"])
    with pytest.raises(RooflabError, match="groups == C"):
        dw(x, w, **p)
    with pytest.raises(RooflabError, match="C=0 must be positive|C=0"):
        v.inputs({**CONV_SHAPES[0], "C": 0})


def check_conv_wrong_results_rejected():
    """A result off by a little more than the declared tolerance (the one table's entry) fails,
    within it passes; the looser Winograd F(4x4) tolerance is 10x the default, no more."""
    from rooflab.verify import tolerance

    v = rooflab.get_variant(conv.NAMES["direct-naive"])
    x, w, out = v.inputs(CONV_SHAPES[0], seed=5)
    p = conv.conv_params(CONV_SHAPES[0])
    expected = v.reference(x, w, out, **p)
    got = v(x, w, out, **p)
    e = float(expected.reshape(-1)[7])
    for name in (v.name, conv.NAMES["winograd-f4x4"]):
        kind = rooflab.get_variant(name).tolerance
        tol = tolerance("float32", kind)
        allowed = tol["atol"] + tol["rtol"] * abs(e)
        for factor, ok in ((1.5, False), (0.5, True)):
            bad = got.copy()
            bad[(0, 0, 0, 7)] = e + factor * allowed
            if ok:
                check_device(bad, expected, f"float32/{kind}", name)
            else:
                with pytest.raises(VerificationError, match="outside"):
                    check_device(bad, expected, f"float32/{kind}", name)
    f4, base = (tolerance("float32", rooflab.get_variant(n).tolerance) for n in (conv.NAMES["winograd-f4x4"], v.name))
    assert f4["atol"] == pytest.approx(10 * base["atol"]) and f4["rtol"] == pytest.approx(10 * base["rtol"])


# ---- elementwise -----------------------------------------------------------------------------------

EW_SIZES = {
    "numel": [{"numel": 10_001}, {"numel": 4096}, {"numel": 3}],
    "rows": [{"rows": 37, "cols": 200}, {"rows": 9, "cols": 7}, {"rows": 3, "cols": 2051}, {"rows": 4, "cols": 1028}],
    "nchw": [{"N": 2, "C": 6, "H": 7, "W": 9}, {"N": 1, "C": 4, "H": 4, "W": 4}],
    "nhwc": [{"N": 2, "C": 8, "H": 7, "W": 9}, {"N": 1, "C": 3, "H": 5, "W": 5}],
}


def check_elementwise_variants():
    seen = set()
    for v in rooflab.list_variants(family="elementwise", device="cuda"):
        for size in EW_SIZES[ew.ROLES[v.op][2]]:
            for dt in v.dtypes:
                arrays = v.inputs(size, dt, seed=2)
                expected = v.reference(*arrays, **v.params())
                got = v(*arrays)
                check_device(got, expected, np.dtype(dt), f"{v.name} {size} {dt}")
                seen.add(v.name)
    assert seen == {v.name for v in rooflab.list_variants(family="elementwise", device="cuda")}


def check_elementwise_unaligned():
    """Views that start 4 bytes into an allocation take the scalar path and are still right."""
    cp = __import__("cupy")
    for op, kind in (("add", "kernel"), ("gelu", "kernel"), ("softmax", "kernel"), ("bias_gelu_add", "fused")):
        v = rooflab.get_variant(ew.VARIANTS[op, kind])
        size = {"numel": 4097} if ew.ROLES[op][2] == "numel" else {"rows": 6, "cols": 129}
        arrays = v.inputs(size)
        shifted = []
        for a in arrays:
            flat = cp.empty(a.size + 1, dtype=a.dtype)
            view = flat[1:].reshape(a.shape)
            view[...] = a
            shifted.append(view)
        expected = v.reference(*shifted)
        check_device(v(*shifted), expected, np.float32, f"{v.name} unaligned")


def check_elementwise_nan():
    """A NaN in x gives NaN exactly where cupy (numpy's semantics) puts it: relu(NaN) is NaN, not
    fmaxf's 0; a softmax or layer-norm row holding one is all NaN (warp and block kernels)."""
    cp = __import__("cupy")
    cases = [("relu", "kernel", {"numel": 4097}), ("add", "kernel", {"numel": 4097})]
    cases += [("softmax", "kernel", {"rows": 4, "cols": c}) for c in (96, 1500)]
    cases += [("layernorm", "kernel", {"rows": 4, "cols": c}) for c in (96, 1500)]
    cases += [("bn_add_relu", k, {"N": 2, "C": 3, "H": 4, "W": 8}) for k in ("unfused", "fused")]
    for op, kind, size in cases:
        lib, own = (rooflab.get_variant(ew.VARIANTS[op, k]) for k in ("cupy", kind))
        arrays = own.inputs(size)
        x = arrays[0].reshape(-1)
        x[cp.asarray([1, x.size - 3])] = cp.nan
        want = cp.isnan(lib(*arrays)).get()
        got = cp.isnan(own(*arrays)).get()
        assert want.any() and np.array_equal(got, want), (own.name, size, int(want.sum()), int(got.sum()))


def check_elementwise_rejects_bad_input():
    add = rooflab.get_variant(ew.VARIANTS["add", "kernel"])
    a, b, out = add.inputs({"numel": 100})
    with pytest.raises(RooflabError, match="shape"):
        add(a, b[:50], out)
    with pytest.raises(RooflabError, match="float32"):
        add(a.astype(np.float64), b.astype(np.float64), out.astype(np.float64))
    with pytest.raises(RooflabError, match="3 arrays"):
        add(a, out)
    bn = rooflab.get_variant(ew.VARIANTS["batchnorm", "kernel"])
    x, scale, shift, y = bn.inputs({"N": 2, "C": 4, "H": 3, "W": 3})
    with pytest.raises(RooflabError, match="shape"):
        bn(x, scale[:3], shift, y)
    with pytest.raises(RooflabError, match="4-D"):
        bn(x[0], scale, shift, y[0])
    with pytest.raises(RooflabError, match="contiguous"):
        bn(x.transpose(0, 1, 3, 2), scale, shift, y.transpose(0, 1, 3, 2))
    sm = rooflab.get_variant(ew.VARIANTS["softmax", "kernel"])
    with pytest.raises(RooflabError, match="positive"):
        sm.inputs({"rows": 0, "cols": 4})
    with pytest.raises(RooflabError, match="float64 is not supported"):
        sm.inputs({"rows": 2, "cols": 4}, "float64")


def check_fused_equals_unfused():
    for op in ("bias_gelu_add", "bn_add_relu"):
        fused = rooflab.get_variant(ew.VARIANTS[op, "fused"])
        unfused = rooflab.get_variant(ew.VARIANTS[op, "unfused"])
        size = {"rows": 33, "cols": 96} if op == "bias_gelu_add" else {"N": 2, "C": 5, "H": 4, "W": 8}
        arrays = fused.inputs(size)
        a = fused(*arrays).copy()
        b = unfused(*arrays)
        check_device(b, a, np.float32, op, rtol=1e-6, atol=1e-7)
        assert unfused.work(*arrays).bytes / fused.work(*arrays).bytes == pytest.approx(28 / 12, rel=0.02)


# ---- chase, launch, transfer ------------------------------------------------------------------------


def check_chase():
    for v in rooflab.list_variants(family="chase", device="cuda"):
        for size in ({"bytes": 16 << 10}, {"bytes": 1 << 20, "stride": 64}, {"l2": 1 / 64}):
            chain, out, order = v.inputs(size, seed=4)
            for params in ({}, {"hops": 1001, "warm": 7}):
                expected = v.reference(chain, out, order, **v.params(**params))
                got = v(chain, out, order, **params)
                check_device(got, expected, np.int64, f"{v.name} {size} {params}")
                lat = chase.measured_latency(out)
                assert lat is not None and lat["hops"] == (params.get("hops") or chase.plan(order.size)[1])
                assert lat["ns_per_hop"] > 0 and lat["cycles_per_hop"] > 0
            # another permutation's expectation (a kernel that walked the wrong chain) is rejected
            other = chase.cycle_order(order.size, "random", seed=99)
            wrong = np.array([chase.final_slot(other, sum(chase.plan(order.size)))], dtype=np.int64)
            if v.name != chase.VARIANTS["sequential-ld-ca"] and int(wrong[0]) != int(got.get()[0]):
                got = v(chain, out, order)
                with pytest.raises(VerificationError):
                    check_device(got, wrong, np.int64, v.name)
    v = rooflab.get_variant(chase.VARIANTS["random-ld-ca"])
    with pytest.raises(RooflabError, match="multiple of 8"):
        v.inputs({"bytes": 4096, "stride": 12})
    with pytest.raises(RooflabError, match="fewer than 2 slots"):
        v.inputs({"bytes": 128})


def check_launch():
    for v in rooflab.list_variants(family="launch", device="cuda"):
        if v.name == "cuda.launch.empty":
            continue
        arrays = v.inputs()
        for reps in (1, 3):
            for params in ({"count": True}, {"count": False}) if v.number else ({},):
                expected = v.reference(*arrays, reps=reps, **params)
                got = v(*arrays, reps=reps, **params)
                dt = v.result_dtype(*arrays) if v.result_dtype else got.dtype
                check_device(got, expected, dt, f"{v.name} reps={reps} {params}")
                assert v.work(*arrays, reps=reps).launches == reps * (launch.GRAPH_NODES if v.number == 3 else 1)
    enqueue = rooflab.get_variant(launch.VARIANTS["enqueue"])
    (counter,) = enqueue.inputs()
    expected = enqueue.reference(counter, reps=5)
    enqueue(counter, reps=4)  # one launch short: the count says so
    with pytest.raises(VerificationError):
        check_device(counter, expected, np.int64, enqueue.name)


def check_transfer():
    for v in rooflab.list_variants(family="transfer", device="cuda"):
        for n in (4096, 1 << 20):
            arrays = v.inputs(n, seed=1)
            expected = v.reference(*arrays)
            got = v(*arrays, reps=2)
            check_device(got, expected, np.float32, f"{v.name} {n}")
        with pytest.raises(RooflabError, match="multiple of 4"):
            v.inputs(4098)
        with pytest.raises(RooflabError, match="does not fit"):
            v.inputs(1 << 62)
    h2d = rooflab.get_variant(transfer.VARIANTS["h2d", False])
    dev, host = h2d.inputs(4096)
    with pytest.raises(RooflabError, match="shape"):
        h2d(dev, host[:10])
