"""Family `elementwise`: memory-bound model ops, their fusion, and the dispatch floor of tiny ops.

What both devices share: shapes, float64 references, declared work, input builders, argument
validation, the suite's cases and the summary that compares records (cpu.py holds the variants).

Ops (``op`` = the model-op kind of rooflab/workloads/ops.py, variant 00 = the framework's numpy path):

  op         size (op shape dict)          arrays                     bytes (STREAM's mix)
  add        {"numel"} or {"shape"}        a, b, out                  3 n e        triad (2R1W)
  scale      idem                          x, out       (param s)     2 n e        copy  (1R1W)
  relu/gelu  idem                          x, out                     2 n e        copy
  batchnorm  {"N","C","H","W","layout"}    x, scale, shift, out       2 n e + 2 C e copy
  softmax    {"rows","cols"}               x, out                     2 n e        copy
  layernorm  {"rows","cols"}               x, gamma, beta, out        2 n e + 2 cols e copy

Declared bytes are what the op must move (each input read once, the output written once, STREAM's
convention: no write-allocate) for the dtype executed, the same for every variant of an op, so
GB/s compares implementations directly and a variant's GB/s over the STREAM kernel's (same mix,
same process, same threads) is its fraction of the DRAM roof.

Fusion (``chain``): bias + GELU + residual add (transformer MLP, (rows, cols)) and batch norm +
residual add + ReLU (the end of a ResNet block, relu(bn(x) + res), NCHW, as the CUDA chain).
Unfused = one kernel per op with the intermediate in memory: bias 2n + GELU 2n + add 3n (BN 2n +
add 3n + ReLU 2n) = 7n elements moved; fused = read x and res, write out = 3n.
Predicted speed-up when memory-bound: 7/3 = 2.33x (2.5x if write-allocate is counted: 10n vs 4n).

Latency floor (``tiny_chain``): N tiny ops on 8 elements, numpy op by op (N dispatches) versus one
numba call doing all N: the time of the first grows by one ufunc dispatch per op, the second not.
"""

from __future__ import annotations

import math

import numpy as np

from ...errors import RooflabError
from ...memory import aligned_empty
from ...registry import Case
from ...work import Work

FAMILY = "elementwise"
DTYPES = ("float32", "float64")
OPS = ("add", "scale", "relu", "gelu", "batchnorm", "softmax", "layernorm")
CHAINS = ("bias_gelu_add", "bn_add_relu")
STREAM_KERNEL = {  # the STREAM kernel with the same read/write mix (rooflab's cpu.stream.*)
    "add": "triad",
    "scale": "copy",
    "relu": "copy",
    "gelu": "copy",
    "batchnorm": "copy",
    "softmax": "copy",
    "layernorm": "copy",
    "bias_gelu_add": "triad",
    "bn_add_relu": "triad",
}
RW_MIX = {"copy": "1R1W", "triad": "2R1W"}
FLOPS_PER_ELEMENT = {  # rooflab/workloads/ops.py conventions (DeepSpeed's): activations 1, BN 2, LN 5
    "add": 1,
    "scale": 1,
    "relu": 1,
    "gelu": 1,
    "batchnorm": 2,
    "softmax": 1,
    "layernorm": 5,
    "bias_gelu_add": 3,
    "bn_add_relu": 4,
}
GELU_C = math.sqrt(2.0 / math.pi)
SCALE_S = 1.5
LN_EPS = 1e-5
CHAIN_OPS = ("multiply", "add", "maximum", "multiply")  # tiny_chain op k = CHAIN_OPS[k % 4]
CHAIN_CONSTS = (1.5, -0.25, 0.0, 0.5)
CHAIN_LENGTHS = (1, 2, 4, 8, 16)


# ---- validation ---------------------------------------------------------------------------------


_OK_TYPES = (np.float32, np.float64)


def check_arrays(variant: str, arrays: dict, *, contiguous: bool = False) -> np.dtype:
    """One dtype from DTYPES for all ``arrays`` (name -> array); C-contiguous if ``contiguous``.
    Raises RooflabError naming the variant and the constraint. (Cheap: dtype.name is Python code
    in numpy and costs microseconds, so it is only read to word an error.)"""
    dtype = None
    for name, a in arrays.items():
        dt = getattr(a, "dtype", None)
        if dt is None or not hasattr(a, "shape"):
            raise RooflabError(f"{variant}: {name} is {type(a).__name__}, not an array", "pass numpy arrays")
        if dt.type not in _OK_TYPES:
            raise RooflabError(
                f"{variant}: {name} has dtype {dt.name}; this kernel supports {' and '.join(DTYPES)}",
                f"pass {name}.astype(np.float32)",
            )
        if dtype is None:
            dtype = dt
        elif dt != dtype:
            raise RooflabError(
                f"{variant}: {name} is {dt.name} but the first array is {dtype.name}", "pass arrays of one dtype"
            )
        if contiguous and not a.flags.c_contiguous:
            raise RooflabError(f"{variant}: {name} is not C-contiguous", f"pass np.ascontiguousarray({name})")
    return dtype


def check_same_shape(variant: str, arrays: dict) -> tuple:
    shapes = {name: tuple(a.shape) for name, a in arrays.items()}
    first_name, first = next(iter(shapes.items()))
    for name, s in shapes.items():
        if s != first:
            raise RooflabError(
                f"{variant}: {name} has shape {s} but {first_name} has {first}", "pass arrays of the same shape"
            )
    return first


def check_vector(variant: str, name: str, v, length: int, what: str) -> None:
    if v.ndim != 1 or v.size != length:
        raise RooflabError(
            f"{variant}: {name} has shape {tuple(v.shape)}, expected ({length},) = {what}",
            f"pass a 1-D {name} of {length} elements",
        )


def channel_axis(variant: str, x, layout: str) -> int:
    if layout not in ("NCHW", "NHWC"):
        raise RooflabError(f"{variant}: unknown layout {layout!r}", "use layout='NCHW' or 'NHWC'")
    if x.ndim < 2:
        raise RooflabError(f"{variant}: x has {x.ndim} dimension(s); batch norm needs a channel axis", "pass N C ...")
    return 1 if layout == "NCHW" else x.ndim - 1


def row_view(variant: str, x):
    """(rows, cols) view of x over its last axis (rows = product of the others)."""
    if x.ndim == 0 or x.shape[-1] == 0:
        raise RooflabError(f"{variant}: x of shape {tuple(x.shape)} has no row to normalise", "pass x with cols >= 1")
    return x.reshape(-1, x.shape[-1])


# ---- shapes and inputs ------------------------------------------------------------------------------


def op_shape(kind: str, size) -> tuple:
    """Array shape of an op's main input from the family's ``size`` (int, op shape dict, or
    {"shape": [...]}: any shape)."""
    if isinstance(size, dict) and "shape" in size:
        return tuple(int(d) for d in size["shape"])
    if kind in ("softmax", "layernorm", "bias_gelu_add"):
        if isinstance(size, dict):
            return (int(size["rows"]), int(size["cols"]))
        return (1, int(size))
    if kind in ("batchnorm", "bn_add_relu"):
        N, C, H, W = (int(size[k]) for k in ("N", "C", "H", "W"))
        return (N, H, W, C) if layout_of(size) == "NHWC" else (N, C, H, W)
    if isinstance(size, dict):
        return (int(size["numel"]),)
    return (int(size),)


def layout_of(size) -> str:
    return size.get("layout", "NCHW") if isinstance(size, dict) else "NCHW"


def _array(shape, dtype, rng=None, scale=1.0, positive=False):
    """Cache-line aligned array; random normal (or uniform in [0.5, 1.5) if ``positive``), or zeros."""
    n = math.prod(shape)
    a = aligned_empty(n, dtype)
    if rng is None:
        a[:] = 0  # first touch outside the timed region
    elif positive:
        rng.random(out=a, dtype=a.dtype)
        a += 0.5
    else:
        rng.standard_normal(out=a, dtype=a.dtype)
        if scale != 1.0:
            a *= a.dtype.type(scale)
    return a.reshape(shape)


def make_inputs(kind: str, size, dtype=np.float32, seed: int = 0, scratch: bool = False) -> tuple:
    """Fresh random inputs of an op or chain, the output (zeros) last; ``scratch`` adds the
    intermediate buffer an unfused chain keeps in memory (before the output)."""
    dtype = np.dtype(dtype)
    if dtype.name not in DTYPES:
        raise RooflabError(f"elementwise {kind}: dtype {dtype.name} is not supported", f"use {' or '.join(DTYPES)}")
    rng = np.random.default_rng(seed)
    shape = op_shape(kind, size)
    if kind == "add":
        ins = (_array(shape, dtype, rng), _array(shape, dtype, rng))
    elif kind in ("scale", "relu"):
        ins = (_array(shape, dtype, rng),)
    elif kind == "gelu":
        ins = (_array(shape, dtype, rng, 2.0),)
    elif kind == "softmax":
        ins = (_array(shape, dtype, rng, 3.0),)
    elif kind == "layernorm":
        cols = shape[-1]
        ins = (_array(shape, dtype, rng), _array((cols,), dtype, rng, positive=True), _array((cols,), dtype, rng))
    elif kind in ("batchnorm", "bn_add_relu"):
        C = shape[1] if layout_of(size) == "NCHW" else shape[-1]
        ins = (_array(shape, dtype, rng), _array((C,), dtype, rng, positive=True), _array((C,), dtype, rng))
        if kind == "bn_add_relu":
            ins += (_array(shape, dtype, rng),)
    elif kind == "bias_gelu_add":
        ins = (_array(shape, dtype, rng, 2.0), _array((shape[-1],), dtype, rng), _array(shape, dtype, rng))
    elif kind == "tiny_chain":
        ins = (_array(shape, dtype, rng),)
    else:
        raise RooflabError(f"elementwise: unknown op {kind!r}", f"use one of {', '.join(OPS + CHAINS)}")
    if scratch:
        ins += (_array(shape, dtype),)
    return ins + (_array(shape, dtype),)


# ---- float64 references -------------------------------------------------------------------------

CHUNK = 1 << 20  # elements per reference chunk: DRAM-sized checks stay within ~50 MB of temporaries


def _f64(a):
    return np.asarray(a, dtype=np.float64)


def _chunked(fn, out_shape, *flat):
    """fn over chunks of same-shape arrays (flattened), into a float64 array of out_shape."""
    out = np.empty(math.prod(out_shape), dtype=np.float64)
    views = [np.asarray(a).reshape(-1) for a in flat]
    for lo in range(0, out.size, CHUNK):
        out[lo : lo + CHUNK] = fn(*(_f64(v[lo : lo + CHUNK]) for v in views))
    return out.reshape(out_shape)


def _rows_chunked(fn, x, *rest):
    """fn over blocks of rows of x (2-D view over the last axis), rest passed whole."""
    x2 = np.asarray(x).reshape(-1, x.shape[-1])
    out = np.empty(x2.shape, dtype=np.float64)
    step = max(1, CHUNK // max(1, x2.shape[1]))
    r64 = [_f64(r) for r in rest]
    for lo in range(0, x2.shape[0], step):
        out[lo : lo + step] = fn(_f64(x2[lo : lo + step]), *r64)
    return out.reshape(x.shape)


def gelu64(x):
    """The tanh form, as frameworks write it (BERT's erf form differs by < 1e-3)."""
    return 0.5 * x * (1.0 + np.tanh(GELU_C * (x + 0.044715 * x**3)))


def softmax64(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def layernorm64(x, g, b, eps=LN_EPS):
    mu = x.mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(x.var(axis=-1, keepdims=True) + eps) * g + b


def _bcast(v, x, layout):
    """Per-channel vector shaped to broadcast against x in ``layout``."""
    return v if layout == "NHWC" else v.reshape((-1,) + (1,) * (x.ndim - 2))


def reference(kind: str, *arrays, s=SCALE_S, eps=LN_EPS, layout="NCHW", n_ops=1, **_):
    """float64 expected output of an op or chain from its arrays (the trailing out and scratch
    arrays are ignored); computed before the kernel runs."""
    if kind == "add":
        a, b = arrays[:2]
        return _chunked(lambda u, v: u + v, a.shape, a, b)
    if kind == "scale":
        x = arrays[0]
        s64 = float(x.dtype.type(s))
        return _chunked(lambda u: s64 * u, x.shape, x)
    if kind == "relu":
        return _chunked(lambda u: np.maximum(u, 0.0), arrays[0].shape, arrays[0])
    if kind == "gelu":
        return _chunked(gelu64, arrays[0].shape, arrays[0])
    if kind == "softmax":
        return _rows_chunked(softmax64, arrays[0])
    if kind == "layernorm":
        x, g, b = arrays[:3]
        return _rows_chunked(lambda u, gg, bb: layernorm64(u, gg, bb, float(eps)), x, g, b)
    if kind == "batchnorm":
        x, sc, sh = arrays[:3]
        return _f64(x) * _bcast(_f64(sc), x, layout) + _bcast(_f64(sh), x, layout)
    if kind == "bn_add_relu":
        x, sc, sh, res = arrays[:4]
        y = _f64(x) * _bcast(_f64(sc), x, "NCHW") + _bcast(_f64(sh), x, "NCHW")
        return np.maximum(y + _f64(res), 0.0)
    if kind == "bias_gelu_add":
        x, b, res = arrays[:3]
        return _rows_chunked(lambda u, bb: gelu64(u + bb), x, b) + _f64(res)
    if kind == "tiny_chain":
        v = _f64(arrays[0]).copy()
        for k in range(int(n_ops)):
            v = getattr(np, CHAIN_OPS[k % 4])(v, CHAIN_CONSTS[k % 4])
        return v
    raise RooflabError(f"elementwise: unknown op {kind!r}")


# ---- declared work --------------------------------------------------------------------------------


def op_bytes(kind: str, shape: tuple, itemsize: int, layout: str = "NCHW") -> tuple[int, int]:
    """(bytes read, bytes written) the op must move: inputs once, output once."""
    n = math.prod(shape)
    if kind == "add":
        return 2 * n * itemsize, n * itemsize
    if kind in ("scale", "relu", "gelu", "softmax", "tiny_chain"):
        return n * itemsize, n * itemsize
    if kind == "layernorm":
        return (n + 2 * shape[-1]) * itemsize, n * itemsize
    if kind == "batchnorm":
        C = shape[1] if layout == "NCHW" else shape[-1]
        return (n + 2 * C) * itemsize, n * itemsize
    if kind == "bias_gelu_add":
        return (2 * n + shape[-1]) * itemsize, n * itemsize
    if kind == "bn_add_relu":
        return (2 * n + 2 * shape[1]) * itemsize, n * itemsize
    raise RooflabError(f"elementwise: unknown op {kind!r}")


def chain_bytes(kind: str, shape: tuple, itemsize: int, fused: bool) -> tuple[int, int]:
    """(read, written) of a chain: fused = one pass; unfused = the sum of its ops' minimum bytes,
    each intermediate written by one op and read back by the next."""
    if fused:
        return op_bytes(kind, shape, itemsize)
    n = math.prod(shape)
    params = shape[-1] if kind == "bias_gelu_add" else 2 * shape[1]
    # first op (bias add / batch norm): n + params in, n out; GELU / ReLU: n in, n out; add: 2n in, n out
    return (n + params + n + 2 * n) * itemsize, 3 * n * itemsize


def work(kind: str, main, reps: int = 1, layout: str = "NCHW", launches: int = 1, fused: bool | None = None) -> Work:
    shape, e = tuple(main.shape), main.dtype.itemsize
    if fused is None:
        r, w = op_bytes(kind, shape, e, layout)
    else:
        r, w = chain_bytes(kind, shape, e, fused)
    flops = FLOPS_PER_ELEMENT.get(kind, 1) * math.prod(shape)
    return Work(flops=flops * reps, bytes_read=r * reps, bytes_written=w * reps, launches=int(launches * reps))


# ---- the suite ------------------------------------------------------------------------------------


def _caches():
    """This host's one cache description with where DRAM starts, probed once (rooflab/cpu/caches.py)."""
    from ...cpu.caches import host_measured

    return host_measured()


def _dram_from() -> int:
    return _caches().dram_from()


MIN_DRAM_ARRAY = 64 << 20  # arrays smaller than this would not measure DRAM on any cache shipped today
KERNEL_ARRAYS = 4  # the most arrays one case's kernel touches (bias_gelu_add: x, bias, residual, out)
LIVE_ARRAYS = 6  # a case's arrays (up to 4: bias_gelu_add's x, bias, residual, out) + reference + temporaries


def dram_numel(dtype: str, dram_from: int | None = None, cap: int | None = None) -> int:
    """Elements per array so that each array reaches where DRAM starts on this machine (the DRAM
    probe's measurement, else STREAM's 4x the OS LLC: rooflab/cpu/caches.py), at most ``cap`` bytes
    (memory.array_cap: --max-working-set, a quick run's budget, free memory)."""
    d = dram_from or _dram_from()
    return int(min(d, cap or d) // np.dtype(dtype).itemsize)


# ResNet-50 activations (C, H, W) per stage, where its batch norms run
RESNET_STAGES = ((64, 112, 112), (256, 56, 56), (512, 28, 28), (1024, 14, 14), (2048, 7, 7))


def dram_sizes(dtype: str, dram_from: int | None = None, cap: int | None = None) -> dict:
    """Op shape dicts with every array >= where DRAM starts (transformer and ResNet-like shapes), at most ``cap``."""
    n = dram_numel(dtype, dram_from, cap)
    sizes = {kind: {"numel": n} for kind in ("add", "scale", "relu", "gelu")}
    sizes["softmax"] = {"rows": -(-n // 512), "cols": 512}  # BERT attention scores, seq 512
    sizes["layernorm"] = {"rows": -(-n // 768), "cols": 768}  # BERT-base hidden
    c, h, w = RESNET_STAGES[1]
    sizes["batchnorm"] = {"N": -(-n // (c * h * w)), "C": c, "H": h, "W": w}
    sizes["bias_gelu_add"] = {"rows": -(-n // 3072), "cols": 3072}  # BERT-base MLP intermediate
    sizes["bn_add_relu"] = dict(sizes["batchnorm"])
    return sizes


def _variants(kind: str, device: str = "cpu"):
    from ...registry import list_variants

    return [v for v in list_variants(family=FAMILY, device=device) if v.name.split(".")[2] == kind]


def cases(quick: bool, threads: list[int], device: str = "cpu") -> list[Case]:
    """The `elementwise` suite: every op variant at DRAM size next to the STREAM kernel with the
    same mix (same dtype, threads and elements per array), the two chains unfused and fused, batch
    norm in NCHW and NHWC at ResNet-50 shapes (batch 32), and the tiny-op chains (latency floor).

    --quick: float32, the largest thread count, softmax at seq 512 only, two layout stages."""
    threads = sorted(set(threads))
    if quick:
        threads = threads[-1:]
    dtypes = ("float32",) if quick else DTYPES
    from ...memory import array_cap, fmt_bytes, require_fits, working_set_limit

    d = _dram_from()
    cap = array_cap(LIVE_ARRAYS, quick)  # checked before anything is allocated, never OOM-killed
    big = max(min(d, cap), min(d, MIN_DRAM_ARRAY))  # smaller arrays would not be DRAM
    if working_set_limit() and KERNEL_ARRAYS * big > working_set_limit():
        raise RooflabError(
            f"--max-working-set {fmt_bytes(working_set_limit())} is below the {KERNEL_ARRAYS} x {fmt_bytes(big)} "
            "that DRAM-sized elementwise cases need",
            f"pass --max-working-set {-(-KERNEL_ARRAYS * big >> 20)}M or more",
        )
    require_fits(
        LIVE_ARRAYS * big,
        f"the elementwise suite's arrays ({LIVE_ARRAYS} x {fmt_bytes(big)})",
        hint="free memory (DRAM-sized cases need arrays of at least 64 MiB)",
    )
    out: list[Case] = []
    for dtype in dtypes:
        sizes = dram_sizes(dtype, d, cap)
        n = dram_numel(dtype, d, cap)
        for t in threads:
            group = f"dram/{dtype}/{t}T"
            for k in ("copy", "triad"):
                out.append(
                    Case(
                        f"{device}.stream.{k}",
                        n,
                        dtype,
                        t,
                        label=f"{group} stream {k}",
                        meta={"group": group, "stream_kernel": k, "rw_mix": RW_MIX[k], "role": "roof"},
                    )
                )
            for kind in OPS:
                for v in _variants(kind, device):
                    out.append(_op_case(v, kind, sizes[kind], dtype, t, group))
            if not quick:  # GPT-2 logits: rows longer than the cached block take the 2-read path
                for v in _variants("softmax", device):
                    size = {"rows": -(-n // 50257), "cols": 50257}
                    out.append(_op_case(v, "softmax", size, dtype, t, group, suffix=" vocab 50257"))
            for kind in CHAINS:
                shape = op_shape(kind, sizes[kind])
                e = np.dtype(dtype).itemsize
                bf, bu = sum(chain_bytes(kind, shape, e, True)), sum(chain_bytes(kind, shape, e, False))
                for v in _variants(kind, device):
                    fused = "fused" in v.name and "unfused" not in v.name
                    out.append(
                        Case(
                            v.name,
                            sizes[kind],
                            dtype,
                            t,
                            label=f"{group} {v.name}",
                            meta={
                                "group": group,
                                "chain": kind,
                                "fused": fused,
                                "bytes_fused": bf,
                                "bytes_unfused": bu,
                                "bytes_ratio": bu / bf,
                                "stream_kernel": STREAM_KERNEL[kind],
                                "rw_mix": RW_MIX[STREAM_KERNEL[kind]],
                            },
                        )
                    )
    out += layout_cases(quick, threads)
    out += latency_cases(quick)
    return out


def _op_case(v, kind, size, dtype, t, group, suffix=""):
    params = {"layout": layout_of(size)} if kind == "batchnorm" else {}
    k = STREAM_KERNEL[kind]
    return Case(
        v.name,
        size,
        dtype,
        t,
        params=params,
        label=f"{group} {v.name}{suffix}",
        meta={"group": group, "op": kind, "key": kind + suffix, "stream_kernel": k, "rw_mix": RW_MIX[k], "role": "op"},
    )


def layout_cases(quick: bool, threads: list[int], batch: int = 32, device: str = "cpu") -> list[Case]:
    """Batch norm (a channel-wise scale and shift) in NCHW and NHWC at ResNet-50 shapes."""
    stages = RESNET_STAGES[1::3] if quick else RESNET_STAGES
    out = []
    for t in sorted(set(threads))[-1:] if quick else sorted(set(threads)):
        for c, h, w in stages:
            for layout in ("NCHW", "NHWC"):
                size = {"N": batch, "C": c, "H": h, "W": w, "layout": layout}
                for v in _variants("batchnorm", device):
                    out.append(
                        Case(
                            v.name,
                            size,
                            "float32",
                            t,
                            params={"layout": layout},
                            label=f"layout {layout} {c}x{h}x{w} N={batch} {v.name}",
                            meta={"group": f"layout/{c}x{h}x{w}/{t}T", "layout": layout, "op": "batchnorm"},
                        )
                    )
    return out


def latency_cases(quick: bool, device: str = "cpu", lengths=None) -> list[Case]:
    """N tiny ops on 8 float64 elements, op by op and fused, N = 1, 2, 4, 8, 16 (or ``lengths``;
    1 thread): for the latency suite (timing: many calls per sample, like the dispatch ceilings)."""
    if lengths is None:
        lengths = CHAIN_LENGTHS[::2] if quick else CHAIN_LENGTHS
    out = []
    for n_ops in lengths:
        for v in _variants("tiny_chain", device):
            out.append(
                Case(
                    v.name,
                    {"numel": 8},
                    "float64",
                    1,
                    params={"n_ops": n_ops},
                    label=f"tiny chain N={n_ops} {v.name}",
                    meta={"group": "tiny_chain", "n_ops": n_ops, "fused": "fused" in v.name},
                    timing={"cv_limit": 0.15},
                )
            )
    return out


# ---- what the records say -------------------------------------------------------------------------


def _median_time(r):
    return r["time_s"]["median"] / max(int(r.get("reps", 1)), 1)


def summarize(records: list[dict]) -> dict:
    """Ratios from one run's records (status ok): each op variant's GB/s over its STREAM kernel's
    (same group), own variant over numpy per op, fused speed-up over unfused beside the bytes
    ratio, NCHW over NHWC, and the tiny-chain time per N."""
    ok = [r for r in records if r.get("status", "ok") == "ok" and r.get("time_s")]
    roofs = {(r["group"], r["stream_kernel"]): r for r in ok if r.get("role") == "roof"}
    vs_stream, vs_numpy, fusion, layouts, chain = [], [], [], [], []
    by_op: dict = {}
    for r in ok:
        if r.get("role") != "op":
            continue
        roof = roofs.get((r["group"], r["stream_kernel"]))
        if roof:
            vs_stream.append(
                {
                    "label": r["label"],
                    "gbps": r["gbps"]["median"],
                    "stream_kernel": r["stream_kernel"],
                    "stream_gbps": roof["gbps"]["median"],
                    "fraction": r["gbps"]["median"] / roof["gbps"]["median"],
                }
            )
        by_op.setdefault((r["group"], r["key"]), []).append(r)
    for (_group, op), rs in by_op.items():
        lib = [r for r in rs if ".00-" in r["variant"]]
        for r in rs:
            if lib and r is not lib[0]:
                vs_numpy.append(
                    {"label": r["label"], "op": op, "speedup_vs_numpy": _median_time(lib[0]) / _median_time(r)}
                )
    chains: dict = {}
    for r in ok:
        if r.get("chain"):
            chains.setdefault((r["group"], r["chain"]), []).append(r)
    for (group, name), rs in chains.items():
        fused = [r for r in rs if r["fused"]]
        for r in rs:
            if fused and not r["fused"]:
                sp = _median_time(r) / _median_time(fused[0])
                fusion.append(
                    {
                        "group": group,
                        "chain": name,
                        "unfused": r["variant"],
                        "fused": fused[0]["variant"],
                        "speedup": sp,
                        "bytes_ratio": r["bytes_ratio"],
                        "fraction_of_prediction": sp / r["bytes_ratio"],
                    }
                )
    lay: dict = {}
    for r in ok:
        if r.get("layout") and r.get("group", "").startswith("layout/"):
            lay.setdefault((r["group"], r["variant"]), {})[r["layout"]] = r
    for (group, variant), d in lay.items():
        if "NCHW" in d and "NHWC" in d:
            layouts.append(
                {
                    "group": group,
                    "variant": variant,
                    "nchw_gbps": d["NCHW"]["gbps"]["median"],
                    "nhwc_gbps": d["NHWC"]["gbps"]["median"],
                    "nhwc_over_nchw": _median_time(d["NCHW"]) / _median_time(d["NHWC"]),
                }
            )
    for r in ok:
        if r.get("group") == "tiny_chain":
            chain.append(
                {
                    "variant": r["variant"],
                    "n_ops": r["n_ops"],
                    "ns_per_chain": _median_time(r) * 1e9,
                    "fused": r["fused"],
                }
            )
    chain.sort(key=lambda c: (c["fused"], c["n_ops"]))
    return {"vs_stream": vs_stream, "vs_numpy": vs_numpy, "fusion": fusion, "layouts": layouts, "tiny_chain": chain}
