"""CUDA elementwise, normalisation and fused variants (issue 14): memory-bound ops, how close a
single-pass kernel gets to the HBM roof next to cupy's several passes, what fusion saves, and what
the layout of a channel-wise op changes.

Each op has its own ladder (``op`` names it, so "% of the library" is per op), named like the CPU's:
  cuda.elementwise.<op>.00-cupy        the library: the numpy formulas of the 0.1 model-op path
                                       run with cupy (one cupy kernel per call: GELU 9, softmax 5,
                                       layer norm 8)
  cuda.elementwise.<op>.01-kernel      one rooflab kernel (kernels/cuda/elementwise.cu)
ops: add, scale, relu, gelu, batchnorm (NCHW), batchnorm_nhwc (NHWC), softmax (rows), layernorm.
Fused chains:
  bias_gelu_add  y = gelu(x + bias[col]) + res            (transformer MLP; the CPU's bias_gelu_add)
  bn_add_relu    y = relu(x * scale[c] + shift[c] + res)  (the end of a ResNet block, as on the CPU)
  <chain>.00-cupy (cupy ops), <chain>.01-kernel-unfused (three rooflab kernels, intermediates in
  memory), <chain>.02-kernel-fused (one kernel).

Declared work: FLOPs as rooflab/workloads/ops.py counts them (1 per element for add/relu/gelu/softmax,
2 for batch norm, 5 for layer norm), and the bytes each version must move (STREAM counting, FP32):
add 12 B/elem, scale/relu/gelu/softmax 8, batch norm 8 + 8 C, layer norm 8 + 8 cols; the chains
12 B/elem fused and 28 B/elem unfused (x+bias: 8, gelu: 8, +res: 12), a 2.33x bytes ratio that
predicts the fused speed-up. Library variants are credited the op's minimum bytes (their extra
passes are the inefficiency the comparison shows). ``BYTES_PER_ELEMENT`` holds the table.

Napkin math (H200, ~4.8 TB/s): 64 Mi floats, relu moves 512 MiB: ~110 us; the unfused chain on
16384 x 3072 moves 1.4 GB (~290 us), the fused one 604 MB (~125 us).

Call: ``v(*arrays, out)`` with cupy float32 arrays (cupy variants also float64): add(a, b, out),
scale(x, out, s=...), relu/gelu(x, out), batchnorm(x, scale, shift, out), softmax(x, out) over the
last axis, layernorm(x, gamma, beta, out, eps=1e-5) over the last axis, bias_gelu_add(x, bias,
res, out), bn-add-relu(x, scale, shift, res, out). ``v.inputs(shape)`` takes the op shape of
rooflab/workloads/ops.py ({"numel"}, {"N","C","H","W"}, {"rows","cols"}).
Run: ``rooflab run --device cuda --suite elementwise``, or
``python -m pytest tests/test_cuda_families_gpu.py -k elementwise`` on a GPU machine.
"""

from __future__ import annotations

import math

import numpy as np

from ...cuda import loader
from ...cuda.args import array_module, cdiv, cupy, require
from ...errors import RooflabError
from ...registry import Case, Variant, register
from ...work import Work

SOURCE = "elementwise.cu"
KNOBS = {
    "EW_BLOCK": 256,
    "EW_SM_THREADS": 2048,
    "FUSED_SM_THREADS": 1536,
    "ROW_WARPS": 8,
    "ROW_BLOCK": 512,
    "ROW_SM_THREADS": 1024,
    "ROW_UNROLL": 4,
}
EW_BLOCK = KNOBS["EW_BLOCK"]
WARP_ROW_MAX = 1024  # rows up to this many columns get one warp each, longer rows a block
# resident threads per SM each launcher fills (checked against ptxas registers in the tests)
SM_THREADS = {
    "ew_add": KNOBS["EW_SM_THREADS"],
    "ew_scale": KNOBS["EW_SM_THREADS"],
    "ew_relu": KNOBS["EW_SM_THREADS"],
    "ew_gelu": KNOBS["EW_SM_THREADS"],
    "ew_bias_add": KNOBS["EW_SM_THREADS"],
    "ew_channel_affine": KNOBS["EW_SM_THREADS"],
    "fused_bias_gelu_residual": KNOBS["FUSED_SM_THREADS"],
    "fused_bn_add_relu": KNOBS["FUSED_SM_THREADS"],
    "softmax_warp": KNOBS["ROW_SM_THREADS"],
    "layernorm_warp": KNOBS["ROW_SM_THREADS"],
    "softmax_block": KNOBS["ROW_SM_THREADS"],
    "layernorm_block": KNOBS["ROW_SM_THREADS"],
}
BLOCK_OF = {
    "softmax_warp": 32 * KNOBS["ROW_WARPS"],
    "layernorm_warp": 32 * KNOBS["ROW_WARPS"],
    "softmax_block": KNOBS["ROW_BLOCK"],
    "layernorm_block": KNOBS["ROW_BLOCK"],
}
EPS = 1e-5
GELU_C0, GELU_C1 = math.sqrt(2.0 / math.pi), 0.044715
# (read, written) bytes per element each version must move (float32; per-channel parameters come
# on top), and the kernel launches (cupy calls) one call makes
BYTES_PER_ELEMENT = {
    "add": (8, 4),
    "scale": (4, 4),
    "relu": (4, 4),
    "gelu": (4, 4),
    "batchnorm": (4, 4),
    "batchnorm_nhwc": (4, 4),
    "softmax": (4, 4),
    "layernorm": (4, 4),
    "bias_gelu_add": (8, 4),
    "bn_add_relu": (8, 4),
    "bias_gelu_add/unfused": (16, 12),  # x+bias (4, 4), gelu (4, 4), +res (8, 4)
    "bn_add_relu/unfused": (16, 12),  # affine (4, 4), +res (8, 4), relu (4, 4)
}
LAUNCHES = {
    "unfused": 3,
    "cupy": {
        "gelu": 9,
        "batchnorm": 2,
        "batchnorm_nhwc": 2,
        "softmax": 5,
        "layernorm": 9,
        "bias_gelu_add": 11,
        "bn_add_relu": 4,
    },
}
FLOPS_PER_ELEMENT = {
    "add": 1,
    "scale": 1,
    "relu": 1,
    "gelu": 1,
    "batchnorm": 2,
    "batchnorm_nhwc": 2,
    "softmax": 1,
    "layernorm": 5,
    "bias_gelu_add": 3,
    "bn_add_relu": 4,
}


def _fn(kernel):
    return loader.kernel(SOURCE, kernel, KNOBS)


def _grid(kernel, n):
    """One resident wave at most, fewer blocks when there is less than a float4 per thread."""
    return max(1, min(loader.one_wave(EW_BLOCK, SM_THREADS[kernel]), cdiv(n, 4 * EW_BLOCK)))


def _launch(kernel, n, args):
    loader.launch(_fn(kernel), _grid(kernel, n), EW_BLOCK, args, kernel)


def _rows(x):
    cols = x.shape[-1]
    return x.size // cols, cols


def _row_kernel(which, rows, cols, args):
    kind = "warp" if cols <= WARP_ROW_MAX else "block"
    name = f"{which}_{kind}"
    block = BLOCK_OF[name]
    per_block = block // 32 if kind == "warp" else 1
    grid = max(1, min(cdiv(rows, per_block), loader.one_wave(block, SM_THREADS[name])))  # one wave, rows in turn
    loader.launch(_fn(name), grid, block, args, name)


def _i64(n):
    return np.int64(n)


# ---- own kernels (variant 01 and the chains) -------------------------------------------------------


def _k_add(a, b, out, **_):
    _launch("ew_add", a.size, (a, b, out, _i64(a.size)))


def _k_scale(x, out, s=3.0, **_):
    _launch("ew_scale", x.size, (x, out, np.float32(s), _i64(x.size)))


def _k_relu(x, out, **_):
    _launch("ew_relu", x.size, (x, out, _i64(x.size)))


def _k_gelu(x, out, **_):
    _launch("ew_gelu", x.size, (x, out, _i64(x.size)))


def _channels(layout, x):
    """(inner, C): element i's channel is (i // inner) % C."""
    if layout == "NCHW":
        return x.shape[2] * x.shape[3], x.shape[1]
    return 1, x.shape[3]


def _k_affine(layout):
    def run(x, scale, shift, out, **_):
        inner, C = _channels(layout, x)
        _launch("ew_channel_affine", x.size, (x, scale, shift, out, _i64(x.size), np.int32(inner), np.int32(C)))

    return run


def _k_softmax(x, out, **_):
    rows, cols = _rows(x)
    _row_kernel("softmax", rows, cols, (x, out, np.int32(rows), np.int32(cols)))


def _k_layernorm(x, gamma, beta, out, eps=EPS, **_):
    rows, cols = _rows(x)
    _row_kernel("layernorm", rows, cols, (x, gamma, beta, out, np.int32(rows), np.int32(cols), np.float32(eps)))


def _k_bgr_fused(x, bias, res, out, **_):
    args = (x, bias, res, out, _i64(x.size), np.int32(1), np.int32(x.shape[-1]))
    _launch("fused_bias_gelu_residual", x.size, args)


_WORKSPACE: dict = {}


def _scratch(x):
    """One intermediate buffer like ``x`` for the unfused chains (kept for the next call of the same
    shape, so the timed calls allocate nothing). Each pass reads one buffer and writes another: the
    kernels' __restrict__ pointers never alias."""
    key = (x.shape, x.dtype.str, cupy().cuda.runtime.getDevice())
    buf = _WORKSPACE.get(key)
    if buf is None:
        _WORKSPACE.clear()
        buf = _WORKSPACE[key] = cupy().empty(x.shape, dtype=x.dtype)
    return buf


def _k_bgr_unfused(x, bias, res, out, **_):  # three passes, intermediates in memory
    n, t = _i64(x.size), _scratch(x)
    _launch("ew_bias_add", x.size, (x, bias, out, n, np.int32(1), np.int32(x.shape[-1])))
    _launch("ew_gelu", x.size, (out, t, n))
    _launch("ew_add", x.size, (t, res, out, n))


def _k_bar_fused(x, scale, shift, res, out, **_):
    inner, C = _channels("NCHW", x)
    _launch("fused_bn_add_relu", x.size, (x, scale, shift, res, out, _i64(x.size), np.int32(inner), np.int32(C)))


def _k_bar_unfused(x, scale, shift, res, out, **_):
    inner, C = _channels("NCHW", x)
    n, t = _i64(x.size), _scratch(x)
    _launch("ew_channel_affine", x.size, (x, scale, shift, out, n, np.int32(inner), np.int32(C)))
    _launch("ew_add", x.size, (out, res, t, n))
    _launch("ew_relu", x.size, (t, out, n))


# ---- the library (cupy, the numpy formulas of the 0.1 model-op path) -----------------------------------


def _c_add(a, b, out, **_):
    cupy().add(a, b, out=out)


def _c_scale(x, out, s=3.0, **_):
    cupy().multiply(x, x.dtype.type(s), out=out)


def _c_relu(x, out, **_):
    cupy().maximum(x, 0, out=out)


def _gelu_passes(cp, x, out):
    """the 0.1 path's tanh-GELU: 9 cupy calls, the cube and the tanh through a temporary."""
    t = cp.multiply(x, x)
    cp.multiply(t, x, out=t)
    cp.multiply(t, x.dtype.type(GELU_C1), out=t)
    cp.add(t, x, out=t)
    cp.multiply(t, x.dtype.type(GELU_C0), out=t)
    cp.tanh(t, out=t)
    cp.add(t, 1, out=t)
    cp.multiply(t, x, out=out)
    cp.multiply(out, x.dtype.type(0.5), out=out)


def _c_gelu(x, out, **_):
    _gelu_passes(cupy(), x, out)


def _bcast(layout, p):
    return p[:, None, None] if layout == "NCHW" else p


def _c_affine(layout):
    def run(x, scale, shift, out, **_):
        cp = cupy()
        cp.multiply(x, _bcast(layout, scale), out=out)
        cp.add(out, _bcast(layout, shift), out=out)

    return run


def _c_softmax(x, out, **_):
    cp = cupy()
    m = cp.max(x, axis=-1, keepdims=True)
    cp.subtract(x, m, out=out)
    cp.exp(out, out=out)
    s = cp.sum(out, axis=-1, keepdims=True)
    cp.divide(out, s, out=out)


def _c_layernorm(x, gamma, beta, out, eps=EPS, **_):
    cp = cupy()
    mu = cp.mean(x, axis=-1, keepdims=True)
    cp.subtract(x, mu, out=out)
    var = cp.mean(cp.square(out), axis=-1, keepdims=True)
    cp.add(var, x.dtype.type(eps), out=var)
    cp.sqrt(var, out=var)
    cp.divide(out, var, out=out)
    cp.multiply(out, gamma, out=out)
    cp.add(out, beta, out=out)


def _c_bgr(x, bias, res, out, **_):
    cp = cupy()
    u = cp.add(x, bias)
    _gelu_passes(cp, u, out)
    cp.add(out, res, out=out)


def _c_bar(x, scale, shift, res, out, **_):
    cp = cupy()
    cp.multiply(x, scale[:, None, None], out=out)
    cp.add(out, shift[:, None, None], out=out)
    cp.add(out, res, out=out)
    cp.maximum(out, 0, out=out)


# ---- float64 references (numpy or cupy) ------------------------------------------------------------


def _f64(a):
    return a.astype(np.float64)


def gelu_ref(xp, x):
    x = _f64(x)
    return 0.5 * x * (1.0 + xp.tanh(GELU_C0 * (x + GELU_C1 * x**3)))


def softmax_ref(xp, x):
    x = _f64(x)
    e = xp.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def layernorm_ref(xp, x, gamma, beta, eps=EPS):
    x = _f64(x)
    mu = x.mean(axis=-1, keepdims=True)
    return (x - mu) / xp.sqrt(x.var(axis=-1, keepdims=True) + eps) * _f64(gamma) + _f64(beta)


def _affine_ref(layout, x, scale, shift):
    return _f64(x) * _bcast(layout, _f64(scale)) + _bcast(layout, _f64(shift))


REFERENCES = {
    "add": lambda a, b, out=None, **_: _f64(a) + _f64(b),
    "scale": lambda x, out=None, s=3.0, **_: float(x.dtype.type(s)) * _f64(x),  # s as the kernel sees it
    "relu": lambda x, out=None, **_: array_module(x).maximum(_f64(x), 0.0),
    "gelu": lambda x, out=None, **_: gelu_ref(array_module(x), x),
    "batchnorm": lambda x, scale, shift, out=None, **_: _affine_ref("NCHW", x, scale, shift),
    "batchnorm_nhwc": lambda x, scale, shift, out=None, **_: _affine_ref("NHWC", x, scale, shift),
    "softmax": lambda x, out=None, **_: softmax_ref(array_module(x), x),
    "layernorm": lambda x, gamma, beta, out=None, eps=EPS, **_: layernorm_ref(array_module(x), x, gamma, beta, eps),
    "bias_gelu_add": lambda x, bias, res, out=None, **_: gelu_ref(array_module(x), _f64(x) + _f64(bias)) + _f64(res),
    "bn_add_relu": lambda x, scale, shift, res, out=None, **_: array_module(x).maximum(
        _affine_ref("NCHW", x, scale, shift) + _f64(res), 0.0
    ),
}


# ---- argument checks and inputs --------------------------------------------------------------------

# op -> (array roles, rank of x (None: any), shape form of inputs())
ROLES = {
    "add": (("a", "b"), None, "numel"),
    "scale": (("x",), None, "numel"),
    "relu": (("x",), None, "numel"),
    "gelu": (("x",), None, "numel"),
    "batchnorm": (("x", "scale", "shift"), 4, "nchw"),
    "batchnorm_nhwc": (("x", "scale", "shift"), 4, "nhwc"),
    "softmax": (("x",), None, "rows"),
    "layernorm": (("x", "gamma", "beta"), None, "rows"),
    "bias_gelu_add": (("x", "bias", "res"), None, "rows"),
    "bn_add_relu": (("x", "scale", "shift", "res"), 4, "nchw"),
}


def _param_len(op, x):
    """Length of the per-channel (or per-column) parameter vectors of ``op`` on ``x``."""
    if op in ("batchnorm", "bn_add_relu"):
        return x.shape[1]
    if op == "batchnorm_nhwc":
        return x.shape[3]
    return x.shape[-1]


def check_args(name, op, arrays, dtypes) -> None:
    roles, rank, _ = ROLES[op]
    if len(arrays) != len(roles) + 1:
        raise RooflabError(f"{name}: takes {', '.join(roles)}, out ({len(roles) + 1} arrays), got {len(arrays)}")
    x = require(name, arrays[0], roles[0], dtype=dtypes, ndim=rank)
    if x.size == 0 or x.ndim == 0:
        raise RooflabError(f"{name}: {roles[0]} must be a non-empty array with at least one dimension")
    for role, a in zip(roles[1:] + ("out",), arrays[1:]):
        if role in ("b", "res", "out"):
            require(name, a, role, dtype=x.dtype, shape=x.shape)
        else:
            require(name, a, role, dtype=x.dtype, shape=(_param_len(op, x),))


def _shape_of(name, form, size, layout=None):
    def dims(fields):
        if not isinstance(size, dict) or any(f not in size for f in fields):
            raise RooflabError(f"{name}: size must be a shape dict with {', '.join(fields)}, got {size!r}")
        vals = tuple(size[f] for f in fields)
        for f, v in zip(fields, vals):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v <= 0:
                raise RooflabError(f"{name}: {f}={v!r} must be a positive integer")
        return tuple(int(v) for v in vals)

    if form == "numel":
        if isinstance(size, (int, np.integer)) and not isinstance(size, bool):
            size = {"numel": int(size)}
        return dims(("numel",))
    if form == "rows":
        return dims(("rows", "cols"))
    N, C, H, W = dims(("N", "C", "H", "W"))
    return (N, C, H, W) if form == "nchw" else (N, H, W, C)


def _inputs_fn(name, op, dtypes):
    roles, _, form = ROLES[op]

    def inputs(size=None, dtype="float32", seed=0, threads=None):
        dt = np.dtype(dtype or "float32")
        if dt.name not in dtypes:
            raise RooflabError(f"{name}: dtype {dt.name} is not supported", f"use {' or '.join(dtypes)}")
        shape = _shape_of(name, form, size if size is not None else DEFAULT_SIZE[form], op)
        cp = cupy()
        rng = cp.random.default_rng(seed)
        x = rng.standard_normal(shape, dtype=dt) * (3.0 if op == "softmax" else 1.0)
        arrays = [x.astype(dt, copy=False)]
        plen = _param_len(op, arrays[0])
        for role in roles[1:]:
            if role in ("b", "res"):
                arrays.append(rng.standard_normal(shape, dtype=dt))
            elif role in ("scale", "gamma"):
                arrays.append((rng.random(plen, dtype=dt) + 0.5).astype(dt, copy=False))
            else:  # shift, beta, bias
                arrays.append(rng.standard_normal(plen, dtype=dt))
        arrays.append(cp.empty(shape, dtype=dt))
        return tuple(arrays)

    return inputs


DEFAULT_SIZE = {
    "numel": {"numel": 10_001},  # not a multiple of 4: the scalar tail runs too
    "rows": {"rows": 37, "cols": 200},
    "nchw": {"N": 2, "C": 6, "H": 7, "W": 9},
    "nhwc": {"N": 2, "C": 8, "H": 7, "W": 9},
}


def _work_fn(op, key, kind):
    (read, written), fpe = BYTES_PER_ELEMENT[key], FLOPS_PER_ELEMENT[op]
    launches = LAUNCHES["cupy"].get(op, 1) if kind == "cupy" else LAUNCHES["unfused"] if kind == "unfused" else 1

    def work(*arrays, reps=1, **_):
        x = arrays[0]
        n, scale = x.size, x.dtype.itemsize / 4  # the table is for float32
        per_channel = sum(a.nbytes for role, a in zip(ROLES[op][0], arrays) if role not in ("a", "b", "x", "res"))
        return Work(
            flops=float(fpe * n),
            bytes_read=read * n * scale + per_channel,
            bytes_written=written * n * scale,
            launches=launches,
        ).scaled(reps)

    return work


def _make(number, technique, op, impl, description, dtypes=("float32",), work_key=None, kind="kernel"):
    name = f"cuda.elementwise.{op}.{number:02d}-{technique}"

    def kernel(*arrays, reps=1, threads=None, **params):
        check_args(name, op, arrays, dtypes)
        for _ in range(int(reps)):
            impl(*arrays, **params)
        return arrays[-1]

    defaults = {"s": 3.0} if op == "scale" else {"eps": EPS} if op == "layernorm" else {}
    register(
        Variant(
            name=name,
            family="elementwise",
            device="cuda",
            number=number,
            description=description,
            kernel=kernel,
            reference=REFERENCES[op],
            work=_work_fn(op, work_key or op, kind),
            inputs=_inputs_fn(name, op, dtypes),
            defaults=defaults,
            result_dtype=lambda *a, **k: a[0].dtype,
            op=op,
            dtypes=dtypes,
        )
    )
    return name


LIB = ("float32", "float64")
SINGLE = [
    # op, technique suffix, cupy impl, own impl, what the own kernel does
    ("add", "add", _c_add, _k_add, "y = a + b, float4 grid-stride"),
    ("scale", "scale", _c_scale, _k_scale, "y = s x, float4 grid-stride"),
    ("relu", "relu", _c_relu, _k_relu, "y = max(x, 0), float4 grid-stride"),
    ("gelu", "gelu", _c_gelu, _k_gelu, "tanh-GELU in one pass (x sigmoid(2z): no cancellation)"),
    ("batchnorm", "batchnorm", _c_affine("NCHW"), _k_affine("NCHW"), "y = x scale[c] + shift[c], NCHW"),
    ("batchnorm_nhwc", "batchnorm-nhwc", _c_affine("NHWC"), _k_affine("NHWC"), "y = x scale[c] + shift[c], NHWC"),
    ("softmax", "softmax", _c_softmax, _k_softmax, "row softmax, one warp (block) per row, online max/sum"),
    ("layernorm", "layernorm", _c_layernorm, _k_layernorm, "layer norm, one warp (block) per row, shifted sums"),
]
VARIANTS: dict = {}  # (op, "cupy" | "kernel" | "unfused" | "fused") -> name
for _op, _tech, _lib, _own, _what in SINGLE:
    VARIANTS[_op, "cupy"] = _make(0, "cupy", _op, _lib, f"cupy ({_tech}, numpy formula)", LIB, kind="cupy")
    VARIANTS[_op, "kernel"] = _make(1, "kernel", _op, _own, _what)
for _op, _tech, _lib, _unfused, _fused in (
    ("bias_gelu_add", "bias-gelu-add", _c_bgr, _k_bgr_unfused, _k_bgr_fused),
    ("bn_add_relu", "bn-add-relu", _c_bar, _k_bar_unfused, _k_bar_fused),
):
    VARIANTS[_op, "cupy"] = _make(0, "cupy", _op, _lib, f"cupy ops ({_tech})", LIB, kind="cupy")
    VARIANTS[_op, "unfused"] = _make(
        1,
        "kernel-unfused",
        _op,
        _unfused,
        "three rooflab kernels, intermediates in memory (28 B/elem)",
        work_key=f"{_op}/unfused",
        kind="unfused",
    )
    VARIANTS[_op, "fused"] = _make(2, "kernel-fused", _op, _fused, "one fused kernel (12 B/elem)")


# ---- the suite -------------------------------------------------------------------------------------

# ResNet-50 batch-norm shapes (N=32): every stage's width at its resolution
RESNET_BN = [(64, 112), (256, 56), (512, 28), (1024, 14), (2048, 7)]


def cases(quick: bool, threads=None) -> list[Case]:
    """DRAM-sized arrays (256 MiB per array, 5x an H200's 50 MiB L2; 128 MiB quick), transformer
    and ResNet shapes, a small size where launch overhead shows, both layouts of batch norm, both
    chains fused and unfused."""
    big = 1 << 25 if quick else 1 << 26  # float32 elements per array
    small = 1 << 12
    out = []

    def add(op, size, label, kinds=("cupy", "kernel"), meta=None):
        for kind in kinds:
            out.append(
                Case(
                    variant=VARIANTS[op, kind],
                    size=size,
                    dtype="float32",
                    threads=0,
                    label=f"{label} {kind}",
                    meta={"op": op, "version": kind, **(meta or {})},
                )
            )

    for op in ("add", "scale", "relu", "gelu"):
        add(op, {"numel": big}, f"{op} {big >> 20}M")
        if not quick:
            add(op, {"numel": small}, f"{op} {small}")
    bn = RESNET_BN[1:2] if quick else RESNET_BN
    for C, H in bn:
        for layout in ("batchnorm", "batchnorm_nhwc"):
            add(layout, {"N": 32, "C": C, "H": H, "W": H}, f"{layout} 32x{C}x{H}x{H}")
    rows_shapes = [(12 * 128 * 8, 128), (12 * 512 * 8, 512), (12 * 1024, 1024), (4096, 4096)]  # BERT, GPT-2, LLM
    for rows, cols in rows_shapes[1:3] if quick else rows_shapes:
        add("softmax", {"rows": rows, "cols": cols}, f"softmax {rows}x{cols}")
    for rows, cols in [(128 * 64, 768), (1024 * 8, 1600), (4096, 8192)][: 2 if quick else 3]:
        add("layernorm", {"rows": rows, "cols": cols}, f"layernorm {rows}x{cols}")
    rows = 4096 if quick else 16384
    ratio = sum(BYTES_PER_ELEMENT["bias_gelu_add/unfused"]) / sum(BYTES_PER_ELEMENT["bias_gelu_add"])
    add(
        "bias_gelu_add",
        {"rows": rows, "cols": 3072},
        f"bias+gelu+residual {rows}x3072",
        ("cupy", "unfused", "fused"),
        {"bytes_ratio_unfused_over_fused": ratio},
    )
    add(
        "bn_add_relu",
        {"N": 32, "C": 256, "H": 56, "W": 56},
        "bn+add+relu 32x256x56x56",
        ("cupy", "unfused", "fused"),
        {"bytes_ratio_unfused_over_fused": ratio},
    )
    return out
