"""The `elementwise` family on the CPU: every variant against its float64 reference (odd sizes, any
shape, 1 and all threads, both dtypes), deliberately wrong twins rejected, bad input refused with
the variant's name, declared bytes, the suite's cases and the summary of a run."""

import dataclasses
import math

import numpy as np
import pytest
from rooflab.kernels.cpu import clock
from rooflab.kernels.cpu import elementwise as K

import rooflab
from rooflab.cpu.backend import cpu_backend
from rooflab.driver import Driver, Settings
from rooflab.families import elementwise as F
from rooflab.registry import check_cases
from rooflab.threads import max_threads

THREADS = sorted({1, max_threads()})
RUNNER = Driver(cpu_backend(), Settings(budget_s=0.0, min_samples=1, probe_clock=False, max_attempts=1))
OPS = F.OPS
SIZES = {
    "add": [{"numel": 1}, {"numel": 4096 + 13}, {"shape": (3, 5, 7)}],
    "scale": [{"numel": 37}, {"shape": (2, 3, 4, 5)}],
    "relu": [{"numel": 100_003}, {"shape": (7, 9)}],
    "gelu": [{"numel": 100_003}, {"shape": (5, 1, 33)}],
    "batchnorm": [{"N": 2, "C": 5, "H": 7, "W": 3}, {"N": 3, "C": 16, "H": 1, "W": 1}],
    "softmax": [{"rows": 7, "cols": 33}, {"rows": 1, "cols": 1}, {"shape": (2, 3, 65)}],
    "layernorm": [{"rows": 7, "cols": 33}, {"rows": 3, "cols": 2}, {"rows": 1, "cols": 17}, {"shape": (2, 3, 65)}],
}


# (dtype, threads): float64 at more than one thread builds every parallel kernel a second time (5-20 s
# each with a cold numba cache, the bulk of this file's cold cost) where float32 in parallel and float64
# serially already take each path: those pairs run in CI, with the slow set
DT_THREADS = [
    pytest.param(dt, t, marks=[pytest.mark.slow] if dt is np.float64 and t > 1 else [], id=f"{t}-{np.dtype(dt).name}")
    for t in THREADS
    for dt in (np.float32, np.float64)
]


def variants(kind):
    return [v for v in rooflab.list_variants(family="elementwise", device="cpu") if v.name.split(".")[2] == kind]


def measure(v, size, dtype=np.float32, threads=1, params=None, inputs=None):
    ins = inputs if inputs is not None else v.inputs(size, dtype)
    return RUNNER.measure(v, ins, threads=threads, params=params or {})


def test_registry_has_both_rungs_of_every_op_with_its_model_kind():
    for kind in OPS:
        vs = rooflab.list_variants(family="elementwise", device="cpu", op=kind)
        assert [v.number for v in vs] == [0, 1], kind
        assert vs[0].name == f"cpu.elementwise.{kind}.00-numpy" and vs[1].name == f"cpu.elementwise.{kind}.01-numba"
        assert next(v for v in rooflab.registry.list_variants("elementwise", "cpu", kind) if v.library) is vs[0]
    assert "elementwise" in rooflab.list_families("cpu") and "chase" in rooflab.list_families("cpu")


@pytest.fixture
def paths(monkeypatch):
    """At > 1 thread, the parallel entry points even for small arrays (1 thread: the serial ones)."""

    def use(threads):
        if threads > 1:
            monkeypatch.setattr(K, "SERIAL_BELOW", 0)

    return use


@pytest.mark.parametrize("kind", OPS)
@pytest.mark.parametrize("dtype,threads", DT_THREADS)
def test_op_variants_match_reference(kind, dtype, threads, paths):
    paths(threads)
    for v in variants(kind):
        for size in SIZES[kind]:
            for params in [{}, {"layout": "NHWC"}] if kind == "batchnorm" else [{}]:
                s = dict(size, **params) if kind == "batchnorm" else size
                rec = measure(v, s, dtype, threads, params)
                assert rec["status"] == "ok", (v.name, s, rec.get("error"))
                assert rec["verification"]["elements"] == math.prod(F.op_shape(kind, s))


STREAM_SIZES = {  # rows, planes and pixels of 203 elements: each starts at another vector offset
    "layernorm": {"rows": 5, "cols": 203},
    "batchnorm": {"N": 2, "C": 3, "H": 7, "W": 29},
    "batchnorm NHWC": {"N": 2, "C": 203, "H": 1, "W": 3, "layout": "NHWC"},
}


@pytest.mark.parametrize("kind", ["add", "scale", "relu", "batchnorm", "batchnorm NHWC", "layernorm"])
@pytest.mark.parametrize("dtype,threads", DT_THREADS)
def test_streaming_stores_match_at_every_offset_and_in_place(kind, dtype, threads, paths):
    """stream=True (non-temporal stores, what a DRAM-size output gets): outputs starting 0-17
    elements past a vector boundary exercise the scalar head, the aligned body and the tail (for
    layer norm and batch norm in every row, plane or pixel: 203 elements put each at another
    offset); an in-place call takes the ordinary path and still matches."""
    paths(threads)
    op = kind.split()[0]
    v = rooflab.get_variant(f"cpu.elementwise.{op}.01-numba")
    size = STREAM_SIZES.get(kind, {"numel": 1000 + 13})
    params = {"stream": True, **({"layout": size["layout"]} if "layout" in size else {})}
    n = math.prod(F.op_shape(op, size))
    for off in (0, 1, 3, 7, 16, 17):
        ins = list(v.inputs(size, dtype))
        buf = np.zeros(n + 32, dtype)
        ins[-1] = buf[off : off + n].reshape(ins[-1].shape)  # out: any offset into an aligned buffer
        rec = RUNNER.measure(v, ins, threads=threads, params=params)
        assert rec["status"] == "ok", (off, rec.get("error"))
        assert buf[:off].sum() == 0 and buf[off + n :].sum() == 0, "stores outside out"
    ins = list(v.inputs(size, dtype))
    want = F.reference(op, *ins, **{k: w for k, w in params.items() if k == "layout"})
    ins[-1] = ins[0]  # in place
    np.testing.assert_allclose(v(*ins, threads=threads, **params), want, rtol=1e-6, atol=1e-6)


@pytest.mark.skipif(not clock.SUPPORTED, reason="x86-64 assembly checks")
def test_streaming_path_stores_non_temporally():
    from numba import njit

    fresh = njit(fastmath=K.FM, error_model="numpy")(K.relu_serial.py_func)  # uncached: its asm can be read
    x = np.ones(4096, np.float32)
    fresh(np.empty_like(x), x, 1, True)
    asm = fresh.inspect_asm(fresh.signatures[0])
    assert "vmovntps" in asm and "sfence" in asm


@pytest.mark.parametrize("kind", ["softmax", "layernorm"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_long_rows_take_the_online_path_and_still_match(kind, dtype, paths):
    """block < cols forces the segmented path (online max/sum, Chan's merge, pipelined by
    segment); a later segment holds the row maximum, so a missing rescale or a segment held
    against another segment's max would show."""
    paths(max_threads())
    v = rooflab.get_variant(f"cpu.elementwise.{kind}.01-numba")
    ins = v.inputs({"rows": 5, "cols": 1000}, dtype)
    if kind == "softmax":
        ins[0][:3] += np.linspace(0, 4, 1000, dtype=dtype)  # the max grows segment by segment
        ins[0][3:, 900] += 1000  # the two largest logits, 1 apart, in a late segment: exp(x - m)
        ins[0][3:, 950] += 999  # with any max but that segment's own overflows and flattens them
    else:
        ins[0][:, 900] += 30  # an outlier in the last segment
    for block in (64, 999, 1000):
        rec = RUNNER.measure(v, ins, threads=max_threads(), params={"block": block})
        assert rec["status"] == "ok", (block, rec.get("error"))


NAN_SIZES = {"batchnorm": {"N": 2, "C": 3, "H": 10, "W": 10}, "softmax": {"rows": 6, "cols": 300}}
NAN_SIZES["layernorm"] = NAN_SIZES["softmax"]
STREAMED = [{"stream": False}, {"stream": True}]
NAN_PARAMS = {
    "add": STREAMED,
    "scale": STREAMED,
    "relu": STREAMED,
    "batchnorm": [{}, {"layout": "NHWC"}, {"stream": True}, {"layout": "NHWC", "stream": True}],
    "softmax": [{}, {"block": 64}],
    "layernorm": [{}, {"block": 64}, {"stream": True}],
}


@pytest.mark.parametrize("kind", OPS)
@pytest.mark.parametrize("dtype", [np.float32, pytest.param(np.float64, marks=pytest.mark.slow)])  # see DT_THREADS
def test_a_nan_in_the_input_gives_numpys_nans(kind, dtype, paths):
    """numpy's maximum and exp propagate NaN, LLVM's maxnum does not: relu(NaN) came out 0 and a
    softmax row holding a NaN came out finite. On every path (parallel, streaming stores, long
    rows, both layouts) the own variant puts NaN exactly where numpy does, and nowhere else."""
    paths(max_threads())
    lib, own = variants(kind)
    for params in NAN_PARAMS.get(kind, [{}]):
        size = dict(NAN_SIZES.get(kind, {"numel": 3001}), **{k: v for k, v in params.items() if k == "layout"})
        ins = list(own.inputs(size, dtype))
        x = ins[0].reshape(-1)
        x[[3, x.size // 2 + 7, x.size - 2]] = np.nan  # three rows / planes / chunks
        lib_params = {k: v for k, v in params.items() if k == "layout"}
        want = np.isnan(lib(*ins, threads=max_threads(), **lib_params).copy())
        got = np.isnan(own(*ins, threads=max_threads(), **params))
        assert want.any() and np.array_equal(got, want), (params, int(want.sum()), int(got.sum()))


@pytest.mark.parametrize("chain", F.CHAINS)
def test_a_nan_in_a_chain_input_survives_fusion(chain, paths):
    paths(max_threads())
    size = {"rows": 5, "cols": 37} if chain == "bias_gelu_add" else {"N": 2, "C": 3, "H": 5, "W": 7}
    lib, unfused, fused = variants(chain)
    ins = list(unfused.inputs(size, np.float32))  # x, vectors, res, tmp, out
    ins[0].reshape(-1)[[0, 100]] = np.nan
    want = np.isnan(lib(*ins).copy())
    assert want.sum() == 2
    assert np.array_equal(np.isnan(unfused(*ins)), want)
    assert np.array_equal(np.isnan(fused(*ins[:-2], ins[-1])), want)


@pytest.mark.parametrize("chain", F.CHAINS)
@pytest.mark.parametrize("dtype,threads", DT_THREADS)
def test_chain_variants_match_reference(chain, dtype, threads, paths):
    paths(threads)
    size = {"rows": 5, "cols": 37} if chain == "bias_gelu_add" else {"N": 2, "C": 3, "H": 5, "W": 7}
    vs = variants(chain)
    assert [v.number for v in vs] == [0, 1, 2]
    for v in vs:
        rec = measure(v, size, dtype, threads)
        assert rec["status"] == "ok", (v.name, rec.get("error"))


@pytest.mark.parametrize("n_ops", [1, 2, 4, 8, 16, 7])
def test_tiny_chain_variants_agree_with_the_op_sequence(n_ops):
    for v in variants("tiny_chain"):
        rec = measure(v, {"numel": 8}, np.float64, 1, {"n_ops": n_ops})
        assert rec["status"] == "ok", (v.name, rec.get("error"))
        assert rec["work"]["launches"] == rec["reps"] * (n_ops if v.number == 0 else 1)


def test_small_arrays_or_one_thread_skip_the_parallel_region(monkeypatch):
    """Below SERIAL_BELOW elements (or at 1 thread) the serial twin runs: waking the pool costs
    2-20 us, more than the work."""

    def no_pool(*args):
        raise AssertionError("parallel region entered")

    monkeypatch.setattr(K, "gelu", no_pool)
    v = rooflab.get_variant("cpu.elementwise.gelu.01-numba")
    x, out = v.inputs({"numel": K.SERIAL_BELOW - 1})
    v(x, out, threads=2)
    x, out = v.inputs({"numel": K.SERIAL_BELOW})
    v(x, out, threads=1)
    with pytest.raises(AssertionError, match="parallel region entered"):
        v(x, out, threads=2)


def test_public_call_on_user_arrays_of_any_shape():
    x = np.linspace(-3, 3, 2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    out = np.empty_like(x)
    rooflab.get_variant("cpu.elementwise.relu.01-numba")(x, out)
    np.testing.assert_array_equal(out, np.maximum(x, 0))
    rooflab.get_variant("cpu.elementwise.softmax.01-numba")(x, out)
    np.testing.assert_allclose(out.sum(axis=-1), 1.0, rtol=1e-6)
    y = x.copy()
    rooflab.get_variant("cpu.elementwise.gelu.01-numba")(y, y)  # in place is allowed for one pass
    np.testing.assert_allclose(y, F.gelu64(x.astype(np.float64)), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("threads", THREADS)
def test_in_place_calls_take_their_own_loop_and_stay_exact(threads, paths):
    """out is x (the unfused chains run GELU and ReLU in place): a separate one-array loop, since
    LLVM's overlap check would otherwise send the loop to its scalar version."""
    paths(threads)
    rng = np.random.default_rng(5)
    x = rng.standard_normal(50_000).astype(np.float32)
    b = rng.standard_normal(50_000).astype(np.float32)
    for name, args, expect in (
        ("add", lambda y: (y, b, y), x.astype(np.float64) + b),
        ("add", lambda y: (b, y, y), x.astype(np.float64) + b),
        ("scale", lambda y: (y, y), 1.5 * x.astype(np.float64)),
        ("relu", lambda y: (y, y), np.maximum(x, 0)),
        ("gelu", lambda y: (y, y), F.gelu64(x.astype(np.float64))),
    ):
        y = x.copy()
        rooflab.get_variant(f"cpu.elementwise.{name}.01-numba")(*args(y), threads=threads)
        np.testing.assert_allclose(y, expect, rtol=1e-4, atol=1e-6, err_msg=name)


# ---- declared work --------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_declared_bytes_are_the_ops_minimum_for_the_dtype(dtype):
    e = np.dtype(dtype).itemsize
    n = 1000
    expect = {"add": 3 * n * e, "scale": 2 * n * e, "relu": 2 * n * e, "gelu": 2 * n * e}
    for kind, b in expect.items():
        for v in variants(kind):
            ins = v.inputs({"numel": n}, dtype)
            w = v.work(*ins, reps=3, **v.defaults)
            assert w.bytes == 3 * b and w.flops == 3 * n, v.name
    v = rooflab.get_variant("cpu.elementwise.layernorm.01-numba")
    assert v.work(*v.inputs({"rows": 10, "cols": 100}, dtype)).bytes == e * (2 * 1000 + 2 * 100)
    v = rooflab.get_variant("cpu.elementwise.batchnorm.00-numpy")
    ins = v.inputs({"N": 2, "C": 8, "H": 5, "W": 5, "layout": "NHWC"}, dtype)
    assert v.work(*ins, layout="NHWC").bytes == e * (2 * 400 + 2 * 8)
    assert rooflab.get_variant("cpu.elementwise.gelu.00-numpy").work(*ins[:1], ins[-1]).launches == 9


def test_chain_bytes_fused_and_unfused_predict_seven_thirds():
    for chain, size in (
        ("bias_gelu_add", {"rows": 64, "cols": 3072}),
        ("bn_add_relu", {"N": 4, "C": 64, "H": 8, "W": 8}),
    ):
        by = {}
        for v in variants(chain):
            by[v.number] = v.work(*v.inputs(size, np.float32)).bytes
        assert by[0] == by[1] and by[2] < by[1]
        assert by[1] / by[2] == pytest.approx(7 / 3, rel=0.01)


# ---- deliberately wrong twins (gpu-mode's solutions/wrong/): the checker must refuse each ------------


def _softmax_no_rescale(x, out, block=None, reps=1, threads=None, seg=64):
    """Online softmax that forgets to rescale the running sum when a later segment raises the max."""
    x2, y2 = x.reshape(-1, x.shape[-1]).astype(np.float64), out.reshape(-1, x.shape[-1])
    for r in range(x2.shape[0]):
        M, S = -np.inf, 0.0
        for lo in range(0, x2.shape[1], seg):
            part = x2[r, lo : lo + seg]
            M = max(M, part.max())
            S += np.exp(part - M).sum()  # bug: S is not multiplied by exp(M_old - M)
        y2[r] = np.exp(x2[r] - M) / S
    return out


def _layernorm_unbiased(x, gamma, beta, out, eps=1e-5, block=None, reps=1, threads=None):
    x64 = x.astype(np.float64)
    mu = x64.mean(axis=-1, keepdims=True)
    out[...] = (x64 - mu) / np.sqrt(x64.var(axis=-1, ddof=1, keepdims=True) + eps) * gamma + beta  # n-1
    return out


def _gelu_erf_form(x, out, reps=1, threads=None):
    """BERT's erf GELU is a different function from the tanh form the reference states (< 1e-3)."""
    erf = np.vectorize(math.erf)
    out[...] = 0.5 * x * (1 + erf(x.astype(np.float64) / math.sqrt(2)))
    return out


def _gelu_low_degree_exp(x, out, reps=1, threads=None):
    """The single-pass formula with exp cut to a degree-3 polynomial (a cheaper kernel, ~1e-3 off)."""
    x64 = x.astype(np.float64)
    u = -2 * F.GELU_C * (x64 + 0.044715 * x64**3)
    k = np.floor(u / math.log(2) + 0.5)
    r = u - k * math.log(2)
    e = (1 + r + r * r / 2 + r**3 / 6) * 2.0**k
    out[...] = x64 / (1 + e)
    return out


def _batchnorm_channel_off_by_one(x, scale, shift, out, layout="NCHW", reps=1, threads=None):
    C = scale.size
    s, b = np.roll(scale, 1), np.roll(shift, 1)  # plane p takes channel (p - 1) % C
    out[...] = x * s.reshape(1, C, 1, 1) + b.reshape(1, C, 1, 1)
    return out


def _fused_drops_last_residual(x, bias, res, out, reps=1, threads=None):
    K.bias_gelu_add(out, x, bias, res, 1, 1)
    out.reshape(-1)[-1] -= res.reshape(-1)[-1]
    return out


def _tiny_chain_wrong_order(x, out, n_ops=1, reps=1, threads=None):
    v = x.astype(np.float64)
    for k in range(n_ops):
        j = (k + 1) % 4  # starts with the add
        v = getattr(np, F.CHAIN_OPS[j])(v, F.CHAIN_CONSTS[j])
    out[...] = v
    return out


WRONG = [
    ("cpu.elementwise.softmax.01-numba", _softmax_no_rescale, {"rows": 3, "cols": 300}, "float32", "outside"),
    ("cpu.elementwise.layernorm.01-numba", _layernorm_unbiased, {"rows": 3, "cols": 33}, "float32", "outside"),
    ("cpu.elementwise.gelu.01-numba", _gelu_erf_form, {"numel": 2000}, "float32", "outside"),
    ("cpu.elementwise.gelu.01-numba", _gelu_low_degree_exp, {"numel": 2000}, "float32", "outside"),
    (
        "cpu.elementwise.batchnorm.01-numba",
        _batchnorm_channel_off_by_one,
        {"N": 2, "C": 4, "H": 3, "W": 3},
        "float64",
        "outside",
    ),
    (
        "cpu.elementwise.bias_gelu_add.02-numba-fused",
        _fused_drops_last_residual,
        {"rows": 4, "cols": 33},
        "float32",
        "outside",
    ),
    ("cpu.elementwise.tiny_chain.01-numba-fused", _tiny_chain_wrong_order, {"numel": 8}, "float64", "outside"),
]


@pytest.mark.parametrize("name,kernel,size,dtype,message", WRONG, ids=[w[1].__name__ for w in WRONG])
def test_wrong_kernels_are_rejected(name, kernel, size, dtype, message):
    v = dataclasses.replace(rooflab.get_variant(name), name=f"wrong.{kernel.__name__}", kernel=kernel)
    ins = v.inputs(size, dtype)
    if name.endswith("softmax.01-numba"):
        ins[0][:, 250] += 20  # the row max in the last segment
    params = {"n_ops": 6} if "tiny_chain" in name else {}
    rec = RUNNER.measure(v, ins, threads=1, params=params)
    assert rec["status"] == "failed" and message in rec["error"] and "gbps" not in rec
    assert rec["error"].startswith(f"wrong.{kernel.__name__}")


def test_the_checker_is_not_too_loose_for_the_fast_exp():
    """The f32 kernel's own error stays 10x inside the tolerance the wrong exp breaks."""
    v = rooflab.get_variant("cpu.elementwise.gelu.01-numba")
    ins = v.inputs({"numel": 100_000}, np.float32)
    rec = RUNNER.measure(v, ins, threads=1)
    assert rec["status"] == "ok"
    got, ref = ins[-1].astype(np.float64), F.gelu64(ins[0].astype(np.float64))
    assert np.max(np.abs(got - ref) - 1e-1 * (1e-6 + 1e-4 * np.abs(ref))) <= 0


def test_float64_gelu_is_accurate_to_a_few_ulps_not_just_the_tolerance():
    """The f64 tolerance (1e-9) would pass a sloppy exp; the Pade GELU is held to ~1e-15 relative
    over the arguments whose result is not dominated by the cancellation in v + 0.044715 v^3."""
    x = np.concatenate([np.linspace(-6, 6, 100_001), np.random.default_rng(3).standard_normal(100_000)])
    y = np.empty_like(x)
    K.gelu_serial(y, x, 1)
    ref = x / (1.0 + np.exp(-2.0 * F.GELU_C * (x + 0.044715 * x**3)))  # F.gelu64's tanh form loses
    assert np.all(np.abs(y - ref) <= 5e-14 * np.abs(ref))  # ~1e-6 of the negative tail; measured 5e-15


@pytest.mark.parametrize("dtype, near, wide", [(np.float64, 1e-14, 1e-13), (np.float32, 3e-7, 3e-7)])
def test_softmax_exp_is_accurate_to_a_few_ulps_not_just_the_tolerance(dtype, near, wide):
    """fexp, the exponential of softmax (x - max <= 0), against a long-double reference: the
    tolerances (f64 1e-9) would pass a polynomial short by a degree. Near: [-40, 0], the arguments
    whose results a softmax of that dtype can resolve; wide: down to the clamp."""
    from numba import njit

    @njit(fastmath=K.FM, error_model="numpy")
    def exp_of(x, out):
        for i in range(x.size):
            out[i] = K.fexp(x[i])

    rng = np.random.default_rng(5)
    for lo, bound in ((-40.0, near), (-86.0 if dtype == np.float32 else -700.0, wide)):
        x = np.concatenate([np.linspace(lo, 0, 50_001), rng.uniform(lo, 0, 50_000)]).astype(dtype)
        y = np.empty_like(x)
        exp_of(x, y)
        ref = np.exp(x.astype(np.longdouble))
        assert float(np.max(np.abs(y / ref - 1))) <= bound, (lo, float(np.max(np.abs(y / ref - 1))))


# ---- bad input: RooflabError naming the variant -----------------------------------------------------


@pytest.mark.parametrize("kind", OPS)
def test_unsupported_dtype_and_mismatched_shapes_are_refused(kind):
    size = SIZES[kind][0]
    for v in variants(kind):
        ins = v.inputs(size, np.float32)
        bad = tuple(a.astype(np.float16) for a in ins)
        with pytest.raises(rooflab.RooflabError, match=rf"{v.name}: .*float16.*supports float32 and float64"):
            v(*bad)
        ints = tuple(a.astype(np.int32) for a in ins)
        with pytest.raises(rooflab.RooflabError, match=v.name):
            v(*ints)
        short = ins[:-1] + (np.empty(ins[-1].size + 1, ins[-1].dtype),)
        with pytest.raises(rooflab.RooflabError, match=rf"{v.name}: out has shape .* but (x|a) has"):
            v(*short)


def test_numba_variants_refuse_non_contiguous_and_bad_vectors():
    x = np.ones((8, 6), np.float32)[:, ::2]
    v = rooflab.get_variant("cpu.elementwise.relu.01-numba")
    with pytest.raises(rooflab.RooflabError, match="relu.01-numba: x is not C-contiguous"):
        v(x, np.empty_like(x))
    assert rooflab.get_variant("cpu.elementwise.relu.00-numpy")(x, np.empty((8, 3), np.float32)).shape == (8, 3)
    bn = rooflab.get_variant("cpu.elementwise.batchnorm.01-numba")
    x, scale, shift, out = bn.inputs({"N": 2, "C": 4, "H": 3, "W": 5})
    with pytest.raises(rooflab.RooflabError, match=r"batchnorm.01-numba: scale has shape \(4,\), expected \(5,\)"):
        bn(x, scale, shift, out, layout="NHWC")
    with pytest.raises(rooflab.RooflabError, match="unknown layout"):
        bn(x, scale, shift, out, layout="CHWN")
    ln = rooflab.get_variant("cpu.elementwise.layernorm.00-numpy")
    x, g, b, out = ln.inputs({"rows": 3, "cols": 8})
    with pytest.raises(rooflab.RooflabError, match="layernorm.00-numpy: gamma"):
        ln(x, g[:4], b, out)
    g = rooflab.get_variant("cpu.elementwise.gelu.00-numpy")
    x, out = g.inputs({"numel": 16})
    with pytest.raises(rooflab.RooflabError, match="gelu.00-numpy: out overlaps x"):
        g(x, x)
    ch = rooflab.get_variant("cpu.elementwise.bias_gelu_add.01-numba-unfused")
    x, bias, res, tmp, out = ch.inputs({"rows": 3, "cols": 8})
    with pytest.raises(rooflab.RooflabError, match="bias_gelu_add.01-numba-unfused: res has shape"):
        ch(x, bias, res[:2], tmp, out)
    with pytest.raises(rooflab.RooflabError, match="tmp overlaps"):
        ch(x, bias, res, x, out)


# ---- generated code -------------------------------------------------------------------------------


def _fresh_asm(pyfunc, *args):
    from numba import njit

    opts = pyfunc.targetoptions
    k = njit(parallel=True, fastmath=opts.get("fastmath", False), error_model=opts.get("error_model", "python"))(
        pyfunc.py_func
    )
    k(*args)
    return k.overloads[k.signatures[0]].library.get_asm_str()


@pytest.mark.slow  # compiles fresh (uncached) copies of two parallel kernels
@pytest.mark.skipif(not clock.SUPPORTED, reason="x86-64 assembly checks")
def test_gelu_and_softmax_exp_is_vectorized_not_a_libm_call():
    x = np.linspace(-4, 4, 4096, dtype=np.float32)
    asm = _fresh_asm(K.gelu, np.empty_like(x), x, 1, 1)
    vec = [ln for ln in asm.splitlines() if "vfmadd" in ln and "ps" in ln and ("%ymm" in ln or "%zmm" in ln)]
    assert len(vec) >= 6, "the exp polynomial must run on packed vectors"
    assert "expf" not in asm and "tanhf" not in asm
    x2 = x.reshape(64, 64)
    asm = _fresh_asm(K.softmax, np.empty_like(x2), x2, 1, 1, K.BLOCK)
    assert any("vmaxps" in ln and ("%ymm" in ln or "%zmm" in ln) for ln in asm.splitlines()), "max reduction vectorized"
    assert "expf" not in asm


# ---- the suite and its summary ----------------------------------------------------------------------


def test_cases_cover_every_variant_at_dram_size_next_to_its_stream_kernel():
    from rooflab.memory import array_cap

    dram_from = F._dram_from()  # where DRAM starts on this host (its probe), not the OS's LLC
    for quick in (True, False):
        cs = check_cases(F.cases(quick, [1, max_threads()]))
        names = {c.variant for c in cs}
        for v in rooflab.list_variants(family="elementwise", device="cpu"):
            assert v.name in names, v.name
        roofs = {(c.meta["group"], c.meta["stream_kernel"]) for c in cs if c.meta.get("role") == "roof"}
        for c in cs:
            if c.meta.get("role") == "op" or c.meta.get("chain"):
                assert (c.meta["group"], c.meta["stream_kernel"]) in roofs
                shape = F.op_shape(c.meta.get("op") or c.meta["chain"], c.size)
                want = min(dram_from, array_cap(F.LIVE_ARRAYS, quick))  # free memory may cap it
                assert math.prod(shape) * np.dtype(c.dtype).itemsize >= want, c.label
        dtypes = {c.dtype for c in cs if c.meta.get("role") == "op"}
        assert dtypes == ({"float32"} if quick else {"float32", "float64"})
    lat = F.latency_cases(False)
    assert sorted({c.params["n_ops"] for c in lat}) == [1, 2, 4, 8, 16] and len(lat) == 10
    lay = F.layout_cases(False, [1])
    assert {c.size["layout"] for c in lay} == {"NCHW", "NHWC"} and len(lay) == 5 * 2 * 2


def _rec(variant, t, gbps=None, reps=1, **meta):
    return {"variant": variant, "status": "ok", "time_s": {"median": t}, "reps": reps, "gbps": {"median": gbps}, **meta}


def test_summary_ratios():
    g = "dram/float32/2T"
    recs = [
        _rec("cpu.stream.copy", 1.0, 20.0, group=g, stream_kernel="copy", role="roof"),
        _rec(
            "cpu.elementwise.gelu.00-numpy", 8.0, 2.5, group=g, stream_kernel="copy", role="op", key="gelu", label="a"
        ),
        _rec(
            "cpu.elementwise.gelu.01-numba",
            2.0,
            18.0,
            reps=2,
            group=g,
            stream_kernel="copy",
            role="op",
            key="gelu",
            label="b",
        ),
        _rec("x.02-numba-fused", 3.0, group=g, chain="bn_add_relu", fused=True, bytes_ratio=7 / 3),
        _rec("x.01-numba-unfused", 6.0, group=g, chain="bn_add_relu", fused=False, bytes_ratio=7 / 3),
        _rec("bn.01", 2.0, 10.0, group="layout/x/1T", layout="NCHW"),
        _rec("bn.01", 1.0, 20.0, group="layout/x/1T", layout="NHWC"),
        _rec("t.00", 4e-6, reps=4, group="tiny_chain", n_ops=4, fused=False),
    ]
    s = F.summarize(recs)
    assert [round(r["fraction"], 3) for r in s["vs_stream"]] == [0.125, 0.9]
    assert s["vs_numpy"] == [{"label": "b", "op": "gelu", "speedup_vs_numpy": 8.0}]
    assert s["fusion"][0]["speedup"] == 2.0 and s["fusion"][0]["fraction_of_prediction"] == pytest.approx(6 / 7)
    assert s["layouts"][0]["nhwc_over_nchw"] == 2.0
    assert s["tiny_chain"][0]["ns_per_chain"] == pytest.approx(1000.0)


def test_row_kernels_stream_only_rows_long_enough_to_gain(monkeypatch):
    """Past the LLC a row kernel streams row by row, but a short row's partial lines at both ends
    cost more than the read they save (7x7 planes ran at 0.28x of ordinary stores): rows under
    STREAM_ROW_MIN bytes keep ordinary stores unless ``stream=True`` forces them."""
    from rooflab.cpu.caches import CacheMap
    from rooflab.families.elementwise import cpu as C

    tiny = CacheMap([{"name": "L1", "level": 1, "size_bytes": 1024, "private": True, "instances": 1}])
    monkeypatch.setattr(C, "_caches", lambda: tiny)
    out = np.empty(4096, np.float32)  # 16 KiB: past the (patched) LLC
    assert C._streams(out, None) and C._streams(out, None, 28 * 28 * 4)
    assert not C._streams(out, None, 7 * 7 * 4) and not C._streams(out, None, 14 * 14 * 4)
    assert C._streams(out, True, 7 * 7 * 4) and not C._streams(out, False, 28 * 28 * 4)
    assert not C._streams(np.empty(64, np.float32), None, 28 * 28 * 4)  # fits the cache: never
