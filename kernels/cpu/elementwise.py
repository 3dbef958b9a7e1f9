"""Elementwise, normalisation and fused kernels: single passes over memory, one parallel region.

What they measure: how close a memory-bound op gets to the DRAM roof of the STREAM kernel with the
same read/write mix, and what fusion saves. Variants (registered in rooflab/families/elementwise):

  add        y = a + b                          2 reads + 1 write  (triad's mix)
  scale      y = s * x                          1 read  + 1 write  (copy's mix)
  relu       y = max(x, 0)                      1 + 1
  gelu       y = x * sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3)   (= the tanh form) 1 + 1
  batchnorm  y = x * scale[c] + shift[c]        1 + 1, NCHW (planes) or NHWC (rows of C)
  softmax    rows: max, exp-sum, scale          1 + 1 from DRAM (long rows: + the cached row re-scaled)
  layernorm  rows: mean, variance, normalise    1 + 1 (idem)
  fused      gelu(x + bias) + res, relu(bn(x) + res): 2 + 1 instead of 7 element passes unfused

Napkin math (f32, 2 Zen 4 cores, DRAM ~20-40 GB/s): a 1R1W op moves 8 B/element, so DRAM feeds
2.5-5 G elements/s, 0.7-1.4 cycles per element per core at ~3.5 GHz. A zmm GELU is ~20 vector ops
per 16 elements (~1 cycle/element on one FMA port pair): the exp must be vectorized or the op is
compute-bound. numba without Intel SVML calls scalar libm exp/tanh (~9-13 cycles per element,
measured), so ``fexp`` below is exp in plain arithmetic that LLVM vectorizes: k = rint(y log2 e)
by adding and subtracting 1.5 * 2^m (no round or convert instruction), times 2^k built by an
integer shift into the exponent field (``_pow2_rounded``). f32: r = y - k ln2 (Cody-Waite split:
f32's log2 e alone would cost 1e-6 at y = -87) and a degree-5 fit of e^r (max rel. error 2.2e-7,
as Taylor 6, 1.12x faster); f64: f = y log2 e - k in one FMA and a degree-10 fit of 2^f (3.8e-15
on [-40, 0], 1.19x faster than Cody-Waite and Taylor 11; _exp_f64).
tanh-GELU is written x / (1 + exp(-2u)): the same function without the cancellation of 1 + tanh(u)
for negative x. ``fgelu`` works in base 2 (e^(-2u) = 2^w, log2 e folded into u's constants: no
Cody-Waite split, which cannot beat the rounding of u itself) and folds the exp into that one
division: 2^f as its Pade approximant P(r) / P(-r), r = f ln2 ([5/5] f64, [3/3] f32), gives
x P(-r) / (P(-r) + 2^k P(r)), 4+4 FMAs instead of an exp polynomial (degree 10 in f64). In
cache, 1 thread, same process: 3.5 -> 2.3 cycles/element f64 (natural-log Pade 2.9), 1.25 -> 1.13
f32; at DRAM size 1 thread this moved GELU from 71-89 % of the copy roof to 90-104 % (128 MiB, 3
rounds, same process), as accurate (_gelu_f64). (BERT's original GELU is 0.5 x (1 + erf(x / sqrt 2));
it differs from the tanh form by < 1e-3 and moves the same bytes.)

Row ops (softmax, layernorm) keep a row in L1/L2 between their sweeps: the first sweep reads DRAM,
the later ones hit the cache, so DRAM sees one read and one write. Rows longer than ``block``
elements (GPT-2's 50257-wide logits) go through ``block``-sized segments combined online (softmax:
each segment's exponentials stored against its own max, the running sum rescaled, a last sweep
over the L2-resident row rescales; layer norm: Chan's merge of mean and M2, then a second sweep
writes: 2 reads + 1 write). Both are software-pipelined across rows: the loop that writes row r
also reduces row r+1 (sum, max), so its DRAM read and write streams run together as in copy
(reading a row in one sweep and writing it in a later one ran at 76-79 % of the copy roof at 2
threads here; the pipelined loop at 85-89 %, same rounds). Long softmax rows are pipelined by
segment too: the exp loop of segment k takes the max of segment k+1 (GPT-2's 50257-wide rows at
DRAM size, 3 rounds, same process: f64 1.14-1.17x at 2 threads, 1.02-1.12x at 1; f32 1.02-1.03x
at 1, 0.84-1.06x at 2). At 1 thread they stay at 60-70 % of the copy roof, and the arithmetic is
not why: with the exponentials replaced by a subtraction the same loops ran at the same rate (f32
16.5-18.6 GB/s against 17.5-18.2 with them; f64 19.1-19.2 against 16.7-17.0; copy 23-31, same
process). Their memory pattern sets the pace. Five other patterns measured slower (same process,
1 thread, DRAM size): the sweep carrying the next row's DRAM read instead of the exp loop (0.85-
0.9x); exponentials into a per-thread scratch row then a streaming-store sweep (0.9-0.95x; its
memory pattern alone reaches 80-85 % of copy, but then nothing overlaps the exponentials); the
same with the next row's read in the exp loop (0.75x) or software-prefetched there (0.75-0.8x);
a three-stage pipeline across rows (read row r+1, exp row r, stream row r-1) (0.8x). What it
costs is the rescale sweep over the L2-resident row: a plain copy of the same 50257-wide rows ran
at 23-26 GB/s (f32, 1 thread), the same copy plus one in-place sweep over each row while it is in
L2 at 18-20, the softmax's own rate (same process, 3 rounds). This VM's L2 moves a 200 KB row
only about twice as fast as DRAM (the row copy with both rows in L2: 53-63 GB/s).

Code-generation notes:
- ``error_model="numpy"``: numba's default Python error model tests every float division for zero
  and raises, a branch that blocks vectorization;
- max reductions use LLVM's ``maxnum`` intrinsic (``_fmax``): numba's ``max()`` does not vectorize
  as a reduction, maxnum does, without any fast-math flag;
- maxnum drops a NaN (maxnum(NaN, 0) = 0): ReLU and fexp's clamp use ``_max_keepnan`` /
  ``_min_keepnan`` (a compare and select, still one vmaxp*/vminp*), so NaN propagates as in numpy;
  softmax's row max may drop it, since the NaN's exponential, hence the row's sum, is NaN;
- one call per row at most, and no branch in a row loop: numba reference-counts each row slice
  passed to a call it cannot see through (NRT incref/decref, ``lock``-prefixed), and a locked
  instruction waits for the store buffer and the write-combining buffers of the non-temporal
  stores, like an sfence. Layer norm with its normalise helper called, or with an untaken branch
  holding a call in the row loop, ran at 17-19 GB/s f32 at 1 thread, inlined and branch-free at
  32-40 (same process, DRAM size, the 1-thread copy roof 21-23); so the normalise step is inlined
  explicit-vector code and the last row "reads ahead" itself instead of taking a branch;
- sums need ``reassoc`` to vectorize; ``fexp`` is compiled on its own with ``contract`` only, so
  reassociation never folds its Cody-Waite split (which would cost ~1e-4 relative in f32).

Run: ``rooflab.get_variant("cpu.elementwise.gelu.01-numba")(x, out)`` on any contiguous float32
or float64 arrays; the suite: ``rooflab.families.elementwise.cases(quick, threads)``.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic, overload

import rooflab._numba_env  # noqa: F401

from .simd import sfence, vadd, vfma, vhsum, vlanes, vload, vmax_keepnan, vmul, vsplat, vstore, vstream, vsub, vzero
from .stream import _chunk

FM = {"contract"}  # elementwise: FMA contraction only
FM_SUM = {"contract", "reassoc", "nsz"}  # reductions: partial sums in vector lanes
BLOCK = 1 << 14  # row segment (elements) kept in L1/L2 between sweeps: 64 KiB f32, 128 KiB f64


# ---- scalar building blocks -----------------------------------------------------------------------


# Round to the nearest integer without a round or a convert instruction: t = y + ROUND (1.5 * 2^m,
# m the mantissa bits) is k + ROUND with k = rint(y) in t's low mantissa bits, t - ROUND is k as a
# float, and 2^k is t's bits shifted into the exponent field (_pow2_rounded). Valid for
# |y| < 2^(m-1). The caller must keep the add and the subtract apart: ``contract`` only, never
# ``reassoc``.
ROUND_F32 = 12582912.0  # 1.5 * 2^23
ROUND_F64 = 6755399441055744.0  # 1.5 * 2^52


@intrinsic
def _pow2_rounded(typingctx, t):
    """2.0**k for t = k + ROUND (k an integer in the normal exponent range): two integer ops."""
    if t == types.float32:
        bits, mant, bias = 32, 23, 127
    elif t == types.float64:
        bits, mant, bias = 64, 52, 1023
    else:
        return None

    def codegen(context, builder, sig, args):
        # t's bits are ROUND's plus k (|k| < 2^(m-1)); ROUND's low (bits - m) bits are zero, so the
        # shift leaves k << m, and adding bias << m gives the bits of 2^k
        ity = ir.IntType(bits)
        e = builder.shl(builder.bitcast(args[0], ity), ir.Constant(ity, mant))
        e = builder.add(e, ir.Constant(ity, bias << mant))
        return builder.bitcast(e, context.get_value_type(t))

    return t(t), codegen


def _minmax_intrinsic(name):
    def impl(typingctx, a, b):
        if a not in (types.float32, types.float64) or a != b:
            return None

        def codegen(context, builder, sig, args):
            lt = context.get_value_type(sig.return_type)
            suffix = "f32" if sig.return_type == types.float32 else "f64"
            fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(lt, [lt, lt]), f"llvm.{name}.{suffix}")
            return builder.call(fn, args)

        return a(a, b), codegen

    return intrinsic(impl)


_fmax = _minmax_intrinsic("maxnum")  # max(a, b); vectorizes as a reduction too; a NaN operand loses


def _keepnan_intrinsic(op):
    """b where ``b op a`` (ordered), else a: max (op ">") or min ("<") that keeps a NaN in ``a``, as
    numpy's maximum/minimum do (maxnum would turn relu(NaN) into 0 and hide a NaN in softmax's
    exponentials); one vmaxp*/vminp* on x86, whose second operand wins when either is NaN."""

    def impl(typingctx, a, b):
        if a not in (types.float32, types.float64) or a != b:
            return None

        def codegen(context, builder, sig, args):
            return builder.select(builder.fcmp_ordered(op, args[1], args[0]), args[1], args[0])

        return a(a, b), codegen

    return intrinsic(impl)


_max_keepnan = _keepnan_intrinsic(">")
_min_keepnan = _keepnan_intrinsic("<")


def fexp(v):  # pragma: no cover - typed by the overload below
    """exp(v) that LLVM can vectorize (clamped to the normal range of the dtype)."""
    return np.exp(v)


# e^r on |r| <= ln2 / 2, degree 5, fitted the way _EXP2_F64 below is: with f32 arithmetic 2.2e-7
# relative, as the degree-6 Taylor polynomial, one FMA shorter (0.91 against 1.02 cycles/element in
# cache).
_EXP_F32 = (
    1.0000001192092896,
    0.9999996423721313,
    0.49998900294303894,
    0.1666766256093979,
    0.04191502928733826,
    0.008291716687381268,
)


def _exp_f32(v):
    y = _min_keepnan(_max_keepnan(v, np.float32(-87.0)), np.float32(88.0))  # NaN stays NaN
    t = y * np.float32(1.4426950408889634) + np.float32(ROUND_F32)
    k = t - np.float32(ROUND_F32)  # rint(y / ln 2)
    r = y - k * np.float32(0.693145751953125)  # ln 2 split: k * hi is exact
    r = r - k * np.float32(1.428606765330187e-06)
    c = _EXP_F32
    p = np.float32(c[5])
    p = p * r + np.float32(c[4])
    p = p * r + np.float32(c[3])
    p = p * r + np.float32(c[2])
    p = p * r + np.float32(c[1])
    p = p * r + np.float32(c[0])
    return p * _pow2_rounded(t)


# 2^f on |f| <= 1/2, degree 10: least squares on the relative error at 4000 Chebyshev nodes (long
# double reference); max relative error 1.1e-15 in exact arithmetic (Taylor needs degree 11 in r).
_EXP2_F64 = (
    1.0000000000000007,
    0.6931471805599496,
    0.2402265069590865,
    0.05550410866445828,
    0.009618129108064437,
    0.0013333558228662318,
    0.00015403529931457913,
    1.5252658027577655e-05,
    1.3215674818420908e-06,
    1.0208560900734666e-07,
    7.035596513180004e-09,
)


def _exp_f64(v):
    """e^v = 2^k 2^f, f = v log2(e) - k by one FMA (the product exact, one rounding; log2 e's own
    rounding, 1e-16 relative, costs |v| * 1.6e-16, under the result's precision for the |v| < 40
    a softmax of doubles can see), 2^f by the degree-10 fit above: 1.19x faster than the
    Cody-Waite split with the degree-11 Taylor polynomial (2.25 -> 1.90 cycles/element in cache,
    1 thread, same process); relative error 3.9e-15 on [-40, 0] (Taylor 8.6e-15), 5e-14 on
    [-700, 0] against a long-double reference."""
    y = _min_keepnan(_max_keepnan(v, -708.0), 709.0)
    t = y * 1.4426950408889634 + ROUND_F64
    k = t - ROUND_F64
    f = y * 1.4426950408889634 - k
    c = _EXP2_F64
    p = c[10]
    p = p * f + c[9]
    p = p * f + c[8]
    p = p * f + c[7]
    p = p * f + c[6]
    p = p * f + c[5]
    p = p * f + c[4]
    p = p * f + c[3]
    p = p * f + c[2]
    p = p * f + c[1]
    p = p * f + c[0]
    return p * _pow2_rounded(t)


def _by_dtype(fn, f32, f64):
    """Compile ``fn`` in numba code as ``f32`` or ``f64`` by its float argument, on its own with
    ``contract`` only: a caller's reassociation never folds the Cody-Waite split or the ROUND add
    and subtract (which would leave k = y and f = 0)."""

    @overload(fn, jit_options={"fastmath": FM, "error_model": "numpy"})
    def typed(v):
        return {types.float32: f32, types.float64: f64}.get(v)

    return typed


_by_dtype(fexp, _exp_f32, _exp_f64)


def fgelu(v):  # pragma: no cover - typed by the overload below
    """tanh-GELU of v with one division and no separate exp (see _gelu_f64)."""
    return v / (1.0 + np.exp(-2.0 * 0.7978845608028654 * (v + 0.044715 * v**3)))


_LN2 = 0.6931471805599453
_W1 = -2.0 * 0.7978845608028654 * 1.4426950408889634  # e^(-2u) = 2^w, w = v (W1 + W3 v^2)
_W3 = _W1 * 0.044715


def _gelu_f32(v):
    w = v * (np.float32(_W1) + np.float32(_W3) * (v * v))
    w = _min_keepnan(_max_keepnan(w, np.float32(-126.0)), np.float32(127.0))  # NaN stays NaN
    t = w + np.float32(ROUND_F32)
    f = w - (t - np.float32(ROUND_F32))
    f2 = f * f
    q = np.float32(1.0) + f2 * np.float32(_LN2**2 / 10.0)  # Pade [3/3] of e^r, r = f ln 2
    rr = f * (np.float32(_LN2 / 2.0) + f2 * np.float32(_LN2**3 / 120.0))
    d = q - rr
    return v * d / (d + _pow2_rounded(t) * (q + rr))


def _gelu_f64(v):
    """v / (1 + e^(-2u)), u = sqrt(2/pi) (v + 0.044715 v^3), in base 2: e^(-2u) = 2^w with
    w = v (W1 + W3 v^2) (log2 e folded into the constants), w = k + f (k = rint(w), |f| <= 1/2,
    f = w - k exact), 2^f = e^r with r = f ln 2 as its Pade [5/5] approximant P(r) / P(-r) =
    (q + rr) / (q - rr) (q, rr: the even and odd parts, coefficients in powers of f):
    v / (1 + 2^k (q + rr) / (q - rr)) = v (q - rr) / ((q - rr) + 2^k (q + rr)), the one division
    GELU needs anyway: 4+4 FMAs instead of an exp polynomial. Against the same Pade in the natural
    log (a Cody-Waite split of y = -2u, floor and convert for k): 2.97 -> 2.30 cycles/element f64
    and 1.24 -> 1.13 f32 in cache (1 thread, same process). Accuracy: the rounding of w (2^-53 |w|, as y = -2u's own
    rounding in the natural-log form) sets it: f64 5.4e-15 relative on [-6, 6] against a
    long-double reference (the natural-log form 4.3e-15), [5/5] adds ~1e-16 (|r| <= ln2/2) and
    [3/3] ~6e-9; over [-30, 30] the worst, ~1.2e-13 f64, is the cancellation in v + 0.044715 v^3
    near v = -20, which every form of tanh-GELU has."""
    w = v * (_W1 + _W3 * (v * v))
    w = _min_keepnan(_max_keepnan(w, -1022.0), 1023.0)
    t = w + ROUND_F64
    f = w - (t - ROUND_F64)
    f2 = f * f
    q = 1.0 + f2 * (_LN2**2 / 9.0 + f2 * (_LN2**4 / 1008.0))
    rr = f * (_LN2 / 2.0 + f2 * (_LN2**3 / 72.0 + f2 * (_LN2**5 / 30240.0)))
    d = q - rr
    return v * d / (d + _pow2_rounded(t) * (q + rr))


_by_dtype(fgelu, _gelu_f32, _gelu_f64)


@njit(inline="always")
def _rows(rows, t, nchunks):
    return rows * t // nchunks, rows * (t + 1) // nchunks


# ---- flat elementwise ops: one chunk per thread, reps inside ----------------------------------------
# Each op is a body (inlined) and two entry points: ``op`` (one parallel region, a cache-line
# aligned chunk per thread) and ``op_serial`` (no parallel region: arrays below SERIAL_BELOW
# elements, or 1 thread, where waking the pool costs more than the work; PyTorch's grain size is
# the same 32k elements).

SERIAL_BELOW = 1 << 15


@njit(inline="always")
def _same(a, b):
    """The same memory (an in-place call): LLVM's runtime overlap check would send the loop to its
    scalar version, so in-place calls take a loop over the one array instead."""
    return a.ctypes.data == b.ctypes.data


# ---- streaming stores: the one-pass ops at DRAM size ------------------------------------------------
# An output far larger than the LLC cannot stay cached, yet each ordinary store first reads its line
# from DRAM (read-for-ownership): 3 DRAM transfers per element of a 1-read op instead of 2. Non-
# temporal stores skip that read. numpy 2.x's maximum does so at this size (np.maximum ran at 1.13x
# the copy roof and 1.15x our ReLU at 1 thread here); with them our ReLU ran at 1.53x its ordinary
# stores and 1.32x np.maximum (1 thread, 128 MiB f64, same process). Batch norm streams plane by
# plane (NCHW) or pixel by pixel (NHWC), each with its own head and tail; rows under 1 KiB do not
# stream (the callers' rule, STREAM_ROW_MIN: 7x7 planes ran at 0.28x of ordinary stores). Layer
# norm's pipelined normalise loop streams too (_normalize_and_sum with ``stream``; see "one call per row" above for
# what it took). The callers pass ``stream`` (rooflab/families/elementwise/cpu.py: output >=
# the LLC) and never for in-place calls, where the line is read anyway. The unfused chains keep
# ordinary stores (their intermediates are re-read).


@njit(inline="always")
def _stream_span(o, L):
    """(h, e): o[h:e] is whole aligned vectors of L lanes (non-temporal stores need them), o[:h] and
    o[e:] go through scalar stores; (n, n) where o can never be aligned (an odd byte offset)."""
    n = o.size
    vb = L * o.itemsize
    addr = o.ctypes.data
    if addr % o.itemsize:
        return n, n
    h = min(n, ((vb - addr % vb) % vb) // o.itemsize)
    return h, h + (n - h) // L * L


@njit(fastmath=FM, error_model="numpy", inline="always")
def _add_stream(o, x, y):
    L = vlanes(o)
    h, e = _stream_span(o, L)
    for i in range(h):
        o[i] = x[i] + y[i]
    for i in range(h, e, L):
        vstream(o, i, vadd(vload(x, i), vload(y, i)))
    for i in range(e, o.size):
        o[i] = x[i] + y[i]
    sfence()


@njit(fastmath=FM, error_model="numpy", inline="always")
def _scale_stream(o, x, s):
    L = vlanes(o)
    h, e = _stream_span(o, L)
    sv = vsplat(s)
    for i in range(h):
        o[i] = s * x[i]
    for i in range(h, e, L):
        vstream(o, i, vmul(sv, vload(x, i)))
    for i in range(e, o.size):
        o[i] = s * x[i]
    sfence()


@njit(fastmath=FM, error_model="numpy", inline="always")
def _relu_stream(o, x):
    L = vlanes(o)
    h, e = _stream_span(o, L)
    zero = x.dtype.type(0)
    zv = vzero(x)
    for i in range(h):
        o[i] = _max_keepnan(x[i], zero)
    for i in range(h, e, L):
        vstream(o, i, vmax_keepnan(vload(x, i), zv))
    for i in range(e, o.size):
        o[i] = _max_keepnan(x[i], zero)
    sfence()


@njit(fastmath=FM, error_model="numpy", inline="always")
def _add_body(o, x, y, reps, stream):
    if stream and not _same(o, x) and not _same(o, y):
        for _ in range(reps):
            _add_stream(o, x, y)
    elif _same(o, x):
        for _ in range(reps):
            for i in range(o.size):
                o[i] = o[i] + y[i]
    elif _same(o, y):
        for _ in range(reps):
            for i in range(o.size):
                o[i] = x[i] + o[i]
    else:
        for _ in range(reps):
            for i in range(o.size):
                o[i] = x[i] + y[i]


@njit(parallel=True, fastmath=FM, error_model="numpy", cache=True)
def add(out, a, b, reps, nchunks, stream=False):
    """out = a + b (1-D views); ``stream``: non-temporal stores (an output that cannot stay cached)."""
    n = out.size
    for t in prange(nchunks):
        lo, hi = _chunk(n, t, nchunks)
        _add_body(out[lo:hi], a[lo:hi], b[lo:hi], reps, stream)


@njit(fastmath=FM, error_model="numpy", cache=True)
def add_serial(out, a, b, reps, stream=False):
    _add_body(out, a, b, reps, stream)


@njit(fastmath=FM, error_model="numpy", inline="always")
def _scale_body(o, a, s, reps, stream):
    if stream and not _same(o, a):
        for _ in range(reps):
            _scale_stream(o, a, s)
    elif _same(o, a):
        for _ in range(reps):
            for i in range(o.size):
                o[i] = s * o[i]
    else:
        for _ in range(reps):
            for i in range(o.size):
                o[i] = s * a[i]


@njit(parallel=True, fastmath=FM, error_model="numpy", cache=True)
def scale(out, x, s, reps, nchunks, stream=False):
    """out = s * x."""
    n = out.size
    for t in prange(nchunks):
        lo, hi = _chunk(n, t, nchunks)
        _scale_body(out[lo:hi], x[lo:hi], s, reps, stream)


@njit(fastmath=FM, error_model="numpy", cache=True)
def scale_serial(out, x, s, reps, stream=False):
    _scale_body(out, x, s, reps, stream)


@njit(fastmath=FM, error_model="numpy", inline="always")
def _relu_body(o, a, reps, stream):
    zero = a.dtype.type(0)
    if stream and not _same(o, a):
        for _ in range(reps):
            _relu_stream(o, a)
    elif _same(o, a):
        for _ in range(reps):
            for i in range(o.size):
                o[i] = _max_keepnan(o[i], zero)
    else:
        for _ in range(reps):
            for i in range(o.size):
                o[i] = _max_keepnan(a[i], zero)


@njit(parallel=True, fastmath=FM, error_model="numpy", cache=True)
def relu(out, x, reps, nchunks, stream=False):
    """out = max(x, 0) (out may be x)."""
    n = out.size
    for t in prange(nchunks):
        lo, hi = _chunk(n, t, nchunks)
        _relu_body(out[lo:hi], x[lo:hi], reps, stream)


@njit(fastmath=FM, error_model="numpy", cache=True)
def relu_serial(out, x, reps, stream=False):
    _relu_body(out, x, reps, stream)


@njit(fastmath=FM, error_model="numpy", inline="always")
def _gelu_body(o, a, reps):
    if _same(o, a):
        for _ in range(reps):
            for i in range(o.size):
                o[i] = fgelu(o[i])
    else:
        for _ in range(reps):
            for i in range(o.size):
                o[i] = fgelu(a[i])


@njit(parallel=True, fastmath=FM, error_model="numpy", cache=True)
def gelu(out, x, reps, nchunks):
    """out = tanh-GELU(x) (out may be x)."""
    n = out.size
    for t in prange(nchunks):
        lo, hi = _chunk(n, t, nchunks)
        _gelu_body(out[lo:hi], x[lo:hi], reps)


@njit(fastmath=FM, error_model="numpy", cache=True)
def gelu_serial(out, x, reps):
    _gelu_body(out, x, reps)


# ---- channel-wise: batch norm (inference) in both layouts -----------------------------------------
# Row-shaped kernels take [lo, hi) of their rows (planes, pixels, rows); ``op`` splits the rows
# over threads, ``op_serial`` takes them all.


@njit(fastmath=FM, error_model="numpy", inline="always")
def _bn_plane_stream(o, x, s, b):
    L = vlanes(o)
    h, e = _stream_span(o, L)
    sv = vsplat(s)
    bv = vsplat(b)
    for i in range(h):
        o[i] = x[i] * s + b
    for i in range(h, e, L):
        vstream(o, i, vfma(vload(x, i), sv, bv))
    for i in range(e, o.size):
        o[i] = x[i] * s + b


@njit(fastmath=FM, error_model="numpy", inline="always")
def _bn_planes(out, x, scale, shift, lo, hi, reps, stream):
    C = scale.size
    if stream and not _same(out, x):
        for _ in range(reps):
            for p in range(lo, hi):
                _bn_plane_stream(out[p], x[p], scale[p % C], shift[p % C])
        sfence()
        return
    for _ in range(reps):
        for p in range(lo, hi):
            s = scale[p % C]
            b = shift[p % C]
            xr = x[p]
            yr = out[p]
            for i in range(xr.size):
                yr[i] = xr[i] * s + b


@njit(parallel=True, fastmath=FM, error_model="numpy", cache=True)
def batchnorm_nchw(out, x, scale, shift, reps, nchunks, stream=False):
    """x, out: (N*C, H*W) planes; plane p has channel p % C: one scalar FMA pair per plane."""
    for t in prange(nchunks):
        lo, hi = _rows(x.shape[0], t, nchunks)
        _bn_planes(out, x, scale, shift, lo, hi, reps, stream)


@njit(fastmath=FM, error_model="numpy", cache=True)
def batchnorm_nchw_serial(out, x, scale, shift, reps, stream=False):
    _bn_planes(out, x, scale, shift, 0, x.shape[0], reps, stream)


@njit(fastmath=FM, error_model="numpy", inline="always")
def _bn_pixel_stream(o, x, scale, shift):
    L = vlanes(o)
    h, e = _stream_span(o, L)
    for i in range(h):
        o[i] = x[i] * scale[i] + shift[i]
    for i in range(h, e, L):
        vstream(o, i, vfma(vload(x, i), vload(scale, i), vload(shift, i)))
    for i in range(e, o.size):
        o[i] = x[i] * scale[i] + shift[i]


@njit(fastmath=FM, error_model="numpy", inline="always")
def _bn_pixels(out, x, scale, shift, lo, hi, reps, stream):
    if stream and not _same(out, x):
        for _ in range(reps):
            for p in range(lo, hi):
                _bn_pixel_stream(out[p], x[p], scale, shift)
        sfence()
        return
    for _ in range(reps):
        for p in range(lo, hi):
            xr = x[p]
            yr = out[p]
            for c in range(xr.size):
                yr[c] = xr[c] * scale[c] + shift[c]


@njit(parallel=True, fastmath=FM, error_model="numpy", cache=True)
def batchnorm_nhwc(out, x, scale, shift, reps, nchunks, stream=False):
    """x, out: (N*H*W, C) pixels; the inner loop runs over C with scale/shift vectors (L1-resident)."""
    for t in prange(nchunks):
        lo, hi = _rows(x.shape[0], t, nchunks)
        _bn_pixels(out, x, scale, shift, lo, hi, reps, stream)


@njit(fastmath=FM, error_model="numpy", cache=True)
def batchnorm_nhwc_serial(out, x, scale, shift, reps, stream=False):
    _bn_pixels(out, x, scale, shift, 0, x.shape[0], reps, stream)


# ---- row ops: softmax and layer norm --------------------------------------------------------------


@njit(fastmath=FM_SUM, error_model="numpy")
def _max(x):
    m = x[0]
    for i in range(x.size):
        m = _fmax(m, x[i])
    return m


@njit(fastmath=FM_SUM, error_model="numpy")
def _exp_store_sum(y, x, m):
    s = x.dtype.type(0)
    for i in range(x.size):
        e = fexp(x[i] - m)
        y[i] = e
        s += e
    return s


@njit(fastmath=FM, error_model="numpy")
def _scale_inplace(y, inv):
    for i in range(y.size):
        y[i] = y[i] * inv


@njit(fastmath=FM_SUM | {"nnan"}, error_model="numpy")
def _scale_and_max(y, inv, x_next):
    """Scale row ``y`` in place and return the max of the next row: the DRAM read of row r+1
    streams in the same loop as the write of row r (copy's pattern, as layer norm). With a store
    in the loop LLVM vectorizes the maxnum reduction only under ``nnan`` (scalar code ran 3.5x
    slower); a NaN in row r+1 still makes that row NaN, through its exponentials' sum."""
    m = x_next[0]
    for i in range(y.size):
        y[i] = y[i] * inv
        m = _fmax(m, x_next[i])
    return m


@njit(fastmath=FM_SUM | {"nnan"}, error_model="numpy")
def _exp_store_sum_and_max(y, x, m, x_next):
    """exp(x - m) into ``y`` and its sum, and the max of ``x_next`` (the next segment, read from
    DRAM in the same loop: the read overlaps the exponentials); len(x_next) <= len(x), the rest
    of ``x`` by _exp_store_sum. ``nnan`` as in _scale_and_max; a NaN still reaches the sum."""
    s = x.dtype.type(0)
    mn = x_next[0]
    k = x_next.size
    for i in range(k):
        e = fexp(x[i] - m)
        y[i] = e
        s += e
        mn = _fmax(mn, x_next[i])
    if k < x.size:
        s += _exp_store_sum(y[k:], x[k:], m)
    return s, mn


@njit(fastmath=FM, error_model="numpy", inline="always")
def _softmax_long_row(y, x, block, seg_max, m, x_next):
    """A row longer than ``block``, software-pipelined by segment: the loop that stores segment
    k's exp(x - its max) also takes the max of segment k + 1 (its DRAM read), and the last sweep,
    which scales each cached segment by exp(m_k - M) / S, takes the max of the next row's first
    segment in its first loop (the last row passes itself). ``m`` is this row's first-segment max;
    returns the next row's.
    The running sum is rescaled when the max grows (online softmax); one exp per element."""
    T = x.dtype.type
    n = x.size
    M = T(-np.inf)
    S = T(0)
    k = 0
    for lo in range(0, n, block):
        hi = min(lo + block, n)
        if hi < n:
            s, m_next = _exp_store_sum_and_max(y[lo:hi], x[lo:hi], m, x[hi : min(hi + block, n)])
        else:
            s = _exp_store_sum(y[lo:hi], x[lo:hi], m)
            m_next = m
        seg_max[k] = m
        if m > M:
            S = S * fexp(M - m) + s
            M = m
        else:
            S += s * fexp(m - M)
        m = m_next
        k += 1
    inv = T(1.0) / S
    m = _scale_and_max(y[:block], fexp(seg_max[0] - M) * inv, x_next[:block])
    k = 1
    for lo in range(block, n, block):
        _scale_inplace(y[lo : min(lo + block, n)], fexp(seg_max[k] - M) * inv)
        k += 1
    return m


@njit(fastmath=FM, error_model="numpy", inline="always")
def _softmax_rows(out, x, lo, hi, reps, block):
    """Rows lo..hi. A row that fits in ``block`` is read from DRAM once, by the max that the
    previous row's scale loop carries (software-pipelined), then exp-and-sum and the scale hit
    the cache. Longer rows: _softmax_long_row, pipelined the same way by segment."""
    n = x.shape[1]
    if hi <= lo:
        return
    if n > block:
        seg_max = np.empty(-(-n // block), x.dtype)
        for _ in range(reps):
            m = _max(x[lo, :block])
            for r in range(lo, hi):  # the last row "reads ahead" itself, as below
                m = _softmax_long_row(out[r], x[r], block, seg_max, m, x[min(r + 1, hi - 1)])
        return
    one = x.dtype.type(1.0)
    for _ in range(reps):
        m = _max(x[lo])
        for r in range(lo, hi):  # the last row "reads ahead" itself: no branch (see the header)
            s = _exp_store_sum(out[r], x[r], m)
            m = _scale_and_max(out[r], one / s, x[min(r + 1, hi - 1)])


@njit(parallel=True, fastmath=FM, error_model="numpy", cache=True)
def softmax(out, x, reps, nchunks, block):
    """Row softmax of a 2-D array (rows split over threads)."""
    for t in prange(nchunks):
        lo, hi = _rows(x.shape[0], t, nchunks)
        _softmax_rows(out, x, lo, hi, reps, block)


@njit(fastmath=FM, error_model="numpy", cache=True)
def softmax_serial(out, x, reps, block):
    _softmax_rows(out, x, 0, x.shape[0], reps, block)


@njit(fastmath=FM_SUM, error_model="numpy")
def _sum(x):
    s = x.dtype.type(0)
    for i in range(x.size):
        s += x[i]
    return s


@njit(fastmath=FM_SUM, error_model="numpy")
def _sqdev(x, mu):
    s = x.dtype.type(0)
    for i in range(x.size):
        d = x[i] - mu
        s += d * d
    return s


@njit(fastmath=FM, error_model="numpy")
def _normalize(y, x, mu, rstd, g, b):
    for i in range(x.size):
        y[i] = (x[i] - mu) * rstd * g[i] + b[i]


@njit(fastmath=FM_SUM, error_model="numpy", inline="always")
def _normalize_and_sum(y, x, mu, rstd, g, b, x_next, stream):
    """Normalise row ``x`` into ``y`` and return the sum of the next row: the DRAM read of row r+1
    streams in the same loop as the write of row r (copy's pattern). Explicit vectors, inlined: no
    call per row (see "one call per row" in the header). ``stream``: non-temporal stores (scalar
    head to the vector boundary, aligned body); else ordinary vector stores (y may be x)."""
    L = vlanes(y)
    h, e = _stream_span(y, L) if stream else (0, x.size // L * L)
    s = x.dtype.type(0)
    for i in range(h):
        y[i] = (x[i] - mu) * rstd * g[i] + b[i]
        s += x_next[i]
    muv = vsplat(mu)
    rv = vsplat(rstd)
    acc = vzero(x)
    for i in range(h, e, L):
        v = vfma(vmul(vsub(vload(x, i), muv), rv), vload(g, i), vload(b, i))
        if stream:
            vstream(y, i, v)
        else:
            vstore(y, i, v)
        acc = vadd(acc, vload(x_next, i))
    for i in range(e, x.size):
        y[i] = (x[i] - mu) * rstd * g[i] + b[i]
        s += x_next[i]
    return s + vhsum(acc)


@njit(fastmath=FM, error_model="numpy", inline="always")
def _layernorm_long_row(y, x, g, b, eps, block):
    """A row longer than ``block``: Chan et al. merge (count, mean, M2) of each cached segment."""
    n = x.size
    T = x.dtype.type  # counts as the dtype: an int64 operand would promote f32 math to f64
    one = T(1.0)
    cnt = T(0)
    mu = T(0)
    m2 = T(0)
    for lo in range(0, n, block):
        seg = x[lo : min(lo + block, n)]
        nb = T(seg.size)
        mb = _sum(seg) / nb
        m2b = _sqdev(seg, mb)
        tot = cnt + nb
        d = mb - mu
        mu = mu + d * (nb / tot)
        m2 = m2 + m2b + d * d * (cnt * nb / tot)
        cnt = tot
    var = m2 / T(n)
    _normalize(y, x, mu, one / np.sqrt(var + eps), g, b)


@njit(fastmath=FM, error_model="numpy", inline="always")
def _layernorm_rows(out, x, gamma, beta, eps, lo, hi, reps, block, stream):
    """Rows lo..hi. A row that fits in ``block`` is read from DRAM once, by the sum that the
    previous row's normalise loop carries (software-pipelined), then its deviations and its
    normalise hit the cache; two-pass mean and variance over the cached row (stable)."""
    n = x.shape[1]
    if n > block:
        for _ in range(reps):
            for r in range(lo, hi):
                _layernorm_long_row(out[r], x[r], gamma, beta, eps, block)
        return
    if hi <= lo:
        return
    stream = stream and not _same(out, x)
    T = x.dtype.type
    one = T(1.0)
    for _ in range(reps):
        mu = _sum(x[lo]) / T(n)
        for r in range(lo, hi):  # the last row "reads ahead" itself: no branch (see the header)
            rstd = one / np.sqrt(_sqdev(x[r], mu) / T(n) + eps)
            mu = _normalize_and_sum(out[r], x[r], mu, rstd, gamma, beta, x[min(r + 1, hi - 1)], stream) / T(n)
        if stream:
            sfence()


@njit(parallel=True, fastmath=FM, error_model="numpy", cache=True)
def layernorm(out, x, gamma, beta, eps, reps, nchunks, block, stream=False):
    """Row layer norm of a 2-D array: (x - mean) / sqrt(var + eps) * gamma + beta; ``stream``:
    non-temporal stores of the output (not in place, where the line is read anyway)."""
    for t in prange(nchunks):
        lo, hi = _rows(x.shape[0], t, nchunks)
        _layernorm_rows(out, x, gamma, beta, eps, lo, hi, reps, block, stream)


@njit(fastmath=FM, error_model="numpy", cache=True)
def layernorm_serial(out, x, gamma, beta, eps, reps, block, stream=False):
    _layernorm_rows(out, x, gamma, beta, eps, 0, x.shape[0], reps, block, stream)


# ---- the two fused chains, and the bias add their unfused versions need ---------------------------


@njit(fastmath=FM, error_model="numpy", inline="always")
def _bias_rows(out, x, bias, lo, hi, reps):
    for _ in range(reps):
        for r in range(lo, hi):
            xr = x[r]
            yr = out[r]
            for c in range(xr.size):
                yr[c] = xr[c] + bias[c]


@njit(parallel=True, fastmath=FM, error_model="numpy", cache=True)
def bias_rows(out, x, bias, reps, nchunks):
    """out[r, :] = x[r, :] + bias (the first op of the unfused MLP chain)."""
    for t in prange(nchunks):
        lo, hi = _rows(x.shape[0], t, nchunks)
        _bias_rows(out, x, bias, lo, hi, reps)


@njit(fastmath=FM, error_model="numpy", cache=True)
def bias_rows_serial(out, x, bias, reps):
    _bias_rows(out, x, bias, 0, x.shape[0], reps)


@njit(fastmath=FM, error_model="numpy", inline="always")
def _bias_gelu_add_rows(out, x, bias, res, lo, hi, reps):
    for _ in range(reps):
        for r in range(lo, hi):
            xr = x[r]
            rr = res[r]
            yr = out[r]
            for c in range(xr.size):
                yr[c] = fgelu(xr[c] + bias[c]) + rr[c]


@njit(parallel=True, fastmath=FM, error_model="numpy", cache=True)
def bias_gelu_add(out, x, bias, res, reps, nchunks):
    """Transformer MLP chain in one pass: out = gelu(x + bias) + res; (rows, cols) arrays."""
    for t in prange(nchunks):
        lo, hi = _rows(x.shape[0], t, nchunks)
        _bias_gelu_add_rows(out, x, bias, res, lo, hi, reps)


@njit(fastmath=FM, error_model="numpy", cache=True)
def bias_gelu_add_serial(out, x, bias, res, reps):
    _bias_gelu_add_rows(out, x, bias, res, 0, x.shape[0], reps)


@njit(fastmath=FM, error_model="numpy", inline="always")
def _bn_add_relu_planes(out, x, scale, shift, res, lo, hi, reps):
    C = scale.size
    zero = x.dtype.type(0)
    for _ in range(reps):
        for p in range(lo, hi):
            s = scale[p % C]
            b = shift[p % C]
            xr = x[p]
            rr = res[p]
            yr = out[p]
            for i in range(xr.size):
                yr[i] = _max_keepnan(xr[i] * s + b + rr[i], zero)


@njit(parallel=True, fastmath=FM, error_model="numpy", cache=True)
def bn_add_relu_nchw(out, x, scale, shift, res, reps, nchunks):
    """ResNet block tail in one pass: out = relu(x * scale[c] + shift[c] + res); (N*C, H*W) planes."""
    for t in prange(nchunks):
        lo, hi = _rows(x.shape[0], t, nchunks)
        _bn_add_relu_planes(out, x, scale, shift, res, lo, hi, reps)


@njit(fastmath=FM, error_model="numpy", cache=True)
def bn_add_relu_nchw_serial(out, x, scale, shift, res, reps):
    _bn_add_relu_planes(out, x, scale, shift, res, 0, x.shape[0], reps)


# ---- the latency floor: a chain of tiny ops in one call -------------------------------------------

# op k of a chain is CHAIN_OPS[k % 4] with CHAIN_CONSTS[k % 4]: multiply, add, maximum, multiply
CHAIN_OPS = ("multiply", "add", "maximum", "multiply")
CHAIN_CONSTS = (1.5, -0.25, 0.0, 0.5)


@njit(fastmath=FM, error_model="numpy", cache=True)
def chain_fused(out, x, n_ops):
    """The whole chain per element, one dispatch: what a fusing compiler makes of N tiny ops."""
    c0 = x.dtype.type(1.5)
    c1 = x.dtype.type(-0.25)
    c2 = x.dtype.type(0.0)
    c3 = x.dtype.type(0.5)
    for i in range(x.size):
        v = x[i]
        for k in range(n_ops):
            j = k & 3
            if j == 0:
                v = v * c0
            elif j == 1:
                v = v + c1
            elif j == 2:
                v = _max_keepnan(v, c2)
            else:
                v = v * c3
        out[i] = v
