"""Family ``conv`` (2-D convolution, the model op "conv2d"): what the CPU and CUDA variants share.

What it measures: y[n,k,p,q] = sum_{c,r,s} x[n, g*C/g + c, p*sh - ph + r, q*sw - pw + s] * w[k, c, r, s]
(cross-correlation, as every framework), by four algorithms: direct (naive, register-blocked,
depthwise), im2col + GEMM, Winograd F(2x2,3x3) / F(4x4,3x3) and FFT. Layout NCHW, weights always
(K, C/groups, R, S) (OIHW); variants that also take NHWC say so and then read x as (N, H, W, C) and
return y as (N, P, Q, K).

This module holds: argument validation (one message per constraint, naming the variant), the float64
reference, declared work, input builders, the shapes (ResNet-50 convs, MobileNetV2 depthwise, a
kernel-size sweep) and the suite's cases. The variants are in cpu.py (numba, kernels/cpu/conv.py,
winograd.py, fft_conv.py) and cuda.py.

Work. ``flops`` is always the nominal 2*N*K*P*Q*(C/groups)*R*S (what PyTorch, cuDNN users and the
model-op catalog count; "effective" rate); ``algorithm_flops`` is the arithmetic the algorithm really
does (the rate the hardware sees): Winograd = alpha^2 batched-GEMM multiplies + input and output
transforms (the filter transform U = G g G^T is precomputed outside the timed call and not counted);
FFT = 2.5 n log2 n per real n-point 2-D transform (half a complex one's 5 n log2 n) for the input
and output planes + 8 FLOP per complex multiply-add of the channel contraction; direct on padded rows
counts the junk columns it computes. Bytes are the op's compulsory traffic (x, w, y once each).

Napkin: ResNet-50 layer1 3x3, 64 -> 64 at 56x56, batch 8: 1.85 GFLOP over 1.6 + 0.15 + 6.4 MB =
~230 FLOP/B, far right of any CPU ridge; at 112 GFLOP/s (Zen 4: 2 x 256-bit FMA/cycle at 3.5 GHz)
that is 16.5 ms. MobileNetV2 depthwise 3x3 144@56x56, batch 1: 8.1 MFLOP over 3.6 MB = 2.25 FLOP/B,
bandwidth-bound wherever its 3.6 MB live (L3 here).

Tolerances (rooflab/verify.py rows "<dtype>/conv", "<dtype>/conv-winograd-f4x4"): an output element
is a sum of n = C/g*R*S products of unit-scale terms, so its rounding error is absolute, ~eps*sqrt(n)
times the output's scale, however close to 0 the element itself is; the inputs built here make the
outputs unit-variance (x ~ N(0,1), w ~ N(0, 1/n)), and the rows' atol is set on that scale.

Run: ``rooflab run --suite conv`` (cases(quick, threads) below), or python -c
"import rooflab; v = rooflab.get_variant('cpu.conv.02-direct-blocked-simd'); print(v(*v.inputs({...})))".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...errors import RooflabError
from ...memory import aligned_array
from ...registry import Case
from ...work import Work

LAYOUTS = ("NCHW", "NHWC")
FAMILY = "conv"

# ---- argument validation -------------------------------------------------------------------------


def pair(v, what: str, variant: str) -> tuple[int, int]:
    """An int or a pair of ints (h, w) as a pair; anything else is refused by name."""
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return int(v), int(v)
    if isinstance(v, (tuple, list)) and len(v) == 2 and all(isinstance(t, (int, np.integer)) for t in v):
        return int(v[0]), int(v[1])
    raise RooflabError(f"{variant}: {what}={v!r} must be an int or a pair of ints (h, w)")


_FLOATS = (np.dtype("float32"), np.dtype("float64"))


_CHECKED: dict = {}  # conv_shape's answers by everything they depend on (validation: ~4 us a call)


def conv_shape(x, w, stride=1, pad=0, groups=1, layout="NCHW", variant: str = "conv") -> dict:
    """Validate the arguments of one convolution; returns its shape dict (workloads/ops.py fields).

    Every constraint has its own message naming the variant: 4-D arrays, float dtypes that agree,
    C-contiguous, positive sizes, channels divisible by groups and matching the weights, stride >= 1,
    0 <= pad < filter size, a filter that fits the padded input. Accepted argument sets are
    remembered by the array types, shapes, dtypes and contiguity plus the scalars (a copy of the
    dict is returned); a refused one is checked again each call, so it raises each call."""
    try:
        key = (
            type(x), getattr(x, "shape", None), getattr(x, "dtype", None), _contiguous(x),
            type(w), getattr(w, "shape", None), getattr(w, "dtype", None), _contiguous(w),
            _typed(stride), _typed(pad), _typed(groups), layout, variant,
        )  # fmt: skip
        hit = _CHECKED.get(key)
    except TypeError:  # an unhashable argument (a list stride): validate without remembering
        key, hit = None, None
    if hit is not None:
        return dict(hit)
    s = _validate(x, w, stride, pad, groups, layout, variant)
    if key is not None:
        if len(_CHECKED) > 4096:
            _CHECKED.clear()
        _CHECKED[key] = dict(s)
    return s


def _typed(v):
    """A scalar or pair as a key that tells 1 from 1.0 and True (equal, and equal hashes, in Python)."""
    if isinstance(v, (tuple, list)):
        return type(v), tuple((type(t), t) for t in v)
    return type(v), v


def _contiguous(a) -> bool | None:
    flags = getattr(a, "flags", None)
    return None if flags is None else bool(flags.c_contiguous)


def _validate(x, w, stride, pad, groups, layout, variant) -> dict:
    """conv_shape's checks, every call."""
    if layout not in LAYOUTS:
        raise RooflabError(f"{variant}: layout {layout!r} is not supported", f"use one of {', '.join(LAYOUTS)}")
    for name, a in (("x", x), ("w", w)):
        if not isinstance(a, np.ndarray) and not hasattr(a, "__cuda_array_interface__"):
            raise RooflabError(f"{variant}: {name} must be an array, got {type(a).__name__}")
        if a.ndim != 4:
            want = f"{layout} (N, C, H, W)" if name == "x" and layout == "NCHW" else "4-D"
            want = "NHWC (N, H, W, C)" if name == "x" and layout == "NHWC" else want
            want = "(K, C/groups, R, S)" if name == "w" else want
            raise RooflabError(f"{variant}: {name} must be {want}, got {a.ndim}-D shape {tuple(a.shape)}")
        if a.dtype not in _FLOATS:  # (not dtype.name: ~3 us a call, a third of a 7x7 depthwise)
            raise RooflabError(f"{variant}: {name} has dtype {a.dtype}; conv kernels take float32 or float64")
        if not a.flags.c_contiguous:
            raise RooflabError(f"{variant}: {name} must be C-contiguous", f"pass np.ascontiguousarray({name})")
    if x.dtype != w.dtype:
        raise RooflabError(f"{variant}: x is {x.dtype} but w is {w.dtype}", "give both the same dtype")
    if layout == "NCHW":
        N, C, H, W = (int(t) for t in x.shape)
    else:
        N, H, W, C = (int(t) for t in x.shape)
    K, Cg, R, S = (int(t) for t in w.shape)
    sizes = {"N": N, "C": C, "H": H, "W": W, "K": K, "C/groups": Cg, "R": R, "S": S}
    bad = [f"{k}={v}" for k, v in sizes.items() if v < 1]
    if bad:
        raise RooflabError(f"{variant}: sizes must be positive, got {', '.join(bad)}")
    if isinstance(groups, bool) or not isinstance(groups, (int, np.integer)) or groups < 1:
        raise RooflabError(f"{variant}: groups={groups!r} must be a positive integer")
    g = int(groups)
    if C % g:
        raise RooflabError(f"{variant}: C={C} input channels are not divisible by groups={g}")
    if K % g:
        raise RooflabError(f"{variant}: K={K} output channels are not divisible by groups={g}")
    if Cg * g != C:
        raise RooflabError(
            f"{variant}: weights expect C/groups={Cg} channels per group but the input has C={C} = {C // g} x groups={g}",
            "weights are (K, C/groups, R, S)",
        )
    sh, sw = pair(stride, "stride", variant)
    ph, pw = pair(pad, "pad", variant)
    if sh < 1 or sw < 1:
        raise RooflabError(f"{variant}: stride=({sh}, {sw}) must be at least 1")
    if ph < 0 or pw < 0:
        raise RooflabError(f"{variant}: pad=({ph}, {pw}) must not be negative")
    if ph >= R or pw >= S:
        raise RooflabError(
            f"{variant}: pad=({ph}, {pw}) must be smaller than the {R}x{S} filter "
            "(a larger pad makes border outputs that see only padding)"
        )
    P = (H + 2 * ph - R) // sh + 1
    Q = (W + 2 * pw - S) // sw + 1
    if H + 2 * ph < R or W + 2 * pw < S:
        raise RooflabError(f"{variant}: the {R}x{S} filter does not fit the padded {H + 2 * ph}x{W + 2 * pw} input")
    return {
        "N": N,
        "C": C,
        "H": H,
        "W": W,
        "K": K,
        "R": R,
        "S": S,
        "P": P,
        "Q": Q,
        "stride_h": sh,
        "stride_w": sw,
        "pad_h": ph,
        "pad_w": pw,
        "groups": g,
        "layout": layout,
    }


def normalize_shape(size: dict) -> dict:
    """An op shape dict (workloads/ops.py fields; an op dict with "shape" works too) with P, Q, defaults."""
    from ...workloads.ops import normalize

    if isinstance(size, dict) and "shape" in size:
        size = size["shape"]
    if not isinstance(size, dict):
        raise RooflabError(f"conv: size must be a shape dict with N C H W K R S, got {size!r}")
    layout = size.get("layout", "NCHW")
    shape = {k: v for k, v in size.items() if k not in ("layout", "name")}
    out = normalize({"kind": "conv2d", "shape": shape, "name": size.get("name", "conv")})["shape"]
    for k in ("N", "C", "H", "W", "K", "R", "S"):
        if out[k] < 1:
            raise RooflabError(f"conv: shape field {k}={out[k]} must be positive")
    out["layout"] = layout
    return out


def params_for(shape: dict) -> dict:
    """The call parameters (stride, pad, groups, layout) of a shape dict."""
    s = normalize_shape(shape) if "P" not in shape else shape
    st = s["stride_h"] if s["stride_h"] == s["stride_w"] else (s["stride_h"], s["stride_w"])
    pd = s["pad_h"] if s["pad_h"] == s["pad_w"] else (s["pad_h"], s["pad_w"])
    return {"stride": st, "pad": pd, "groups": s["groups"], "layout": s.get("layout", "NCHW")}


# ---- inputs --------------------------------------------------------------------------------------


def make_inputs(size: dict, dtype=np.float32, seed: int = 0, threads=None):
    """(x, w) for one shape: x ~ N(0, 1), w ~ N(0, 1/(C/g*R*S)), so y has unit variance and every
    output depends on every element of its window (no zeros, no structure a wrong kernel could hit)."""
    s = normalize_shape(size)
    dt = np.dtype(dtype)
    if dt.name not in ("float32", "float64"):
        raise RooflabError(f"conv: dtype {dt.name} is not supported", "use float32 or float64")
    rng = np.random.default_rng(seed)
    N, C, H, W, K, R, S, g = (s[k] for k in ("N", "C", "H", "W", "K", "R", "S", "groups"))
    xshape = (N, C, H, W) if s["layout"] == "NCHW" else (N, H, W, C)
    x = aligned_array(xshape, dt)  # cache-line aligned, as the kernels' vector loads want
    x[...] = rng.standard_normal(xshape, dtype=np.float64 if dt == np.float64 else np.float32)
    n = C // g * R * S
    w = aligned_array((K, C // g, R, S), dt)
    w[...] = rng.standard_normal((K, C // g, R, S), dtype=np.float64) / math.sqrt(n)
    return x, w


# ---- the float64 reference -----------------------------------------------------------------------

REF_CHUNK_BYTES = 48 << 20  # windows copied per einsum call: ResNet batch 8 stays within ~100 MB


def windows(xpad, R, S, sh, sw, P, Q):
    """(N, C, P, Q, R, S) strided view of a padded NCHW array: no copy."""
    sN, sC, sH, sW = xpad.strides
    return np.lib.stride_tricks.as_strided(
        xpad, shape=xpad.shape[:2] + (P, Q, R, S), strides=(sN, sC, sH * sh, sW * sw, sH, sW), writeable=False
    )


def reference(x, w, stride=1, pad=0, groups=1, layout="NCHW", **_):
    """float64 direct convolution: einsum over sliding windows of the padded input, per image and
    in row chunks (the windows a chunk copies stay under REF_CHUNK_BYTES), per group."""
    s = conv_shape(x, w, stride, pad, groups, layout, variant="conv.reference")
    N, C, K, R, S, P, Q, g = (s[k] for k in ("N", "C", "K", "R", "S", "P", "Q", "groups"))
    sh, sw, ph, pw = s["stride_h"], s["stride_w"], s["pad_h"], s["pad_w"]
    x64 = np.asarray(x, dtype=np.float64)
    if layout == "NHWC":
        x64 = x64.transpose(0, 3, 1, 2)
    w64 = np.asarray(w, dtype=np.float64)
    Cg, Kg = C // g, K // g
    y = np.empty((N, K, P, Q))
    rows = max(1, min(P, REF_CHUNK_BYTES // max(1, Cg * Q * R * S * 8 * (1 if g == 1 else min(g, 64)))))
    for n in range(N):
        xp = np.pad(x64[n : n + 1], ((0, 0), (0, 0), (ph, ph), (pw, pw)))
        win = windows(xp, R, S, sh, sw, P, Q)[0]  # (C, P, Q, R, S)
        for p0 in range(0, P, rows):
            p1 = min(P, p0 + rows)
            if g == 1:
                y[n, :, p0:p1] = np.einsum("cpqrs,kcrs->kpq", win[:, p0:p1], w64, optimize=True)
            else:
                wg = w64.reshape(g, Kg, Cg, R, S)
                wing = win[:, p0:p1].reshape(g, Cg, p1 - p0, Q, R, S)
                y[n, :, p0:p1] = np.einsum("gcpqrs,gkcrs->gkpq", wing, wg).reshape(K, p1 - p0, Q)
    return y if layout == "NCHW" else np.ascontiguousarray(y.transpose(0, 2, 3, 1))


# ---- declared work -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConvWork(Work):
    """Work with the algorithm's real arithmetic beside the nominal FLOPs (``flops``)."""

    algorithm: str = "direct"
    algorithm_flops: float = 0.0

    def scaled(self, factor: float) -> ConvWork:
        return ConvWork(
            self.flops * factor,
            self.bytes_read * factor,
            self.bytes_written * factor,
            int(self.launches * factor),
            self.algorithm,
            self.algorithm_flops * factor,
        )


def nominal_flops(s: dict) -> float:
    return 2.0 * s["N"] * s["K"] * s["P"] * s["Q"] * (s["C"] // s["groups"]) * s["R"] * s["S"]


def min_bytes(s: dict, itemsize: int) -> tuple[float, float]:
    """(read, written): x and w once, y once."""
    read = s["N"] * s["C"] * s["H"] * s["W"] + s["K"] * (s["C"] // s["groups"]) * s["R"] * s["S"]
    return float(itemsize * read), float(itemsize * s["N"] * s["K"] * s["P"] * s["Q"])


def _row_flops(m) -> int:
    """FLOPs of y = M v by rows (FMA = 2): per row (nnz - 1) adds + one multiply per non-unit entry."""
    total = 0
    for row in np.asarray(m, dtype=np.float64):
        nz = row[row != 0]
        total += max(len(nz) - 1, 0) + int(np.count_nonzero(np.abs(nz) != 1))
    return total


# FLOPs per 1-D transform as the kernels evaluate them (common subexpressions shared; see
# kernels/cpu/winograd.py): F(2,3) input 4, output 4; F(4,3) input 22, output 13. A 2-D transform
# is alpha column transforms + (alpha or m) row transforms.
WINOGRAD_1D = {2: (4, 4), 4: (22, 13)}


def winograd_flops(s: dict, m: int) -> dict:
    a = m + 2
    tiles = s["N"] * math.ceil(s["P"] / m) * math.ceil(s["Q"] / m)
    Cg, K = s["C"] // s["groups"], s["K"]
    fin, fout = WINOGRAD_1D[m]
    gemm = 2.0 * a * a * tiles * Cg * K
    tin = tiles * s["C"] * 2 * a * fin
    tout = tiles * K * (a + m) * fout
    return {"tiles": tiles, "gemm": gemm, "input_transform": tin, "output_transform": tout, "total": gemm + tin + tout}


def fft_flops(s: dict, plan) -> dict:
    """plan: (L_h, L_w, tiles per image) from kernels/cpu/fft_conv.plan."""
    Lh, Lw, tiles = plan
    n = Lh * Lw
    bins = Lh * (Lw // 2 + 1)
    per = 2.5 * n * math.log2(n)
    planes_in = s["N"] * s["C"] * tiles
    planes_out = s["N"] * s["K"] * tiles
    Cg = s["C"] // s["groups"]
    pointwise = 8.0 * bins * s["N"] * tiles * Cg * s["K"]
    fwd, inv = per * planes_in, per * planes_out
    return {"forward": fwd, "inverse": inv, "pointwise": pointwise, "total": fwd + inv + pointwise}


def work_for(algorithm: str, real_flops=None):
    """A Variant.work callable: nominal FLOPs, compulsory bytes, and ``real_flops(shape)``."""

    def work(x, w, reps=1, stride=1, pad=0, groups=1, layout="NCHW", **_):
        s = conv_shape(x, w, stride, pad, groups, layout, variant=f"conv.{algorithm}")
        rd, wr = min_bytes(s, x.dtype.itemsize)
        nom = nominal_flops(s)
        real = nom if real_flops is None else real_flops(s)
        return ConvWork(nom, rd, wr, 1, algorithm, real).scaled(reps)

    return work


def result_key(dtype, algorithm: str = "conv") -> str:
    """The rooflab.verify.TOLERANCES row a conv result is checked with."""
    return f"{np.dtype(dtype).name}/{algorithm}"


# ---- shapes --------------------------------------------------------------------------------------


def shape(N, C, H, W, K, R, S=None, stride=1, pad=0, groups=1, name=None, layout="NCHW") -> dict:
    from ...workloads.ops import conv_shape

    s = normalize_shape(conv_shape(N, C, H, W, K, R, S, stride=stride, pad=pad, groups=groups))
    s["layout"] = layout
    if name:
        s["name"] = name
    return s


def resnet50_layers(batch: int) -> list[dict]:
    """The 23 distinct ResNet-50 v1.5 conv shapes (3x3, 1x1, 7x7 stem) from rooflab.workloads.catalog."""
    from ...workloads import catalog

    out = []
    for op in catalog.distinct(catalog.model_ops("resnet50", batch=batch)):
        if op["kind"] == "conv2d":
            s = dict(op["shape"], layout="NCHW", name=f"resnet50-b{batch} {op['name']}")
            s.pop("bias", None)
            out.append(s)
    return out


def resnet50_3x3_targets(batch: int = 8) -> list[dict]:
    """The three stride-1 3x3 layers the issue's targets are set on: 64@56, 128@28, 256@14."""
    return [
        shape(batch, c, h, h, c, 3, pad=1, name=f"resnet50-b{batch} 3x3 {c}@{h}x{h}")
        for c, h in ((64, 56), (128, 28), (256, 14))
    ]


# torchvision mobilenetv2.py inverted_residual_setting: t, c, n, s (first block t=1)
_MBV2 = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1))


def mobilenet_v2_depthwise(batch: int = 1, image: int = 224) -> list[dict]:
    """The 10 distinct depthwise 3x3 shapes of MobileNetV2 (17 layers), with their counts."""
    h, cin = image // 2, 32  # after the 3x3/2 stem
    seen: dict[tuple, dict] = {}
    for t, c, n, s in _MBV2:
        for i in range(n):
            stride = s if i == 0 else 1
            hid = cin * t
            key = (hid, h, stride)
            if key in seen:
                seen[key]["count"] += 1
            else:
                d = shape(batch, hid, h, h, hid, 3, stride=stride, pad=1, groups=hid)
                d["name"] = f"mobilenetv2-b{batch} dw {hid}@{h}x{h}/s{stride}"
                d["count"] = 1
                seen[key] = d
            h = (h + 2 - 3) // stride + 1
            cin = c
    return list(seen.values())


def kernel_sweep(Rs=(3, 5, 7, 9, 11, 13, 15), C=32, image=64, batch=1) -> list[dict]:
    """C=K=32 at 64x64, N=1, same padding: where FFT overtakes im2col and the direct conv."""
    return [shape(batch, C, image, image, C, r, pad=(r - 1) // 2, name=f"sweep {C}@{image} R={r}") for r in Rs]


# ---- the suite -----------------------------------------------------------------------------------


def applicable(variant_name: str, s: dict) -> str | None:
    """None when the variant runs this shape, else why not (the suite skips it; the kernel refuses)."""
    from ...registry import get_variant

    v = get_variant(variant_name)  # loads every family module, the CPU variants of conv included
    check = getattr(v.kernel, "supports", None)
    return check(s) if check else None


def _case(vname, s, threads, dtype="float32", timing=None, **meta) -> Case:
    short = vname.split(".")[-1]
    return Case(
        variant=vname,
        size={k: v for k, v in s.items() if k not in ("name", "count", "P", "Q")},
        dtype=dtype,
        threads=threads,
        params=params_for(s),
        label=f"{s.get('name', 'conv')} | {short}",
        meta={"layer": s.get("name"), "count": s.get("count", 1), **meta},
        timing=timing or {},
        footprint=footprint(s, dtype),
    )


def footprint(s: dict, dtype="float32") -> int:
    """Bytes alive at once for one case: x, w and y in the dtype, im2col's column matrix (the largest
    workspace of any algorithm here: C/g R S x N P Q), and the float64 reference's x, w and y."""
    s = normalize_shape(s)
    read, written = min_bytes(s, 1)
    cols = (s["C"] // s["groups"]) * s["R"] * s["S"] * s["N"] * s["P"] * s["Q"]
    return int(np.dtype(dtype).itemsize * (read + written + cols) + 8 * (read + written))


def _nhwc(shapes: list[dict]) -> list[dict]:
    """The same layers in NHWC (where depthwise vectorizes over channels: every tap one aligned line)."""
    return [dict(s, layout="NHWC", name=f"{s['name']} NHWC") for s in shapes]


def cases(quick: bool, threads: list[int]) -> list[Case]:
    """ResNet-50 convs at batch 1 and 8, MobileNetV2 depthwise at batch 1 (NCHW and NHWC), the
    kernel-size sweep;
    every applicable CPU variant per shape (naive direct only where it finishes in about a second).
    quick: one 3x3 layer at batch 1, two depthwise layers, R = 3 and 9 of the sweep."""
    from ...registry import list_variants

    names = [v.name for v in list_variants(family=FAMILY, device="cpu")]
    out: list[Case] = []
    if quick:
        groups = [
            ("resnet50", [resnet50_3x3_targets(1)[0]]),
            ("depthwise", mobilenet_v2_depthwise(1)[2:4]),
            ("depthwise", _nhwc(mobilenet_v2_depthwise(1)[2:4])),
            ("sweep", kernel_sweep((3, 9))),
        ]
    else:
        groups = [
            ("resnet50", resnet50_layers(1) + resnet50_layers(8)),
            ("depthwise", mobilenet_v2_depthwise(1)),
            ("depthwise", _nhwc(mobilenet_v2_depthwise(1))),
            ("sweep", kernel_sweep()),
        ]
    for t in threads:
        for set_name, shapes in groups:
            for s in shapes:
                for vname in names:
                    if applicable(vname, s) is not None:
                        continue
                    if vname.endswith("01-direct-naive") and nominal_flops(s) > 0.3e9 * t:
                        continue  # ~1 GFLOP/s: keep the rung where it runs in about a second
                    if vname.endswith("04-im2col-own-gemm") and s["groups"] > 1:
                        continue
                    out.append(_case(vname, s, t, suite=set_name))
    return out
