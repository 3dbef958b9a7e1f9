"""Explicit SIMD for the quantized kernels (kernels/cpu/qgemm.py): int32 vectors fed by u8 x s8 dot
steps, and 4-/8-bit weights widened to float32 vectors in registers.

The vectors are simd.py's ``VecType`` (int32 or float32 lanes, one register of simd.BITS bits), so
the float intrinsics of simd.py (vfma, vload, vsplat, vhsum, ...) apply to the widened weights.

  iload(a, i) / istore(a, i, v)   L int32 lanes at a[i] of a C-contiguous 1-D int32 array
  ibcast(a, i)                    a[i] (an int32: 4 packed u8) in every lane
  izero(a)                        zero int32 vector (a: any int32 array)
  iadd(x, y)                      lane-wise int32 add
  dpbusd(acc, a, b)               acc + per int32 lane the sum of 4 products u8(a byte) x s8(b byte):
                                  ``vpdpbusd`` where the target has VNNI at this width (AVX-512 VNNI,
                                  or AVX-VNNI / AVX-512VL for ymm), else the AVX2 sequence
                                  ``vpmaddubsw`` + ``vpmaddwd`` by ones + ``vpaddd`` (pairs summed to
                                  s16 with saturation: callers keep |pair| < 2^15, e.g. 7-bit weights);
                                  on a CPU with neither (an Arm host, an AVX-only x86), plain LLVM IR
                                  (widen, multiply, add groups of 4): exact, never an x86 intrinsic
  dpbusd2(acc, a1, b1, a2, b2)    acc + a1.b1 + a2.b2 for u8 operands below 64 (4-bit codes): on AVX2
                                  the two vpmaddubsw results summed as s16 before one vpmaddwd
                                  (3 multiply uops instead of 4); two dot steps elsewhere
  nib_lo(p, i) / nib_hi(p, i)     F = BITS/32 bytes at p[i] (uint8), their low / high nibbles as
                                  float32 lanes (vpmovzxbd + vpandd/vpsrld + vcvtdq2ps)
  byte_f32(p, i)                  F bytes at p[i] (uint8) as float32 lanes

  inib_lo(v) / inib_hi(v)         the low / high nibble of every byte of an int32 vector (bytes 0..15)
  icvt(v)                         int32 lanes -> float32 lanes
  bscale(s, i)                    ILANES / 4 floats at s[i], each in 4 consecutive lanes (one block's
                                  scale beside the 4 int32 lanes of its 16 packed bytes)

``DOT_PATH`` names the dot step compiled ("vnni-512", "vnni-256", "avx2"); like the width it is
fixed by numba's target features, which key numba's cache (rooflab/jitcache.py).

Napkin: one zmm vpdpbusd = 64 MACs; Zen 4 issues one per cycle (128 int8 ops/cycle), Intel server
cores two. The AVX2 sequence is 2 multiply uops per 32 MACs.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from . import simd
from .simd import _ints, _ptr, _splat, vec_type

BITS = simd.BITS
ILANES = BITS // 32  # int32 lanes (= float32 lanes) per vector
_I32 = types.int32
_VI = vec_type(_I32, ILANES)
_VF = vec_type(types.float32, ILANES)


def dot_path(features: str | None = None, bits: int | None = None) -> str:
    """The u8 x s8 dot step numba compiles for these features at this width."""
    f = set((simd._target_features() if features is None else features).split(","))
    bits = BITS if bits is None else bits
    if bits >= 512 and {"+avx512vnni", "+avx512f"} <= f:
        return "vnni-512"
    if bits == 256 and ("+avxvnni" in f or {"+avx512vnni", "+avx512vl"} <= f):
        return "vnni-256"
    if "+avx2" in f and bits >= 256:
        return "avx2"
    return "none"


DOT_PATH = dot_path()


def _int_contig(arr, dtype) -> bool:
    return isinstance(arr, types.Array) and arr.ndim == 1 and arr.layout == "C" and arr.dtype == dtype


def _is(v, ty) -> bool:
    return v == ty


@intrinsic
def iload(typingctx, arr, i):
    if not (_int_contig(arr, _I32) and _ints(i)):
        return None

    def codegen(context, builder, sig, args):
        ptr = _ptr(context, builder, sig.args[0], args[0], args[1:], sig.args[1:])
        llty = context.get_value_type(_VI)
        return builder.load(builder.bitcast(ptr, llty.as_pointer()), align=4)

    return _VI(arr, i), codegen


@intrinsic
def istore(typingctx, arr, i, v):
    if not (_int_contig(arr, _I32) and _ints(i) and _is(v, _VI)):
        return None

    def codegen(context, builder, sig, args):
        ptr = _ptr(context, builder, sig.args[0], args[0], args[1:2], sig.args[1:2])
        builder.store(args[2], builder.bitcast(ptr, context.get_value_type(_VI).as_pointer()), align=4)
        return context.get_dummy_value()

    return types.none(arr, i, v), codegen


@intrinsic
def ibcast(typingctx, arr, i):
    if not (_int_contig(arr, _I32) and _ints(i)):
        return None

    def codegen(context, builder, sig, args):
        ptr = _ptr(context, builder, sig.args[0], args[0], args[1:], sig.args[1:])
        return _splat(builder, builder.load(ptr), context.get_value_type(_VI))

    return _VI(arr, i), codegen


@intrinsic
def izero(typingctx, arr):
    if not (isinstance(arr, types.Array) and arr.dtype == _I32):
        return None

    def codegen(context, builder, sig, args):
        return ir.Constant(context.get_value_type(_VI), None)

    return _VI(arr), codegen


@intrinsic
def iadd(typingctx, x, y):
    if not (_is(x, _VI) and _is(y, _VI)):
        return None

    def codegen(context, builder, sig, args):
        return builder.add(args[0], args[1])

    return _VI(x, y), codegen


def _declare(builder, name, ret, argtys):
    mod = builder.module
    fn = mod.globals.get(name)
    if fn is None:
        fn = ir.Function(mod, ir.FunctionType(ret, argtys), name=name)
    return fn


def _dot_codegen(context, builder, sig, args):
    acc, a, b = args
    vi = context.get_value_type(_VI)
    vb = ir.VectorType(ir.IntType(8), ILANES * 4)
    if DOT_PATH.startswith("vnni"):
        name = f"llvm.x86.avx512.vpdpbusd.{BITS}"
        fn = _declare(builder, name, vi, [vi, vb, vb])
        return builder.call(fn, [acc, builder.bitcast(a, vb), builder.bitcast(b, vb)])
    if DOT_PATH == "none":  # no x86 dot instruction: plain IR (widen, multiply, sum each group of 4)
        n = ILANES * 4
        wide = ir.VectorType(ir.IntType(32), n)
        prod = builder.mul(builder.zext(builder.bitcast(a, vb), wide), builder.sext(builder.bitcast(b, vb), wide))
        for t in range(4):
            lane = builder.shuffle_vector(
                prod, prod, ir.Constant(ir.VectorType(ir.IntType(32), ILANES), list(range(t, n, 4)))
            )
            acc = builder.add(acc, lane)
        return acc
    # AVX2: u8 x s8 pairs -> s16 (saturating), pairs of s16 -> s32, add
    vs = ir.VectorType(ir.IntType(16), ILANES * 2)
    suffix = "avx512.pmaddubs.w.512" if BITS == 512 else "avx2.pmadd.ub.sw"
    madd = "avx512.pmaddw.d.512" if BITS == 512 else "avx2.pmadd.wd"
    f1 = _declare(builder, f"llvm.x86.{suffix}", vs, [vb, vb])
    f2 = _declare(builder, f"llvm.x86.{madd}", vi, [vs, vs])
    pairs = builder.call(f1, [builder.bitcast(a, vb), builder.bitcast(b, vb)])
    quads = builder.call(f2, [pairs, ir.Constant(vs, [1] * (ILANES * 2))])
    return builder.add(acc, quads)


@intrinsic
def dpbusd(typingctx, acc, a, b):
    if not (_is(acc, _VI) and _is(a, _VI) and _is(b, _VI)):
        return None
    return _VI(acc, a, b), _dot_codegen


def _dot2_codegen(context, builder, sig, args):
    """acc + a1.b1 + a2.b2 with the u8 operands below 64: on AVX2 the two pmaddubsw results are added
    as s16 (|pair| <= 2 x 63 x 128 each, their sum below 2^15) before ONE pmaddwd by ones: 3
    multiply uops where two dpbusd steps take 4; elsewhere two dot steps."""
    acc, a1, b1, a2, b2 = args
    if DOT_PATH != "avx2":
        inner = _dot_codegen(context, builder, sig, [acc, a1, b1])
        return _dot_codegen(context, builder, sig, [inner, a2, b2])
    vi = context.get_value_type(_VI)
    vb = ir.VectorType(ir.IntType(8), ILANES * 4)
    vs = ir.VectorType(ir.IntType(16), ILANES * 2)
    suffix = "avx512.pmaddubs.w.512" if BITS == 512 else "avx2.pmadd.ub.sw"
    madd = "avx512.pmaddw.d.512" if BITS == 512 else "avx2.pmadd.wd"
    f1 = _declare(builder, f"llvm.x86.{suffix}", vs, [vb, vb])
    f2 = _declare(builder, f"llvm.x86.{madd}", vi, [vs, vs])
    p1 = builder.call(f1, [builder.bitcast(a1, vb), builder.bitcast(b1, vb)])
    p2 = builder.call(f1, [builder.bitcast(a2, vb), builder.bitcast(b2, vb)])
    quads = builder.call(f2, [builder.add(p1, p2), ir.Constant(vs, [1] * (ILANES * 2))])
    return builder.add(acc, quads)


@intrinsic
def dpbusd2(typingctx, acc, a1, b1, a2, b2):
    if not all(_is(x, _VI) for x in (acc, a1, b1, a2, b2)):
        return None
    return _VI(acc, a1, b1, a2, b2), _dot2_codegen


def _widen(shift: int | None, mask: int | None):
    """Codegen: ILANES bytes at p[i] -> (>> shift) (& mask) -> float32 lanes."""

    def codegen(context, builder, sig, args):
        ptr = _ptr(context, builder, sig.args[0], args[0], args[1:], sig.args[1:])
        v8 = ir.VectorType(ir.IntType(8), ILANES)
        raw = builder.load(builder.bitcast(ptr, v8.as_pointer()), align=1)
        if shift:
            raw = builder.lshr(raw, ir.Constant(v8, [shift] * ILANES))
        if mask is not None:
            raw = builder.and_(raw, ir.Constant(v8, [mask] * ILANES))
        wide = builder.zext(raw, ir.VectorType(ir.IntType(32), ILANES))
        return builder.uitofp(wide, context.get_value_type(_VF))

    return codegen


def _u8_sig(arr, i):
    return _int_contig(arr, types.uint8) and _ints(i)


@intrinsic
def nib_lo(typingctx, arr, i):
    return (_VF(arr, i), _widen(None, 0x0F)) if _u8_sig(arr, i) else None


@intrinsic
def nib_hi(typingctx, arr, i):
    return (_VF(arr, i), _widen(4, None)) if _u8_sig(arr, i) else None


@intrinsic
def byte_f32(typingctx, arr, i):
    return (_VF(arr, i), _widen(None, None)) if _u8_sig(arr, i) else None


def _nibble(shift: int):
    def codegen(context, builder, sig, args):
        vi = context.get_value_type(_VI)
        v = builder.lshr(args[0], ir.Constant(vi, [shift] * ILANES)) if shift else args[0]
        return builder.and_(v, ir.Constant(vi, [0x0F0F0F0F] * ILANES))

    return codegen


@intrinsic
def inib_lo(typingctx, v):
    return (_VI(v), _nibble(0)) if _is(v, _VI) else None


@intrinsic
def inib_hi(typingctx, v):
    return (_VI(v), _nibble(4)) if _is(v, _VI) else None


@intrinsic
def icvt(typingctx, v):
    if not _is(v, _VI):
        return None

    def codegen(context, builder, sig, args):
        return builder.sitofp(args[0], context.get_value_type(_VF))

    return _VF(v), codegen


@intrinsic
def bscale(typingctx, arr, i):
    if not (_int_contig(arr, types.float32) and _ints(i)):
        return None

    def codegen(context, builder, sig, args):
        ptr = _ptr(context, builder, sig.args[0], args[0], args[1:], sig.args[1:])
        g = max(ILANES // 4, 1)
        small = builder.load(builder.bitcast(ptr, ir.VectorType(ir.FloatType(), g).as_pointer()), align=4)
        mask = ir.Constant(ir.VectorType(ir.IntType(32), ILANES), [lane // 4 for lane in range(ILANES)])
        return builder.shuffle_vector(small, small, mask)

    return _VF(arr, i), codegen


__all__ = ["BITS", "DOT_PATH", "ILANES", "byte_f32", "dot_path", "dpbusd", "iadd", "ibcast", "iload", "istore"]
__all__ += ["dpbusd2", "izero", "nib_hi", "nib_lo", "inib_lo", "inib_hi", "icvt", "bscale"]
