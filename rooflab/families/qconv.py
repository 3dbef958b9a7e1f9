"""Family `qconv`: the 8-bit convolution of a quantized graph (the model op "conv2d" at dtype int8:
QLinearConv, or a QDQ-wrapped Conv that onnxruntime fuses into one), beside onnxruntime's own
kernel on the same values as variant 0.

What it measures: y (uint8, NCHW) = clamp(rint(acc * m) + zy, 0, 255), acc[n,k,p,q] = sum over
the window of (x - zx) * w; x uint8 with zero point zx, w int8 (K, C/groups, R, S) symmetric, one
requantization multiplier m (x_scale * w_scale / y_scale) and output zero point zy.

  00-ort-qlinearconv  onnxruntime ``QLinearConv`` (MLAS; the filter a constant, prepacked)
  01-im2col-dpbusd    kernels/cpu/qconv.py: the patches written straight into the INT8 GEMM's packed
                      words, kernels/cpu/qgemm_i8.py's tile product, requantized and transposed to
                      NCHW in one pass (any groups but depthwise)
  02-depthwise        kernels/cpu/qconv.py: direct, per channel, int32 accumulators (groups = C = K)

Inputs: x uniform over 0..255 (zx = 77, so the zero point's term is checked), w uniform over
-64..63 (7 bits, onnxruntime's reduce_range: no vpmaddubsw pair saturates), m chosen from the
window size so the outputs spread ~48 codes around zy = 128 and ~1 % clamp at each end. Verified
against the float64 convolution of (x - zx) and w, requantized in float64: the float32 multiply and
the float64 one can round a tie one code apart (the ``uint8`` tolerance, 1 code); a dropped tap or
zero point moves codes by many (tests/test_qconv.py keeps such kernels).

Work: 2 N K P Q (C/g) R S integer ops (as the conv family counts FLOPs) over x and w read once and y
written once, 1 byte each: a ResNet-50 3x3 64 -> 64 at 56x56, batch 1, is 231 M ops over 0.24 MB.

Run: ``rooflab run --suite qconv``; `rooflab place` of a static-quantized graph executes its 8-bit
convs here.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import RooflabError
from ..kernels.cpu import qconv as QC
from ..kernels.cpu.simd_q import BITS as SIMD_BITS
from ..kernels.cpu.simd_q import DOT_PATH
from ..registry import Case, Variant, register
from ..threads import resolve_threads
from ..work import Work
from .conv import normalize_shape, pair
from .conv import reference as float_reference
from .qgemm import PerWeight
from .unit_peak import around

FAMILY = "qconv"
ZX, ZY = 77, 128  # the input and output zero points (any 0..255; not the codes' mean)
SPREAD = 48.0  # output codes per standard deviation of acc * m
# E[(x - zx)^2] E[w^2] for x uniform over 0..255 and w over -64..63: one product's mean square
TERM_MS = ((256**2 - 1) / 12 + (127.5 - ZX) ** 2) * ((128**2 - 1) / 12 + 0.25)


def multiplier(window: int) -> float:
    """m for a window of ``window`` = C/g R S products: acc's spread times m is SPREAD codes."""
    return SPREAD / math.sqrt(TERM_MS * max(window, 1))


def make_inputs(size: dict, dtype=None, seed: int = 0, threads=None) -> tuple:
    """(x uint8 NCHW, w int8 (K, C/g, R, S), q = [zx, m, zy] float64) for one conv shape."""
    s = normalize_shape(size)
    if s.get("layout", "NCHW") != "NCHW":
        raise RooflabError(f"qconv: layout {s['layout']} is not supported", "8-bit convs run NCHW")
    rng = np.random.default_rng(seed)
    N, C, H, W, K, R, S, g = (s[k] for k in ("N", "C", "H", "W", "K", "R", "S", "groups"))
    x = rng.integers(0, 256, (N, C, H, W), dtype=np.uint8)
    w = rng.integers(-64, 64, (K, C // g, R, S), dtype=np.int8)
    return x, w, np.array([ZX, multiplier(C // g * R * S), ZY], np.float64)


def _check(name, x, w, q, stride, pad, groups) -> dict:
    """The conv's shape (P, Q, strides, pads), or one line naming what is wrong."""
    for what, a, dt in (("x", x, np.uint8), ("w", w, np.int8)):
        if not isinstance(a, np.ndarray) or a.dtype != dt or a.ndim != 4 or not a.flags.c_contiguous:
            raise RooflabError(
                f"{name}: {what} must be a C-contiguous 4-D {np.dtype(dt).name} array, got "
                f"{getattr(a, 'dtype', type(a).__name__)} {getattr(a, 'shape', '')}"
            )
    if np.shape(q) != (3,):
        raise RooflabError(f"{name}: q must be [zx, m, zy], got {q!r}")
    N, C, H, W = x.shape
    K, Cg, R, S = w.shape
    g = int(groups)
    if g < 1 or C % g or K % g or Cg * g != C:
        raise RooflabError(f"{name}: x has {C} channels, w {K} x {Cg} per group: groups={groups} does not fit")
    (sh, sw), (ph, pw) = pair(stride, "stride", name), pair(pad, "pad", name)
    P, Q = (H + 2 * ph - R) // sh + 1, (W + 2 * pw - S) // sw + 1
    if min(sh, sw) < 1 or min(ph, pw) < 0 or ph >= R or pw >= S or P < 1 or Q < 1:
        raise RooflabError(f"{name}: stride {stride} and pad {pad} do not fit a {R}x{S} filter on {H}x{W}")
    return {"N": N, "C": C, "K": K, "R": R, "S": S, "P": P, "Q": Q, "g": g, "stride": (sh, sw), "pad": (ph, pw)}


def reference(x, w, q, stride=1, pad=0, groups=1, **_) -> np.ndarray:
    """float64: the convolution of (x - zx) and w, times m, rounded half to even, + zy, clamped."""
    zx, m, zy = (float(v) for v in q)
    acc = float_reference(x.astype(np.float64) - zx, w.astype(np.float64), stride, pad, groups)
    return np.clip(np.rint(acc * m) + zy, 0, 255)


def work(x, w, q, reps=1, stride=1, pad=0, groups=1, **_) -> Work:
    s = _check("qconv.work", x, w, q, stride, pad, groups)
    ops = 2.0 * s["N"] * s["K"] * s["P"] * s["Q"] * (s["C"] // s["g"]) * s["R"] * s["S"]
    written = s["N"] * s["K"] * s["P"] * s["Q"]
    return Work(flops=ops, bytes_read=x.nbytes + w.nbytes, bytes_written=written).scaled(reps)


# ---- the variants --------------------------------------------------------------------------------


def _qlinearconv_model(x_shape, w, q, stride, pad, groups) -> bytes:
    """One QLinearConv node on the constant filter w: x_scale 1, w_scale m, y_scale 1 (so the
    multiplier is m), zero points zx (x), 0 (w, symmetric) and zy (y)."""
    from onnx import TensorProto, helper, numpy_helper

    zx, m, zy = q
    (sh, sw), (ph, pw) = stride, pad
    node = helper.make_node(
        "QLinearConv",
        ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"],
        ["y"],
        pads=[ph, pw, ph, pw],
        strides=[sh, sw],
        group=int(groups),
        kernel_shape=list(w.shape[2:]),
    )
    inits = [
        numpy_helper.from_array(np.array(1.0, np.float32), "xs"),
        numpy_helper.from_array(np.array(int(zx), np.uint8), "xz"),
        numpy_helper.from_array(w, "w"),
        numpy_helper.from_array(np.array(m, np.float32), "ws"),
        numpy_helper.from_array(np.array(0, np.int8), "wz"),
        numpy_helper.from_array(np.array(1.0, np.float32), "ys"),
        numpy_helper.from_array(np.array(int(zy), np.uint8), "yz"),
    ]
    xi = helper.make_tensor_value_info("x", TensorProto.UINT8, list(x_shape))
    yo = helper.make_tensor_value_info("y", TensorProto.UINT8, None)
    g = helper.make_graph([node], "qconv", [xi], [yo], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def _session(w, x_shape, q, stride, pad, groups, threads):
    from ..ort_session import weight_session

    model = _qlinearconv_model(x_shape, w, q, stride, pad, groups)
    return weight_session(model, threads, "variant 0 of qconv")


_ort_session = PerWeight(_session)
_packed = PerWeight(lambda w, zx, groups: QC.pack_weights(w, zx, groups))


def _ort(x, w, q, reps=1, threads=None, stride=1, pad=0, groups=1):
    s = _check("cpu.qconv.00-ort-qlinearconv", x, w, q, stride, pad, groups)
    sess = _ort_session(w, x.shape, tuple(float(v) for v in q), s["stride"], s["pad"], s["g"], resolve_threads(threads))
    y = None
    for _ in range(int(reps)):
        y = sess.run(None, {"x": x})[0]
    return y


def _im2col(x, w, q, reps=1, threads=None, stride=1, pad=0, groups=1):
    name = "cpu.qconv.01-im2col-dpbusd"
    s = _check(name, x, w, q, stride, pad, groups)
    if s["C"] // s["g"] == 1 and s["g"] > 1:
        raise RooflabError(f"{name}: a depthwise conv (one channel per group) is 02-depthwise's")
    zx, m, zy = int(q[0]), float(q[1]), float(q[2])
    packed = _packed(w, zx, s["g"])
    y = np.empty((s["N"], s["K"], s["P"], s["Q"]), np.uint8)
    for _ in range(int(reps)):
        QC.conv_gemm(x, packed, s["R"], s["S"], zx, m, zy, s["stride"], s["pad"], s["g"], y, resolve_threads(threads))
    return y


def _depthwise(x, w, q, reps=1, threads=None, stride=1, pad=0, groups=1):
    name = "cpu.qconv.02-depthwise"
    s = _check(name, x, w, q, stride, pad, groups)
    if not (s["g"] == s["C"] == s["K"]):
        raise RooflabError(f"{name}: takes depthwise convs only (groups = C = K), got groups={s['g']}")
    if s["R"] * s["S"] > QC.EXACT_TAPS:
        raise RooflabError(
            f"{name}: a {s['R']}x{s['S']} filter's float32 sums are not exact (at most {QC.EXACT_TAPS} taps)"
        )
    zx, m, zy = int(q[0]), float(q[1]), float(q[2])
    y = np.empty((s["N"], s["K"], s["P"], s["Q"]), np.uint8)
    (sh, sw), (ph, pw) = s["stride"], s["pad"]
    for _ in range(int(reps)):
        QC.depthwise(x, w, zx, m, zy, sh, sw, ph, pw, y, max(1, min(resolve_threads(threads), s["N"] * s["C"])))
    return y


# the lowprec unit whose peak the GEMM rung runs on (as qgemm's 01: the AVX2 sequence at 512 bits has
# no peak kernel of its width)
UNIT = {"vnni-512": "int8-vnni", "avx2": "int8-avx2" if SIMD_BITS == 256 else None}.get(DOT_PATH)

for _name, _num, _kernel, _desc, _unit in (
    ("00-ort-qlinearconv", 0, _ort, "onnxruntime QLinearConv (MLAS, the filter prepacked)", None),
    (
        "01-im2col-dpbusd",
        1,
        _im2col,
        f"patches written into packed INT8 GEMM words, {DOT_PATH} dot steps, requantized to NCHW in one pass",
        UNIT,
    ),
    ("02-depthwise", 2, _depthwise, "depthwise direct: float32 planes, 4 rows x a vector per FMA chain (exact)", None),
):
    register(
        Variant(
            name=f"cpu.{FAMILY}.{_name}",
            family=FAMILY,
            device="cpu",
            number=_num,
            description=_desc,
            kernel=_kernel,
            reference=reference,
            work=work,
            inputs=make_inputs,
            defaults={"stride": 1, "pad": 0, "groups": 1},
            result_dtype=lambda *_, **__: "uint8",
            op="conv2d",
            dtypes=("int8",),
            roles=("threaded",),
        )
    )


# ---- the suite -----------------------------------------------------------------------------------

SHAPES = (  # (label, shape, in the quick run)
    ("resnet50 layer1 3x3", {"N": 1, "C": 64, "H": 56, "W": 56, "K": 64, "R": 3, "S": 3, "pad": 1}, True),
    ("resnet50 layer3 1x1", {"N": 1, "C": 1024, "H": 14, "W": 14, "K": 256, "R": 1, "S": 1}, False),
    (
        "resnet50 stem 7x7/2",
        {"N": 1, "C": 3, "H": 224, "W": 224, "K": 64, "R": 7, "S": 7, "stride": 2, "pad": 3},
        False,
    ),
    (
        "mobilenetv2 depthwise 3x3",
        {"N": 1, "C": 144, "H": 56, "W": 56, "K": 144, "R": 3, "S": 3, "pad": 1, "groups": 144},
        True,
    ),
)


def cases(quick: bool = False, threads: list[int] | None = None, device: str = "cpu") -> list[Case]:
    """The GEMM rung's unit peak before and after (the report gives "% of unit peak", unit_peak.around),
    each shape by onnxruntime and by the rung that takes it between, at every thread count."""
    out = []
    for label, s, in_quick in SHAPES:
        if quick and not in_quick:
            continue
        own = "02-depthwise" if s.get("groups", 1) > 1 else "01-im2col-dpbusd"
        for v in ("00-ort-qlinearconv", own):
            for t in sorted(set(threads or [1])):
                out.append(
                    Case(
                        variant=f"cpu.{FAMILY}.{v}",
                        size=dict(s),
                        dtype="uint8",
                        threads=t,
                        params={k: s[k] for k in ("stride", "pad", "groups") if k in s},
                        label=f"cpu.{FAMILY}.{v} {label}",
                        meta={"shape": dict(s), "shape_label": label, "unit": UNIT if own == v else None},
                    )
                )
    return around([UNIT] if UNIT else [], sorted(set(threads or [1])), out)
