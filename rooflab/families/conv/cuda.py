"""CUDA convolution variants (2-D cross-correlation, NCHW, FP32) for the `conv` family: what each
algorithm costs and how accurate it is on the GPU, against the library path.

  cuda.conv.00-cupy-im2col-cublas  the library path: cuDNN through torch.nn.functional.conv2d where
                                   torch with CUDA and cuDNN is installed (as GPU machines with torch
                                   have it; the tensors share cupy's memory, no copy), else what a
                                   cupy user has (CuPy v14 removed its cuDNN binding): im2col through
                                   a strided view and one copy, then one cuBLAS GEMM (cupy.matmul);
                                   float32/float64. ``library_path()`` says which; the suite's labels
                                   and records carry it (meta "library")
  cuda.conv.01-direct-naive        one thread per output, everything from global memory (L1/L2)
  cuda.conv.02-direct-tiled        16 output channels per thread in registers, input tile + weights
                                   in shared memory (conv.cu conv_tiled)
  cuda.conv.03-direct-depthwise    groups == C: one input plane tile per block in shared memory
  cuda.conv.04-im2col-cublas       rooflab's im2col kernel, then one cuBLAS GEMM
  cuda.conv.05-winograd-f2x2       F(2x2,3x3): filter/input/output transform kernels, the 16
                                   products as one batched cuBLAS GEMM
  cuda.conv.06-winograd-f4x4       F(4x4,3x3): the same with 36 products (looser tolerance, below)
  cuda.conv.07-fft                 cupy.fft (cuFFT): zero padding to a 2,3,5,7-smooth size,
                                   overlap-save tiles for images above 64 pixels, one complex GEMM
                                   per frequency bin over the channels, inverse FFT

Call: ``y = v(x, w, out=None, stride=1, pad=0, groups=1)`` with cupy arrays x (N, C, H, W) and w
(K, C/groups, R, S); stride and pad are an int or an (h, w) pair. ``v.inputs(shape)`` takes the
op shape of rooflab/workloads/ops.py (N C H W K R S, stride_h stride_w pad_h pad_w groups) and returns
(x, w, out); ``conv_params(shape)`` gives the matching call parameters.

Napkin math: ResNet-50's 64@56x56 3x3 layer at batch 8 is 2*8*64*56*56*64*9 = 3.7 GFLOP; at the
H200's ~67 TFLOP/s FP32 (non-tensor) that is 55 us, while its minimum traffic (6.4 MB in, 6.4 MB out)
takes 3 us at 4.8 TB/s: compute-bound for every algorithm that keeps its tiles on chip. Winograd
F(4x4) needs 36 instead of 144 multiplies per 4x4 output tile and channel (4x fewer), FFT's cost
does not grow with R*S. Every record carries both the nominal FLOPs (2 N K P Q C/g R S) and the
arithmetic the variant really executes (``executed_work``).

Verification: float64 reference on the device (im2col + DGEMM, itself tested against a loop nest
on the host), compared elementwise with the one tolerance table's ``conv`` entry (rooflab.verify:
the inputs are unit-variance, x ~ N(0,1), w ~ N(0, 1/n), so an output's rounding error is absolute,
~eps sqrt(n)); Winograd F(4x4,3x3) holds to ``conv-winograd-f4x4``, 10x looser (its transform
constants up to 8 amplify rounding: ~1e-5 of max|y| measured in FP32 on the host, 1.4e-5 in
../shared/research/model-ops.md).

Run: ``rooflab run --device cuda --suite conv``, or
``python -m pytest tests/test_cuda_families_gpu.py -k conv`` on a GPU machine.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...cuda import loader
from ...cuda.args import array_module, cdiv, cupy, grid_for, require
from ...errors import RooflabError
from ...registry import Case, Variant, register
from ...work import Work

SOURCE = "conv.cu"
KNOBS = {"CONV_BLOCK": 256, "DT_P": 8, "DT_Q": 16, "DT_KB": 16, "DW_P": 8, "DW_Q": 32}
BLOCK = KNOBS["CONV_BLOCK"]
SMEM_LIMIT = 48 << 10  # dynamic shared memory a block gets without an opt-in attribute
CB_MAX = 8  # conv_tiled: input channels per shared-memory chunk (fewer when the tile is large)
GRID_YZ_MAX = 65535
FFT_SINGLE_MAX = 64  # padded images up to this size are one FFT tile; larger ones are tiled
FFT_TILE = 32  # overlap-save tile: FFT size >= max(FFT_TILE, 2R)
LIBRARY_PATHS = {
    "cudnn": "cuDNN through torch.nn.functional.conv2d",
    "im2col-cublas": "cupy im2col + cuBLAS GEMM (no torch with CUDA and cuDNN here)",
}

# Arithmetic of the Winograd transforms as written in conv.cu (FMA = 2 FLOP): per tile and input
# channel (B^T d B), per tile and output channel (A^T M A), per (k, c) filter (G g G^T).
WINOGRAD_TRANSFORM_FLOPS = {
    2: {"input": 32, "output": 24, "filter": 42},
    4: {"input": 288, "output": 130, "filter": 153},
}


@dataclass(frozen=True)
class Spec:
    N: int
    C: int
    H: int
    W: int
    K: int
    R: int
    S: int
    P: int
    Q: int
    sh: int
    sw: int
    ph: int
    pw: int
    G: int

    @property
    def Cg(self) -> int:
        return self.C // self.G

    @property
    def Kg(self) -> int:
        return self.K // self.G

    def args(self) -> tuple:
        return tuple(np.int32(v) for v in (self.N, self.C, self.H, self.W, self.K, self.R, self.S, self.P, self.Q))


def _pair(variant, name, v):
    if isinstance(v, (tuple, list)):
        if len(v) != 2:
            raise RooflabError(f"{variant}: {name}={v!r} must be an int or an (h, w) pair")
        return tuple(_int(variant, name, x) for x in v)
    v = _int(variant, name, v)
    return v, v


def _int(variant, name, v) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise RooflabError(f"{variant}: {name}={v!r} must be an integer")
    return int(v)


def make_spec(variant, N, C, H, W, K, Cw, R, S, stride=1, pad=0, groups=1) -> Spec:
    """Validated problem: every size positive, padding smaller than the filter, channels and groups
    consistent, the filter inside the padded image. RooflabError names the variant and the field."""
    (sh, sw), (ph, pw) = _pair(variant, "stride", stride), _pair(variant, "pad", pad)
    G = _int(variant, "groups", groups)
    for name, v in (("N", N), ("C", C), ("H", H), ("W", W), ("K", K), ("R", R), ("S", S)):
        if _int(variant, name, v) <= 0:
            raise RooflabError(f"{variant}: {name}={v} must be positive")
    if sh <= 0 or sw <= 0:
        raise RooflabError(f"{variant}: stride {(sh, sw)} must be positive")
    if G <= 0:
        raise RooflabError(f"{variant}: groups={G} must be positive")
    if ph < 0 or pw < 0 or ph >= R or pw >= S:
        raise RooflabError(
            f"{variant}: padding {(ph, pw)} must be >= 0 and smaller than the {R}x{S} filter",
            "with pad >= R some outputs see nothing but padding",
        )
    if C % G or K % G:
        raise RooflabError(f"{variant}: C={C} and K={K} must be multiples of groups={G}")
    if Cw * G != C:
        raise RooflabError(
            f"{variant}: the filter has {Cw} input channels per group; with groups={G} the input needs "
            f"{Cw * G}, it has C={C}"
        )
    P, Q = (H + 2 * ph - R) // sh + 1, (W + 2 * pw - S) // sw + 1
    if H + 2 * ph < R or W + 2 * pw < S:
        raise RooflabError(f"{variant}: the {R}x{S} filter does not fit the padded {H + 2 * ph}x{W + 2 * pw} input")
    return Spec(int(N), int(C), int(H), int(W), int(K), int(R), int(S), P, Q, sh, sw, ph, pw, G)


def spec_from_shape(variant: str, shape: dict) -> Spec:
    """Spec of an op shape dict (rooflab/workloads/ops.py fields; ``stride``/``pad`` accepted too)."""
    if not isinstance(shape, dict):
        raise RooflabError(f"{variant}: size must be a conv2d shape dict (N C H W K R S ...), got {shape!r}")
    missing = [f for f in ("N", "C", "H", "W", "K", "R", "S") if f not in shape]
    if missing:
        raise RooflabError(f"{variant}: conv2d shape misses {', '.join(missing)}")
    s = shape
    G = s.get("groups", 1)
    stride = (s.get("stride_h", s.get("stride", 1)), s.get("stride_w", s.get("stride_h", s.get("stride", 1))))
    pad = (s.get("pad_h", s.get("pad", 0)), s.get("pad_w", s.get("pad_h", s.get("pad", 0))))
    C, G_ = s["C"], _int(variant, "groups", G)
    if G_ <= 0 or C % G_:
        raise RooflabError(f"{variant}: C={C} must be a positive multiple of groups={G}")
    spec = make_spec(variant, s["N"], C, s["H"], s["W"], s["K"], C // G_, s["R"], s["S"], stride, pad, G_)
    for f, v in (("P", spec.P), ("Q", spec.Q)):
        if f in s and s[f] != v:
            raise RooflabError(f"{variant}: given {f}={s[f]} is inconsistent with the input, filter and stride ({v})")
    return spec


def conv_params(shape: dict) -> dict:
    """The call parameters (stride, pad, groups) that go with an op shape dict."""
    spec = spec_from_shape("conv2d", shape)
    return {"stride": (spec.sh, spec.sw), "pad": (spec.ph, spec.pw), "groups": spec.G}


def spec_of(variant, x, w, stride=1, pad=0, groups=1, device=True) -> Spec:
    require(variant, x, "x", ndim=4, device=device)
    require(variant, w, "w", ndim=4, device=device)
    if x.dtype != w.dtype:
        raise RooflabError(f"{variant}: x is {x.dtype} but w is {w.dtype}", "give both the same dtype")
    N, C, H, W = x.shape
    K, Cw, R, S = w.shape
    return make_spec(variant, N, C, H, W, K, Cw, R, S, stride, pad, groups)


# ---- float64 reference (numpy or cupy: the array module of x) -------------------------------------


def windows(xp, padded, R, S, sh, sw, P, Q):
    """(N, C, P, Q, R, S) strided view of a padded NCHW input: no copy."""
    sN, sC, sH, sW = padded.strides
    return xp.lib.stride_tricks.as_strided(
        padded, shape=padded.shape[:2] + (P, Q, R, S), strides=(sN, sC, sH * sh, sW * sw, sH, sW)
    )


def lowered(xp, x, spec: Spec, dtype):
    """im2col through a strided view: (N, G, C/g*R*S, P*Q) in ``dtype`` (one copy)."""
    s = spec
    xpad = xp.pad(x.astype(dtype, copy=False), ((0, 0), (0, 0), (s.ph, s.ph), (s.pw, s.pw)))
    win = windows(xp, xpad, s.R, s.S, s.sh, s.sw, s.P, s.Q)  # (N, C, P, Q, R, S)
    cols = xp.ascontiguousarray(win.transpose(0, 1, 4, 5, 2, 3))  # (N, C, R, S, P, Q)
    return cols.reshape(s.N, s.G, s.Cg * s.R * s.S, s.P * s.Q)


def reference(x, w, out=None, *, stride=1, pad=0, groups=1, **_):
    """float64 convolution on the array's device: im2col in float64 and one DGEMM per group."""
    xp = array_module(x)
    s = spec_of("reference", x, w, stride, pad, groups, device=False)
    cols = lowered(xp, x, s, np.float64)
    wm = w.astype(np.float64).reshape(s.G, s.Kg, s.Cg * s.R * s.S)
    return xp.matmul(wm, cols).reshape(s.N, s.K, s.P, s.Q)


# ---- declared work ----------------------------------------------------------------------------


def nominal_flops(s: Spec) -> float:
    return 2.0 * s.N * s.K * s.P * s.Q * s.Cg * s.R * s.S


def fast_len(n: int) -> int:
    """Smallest m >= n whose prime factors are 2, 3, 5 and 7 (sizes cuFFT handles fastest)."""
    m = max(1, int(n))
    while True:
        r = m
        for p in (2, 3, 5, 7):
            while r % p == 0:
                r //= p
        if r == 1:
            return m
        m += 1


def fft_tiling(padded: int, r: int) -> tuple[int, int, int]:
    """(FFT size L, stride-1 outputs per tile L - r + 1, tiles) along one axis of length ``padded``."""
    full = padded - r + 1
    L = fast_len(padded) if padded <= FFT_SINGLE_MAX else fast_len(max(FFT_TILE, 2 * r))
    per = L - r + 1
    return L, per, cdiv(full, per)


def executed_work(variant: str, s: Spec) -> dict:
    """The arithmetic a variant really executes and the workspace it writes and reads back, next to
    the nominal direct count (a plot shows both the effective and the real rate)."""
    nominal = nominal_flops(s)
    e = 4  # float32 workspace
    tech = variant.split(".")[-1]
    if "winograd" in tech:
        m = 2 if "f2x2" in tech else 4
        a2 = (m + 2) ** 2
        T = s.N * cdiv(s.P, m) * cdiv(s.Q, m)
        t = WINOGRAD_TRANSFORM_FLOPS[m]
        flops = 2.0 * a2 * s.K * s.C * T + t["input"] * s.C * T + t["output"] * s.K * T + t["filter"] * s.K * s.C
        workspace = e * a2 * (s.K * s.C + s.C * T + s.K * T)
        return {"nominal_flops": nominal, "executed_flops": flops, "workspace_bytes": 2 * workspace}
    if "fft" in tech:
        Lh, _, nh = fft_tiling(s.H + 2 * s.ph, s.R)
        Lw, _, nw = fft_tiling(s.W + 2 * s.pw, s.S)
        n = Lh * Lw
        F, tiles = Lh * (Lw // 2 + 1), nh * nw
        fft_one = 2.5 * n * math.log2(n)  # a real 2-D FFT: half of a complex one's 5 n log2 n
        ffts = s.N * s.C * tiles + s.K * s.C + s.N * s.K * tiles
        flops = fft_one * ffts + 8.0 * F * s.N * tiles * s.C * s.K  # complex MAC = 8 FLOP
        workspace = 8 * F * (s.N * s.C * tiles + s.K * s.C + s.N * s.K * tiles) + e * n * s.N * (s.C + s.K) * tiles
        return {"nominal_flops": nominal, "executed_flops": flops, "workspace_bytes": 2 * workspace}
    if "im2col" in tech:
        cols = e * s.N * s.C * s.R * s.S * s.P * s.Q
        return {"nominal_flops": nominal, "executed_flops": nominal, "workspace_bytes": 2 * cols}
    return {"nominal_flops": nominal, "executed_flops": nominal, "workspace_bytes": 0}


def _work_fn(name):
    def work(x, w, out=None, reps=1, stride=1, pad=0, groups=1, **_):
        s = spec_of(name, x, w, stride, pad, groups, device=False)
        y_bytes = s.N * s.K * s.P * s.Q * x.dtype.itemsize
        return Work(nominal_flops(s), x.nbytes + w.nbytes, y_bytes).scaled(reps)

    return work


# ---- launchers -----------------------------------------------------------------------------------


def _fn(kernel):
    return loader.kernel(SOURCE, kernel, KNOBS)


def _geometry(s: Spec):
    return (np.int32(s.sh), np.int32(s.sw), np.int32(s.ph), np.int32(s.pw))


def _naive(x, w, y, s: Spec):
    total = s.N * s.K * s.P * s.Q
    grid = grid_for(total, BLOCK, loader.sm_count() * 64)
    loader.launch(_fn("conv_naive"), grid, BLOCK, (x, w, y, *s.args(), *_geometry(s), np.int32(s.G)), "conv_naive")


def tiled_plan(s: Spec, variant="cuda.conv.02-direct-tiled") -> tuple[int, int, tuple]:
    """(channels per chunk, dynamic shared bytes, grid) of conv_tiled; RooflabError if it cannot run."""
    P_, Q_, KB = KNOBS["DT_P"], KNOBS["DT_Q"], KNOBS["DT_KB"]
    per_c = s.R * s.S * KB + ((P_ - 1) * s.sh + s.R) * ((Q_ - 1) * s.sw + s.S)  # floats per input channel
    cb = min(CB_MAX, s.Cg, SMEM_LIMIT // (4 * per_c))
    if cb < 1:
        raise RooflabError(
            f"{variant}: a {s.R}x{s.S} filter at stride {(s.sh, s.sw)} needs {4 * per_c} B of shared memory per "
            f"channel, more than the {SMEM_LIMIT} B a block gets",
            "use cuda.conv.01-direct-naive or cuda.conv.04-im2col-cublas",
        )
    grid = (cdiv(s.P, P_) * cdiv(s.Q, Q_), s.G * cdiv(s.Kg, KB), s.N)
    if grid[1] > GRID_YZ_MAX or grid[2] > GRID_YZ_MAX:
        raise RooflabError(f"{variant}: grid {grid} exceeds CUDA's 65535 blocks in y/z (groups x K/16, N)")
    return cb, 4 * cb * per_c, grid


def _tiled(x, w, y, s: Spec):
    cb, smem, grid = tiled_plan(s)
    loader.launch(
        _fn("conv_tiled"),
        grid,
        KNOBS["DT_P"] * KNOBS["DT_Q"],
        (x, w, y, *s.args(), *_geometry(s), np.int32(s.G), np.int32(cb)),
        "conv_tiled",
        shared_mem=smem,
    )


def depthwise_plan(s: Spec, variant="cuda.conv.03-direct-depthwise") -> tuple[int, tuple]:
    P_, Q_ = KNOBS["DW_P"], KNOBS["DW_Q"]
    smem = 4 * (((P_ - 1) * s.sh + s.R) * ((Q_ - 1) * s.sw + s.S) + s.R * s.S)
    if smem > SMEM_LIMIT:
        raise RooflabError(f"{variant}: the {s.R}x{s.S} stride-{(s.sh, s.sw)} tile needs {smem} B of shared memory")
    grid = (cdiv(s.P, P_) * cdiv(s.Q, Q_), s.K, s.N)
    if grid[1] > GRID_YZ_MAX or grid[2] > GRID_YZ_MAX:
        raise RooflabError(f"{variant}: grid {grid} exceeds CUDA's 65535 blocks in y/z (K, N)")
    return smem, grid


def _depthwise(x, w, y, s: Spec):
    smem, grid = depthwise_plan(s)
    loader.launch(
        _fn("conv_depthwise"),
        grid,
        KNOBS["DW_P"] * KNOBS["DW_Q"],
        (x, w, y, *s.args(), *_geometry(s)),
        "conv_depthwise",
        shared_mem=smem,
    )


def _gemm(w, cols, y, s: Spec):
    """y (N, K, P, Q) = w (G, Kg, CgRS) @ cols (N, G, CgRS, PQ): cuBLAS (batched over n and g)."""
    cp = cupy()
    cp.matmul(w.reshape(s.G, s.Kg, s.Cg * s.R * s.S), cols, out=y.reshape(s.N, s.G, s.Kg, s.P * s.Q))


def torch_cudnn():
    """torch when it is installed with CUDA and cuDNN (variant 0 is then cuDNN), else None."""
    try:
        import torch
    except Exception:  # not installed, or a broken install: the cupy path
        return None
    try:
        return torch if torch.cuda.is_available() and torch.backends.cudnn.is_available() else None
    except Exception:
        return None


def library_path() -> str:
    """Which library variant 0 runs here: "cudnn" or "im2col-cublas" (LIBRARY_PATHS says what)."""
    return "cudnn" if torch_cudnn() is not None else "im2col-cublas"


def _cudnn(torch, x, w, s: Spec):
    """cuDNN's convolution on cupy's memory (DLPack-free: __cuda_array_interface__, no copy); the
    result is torch's output tensor seen as a cupy array. FP32 stays FP32: torch lets cuDNN use TF32
    tensor cores for FP32 convolutions by default (10-bit mantissas, ~1e-3 relative error, outside the
    conv tolerance and not what the FP32 rungs compute), so that is switched off."""
    torch.backends.cudnn.allow_tf32 = False
    tx, tw = torch.as_tensor(x, device="cuda"), torch.as_tensor(w, device="cuda")
    y = torch.nn.functional.conv2d(tx, tw, stride=(s.sh, s.sw), padding=(s.ph, s.pw), groups=s.G)
    return cupy().asarray(y)


def _library(x, w, y, s: Spec):
    torch = torch_cudnn()
    if torch is not None:
        return _cudnn(torch, x, w, s)  # cuDNN writes its own output tensor: returned, ``out`` untouched
    cp = cupy()
    if s.R == s.S == 1 and s.sh == s.sw == 1 and s.ph == s.pw == 0:
        cols = x.reshape(s.N, s.G, s.Cg, s.H * s.W)  # a 1x1 stride-1 conv is a GEMM as it stands
    else:
        cols = lowered(cp, x, s, x.dtype)
    _gemm(w, cols, y, s)


def _im2col(x, w, y, s: Spec):
    cols = cupy().empty((s.N, s.C * s.R * s.S, s.P * s.Q), dtype=np.float32)
    rows = s.N * s.C * s.R * s.S
    grid = (cdiv(s.P * s.Q, BLOCK), min(rows, GRID_YZ_MAX))
    args = (x, cols, *(np.int32(v) for v in (s.N, s.C, s.H, s.W, s.R, s.S, s.P, s.Q)), *_geometry(s))
    loader.launch(_fn("im2col"), grid, BLOCK, args, "im2col")
    _gemm(w, cols.reshape(s.N, s.G, s.Cg * s.R * s.S, s.P * s.Q), y, s)


def _winograd(m):
    tag = f"f{m}"
    A = m + 2

    def run(x, w, y, s: Spec):
        cp = cupy()
        tp, tq = cdiv(s.P, m), cdiv(s.Q, m)
        T = s.N * tp * tq
        U = cp.empty((A * A, s.K, s.C), dtype=np.float32)
        V = cp.empty((A * A, s.C, T), dtype=np.float32)
        M = cp.empty((A * A, s.K, T), dtype=np.float32)
        cap = loader.sm_count() * 16
        kc = (np.int32(s.K), np.int32(s.C))
        loader.launch(_fn(f"winograd_filter_{tag}"), grid_for(s.K * s.C, BLOCK, cap), BLOCK, (w, U, *kc), "filter")
        args = (x, V, *(np.int32(v) for v in (s.N, s.C, s.H, s.W, s.ph, s.pw, tp, tq)))
        loader.launch(_fn(f"winograd_input_{tag}"), grid_for(s.C * T, BLOCK, cap), BLOCK, args, "input transform")
        cp.matmul(U, V, out=M)  # alpha^2 GEMMs (K x C) @ (C x T), one strided-batched cuBLAS call
        args = (M, y, *(np.int32(v) for v in (s.N, s.K, s.P, s.Q, tp, tq)))
        loader.launch(_fn(f"winograd_output_{tag}"), grid_for(s.K * T, BLOCK, cap), BLOCK, args, "output transform")

    return run


def _fft(x, w, y, s: Spec):
    cp = cupy()
    Lh, oh, nh = fft_tiling(s.H + 2 * s.ph, s.R)  # FFT size, stride-1 outputs per tile, tiles
    Lw, ow, nw = fft_tiling(s.W + 2 * s.pw, s.S)
    rows, cols_ = nh * oh + s.R - 1, nw * ow + s.S - 1  # every tile's L inputs lie inside
    xt = cp.zeros((s.N, s.C, rows, cols_), dtype=np.float32)
    xt[:, :, s.ph : s.ph + s.H, s.pw : s.pw + s.W] = x
    sN, sC, sH, sW = xt.strides
    tiles = cp.lib.stride_tricks.as_strided(
        xt, shape=(s.N, s.C, nh, nw, Lh, Lw), strides=(sN, sC, sH * oh, sW * ow, sH, sW)
    )
    X = cp.fft.rfft2(cp.ascontiguousarray(tiles))  # (N, C, nh, nw, Lh, F2)
    Wf = cp.fft.rfft2(w, s=(Lh, Lw))  # (K, C, Lh, F2), zero-padded filters
    F, T = Lh * (Lw // 2 + 1), nh * nw
    # correlation = X * conj(W); the channel sum is a complex GEMM per frequency bin
    Xm = cp.ascontiguousarray(X.reshape(s.N, s.C, T, F).transpose(3, 0, 2, 1)).reshape(F, s.N * T, s.C)
    Wm = cp.ascontiguousarray(cp.conj(Wf).reshape(s.K, s.C, F).transpose(2, 1, 0))  # (F, C, K)
    Ym = cp.matmul(Xm, Wm)  # (F, N*T, K)
    Y = Ym.reshape(Lh, Lw // 2 + 1, s.N, nh, nw, s.K).transpose(2, 5, 3, 4, 0, 1)
    yt = cp.fft.irfft2(Y, s=(Lh, Lw))  # (N, K, nh, nw, Lh, Lw)
    valid = yt[..., :oh, :ow].transpose(0, 1, 2, 4, 3, 5).reshape(s.N, s.K, nh * oh, nw * ow)
    y[...] = valid[:, :, : (s.P - 1) * s.sh + 1 : s.sh, : (s.Q - 1) * s.sw + 1 : s.sw]


# ---- variants ------------------------------------------------------------------------------------


def _applies_any(s: Spec, name: str) -> None:
    return None


def _applies_depthwise(s: Spec, name: str) -> None:
    if s.G != s.C or s.K % s.C:
        raise RooflabError(
            f"{name}: depthwise needs groups == C and K a multiple of C, got C={s.C} K={s.K} groups={s.G}",
            "use cuda.conv.01-direct-naive or 02-direct-tiled for grouped and dense convolutions",
        )
    depthwise_plan(s, name)


def _applies_tiled(s: Spec, name: str) -> None:
    tiled_plan(s, name)


def _applies_winograd(s: Spec, name: str) -> None:
    if s.R != 3 or s.S != 3:
        raise RooflabError(
            f"{name}: Winograd F(mxm,3x3) needs a 3x3 filter, got {s.R}x{s.S}",
            "use the direct, im2col or FFT variants for other filter sizes",
        )
    if s.sh != 1 or s.sw != 1:
        raise RooflabError(
            f"{name}: Winograd needs stride 1, got stride {(s.sh, s.sw)}",
            "use the direct or im2col variants for strided convolutions",
        )
    if s.G != 1:
        raise RooflabError(f"{name}: this Winograd variant computes dense convolutions only (groups=1), got {s.G}")


def _applies_fft(s: Spec, name: str) -> None:
    if s.G != 1:
        raise RooflabError(f"{name}: the FFT variant computes dense convolutions only (groups=1), got {s.G}")


LADDER = [
    # number, technique, description, implementation, applicability check, dtypes
    (
        0,
        "cupy-im2col-cublas",
        "library path: cuDNN (torch.nn.functional.conv2d) where torch has CUDA, else cupy im2col "
        "(strided view + copy) + cuBLAS GEMM (CuPy v14 removed its cuDNN binding)",
        _library,
        _applies_any,
        ("float32", "float64"),
    ),
    (
        1,
        "direct-naive",
        "direct, one thread per output, operands from global memory",
        _naive,
        _applies_any,
        ("float32",),
    ),
    (
        2,
        "direct-tiled",
        "direct, 16 output channels per thread in registers, input tile and weights in shared memory",
        _tiled,
        _applies_tiled,
        ("float32",),
    ),
    (
        3,
        "direct-depthwise",
        "depthwise (groups == C), input plane tile in shared memory",
        _depthwise,
        _applies_depthwise,
        ("float32",),
    ),
    (4, "im2col-cublas", "rooflab im2col kernel + one cuBLAS GEMM", _im2col, _applies_any, ("float32",)),
    (
        5,
        "winograd-f2x2",
        "Winograd F(2x2,3x3): transform kernels + 16 batched cuBLAS GEMMs",
        _winograd(2),
        _applies_winograd,
        ("float32",),
    ),
    (
        6,
        "winograd-f4x4",
        "Winograd F(4x4,3x3): transform kernels + 36 batched cuBLAS GEMMs",
        _winograd(4),
        _applies_winograd,
        ("float32",),
    ),
    (
        7,
        "fft",
        "FFT convolution through cuFFT: smooth-size padding, overlap-save tiles, per-bin complex GEMM",
        _fft,
        _applies_fft,
        ("float32",),
    ),
]
NAMES = {tech: f"cuda.conv.{num:02d}-{tech}" for num, tech, *_ in LADDER}


def check_applies(name: str, s: Spec) -> None:
    """RooflabError when variant ``name`` cannot compute ``s`` (Winograd with 5x5 or stride 2, ...)."""
    for _num, tech, _, _, applies, _ in LADDER:
        if NAMES[tech] == name:
            applies(s, name)
            return
    raise RooflabError(f"unknown conv variant {name!r}")


def _make(num, tech, description, impl, applies, dtypes):
    name = NAMES[tech]
    default_shape = SMALL_DEPTHWISE if tech == "direct-depthwise" else SMALL

    def kernel(x, w, out=None, reps=1, threads=None, stride=1, pad=0, groups=1):
        s = spec_of(name, x, w, stride, pad, groups)
        require(name, x, "x", dtype=dtypes)
        applies(s, name)
        if out is None:
            out = cupy().empty((s.N, s.K, s.P, s.Q), dtype=x.dtype)
        require(name, out, "out", dtype=x.dtype, shape=(s.N, s.K, s.P, s.Q))
        result = out
        for _ in range(int(reps)):
            result = impl(x, w, out, s)
            result = out if result is None else result  # the cuDNN path returns its own tensor
        return result

    def inputs(size=None, dtype="float32", seed=0, threads=None):
        shape = size if size is not None else default_shape
        s = spec_from_shape(name, shape)
        dt = np.dtype(dtype or "float32")
        if dt.name not in dtypes:
            raise RooflabError(f"{name}: dtype {dt.name} is not supported", f"use {' or '.join(dtypes)}")
        applies(s, name)
        cp = cupy()
        rng = cp.random.default_rng(seed)
        x = rng.standard_normal((s.N, s.C, s.H, s.W), dtype=np.float64 if dt == np.float64 else np.float32)
        w = rng.standard_normal((s.K, s.Cg, s.R, s.S), dtype=x.dtype) * (1.0 / math.sqrt(s.Cg * s.R * s.S))
        return x.astype(dt, copy=False), w.astype(dt, copy=False), cp.empty((s.N, s.K, s.P, s.Q), dtype=dt)

    register(
        Variant(
            name=name,
            family="conv",
            device="cuda",
            number=num,
            description=description,
            kernel=kernel,
            reference=reference,
            work=_work_fn(name),
            inputs=inputs,
            defaults={"stride": 1, "pad": 0, "groups": 1},
            result_dtype=lambda x, *a, **k: x.dtype,
            op="conv2d",
            dtypes=dtypes,
            tolerance="conv-winograd-f4x4" if tech == "winograd-f4x4" else "conv",
        )
    )


# the shape inputs() builds when called without one (the generic GPU test): 3x3, stride 1, pad 1
SMALL = {"N": 2, "C": 8, "H": 12, "W": 12, "K": 8, "R": 3, "S": 3, "stride_h": 1, "stride_w": 1, "pad_h": 1, "pad_w": 1}
SMALL_DEPTHWISE = {**SMALL, "groups": 8}

for _num, _tech, _desc, _impl, _applies, _dtypes in LADDER:
    _make(_num, _tech, _desc, _impl, _applies, _dtypes)


# ---- the suite -----------------------------------------------------------------------------------


def _shape(N, C, H, K, R, stride=1, pad=None, groups=1, W=None):
    from ...workloads.ops import conv_shape

    return conv_shape(N, C, H, W or H, K, R, stride=stride, pad=R // 2 if pad is None else pad, groups=groups)


RESNET_3X3 = [(64, 56), (128, 28), (256, 14), (512, 7)]  # C = K, H = W, stride 1, pad 1
RESNET_1X1 = [(64, 256, 56), (256, 64, 56), (512, 128, 28), (1024, 256, 14), (512, 2048, 7)]  # C, K, H
MOBILENET_DW = [(32, 112, 1), (64, 112, 2), (128, 56, 1), (256, 28, 1), (512, 14, 1), (1024, 7, 1)]  # C, H, s


def layers(quick: bool) -> list[tuple[str, dict]]:
    """(label, shape) of the suite: ResNet-50 3x3, 1x1, stride-2 3x3 and 7x7 stem at batch 1 and 8,
    MobileNet depthwise 3x3 at batch 1, and the kernel-size sweep 32 -> 32 channels at 64x64."""
    out = []
    batches = (8,) if quick else (1, 8)
    conv3 = [RESNET_3X3[0], RESNET_3X3[2]] if quick else RESNET_3X3
    conv1 = RESNET_1X1[1:2] if quick else RESNET_1X1
    for N in batches:
        out += [(f"resnet50 3x3 {C}@{H} N={N}", _shape(N, C, H, C, 3)) for C, H in conv3]
        out += [(f"resnet50 1x1 {C}->{K}@{H} N={N}", _shape(N, C, H, K, 1, pad=0)) for C, K, H in conv1]
        out.append((f"resnet50 3x3 s2 128@56 N={N}", _shape(N, 128, 56, 128, 3, stride=2)))
        out.append((f"resnet50 stem 7x7 s2 N={N}", _shape(N, 3, 224, 64, 7, stride=2, pad=3)))
    dw = [MOBILENET_DW[2]] if quick else MOBILENET_DW
    out += [(f"mobilenet dw3x3 {C}@{H} s{s} N=1", _shape(1, C, H, C, 3, stride=s, groups=C)) for C, H, s in dw]
    for R in (3, 7, 15) if quick else range(3, 16):
        out.append((f"sweep R={R} 32->32@64 N=1", _shape(1, 32, 64, 32, R)))
    return out


def cases(quick: bool, threads=None) -> list[Case]:
    """Every variant that applies to every layer (refusals are skipped here, not measured). Variant
    0's label and meta say which library it is here (cuDNN or im2col + cuBLAS)."""
    out, lib = [], library_path()
    for label, shape in layers(quick):
        for _num, tech, _, _, applies, _ in LADDER:
            name = NAMES[tech]
            s = spec_from_shape(name, shape)
            try:
                applies(s, name)
            except RooflabError:
                continue
            out.append(
                Case(
                    variant=name,
                    size=shape,
                    dtype="float32",
                    threads=0,
                    params=conv_params(shape),
                    label=f"{label} {lib if _num == 0 else tech}",
                    meta={
                        "layer": label,
                        "algorithm": lib if _num == 0 else tech,
                        **({"library": LIBRARY_PATHS[lib]} if _num == 0 else {}),
                        **executed_work(name, s),
                    },
                )
            )
    return out
