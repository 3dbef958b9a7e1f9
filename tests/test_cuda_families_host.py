"""The host-side (pure Python/numpy) parts of the CUDA families, without a GPU or an emulator: the
float64 conv reference against a loop nest, the Winograd matrices and FFT plans the kernels
implement, shape validation and refusals, declared work, tolerances, the chase permutation and its
host-side verification, transfer size checks, and the suites' cases."""

import itertools
import math
import sys
import types

import numpy as np
import pytest

import rooflab
from rooflab.errors import RooflabError, VerificationError
from rooflab.families.chase import cuda as chase
from rooflab.families.conv import cuda as conv
from rooflab.families.elementwise import cuda as ew
from rooflab.families.launch import cuda as launch
from rooflab.families.transfer import cuda as transfer
from rooflab.registry import check_cases
from rooflab.verify import check

# ---- conv: reference, validation, algorithms -------------------------------------------------------


def _loops(x, w, sh, sw, ph, pw, G):
    """Direct convolution by the definition, one output at a time (float64)."""
    N, C, H, W = x.shape
    K, Cg, R, S = w.shape
    P, Q = (H + 2 * ph - R) // sh + 1, (W + 2 * pw - S) // sw + 1
    Kg = K // G
    y = np.zeros((N, K, P, Q))
    for n, k, p, q in itertools.product(range(N), range(K), range(P), range(Q)):
        g = k // Kg
        for c, r, s in itertools.product(range(Cg), range(R), range(S)):
            h, v = p * sh - ph + r, q * sw - pw + s
            if 0 <= h < H and 0 <= v < W:
                y[n, k, p, q] += x[n, g * Cg + c, h, v] * w[k, c, r, s]
    return y


@pytest.mark.parametrize(
    "N,C,H,W,K,R,S,sh,sw,ph,pw,G",
    [
        (2, 3, 7, 6, 4, 3, 3, 1, 1, 1, 1, 1),
        (1, 4, 9, 8, 6, 3, 2, 2, 1, 1, 0, 2),
        (1, 4, 6, 6, 4, 3, 3, 1, 1, 1, 1, 4),  # depthwise
        (1, 2, 5, 9, 3, 1, 5, 1, 2, 0, 2, 1),
    ],
)
def test_reference_is_the_definition(N, C, H, W, K, R, S, sh, sw, ph, pw, G, rng):
    x = rng.standard_normal((N, C, H, W))
    w = rng.standard_normal((K, C // G, R, S))
    got = conv.reference(x, w, stride=(sh, sw), pad=(ph, pw), groups=G)
    np.testing.assert_allclose(got, _loops(x, w, sh, sw, ph, pw, G), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    "change,match",
    [
        ({"C": 0}, "C=0 must be positive"),
        ({"N": -1}, "N=-1 must be positive"),
        ({"pad_h": 3}, "smaller than the 3x3 filter"),
        ({"pad_w": -1}, "must be >= 0"),
        ({"groups": 3}, "positive multiple of groups"),
        ({"K": 9, "groups": 2}, "multiples of groups"),
        ({"stride_h": 0}, "stride"),
        ({"R": 20, "pad_h": 1}, "does not fit"),
        ({"P": 5}, "inconsistent"),
        ({"H": 2.5}, "must be an integer"),
    ],
)
def test_bad_shapes_are_refused_by_name(change, match):
    shape = {**conv.SMALL, **change}
    with pytest.raises(RooflabError, match=match) as e:
        conv.spec_from_shape("cuda.conv.02-direct-tiled", shape)
    assert "cuda.conv.02-direct-tiled" in str(e.value)


def test_params_follow_the_shape():
    s = {"N": 1, "C": 4, "H": 9, "W": 9, "K": 2, "R": 3, "S": 3, "stride": 2, "pad": 1}
    assert conv.conv_params(s) == {"stride": (2, 2), "pad": (1, 1), "groups": 1}
    spec = conv.spec_from_shape("t", s)
    assert (spec.P, spec.Q) == (5, 5)


def test_refusals_name_the_algorithm_and_the_constraint():
    for name, shape, match in [
        (conv.NAMES["winograd-f2x2"], {**conv.SMALL, "stride_h": 2, "stride_w": 2}, "stride 1"),
        (conv.NAMES["winograd-f4x4"], {**conv.SMALL, "R": 5, "S": 5, "pad_h": 2, "pad_w": 2}, "3x3 filter"),
        (conv.NAMES["winograd-f4x4"], {**conv.SMALL, "groups": 2}, "groups=1"),
        (conv.NAMES["fft"], {**conv.SMALL, "groups": 2}, "groups=1"),
        (conv.NAMES["direct-depthwise"], conv.SMALL, "groups == C"),
    ]:
        with pytest.raises(RooflabError, match=match):
            conv.check_applies(name, conv.spec_from_shape(name, shape))


# Lavin & Gray matrices, as written (the CUDA transforms must implement exactly these)
BT2 = np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], float)
G2 = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]])
AT2 = np.array([[1, 1, 1, 0], [0, 1, -1, -1]], float)
BT4 = np.array(
    [[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0], [0, -2, -1, 2, 1, 0], [0, 2, -1, -2, 1, 0],
     [0, 4, 0, -5, 0, 1]], float)  # fmt: skip
G4 = np.array([[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6], [1 / 24, 1 / 12, 1 / 6],
               [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]])  # fmt: skip
AT4 = np.array([[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]], float)


@pytest.mark.parametrize("m,BT,G,AT", [(2, BT2, G2, AT2), (4, BT4, G4, AT4)])
def test_winograd_matrices_compute_the_correlation(m, BT, G, AT, rng):
    """Y = A^T [(G g G^T) * (B^T d B)] A equals the valid 3x3 correlation of the tile (what conv.cu's
    transforms implement, checked for real by the emulation and GPU tests)."""
    a = m + 2
    for _ in range(5):
        d, g = rng.standard_normal((a, a)), rng.standard_normal((3, 3))
        y = AT @ ((G @ g @ G.T) * (BT @ d @ BT.T)) @ AT.T
        direct = np.array([[np.sum(d[i : i + 3, j : j + 3] * g) for j in range(m)] for i in range(m)])
        np.testing.assert_allclose(y, direct, rtol=1e-12, atol=1e-12)


def test_winograd_multiplies_are_the_published_fractions():
    spec = conv.spec_from_shape("t", {"N": 8, "C": 64, "H": 56, "W": 56, "K": 64, "R": 3, "S": 3, "pad": 1})
    for tech, fraction in (("winograd-f2x2", 16 / 36), ("winograd-f4x4", 36 / 144)):
        m = 2 if "f2x2" in tech else 4
        w = conv.executed_work(conv.NAMES[tech], spec)
        t = conv.WINOGRAD_TRANSFORM_FLOPS[m]
        T = 8 * (56 // m) ** 2
        gemm = w["executed_flops"] - t["input"] * 64 * T - t["output"] * 64 * T - t["filter"] * 64 * 64
        assert gemm / w["nominal_flops"] == pytest.approx(fraction)
    direct = conv.executed_work(conv.NAMES["direct-tiled"], spec)
    assert direct["executed_flops"] == direct["nominal_flops"] == 2 * 8 * 64 * 56 * 56 * 64 * 9


def test_fast_len_is_the_smallest_7_smooth_size():
    def smooth(n):
        for p in (2, 3, 5, 7):
            while n % p == 0:
                n //= p
        return n == 1

    for n in range(1, 300):
        m = conv.fast_len(n)
        assert m >= n and smooth(m) and not any(smooth(k) for k in range(n, m))


@pytest.mark.parametrize("padded,r", [(10, 3), (58, 3), (64, 7), (65, 3), (230, 7), (78, 15), (100, 15)])
def test_fft_tiles_cover_every_output(padded, r):
    L, per, tiles = conv.fft_tiling(padded, r)
    assert per == L - r + 1 >= 1 and tiles * per >= padded - r + 1
    assert (tiles - 1) * per < padded - r + 1  # no tile is all waste
    assert (L == conv.fast_len(padded)) == (padded <= conv.FFT_SINGLE_MAX)


def _fft_numpy(x, w, spec):
    """The FFT variant's algorithm on the host (numpy.fft): zero-padded tiles, X conj(W) summed
    over channels per frequency, inverse, valid part, stride."""
    s = spec
    Lh, oh, nh = conv.fft_tiling(s.H + 2 * s.ph, s.R)
    Lw, ow, nw = conv.fft_tiling(s.W + 2 * s.pw, s.S)
    xt = np.zeros((s.N, s.C, nh * oh + s.R - 1, nw * ow + s.S - 1))
    xt[:, :, s.ph : s.ph + s.H, s.pw : s.pw + s.W] = x
    y = np.zeros((s.N, s.K, nh * oh, nw * ow))
    Wf = np.fft.rfft2(w, s=(Lh, Lw))
    for i, j in itertools.product(range(nh), range(nw)):
        X = np.fft.rfft2(xt[:, :, i * oh : i * oh + Lh, j * ow : j * ow + Lw])
        Y = np.einsum("ncf,kcf->nkf", X.reshape(s.N, s.C, -1), np.conj(Wf).reshape(s.K, s.C, -1))
        t = np.fft.irfft2(Y.reshape(s.N, s.K, Lh, -1), s=(Lh, Lw))
        y[:, :, i * oh : (i + 1) * oh, j * ow : (j + 1) * ow] = t[:, :, :oh, :ow]
    return y[:, :, : (s.P - 1) * s.sh + 1 : s.sh, : (s.Q - 1) * s.sw + 1 : s.sw]


@pytest.mark.parametrize("H,R,stride,pad", [(12, 3, 1, 1), (70, 7, 2, 3), (80, 15, 1, 7), (9, 5, 2, 2)])
def test_fft_algorithm_with_tiles_and_strides(H, R, stride, pad, rng):
    shape = {"N": 2, "C": 3, "H": H, "W": H - 1, "K": 2, "R": R, "S": R, "stride": stride, "pad": pad}
    s = conv.spec_from_shape("t", shape)
    x, w = rng.standard_normal((2, 3, H, H - 1)), rng.standard_normal((2, 3, R, R))
    np.testing.assert_allclose(_fft_numpy(x, w, s), conv.reference(x, w, **conv.conv_params(shape)), atol=1e-10)


def test_conv_tolerances_come_from_the_one_table():
    """Issue 25: conv's private tolerance (rtol x max|y|) is gone; every GPU conv variant declares an
    entry of rooflab.verify.TOLERANCES (pinned in tests/test_verify.py), F(4x4) the looser one."""
    from rooflab.verify import TOLERANCES

    kinds = {v.name: v.tolerance for v in rooflab.list_variants(family="conv", device="cuda")}
    assert kinds.pop(conv.NAMES["winograd-f4x4"]) == "conv-winograd-f4x4"
    assert set(kinds.values()) == {"conv"} and {"conv", "conv-winograd-f4x4"} <= set(TOLERANCES["float32"])
    assert not hasattr(conv, "tolerance") and not hasattr(conv, "verify")


def test_conv_library_is_cudnn_where_torch_has_cuda(monkeypatch):
    """Variant 0 is cuDNN (torch.nn.functional.conv2d) where torch with CUDA and cuDNN imports, im2col
    + cuBLAS otherwise; the suite's labels and meta say which."""
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch -> ImportError
    assert conv.library_path() == "im2col-cublas"
    lib = [c for c in conv.cases(quick=True) if c.variant == conv.NAMES["cupy-im2col-cublas"]]
    assert lib and all(c.label.endswith("im2col-cublas") and "cuBLAS" in c.meta["library"] for c in lib)
    calls = []

    def conv2d(x, w, stride, padding, groups):
        calls.append((stride, padding, groups))
        return conv.reference(x, w, stride=stride, pad=padding, groups=groups)

    for cuda_ok, cudnn_ok, want in (
        (False, True, "im2col-cublas"),
        (True, False, "im2col-cublas"),
        (True, True, "cudnn"),
    ):
        torch = types.SimpleNamespace(
            cuda=types.SimpleNamespace(is_available=lambda ok=cuda_ok: ok),
            backends=types.SimpleNamespace(
                cudnn=types.SimpleNamespace(is_available=lambda ok=cudnn_ok: ok, allow_tf32=True)
            ),
            as_tensor=lambda a, device=None: a,
            nn=types.SimpleNamespace(functional=types.SimpleNamespace(conv2d=conv2d)),
        )
        monkeypatch.setitem(sys.modules, "torch", torch)
        assert conv.library_path() == want
    lib = [c for c in conv.cases(quick=True) if c.variant == conv.NAMES["cupy-im2col-cublas"]]
    assert all(c.label.endswith(" cudnn") and c.meta["library"].startswith("cuDNN") for c in lib)
    # the cuDNN path passes the geometry through (numpy stands in for the device arrays here)
    monkeypatch.setattr(conv, "cupy", lambda: np)
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((1, 4, 9, 9)), rng.standard_normal((4, 2, 3, 3))
    s = conv.make_spec("t", 1, 4, 9, 9, 4, 2, 3, 3, stride=2, pad=1, groups=2)
    y = conv._library(x, w, None, s)
    assert calls[-1] == ((2, 2), (1, 1), 2) and y.shape == (1, 4, s.P, s.Q)
    assert torch.backends.cudnn.allow_tf32 is False  # FP32 convolutions stay FP32 (no TF32)


def test_f4x4_float32_error_sits_inside_its_tolerance(rng):
    """Winograd F(4x4,3x3) in float32 (numpy, the same matrices) on a 64-channel layer: its error is
    a few 1e-6 of max|y|, visibly above F(2x2)'s, and below the declared 1e-3."""
    C = K = 64
    d = rng.standard_normal((C, 6, 6)).astype(np.float32)
    g = (rng.standard_normal((K, C, 3, 3)) / math.sqrt(C * 9)).astype(np.float32)
    errs = {}
    for m, BT, G, AT in ((2, BT2, G2, AT2), (4, BT4, G4, AT4)):
        dd = d[:, : m + 2, : m + 2]
        V = np.einsum("ij,cjk,lk->cil", BT.astype(np.float32), dd, BT.astype(np.float32))
        U = np.einsum("ij,kcjl,ml->kcim", G.astype(np.float32), g, G.astype(np.float32))
        Mx = np.einsum("kcab,cab->kab", U, V)
        Y = np.einsum("ia,kab,jb->kij", AT.astype(np.float32), Mx, AT.astype(np.float32))
        ref = np.array([[[np.sum(dd[:, i : i + 3, j : j + 3].astype(float) * g[k]) for j in range(m)] for i in range(m)]
                        for k in range(K)])  # fmt: skip
        errs[m] = np.abs(Y - ref).max() / np.abs(ref).max()
    assert errs[4] > errs[2] and errs[4] < 1e-4


def test_conv_suite_cases_are_runnable_descriptions():
    quick, full = conv.cases(True), conv.cases(False)
    check_cases(quick + full)
    assert len(quick) < len(full)
    for c in full:
        s = conv.spec_from_shape(c.variant, c.size)
        conv.check_applies(c.variant, s)  # every case applies to its variant
        assert c.params == conv.conv_params(c.size) and c.dtype == "float32"
        assert c.meta["nominal_flops"] == conv.nominal_flops(s) and c.meta["executed_flops"] > 0
    labels = " ".join(c.label for c in full)
    for what in ("3x3 64@56 N=8", "3x3 512@7 N=1", "1x1 64->256@56", "stem 7x7 s2", "dw3x3", "sweep R=15"):
        assert what in labels, what
    sweep = {c.size["R"] for c in full if "sweep" in c.label}
    assert sweep == set(range(3, 16))
    assert {c.variant for c in full} == set(conv.NAMES.values())


def test_conv_variants_are_registered_as_conv2d_ops():
    vs = rooflab.list_variants(family="conv", device="cuda")
    assert [v.number for v in vs] == list(range(8)) and all(v.op == "conv2d" for v in vs)
    assert (
        next(v for v in rooflab.registry.list_variants("conv", "cuda", "conv2d") if v.library).name
        == "cuda.conv.00-cupy-im2col-cublas"
    )
    assert "cuDNN" in vs[0].description


# ---- elementwise ---------------------------------------------------------------------------------


def test_gelu_as_the_kernel_computes_it_equals_the_tanh_form(rng):
    """elementwise.cu computes x / (1 + exp(-2z)), the reference 0.5 x (1 + tanh z): the same."""
    x = np.concatenate([rng.standard_normal(1000) * 4, [-30.0, -10.0, 0.0, 10.0, 30.0]])
    z = ew.GELU_C0 * (x + ew.GELU_C1 * x**3)
    with np.errstate(over="ignore"):
        kernel_form = x / (1 + np.exp(-2 * z))
    # (the tanh form itself cancels for x << 0: equal to float64 rounding, 1e-16 absolute)
    np.testing.assert_allclose(kernel_form, ew.gelu_ref(np, x), rtol=1e-12, atol=1e-15)


def test_online_softmax_statistics_equal_two_pass(rng):
    """The kernel's single pass (running max, rescaled sum) and its pairwise combine, in numpy."""

    def online(values):
        m, s = -np.inf, 0.0
        for v in values:
            if v > m:
                s, m = s * np.exp(m - v) + 1.0, v
            elif m > -np.inf:
                s += np.exp(v - m)
        return m, s

    def combine(a, b):
        m = max(a[0], b[0])
        return m, (0 if a[0] == -np.inf else a[1] * np.exp(a[0] - m)) + (
            0 if b[0] == -np.inf else b[1] * np.exp(b[0] - m)
        )

    x = rng.standard_normal(300) * 5
    parts = [online(x[i::32]) for i in range(32)] + [online([])] * 3  # idle lanes hold (-inf, 0)
    while len(parts) > 1:
        parts = [combine(parts[i], parts[i + 1]) if i + 1 < len(parts) else parts[i] for i in range(0, len(parts), 2)]
    m, s = parts[0]
    assert m == x.max() and s == pytest.approx(np.exp(x - x.max()).sum(), rel=1e-12)
    assert combine(online([]), online([])) == (-np.inf, 0.0)  # two empty partials stay empty, no NaN


def test_shifted_sums_keep_the_variance_when_the_mean_is_large(rng):
    x = (1000.0 + rng.standard_normal(768)).astype(np.float32)
    K = x[0]
    d = x - K
    var_shifted = np.float32(np.mean(d * d) - np.mean(d) ** 2)
    var_naive = np.float32(np.mean(x * x) - np.mean(x) ** 2)
    true = np.var(x.astype(np.float64))
    assert abs(var_shifted - true) < 1e-3 * true < abs(var_naive - true)


def test_elementwise_declares_the_bytes_each_version_moves():
    table = ew.BYTES_PER_ELEMENT
    assert sum(table["bias_gelu_add/unfused"]) / sum(table["bias_gelu_add"]) == pytest.approx(28 / 12)
    assert sum(table["add"]) == 12 and sum(table["relu"]) == 8
    for v in rooflab.list_variants(family="elementwise", device="cuda"):
        assert v.op in ew.ROLES and v.number in (0, 1, 2)
    lib = {v.op for v in rooflab.list_variants(family="elementwise", device="cuda") if v.library}
    assert lib == set(ew.ROLES)  # every op's ladder has its library rung


def test_elementwise_work_on_host_arrays():
    v = rooflab.get_variant(ew.VARIANTS["bias_gelu_add", "unfused"])
    x = np.zeros((4, 8), np.float32)
    bias = np.zeros(8, np.float32)
    w = v.work(x, bias, x, x, reps=2)
    assert w.bytes == 2 * (28 * 32 + 4 * 8) and w.launches == 6
    lib = rooflab.get_variant(ew.VARIANTS["gelu", "cupy"])
    assert lib.work(x, x).launches == 9 and lib.work(x, x).bytes == 8 * 32


def test_host_arrays_are_refused_before_any_launch():
    pytest.importorskip("cupy")
    v = rooflab.get_variant(ew.VARIANTS["relu", "kernel"])
    x = np.zeros(16, np.float32)
    with pytest.raises(RooflabError, match="must be a cupy array"):
        v(x, x.copy())


def test_elementwise_suite():
    cases = ew.cases(True) + ew.cases(False)
    check_cases(cases)
    ops = {c.meta["op"] for c in cases}
    assert ops == set(ew.ROLES) - {"scale"} | {"scale"}
    fused = [c for c in cases if c.meta.get("version") == "fused"]
    assert fused and all(c.meta["bytes_ratio_unfused_over_fused"] == pytest.approx(28 / 12) for c in fused)
    big = [c for c in ew.cases(False) if c.meta["op"] == "add" and c.size["numel"] > 1 << 20]
    assert big and all(4 * c.size["numel"] >= 4 * (50 << 20) for c in big)  # >= 4x an H200's L2 per array


# ---- chase -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [2, 3, 17, 1000])
def test_random_order_is_one_cycle_through_every_slot(n):
    order = chase.cycle_order(n, "random", seed=n)
    nxt = chase.next_slots(order)
    seen, s = [], int(order[0])
    for _ in range(n):
        seen.append(s)
        s = int(nxt[s])
    assert s == order[0] and sorted(seen) == list(range(n))


def test_final_slot_is_the_walk():
    order = chase.cycle_order(257, "random", seed=1)
    nxt = chase.next_slots(order)
    for hops in (0, 1, 256, 257, 1000, 65536):
        assert chase.final_slot(order, hops) == chase.walk(nxt, order[0], hops)
    seq = chase.cycle_order(10, "sequential")
    assert list(chase.next_slots(seq)) == [1, 2, 3, 4, 5, 6, 7, 8, 9, 0]


def test_chase_verification_can_fail():
    order = chase.cycle_order(64, "random", seed=2)
    w, h = chase.plan(order.size)
    expected = np.array([chase.final_slot(order, w + h)])
    check(expected.copy(), expected, np.int64)
    one_hop_short = np.array([chase.final_slot(order, w + h - 1)])
    with pytest.raises(VerificationError):
        check(one_hop_short, expected, np.int64)


def test_chase_plan_and_sizes():
    assert chase.plan(128) == (128, chase.HOPS_MIN)
    assert chase.plan(1 << 20) == (0, chase.HOPS_MAX)  # HBM-sized sets: no warm pass, 2^18 hops
    assert chase.plan(5000, hops=10, warm=3) == (3, 10)
    with pytest.raises(RooflabError):
        chase.plan(10, hops=0)
    assert chase.resolve("t", 4096) == (4096, 128)
    assert chase.resolve("t", {"bytes": 1000, "stride": 64}) == (960, 64)
    for bad, match in (
        ({"bytes": 4096, "stride": 12}, "multiple of 8"),
        ({"bytes": 100}, "fewer than 2"),
        ("x", "size"),
    ):
        with pytest.raises(RooflabError, match=match):
            chase.resolve("t", bad)
    lat = chase.measured_latency(np.array([5, 2000, 1000, 100], dtype=np.uint64))
    assert lat["ns_per_hop"] == 10 and lat["cycles_per_hop"] == 20 and lat["sm_clock_ghz"] == 2
    assert chase.measured_latency(np.zeros(4, dtype=np.uint64)) is None


def test_chase_suite_spans_l1_to_hbm():
    cases = chase.cases(False)
    check_cases(cases + chase.cases(True))
    levels = [c.meta["level"] for c in cases if c.variant == chase.VARIANTS["random-ld-ca"]]
    assert levels[0] == "L1" and "L2" in levels and levels[-1] == "HBM"
    assert cases[0].size == {"bytes": 16 << 10}
    assert any(c.size.get("l2") == 1 for c in cases) is False and any(c.size.get("l2", 0) > 1 for c in cases)


# ---- launch and transfer ---------------------------------------------------------------------------


def test_launch_cases_time_empty_and_verify_counted():
    cases = launch.cases(True)
    check_cases(cases)
    assert {c.variant for c in cases} == set(launch.VARIANTS.values())
    for c in cases:
        if c.variant != launch.VARIANTS["cupy-tiny-op"]:
            assert c.params == {"count": False} and c.verify_params == {"count": True}
    ref = launch._count_reference(launch.GRAPH_NODES)
    counter = np.array([7], dtype=np.uint32)
    assert ref(counter, None, reps=3)[0] == 7 + 3 * launch.GRAPH_NODES
    assert ref(counter, None, reps=3, count=False)[0] == 7


def test_transfer_sizes_and_refusals(monkeypatch):
    assert transfer.sizes(False)[0] == 4096 and transfer.sizes(False)[-1] == 1 << 30
    for bad in (0, -4, 4098, "1G", True):
        with pytest.raises(RooflabError, match="multiple of 4"):
            transfer.nbytes_of("t", bad)
    monkeypatch.setattr(transfer, "free_device_bytes", lambda: 1 << 30)
    monkeypatch.setattr(transfer, "available_bytes", lambda: 64 << 30)
    transfer.check_fits("t", 512 << 20)
    with pytest.raises(RooflabError, match="does not fit in the GPU's 1 GiB"):
        transfer.check_fits("t", 1 << 30)
    monkeypatch.setattr(transfer, "available_bytes", lambda: 1 << 30)
    with pytest.raises(RooflabError, match="host buffers do not fit"):
        transfer.check_fits("t", 900 << 20)
    check_cases(transfer.cases(False))
    assert len(transfer.cases(False)) == 4 * 10


def test_registering_the_families_imports_no_cupy():
    import subprocess
    import sys

    code = "import sys, rooflab; rooflab.list_variants(); print('cupy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "False", out.stderr
