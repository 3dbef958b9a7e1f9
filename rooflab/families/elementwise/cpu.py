"""CPU variants of the `elementwise` family: numpy (variant 00, the framework path of
the 0.1 model-op path) and numba single-pass kernels (kernels/cpu/elementwise.py).

  cpu.elementwise.<op>.00-numpy             the ufunc sequence frameworks run, one pass per ufunc:
                                            gelu 9, softmax 5, layernorm 9, batchnorm 2 passes
  cpu.elementwise.<op>.01-numba             one parallel region, one pass over DRAM (row ops: the
                                            row stays in cache between sweeps); below 32k elements
                                            or at 1 thread a serial twin (no pool wake-up); add,
                                            scale, relu, batchnorm, layernorm with non-temporal
                                            stores once the output is >= the LLC (``stream=``:
                                            force either way)
  cpu.elementwise.<chain>.00-numpy-unfused  numpy op by op, the intermediate in memory
  cpu.elementwise.<chain>.01-numba-unfused  rooflab's own kernel per op, the intermediate in memory
  cpu.elementwise.<chain>.02-numba-fused    one kernel for the chain
  cpu.elementwise.tiny_chain.00-numpy-op-by-op / 01-numba-fused   N tiny ops: N dispatches or one

Every kernel takes its inputs, then ``out`` (the shape of the main input), validates them once per
call (RooflabError naming the variant: dtype, shapes, contiguity, overlap) and repeats ``reps``
times: numba inside the parallel region, numpy (and the per-op unfused chains) in Python.
"""

from __future__ import annotations

import numpy as np

from ...errors import RooflabError
from ...kernels.cpu import elementwise as K
from ...registry import Variant, register
from ...work import Work
from . import (
    CHAIN_CONSTS,
    CHAIN_OPS,
    DTYPES,
    LN_EPS,
    SCALE_S,
    _caches,
    channel_axis,
    check_arrays,
    check_same_shape,
    check_vector,
    make_inputs,
    reference,
    row_view,
    work,
)


def _threads(threads):
    if threads is None:
        import numba

        return numba.get_num_threads()
    return int(threads)


def _flat(a):
    return a.reshape(-1)


def _planes(a):
    """(N*C, rest) view of an NCHW-like array."""
    return a.reshape(a.shape[0] * a.shape[1], -1)


STREAM_ROW_MIN = 1024  # bytes: a shorter row (plane, pixel, layer-norm row) keeps ordinary stores


def _streams(out, stream, row_bytes: int | None = None) -> bool:
    """Non-temporal stores for add/scale/relu/batchnorm/layernorm: ``stream`` when given, else when
    ``out`` is at least what the last-level cache really holds (it cannot stay cached; kernels/cpu/elementwise.py).
    In-place calls never stream: the kernels check. Row kernels stream row by row, each row with a
    scalar head and tail: under STREAM_ROW_MIN those partial lines dominate, and streaming and
    ordinary stores into one line cost more than the read they save (batch norm NCHW at DRAM size,
    f32, 1 thread, against ordinary stores: 7x7 planes 0.28x, 14x14 0.78x, 20x20 and 28x28 1.55x)."""
    if stream is not None:
        return bool(stream)
    return out.nbytes >= _caches().llc_effective() and (row_bytes is None or row_bytes >= STREAM_ROW_MIN)


def _par(nthreads: int, n: int) -> bool:
    """The parallel entry point for >1 thread and >= SERIAL_BELOW elements, else the serial one."""
    return nthreads > 1 and n >= K.SERIAL_BELOW


def _no_overlap(name, target, what="out", **inputs):
    for k, a in inputs.items():
        if np.shares_memory(target, a):
            raise RooflabError(
                f"{name}: {what} overlaps {k}; this variant cannot run in place", f"pass a separate {what}"
            )


# ---- numpy: the framework path (formulas of the 0.1 model-op path) ----------------------------


def _np_gelu_into(x, y):
    """9 ufuncs, y as the scratch: y = 0.5 x (1 + tanh(c (x + 0.044715 x^3)))."""
    c0, c1 = x.dtype.type(np.sqrt(2 / np.pi)), x.dtype.type(0.044715)
    np.multiply(x, x, out=y)
    np.multiply(y, x, out=y)
    np.multiply(y, c1, out=y)
    np.add(y, x, out=y)
    np.multiply(y, c0, out=y)
    np.tanh(y, out=y)
    np.add(y, 1, out=y)
    np.multiply(y, x, out=y)
    np.multiply(y, 0.5, out=y)
    return y


def _bn_views(name, x, scale, shift, layout):
    ax = channel_axis(name, x, layout)
    check_vector(name, "scale", scale, x.shape[ax], f"channels of x in {layout}")
    check_vector(name, "shift", shift, x.shape[ax], f"channels of x in {layout}")
    if layout == "NCHW":
        tail = (1,) * (x.ndim - 2)
        return scale.reshape((-1,) + tail), shift.reshape((-1,) + tail)
    return scale, shift


def np_op(kind, name):
    def add(a, b, out, reps=1, threads=None):
        check_arrays(name, {"a": a, "b": b, "out": out})
        check_same_shape(name, {"a": a, "b": b, "out": out})
        for _ in range(int(reps)):
            np.add(a, b, out=out)
        return out

    def scale(x, out, s=SCALE_S, reps=1, threads=None):
        check_arrays(name, {"x": x, "out": out})
        check_same_shape(name, {"x": x, "out": out})
        s = x.dtype.type(s)
        for _ in range(int(reps)):
            np.multiply(x, s, out=out)
        return out

    def relu(x, out, reps=1, threads=None):
        check_arrays(name, {"x": x, "out": out})
        check_same_shape(name, {"x": x, "out": out})
        for _ in range(int(reps)):
            np.maximum(x, 0, out=out)
        return out

    def gelu(x, out, reps=1, threads=None):
        check_arrays(name, {"x": x, "out": out})
        check_same_shape(name, {"x": x, "out": out})
        _no_overlap(name, out, x=x)
        for _ in range(int(reps)):
            _np_gelu_into(x, out)
        return out

    def batchnorm(x, scale, shift, out, layout="NCHW", reps=1, threads=None):
        check_arrays(name, {"x": x, "scale": scale, "shift": shift, "out": out})
        check_same_shape(name, {"x": x, "out": out})
        sc, sh = _bn_views(name, x, scale, shift, layout)
        for _ in range(int(reps)):
            np.multiply(x, sc, out=out)
            np.add(out, sh, out=out)
        return out

    def softmax(x, out, reps=1, threads=None):
        check_arrays(name, {"x": x, "out": out})
        check_same_shape(name, {"x": x, "out": out})
        row_view(name, x)
        m = np.empty(x.shape[:-1] + (1,), dtype=x.dtype)
        for _ in range(int(reps)):
            np.max(x, axis=-1, keepdims=True, out=m)
            np.subtract(x, m, out=out)
            np.exp(out, out=out)
            np.sum(out, axis=-1, keepdims=True, out=m)
            np.divide(out, m, out=out)
        return out

    def layernorm(x, gamma, beta, out, eps=LN_EPS, reps=1, threads=None):
        check_arrays(name, {"x": x, "gamma": gamma, "beta": beta, "out": out})
        check_same_shape(name, {"x": x, "out": out})
        row_view(name, x)
        check_vector(name, "gamma", gamma, x.shape[-1], "the last axis of x")
        check_vector(name, "beta", beta, x.shape[-1], "the last axis of x")
        mu = np.empty(x.shape[:-1] + (1,), dtype=x.dtype)
        var = np.empty_like(mu)
        for _ in range(int(reps)):
            np.mean(x, axis=-1, keepdims=True, out=mu)
            np.subtract(x, mu, out=out)
            np.mean(np.square(out), axis=-1, keepdims=True, out=var)
            np.add(var, eps, out=var)
            np.sqrt(var, out=var)
            np.divide(out, var, out=out)
            np.multiply(out, gamma, out=out)
            np.add(out, beta, out=out)
        return out

    return locals()[kind]


NP_DISPATCHES = {"add": 1, "scale": 1, "relu": 1, "gelu": 9, "batchnorm": 2, "softmax": 5, "layernorm": 9}


# ---- numba: one pass --------------------------------------------------------------------------------


def nb_op(kind, name):
    def add(a, b, out, reps=1, threads=None, stream=None):
        check_arrays(name, {"a": a, "b": b, "out": out}, contiguous=True)
        check_same_shape(name, {"a": a, "b": b, "out": out})
        o, x, y, nt, st = _flat(out), _flat(a), _flat(b), _threads(threads), _streams(out, stream)
        K.add(o, x, y, int(reps), nt, st) if _par(nt, o.size) else K.add_serial(o, x, y, int(reps), st)
        return out

    def scale(x, out, s=SCALE_S, reps=1, threads=None, stream=None):
        check_arrays(name, {"x": x, "out": out}, contiguous=True)
        check_same_shape(name, {"x": x, "out": out})
        o, a, c, nt, st = _flat(out), _flat(x), x.dtype.type(s), _threads(threads), _streams(out, stream)
        K.scale(o, a, c, int(reps), nt, st) if _par(nt, o.size) else K.scale_serial(o, a, c, int(reps), st)
        return out

    def relu(x, out, reps=1, threads=None, stream=None):
        check_arrays(name, {"x": x, "out": out}, contiguous=True)
        check_same_shape(name, {"x": x, "out": out})
        o, a, nt, st = _flat(out), _flat(x), _threads(threads), _streams(out, stream)
        K.relu(o, a, int(reps), nt, st) if _par(nt, o.size) else K.relu_serial(o, a, int(reps), st)
        return out

    def gelu(x, out, reps=1, threads=None):
        check_arrays(name, {"x": x, "out": out}, contiguous=True)
        check_same_shape(name, {"x": x, "out": out})
        o, a, nt = _flat(out), _flat(x), _threads(threads)
        K.gelu(o, a, int(reps), nt) if _par(nt, o.size) else K.gelu_serial(o, a, int(reps))
        return out

    def batchnorm(x, scale, shift, out, layout="NCHW", reps=1, threads=None, stream=None):
        check_arrays(name, {"x": x, "scale": scale, "shift": shift, "out": out}, contiguous=True)
        check_same_shape(name, {"x": x, "out": out})
        _bn_views(name, x, scale, shift, layout)
        nt = _threads(threads)
        par = _par(nt, x.size)
        if layout == "NCHW":  # (N*C, rest) planes
            x2, y2 = _planes(x), _planes(out)
            st = _streams(out, stream, y2.shape[1] * out.itemsize)
            if par:
                K.batchnorm_nchw(y2, x2, scale, shift, int(reps), nt, st)
            else:
                K.batchnorm_nchw_serial(y2, x2, scale, shift, int(reps), st)
        else:  # (pixels, C)
            x2, y2 = x.reshape(-1, x.shape[-1]), out.reshape(-1, x.shape[-1])
            st = _streams(out, stream, y2.shape[1] * out.itemsize)
            if par:
                K.batchnorm_nhwc(y2, x2, scale, shift, int(reps), nt, st)
            else:
                K.batchnorm_nhwc_serial(y2, x2, scale, shift, int(reps), st)
        return out

    def softmax(x, out, block=K.BLOCK, reps=1, threads=None):
        check_arrays(name, {"x": x, "out": out}, contiguous=True)
        check_same_shape(name, {"x": x, "out": out})
        y2, x2, nt = row_view(name, out), row_view(name, x), _threads(threads)
        if _par(nt, x.size):
            K.softmax(y2, x2, int(reps), nt, int(block))
        else:
            K.softmax_serial(y2, x2, int(reps), int(block))
        return out

    def layernorm(x, gamma, beta, out, eps=LN_EPS, block=K.BLOCK, reps=1, threads=None, stream=None):
        check_arrays(name, {"x": x, "gamma": gamma, "beta": beta, "out": out}, contiguous=True)
        check_same_shape(name, {"x": x, "out": out})
        x2 = row_view(name, x)
        check_vector(name, "gamma", gamma, x.shape[-1], "the last axis of x")
        check_vector(name, "beta", beta, x.shape[-1], "the last axis of x")
        y2, e, nt = row_view(name, out), x.dtype.type(eps), _threads(threads)
        st = _streams(out, stream, y2.shape[1] * out.itemsize)
        if _par(nt, x.size):
            K.layernorm(y2, x2, gamma, beta, e, int(reps), nt, int(block), st)
        else:
            K.layernorm_serial(y2, x2, gamma, beta, e, int(reps), int(block), st)
        return out

    return locals()[kind]


DESCRIPTIONS = {
    "add": "a + b in one parallel pass (2 reads, 1 write per element)",
    "scale": "s * x in one parallel pass",
    "relu": "max(x, 0) in one parallel pass",
    "gelu": "tanh-GELU in one pass: x / (1 + exp(-2u)) with a vectorized polynomial exp",
    "batchnorm": "x * scale[c] + shift[c] in one pass: per-plane scalars (NCHW) or vectors over C (NHWC)",
    "softmax": "row kept in cache: max (read in the previous row's scale loop), exp-and-sum, scale (1 DRAM "
    "read); long rows: per-segment exp stored, online sum, cached rescale",
    "layernorm": "row kept in cache: two-pass mean and variance, normalise (1 DRAM read); long rows: Chan's merge",
}
NP_DESCRIPTIONS = {
    "add": "np.add(a, b, out=)",
    "scale": "np.multiply(x, s, out=)",
    "relu": "np.maximum(x, 0, out=)",
    "gelu": "9 ufuncs (x*x, *x, *0.044715, +x, *c, tanh, +1, *x, *0.5), each a pass over memory",
    "batchnorm": "np.multiply by scale then np.add shift (2 passes)",
    "softmax": "max, subtract, exp, sum, divide (5 passes)",
    "layernorm": "mean, subtract, mean of square (a temporary), +eps, sqrt, divide, *gamma, +beta",
}


def _defaults(kind, library):
    d = {}
    if kind == "scale":
        d["s"] = SCALE_S
    if kind == "layernorm":
        d["eps"] = LN_EPS
    if kind == "batchnorm":
        d["layout"] = "NCHW"
    if kind in ("softmax", "layernorm") and not library:
        d["block"] = K.BLOCK
    return d


def _register_op(kind):
    for number, tech, make, desc in ((0, "numpy", np_op, NP_DESCRIPTIONS), (1, "numba", nb_op, DESCRIPTIONS)):
        name = f"cpu.elementwise.{kind}.{number:02d}-{tech}"
        launches = NP_DISPATCHES[kind] if number == 0 else 1
        register(
            Variant(
                name=name,
                family="elementwise",
                device="cpu",
                number=number,
                op=kind,
                description=desc[kind],
                kernel=make(kind, name),
                reference=lambda *arrays, _k=kind, **p: reference(_k, *arrays, **p),
                work=lambda *arrays, reps=1, layout="NCHW", _k=kind, _l=launches, **_: work(
                    _k, arrays[0], reps, layout, _l
                ),
                inputs=lambda size, dtype=np.float32, seed=0, _k=kind, **_: make_inputs(_k, size, dtype, seed),
                defaults=_defaults(kind, number == 0),
                dtypes=DTYPES,
            )
        )


for _kind in ("add", "scale", "relu", "gelu", "batchnorm", "softmax", "layernorm"):
    _register_op(_kind)


# ---- fused vs unfused chains ------------------------------------------------------------------------


def _check_chain(name, kind, arrays, contiguous):
    check_arrays(name, arrays, contiguous=contiguous)
    big = {k: v for k, v in arrays.items() if k not in ("bias", "scale", "shift")}
    check_same_shape(name, big)
    x = arrays["x"]
    if kind == "bias_gelu_add":
        if x.ndim < 1:
            raise RooflabError(f"{name}: x must have a last axis for the bias", "pass (rows, cols)")
        check_vector(name, "bias", arrays["bias"], x.shape[-1], "the last axis of x")
    else:
        _bn_views(name, x, arrays["scale"], arrays["shift"], "NCHW")
    if "tmp" in arrays:
        _no_overlap(name, arrays["tmp"], "tmp", x=x, res=arrays["res"], out=arrays["out"])


def bias_gelu_add_numpy(x, bias, res, tmp, out, reps=1, threads=None):
    name = "cpu.elementwise.bias_gelu_add.00-numpy-unfused"
    _check_chain(name, "bias_gelu_add", {"x": x, "bias": bias, "res": res, "tmp": tmp, "out": out}, False)
    for _ in range(int(reps)):
        np.add(x, bias, out=tmp)
        _np_gelu_into(tmp, out)
        np.add(out, res, out=out)
    return out


def bias_gelu_add_unfused(x, bias, res, tmp, out, reps=1, threads=None):
    name = "cpu.elementwise.bias_gelu_add.01-numba-unfused"
    _check_chain(name, "bias_gelu_add", {"x": x, "bias": bias, "res": res, "tmp": tmp, "out": out}, True)
    nt = _threads(threads)
    x2, t2 = row_view(name, x), row_view(name, tmp)
    t1, o1, r1 = _flat(tmp), _flat(out), _flat(res)
    if _par(nt, x.size):
        for _ in range(int(reps)):
            K.bias_rows(t2, x2, bias, 1, nt)
            K.gelu(t1, t1, 1, nt)
            K.add(o1, t1, r1, 1, nt)
    else:
        for _ in range(int(reps)):
            K.bias_rows_serial(t2, x2, bias, 1)
            K.gelu_serial(t1, t1, 1)
            K.add_serial(o1, t1, r1, 1)
    return out


def bias_gelu_add_fused(x, bias, res, out, reps=1, threads=None):
    name = "cpu.elementwise.bias_gelu_add.02-numba-fused"
    _check_chain(name, "bias_gelu_add", {"x": x, "bias": bias, "res": res, "out": out}, True)
    y2, x2, r2, nt = row_view(name, out), row_view(name, x), row_view(name, res), _threads(threads)
    if _par(nt, x.size):
        K.bias_gelu_add(y2, x2, bias, r2, int(reps), nt)
    else:
        K.bias_gelu_add_serial(y2, x2, bias, r2, int(reps))
    return out


def bn_add_relu_numpy(x, scale, shift, res, tmp, out, reps=1, threads=None):
    name = "cpu.elementwise.bn_add_relu.00-numpy-unfused"
    arrays = {"x": x, "scale": scale, "shift": shift, "res": res, "tmp": tmp, "out": out}
    _check_chain(name, "bn_add_relu", arrays, False)
    sc, sh = _bn_views(name, x, scale, shift, "NCHW")
    for _ in range(int(reps)):
        np.multiply(x, sc, out=tmp)
        np.add(tmp, sh, out=tmp)
        np.add(tmp, res, out=tmp)
        np.maximum(tmp, 0, out=out)
    return out


def bn_add_relu_unfused(x, scale, shift, res, tmp, out, reps=1, threads=None):
    name = "cpu.elementwise.bn_add_relu.01-numba-unfused"
    arrays = {"x": x, "scale": scale, "shift": shift, "res": res, "tmp": tmp, "out": out}
    _check_chain(name, "bn_add_relu", arrays, True)
    nt = _threads(threads)
    t2, x2, t1, o1, r1 = _planes(tmp), _planes(x), _flat(tmp), _flat(out), _flat(res)
    if _par(nt, x.size):
        for _ in range(int(reps)):
            K.batchnorm_nchw(t2, x2, scale, shift, 1, nt)
            K.add(t1, t1, r1, 1, nt)
            K.relu(o1, t1, 1, nt)
    else:
        for _ in range(int(reps)):
            K.batchnorm_nchw_serial(t2, x2, scale, shift, 1)
            K.add_serial(t1, t1, r1, 1)
            K.relu_serial(o1, t1, 1)
    return out


def bn_add_relu_fused(x, scale, shift, res, out, reps=1, threads=None):
    name = "cpu.elementwise.bn_add_relu.02-numba-fused"
    _check_chain(name, "bn_add_relu", {"x": x, "scale": scale, "shift": shift, "res": res, "out": out}, True)
    y2, x2, r2, nt = _planes(out), _planes(x), _planes(res), _threads(threads)
    if _par(nt, x.size):
        K.bn_add_relu_nchw(y2, x2, scale, shift, r2, int(reps), nt)
    else:
        K.bn_add_relu_nchw_serial(y2, x2, scale, shift, r2, int(reps))
    return out


CHAIN_VARIANTS = {
    "bias_gelu_add": (
        (
            0,
            "numpy-unfused",
            bias_gelu_add_numpy,
            11,
            "np.add bias, 9-ufunc GELU, np.add residual; intermediates in memory",
        ),
        (1, "numba-unfused", bias_gelu_add_unfused, 3, "rooflab's bias, GELU and add kernels one after another"),
        (2, "numba-fused", bias_gelu_add_fused, 1, "gelu(x + bias) + res in one pass (2 reads, 1 write)"),
    ),
    "bn_add_relu": (
        (0, "numpy-unfused", bn_add_relu_numpy, 4, "np.multiply, np.add, np.add, np.maximum; intermediate in memory"),
        (1, "numba-unfused", bn_add_relu_unfused, 3, "rooflab's batchnorm, add (in place) and relu kernels"),
        (2, "numba-fused", bn_add_relu_fused, 1, "relu(x * scale[c] + shift[c] + res) in one pass"),
    ),
}

for _chain, _rungs in CHAIN_VARIANTS.items():
    for _number, _tech, _fn, _launches, _desc in _rungs:
        _fused = _tech.endswith("-fused") and "unfused" not in _tech
        register(
            Variant(
                name=f"cpu.elementwise.{_chain}.{_number:02d}-{_tech}",
                family="elementwise",
                device="cpu",
                number=_number,
                op=None,
                description=_desc,
                kernel=_fn,
                reference=lambda *arrays, _k=_chain, **p: reference(_k, *arrays, **p),
                work=lambda *arrays, reps=1, _k=_chain, _f=_fused, _l=_launches, **_: work(
                    _k, arrays[0], reps, launches=_l, fused=_f
                ),
                inputs=lambda size, dtype=np.float32, seed=0, _k=_chain, _f=_fused, **_: make_inputs(
                    _k, size, dtype, seed, scratch=not _f
                ),
                dtypes=DTYPES,
            )
        )


# ---- latency floor: N tiny ops, op by op or in one call ----------------------------------------------


def _check_tiny(name, x, out, n_ops):
    check_arrays(name, {"x": x, "out": out}, contiguous=name.endswith("fused"))
    check_same_shape(name, {"x": x, "out": out})
    if int(n_ops) < 1:
        raise RooflabError(f"{name}: n_ops={n_ops} must be at least 1")


def tiny_chain_step(x, out, n_ops: int, fused: bool):
    """One unchecked run of the chain (what the variants repeat, and what tests/micro times):
    numpy: N ufunc calls, the first reading x, the others out in place; fused: one @njit call."""
    if fused:
        fn = K.chain_fused
        return lambda: fn(out, x, n_ops)
    plan = [
        (getattr(np, CHAIN_OPS[k % 4]), x if k == 0 else out, x.dtype.type(CHAIN_CONSTS[k % 4])) for k in range(n_ops)
    ]

    def step():
        for f, src, c in plan:
            f(src, c, out=out)

    return step


def tiny_chain_numpy(x, out, n_ops=1, reps=1, threads=None):
    _check_tiny("cpu.elementwise.tiny_chain.00-numpy-op-by-op", x, out, n_ops)
    step = tiny_chain_step(x, out, int(n_ops), False)
    for _ in range(int(reps)):
        step()
    return out


def tiny_chain_fused(x, out, n_ops=1, reps=1, threads=None):
    _check_tiny("cpu.elementwise.tiny_chain.01-numba-fused", x, out, n_ops)
    step = tiny_chain_step(x, out, int(n_ops), True)
    for _ in range(int(reps)):
        step()
    return out


def _tiny_work(x, n_ops, reps, op_by_op):
    """Op by op: every op reads and writes the array and is one dispatch; fused: one of each."""
    passes = n_ops if op_by_op else 1
    return Work(
        flops=x.size * n_ops * reps,
        bytes_read=x.nbytes * passes * reps,
        bytes_written=x.nbytes * passes * reps,
        launches=passes * reps,
    )


for _number, _tech, _fn, _desc in (
    (0, "numpy-op-by-op", tiny_chain_numpy, "N ufunc calls on 8 elements (multiply, add, maximum, multiply, ...)"),
    (1, "numba-fused", tiny_chain_fused, "the same N ops per element inside one @njit call"),
):
    register(
        Variant(
            name=f"cpu.elementwise.tiny_chain.{_number:02d}-{_tech}",
            family="elementwise",
            device="cpu",
            number=_number,
            op=None,
            description=_desc,
            kernel=_fn,
            reference=lambda x, out, n_ops=1, **_: reference("tiny_chain", x, n_ops=n_ops),
            work=lambda x, out, n_ops=1, reps=1, _n=_number, **_: _tiny_work(x, int(n_ops), int(reps), _n == 0),
            inputs=lambda size=8, dtype=np.float64, seed=0, **_: make_inputs("tiny_chain", size, dtype, seed),
            defaults={"n_ops": 1},
            dtypes=DTYPES,
        )
    )
