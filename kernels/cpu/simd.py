"""Explicit SIMD vectors for numba kernels, through ``@intrinsic`` (float32 and float64).

Why: numba's auto-vectorizers do not keep a register tile in registers (a GEMM 6x16 tile of scalar
accumulators gets reduction-vectorized over k, with gathers and spills: ~21 % of BLAS in FP32,
../shared/research/numba-gemm-conv.md). A vector value here is an LLVM ``<L x float>`` SSA value,
so 12 accumulators carried around a loop stay in 12 ymm/zmm registers and each call below is one
instruction in the hot loop.

Width: chosen once from the CPU numba compiles for (rooflab._numba_env removes LLVM's
prefer-256-bit tuning so zmm is usable): AVX-512 -> 512-bit (16 x f32, 8 x f64); AVX/AVX2 ->
256-bit (8 x f32, 4 x f64); otherwise 128-bit. ``ROOFLAB_SIMD_BITS=256`` (or 128/512) forces it, e.g.
to exercise the AVX2 path on an AVX-512 host; ``ROOFLAB_PREFER_256=1`` also selects 256. The width
is baked into the compiled code: both settings key numba's cache folder (rooflab/jitcache.py), as
every kernel source does; to emulate an AVX2 machine fully, also switch off the avx512 features in
NUMBA_CPU_FEATURES (stops LLVM using AVX-512 elsewhere).

API (all usable inside @njit code; the lane count follows the array's dtype; arrays must be
C-contiguous (layout 'C'); indices are not bounds-checked and never wrapped, i.e. -1 is NOT the
last element):

  vload(a, i) / vload2(a, i, j)         L elements starting at a[i] / a[i, j] (unaligned load)
  vstore(a, i, v) / vstore2(a, i, j, v)  store them back
  vstream(a, i, v)                      non-temporal store (vmovntp*: no read-for-ownership, the line
                                         goes around the caches); a[i] must be vector-aligned; end
                                         the streaming loop with sfence()
  vloadm(a, i, n) / vstorem(a, i, v, n)  masked: only the first min(n, L) lanes touch memory
                                         (loaded lanes beyond n are 0): vector tails without overrun
  vbcast(a, i) / vbcast2(a, i, j)       a[i] (a[i, j]) in every lane: one vbroadcastss/sd from memory
  vsplat(x)                             scalar value in every lane (float32 or float64 scalar)
  vzero(a)                              zero vector of a's dtype (a: an array, or np.float32/np.float64)
  vfma(a, b, c) = a * b + c            llvm.fma, one vfmadd instruction
  vadd, vsub, vmul, vmax, vmin          lane-wise (vmax/vmin: LLVM maxnum/minnum, a NaN lane loses)
  vmax_keepnan(a, b)                    lane-wise max that keeps a NaN of ``a`` (numpy's maximum):
                                         b where b > a, else a; one vmaxp* on x86
  vlanes(a)                             lanes of a vector of a's dtype (compile-time constant intp)
  vhsum(v)                              sum of the lanes (scalar)
  vget(v, k)                            lane k (scalar)
  prefetch(a, i) / prefetch2(a, i, j)   prefetcht0 of a[i] (a[i, j]) for reading
  prefetchw(a, i) / prefetchw2(a, i, j) prefetch for writing
  sfence()                              orders earlier non-temporal stores (after a vstream loop)

Python side: ``BITS``, ``LANES_F32``, ``LANES_F64``, ``lanes(dtype)``, ``describe()``, and
``ops(bits)`` which builds the same intrinsics for another width (a namespace; the module-level
names are ``ops(BITS)``).

Napkin: a 512-bit FMA on Zen 4 is two 256-bit halves, 2 pipes -> 32 FP32 FLOP/cycle either way; on
AVX-512 the 32 zmm registers allow taller tiles (more FMAs per load) than AVX2's 16 ymm.

Run: ``python -c "from rooflab.kernels.cpu import simd; print(simd.describe())"``; the asm check
of a kernel using it is in tests/test_gemm_cpu.py.
"""

from __future__ import annotations

import os
from types import SimpleNamespace

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, models, register_model

import rooflab._numba_env  # noqa: F401  (settles NUMBA_CPU_FEATURES before numba builds its target)

# ---- width -----------------------------------------------------------------------------------


def _target_features() -> str:
    """The feature string numba compiles for ('+avx2,-avx512f,...'), or the host's."""
    feats = os.environ.get("NUMBA_CPU_FEATURES", "")
    if not feats:
        try:
            import numba.core.config as cfg

            feats = cfg.CPU_FEATURES or ""
        except Exception:  # pragma: no cover
            feats = ""
    if not feats:
        try:
            import llvmlite.binding as llb

            feats = llb.get_host_cpu_features().flatten()
        except Exception:  # pragma: no cover
            feats = ""
    return feats


def bits_for(features: str, forced: str | None = None, prefer_256: bool = False) -> int:
    """The vector width the kernels are built for, from LLVM's feature string ('+avx2,-avx512f,...')
    and the two settings: the rule every machine's build follows (tests/test_machine_profiles.py)."""
    if forced:
        if forced not in ("128", "256", "512"):
            from rooflab.errors import RooflabError

            raise RooflabError(f"ROOFLAB_SIMD_BITS={forced!r} is not a vector width", "use 128, 256 or 512")
        return int(forced)
    feats = set(features.split(","))
    if "+avx512f" in feats and not prefer_256:
        return 512
    if "+avx2" in feats or "+avx" in feats:
        return 256
    return 128


def _detect_bits() -> int:
    return bits_for(
        _target_features(), os.environ.get("ROOFLAB_SIMD_BITS"), os.environ.get("ROOFLAB_PREFER_256") == "1"
    )


BITS = _detect_bits()
LANES_F32 = BITS // 32
LANES_F64 = BITS // 64


def lanes(dtype, bits: int | None = None) -> int:
    """Lanes of one vector of ``dtype`` (float32 or float64) at ``bits`` (default: BITS)."""
    return (bits or BITS) // (np.dtype(dtype).itemsize * 8)


def describe() -> str:
    isa = {512: "AVX-512", 256: "AVX2", 128: "SSE"}[BITS]
    return f"{isa}: {BITS}-bit vectors, {LANES_F32} x float32 / {LANES_F64} x float64"


# ---- the numba vector type ---------------------------------------------------------------------


class VecType(types.Type):
    """A SIMD vector of ``lanes`` x ``dtype`` (numba float32 or float64), held in one register."""

    def __init__(self, dtype, nlanes):
        self.dtype = dtype
        self.lanes = nlanes
        super().__init__(name=f"Vec{nlanes}x{dtype}")


@register_model(VecType)
class _VecModel(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        elem = dmm.lookup(fe_type.dtype).get_value_type()
        super().__init__(dmm, fe_type, ir.VectorType(elem, fe_type.lanes))


_VEC_TYPES: dict = {}


def vec_type(dtype, nlanes: int) -> VecType:
    key = (dtype, nlanes)
    if key not in _VEC_TYPES:
        _VEC_TYPES[key] = VecType(dtype, nlanes)
    return _VEC_TYPES[key]


_FLOATS = (types.float32, types.float64)


def _float_of(ty):
    """The float scalar type an argument denotes: array dtype, number class, or scalar type."""
    if isinstance(ty, types.Array):
        return ty.dtype if ty.dtype in _FLOATS else None
    if isinstance(ty, types.NumberClass):
        return ty.instance_type if ty.instance_type in _FLOATS else None
    if ty in _FLOATS:
        return ty
    return None


def _contig(arr, ndim) -> bool:
    return isinstance(arr, types.Array) and arr.ndim == ndim and arr.layout == "C" and arr.dtype in _FLOATS


def _ints(*tys) -> bool:
    return all(isinstance(t, types.Integer) for t in tys)


def _ptr(context, builder, aryty, ary, idx_vals, idx_tys):
    """Pointer to ary[idx...] without wraparound or bounds checks."""
    arr = context.make_array(aryty)(context, builder, ary)
    inds = [context.cast(builder, v, t, types.intp) for v, t in zip(idx_vals, idx_tys)]
    return cgutils.get_item_pointer(context, builder, aryty, arr, inds, wraparound=False, boundscheck=False)


def _vsuffix(vty: VecType) -> str:
    return f"v{vty.lanes}f{vty.dtype.bitwidth}"


def _splat(builder, scalar, lltype: ir.VectorType):
    undef = ir.Constant(lltype, ir.Undefined)
    one = builder.insert_element(undef, scalar, ir.Constant(ir.IntType(32), 0))
    mask = ir.Constant(ir.VectorType(ir.IntType(32), lltype.count), [0] * lltype.count)
    return builder.shuffle_vector(one, undef, mask)


def _lane_mask(builder, n_val, n_ty, context, nlanes):
    """<L x i1>: lane k is on when k < n."""
    n = context.cast(builder, n_val, n_ty, types.int64)
    iota = ir.Constant(ir.VectorType(ir.IntType(64), nlanes), list(range(nlanes)))
    return builder.icmp_signed("<", iota, _splat(builder, n, ir.VectorType(ir.IntType(64), nlanes)))


def ops(bits: int) -> SimpleNamespace:
    """All intrinsics for vectors of ``bits`` bits (128, 256 or 512)."""
    if bits not in (128, 256, 512):
        raise ValueError(f"vector width {bits} is not 128, 256 or 512")

    def vt(dtype) -> VecType:
        return vec_type(dtype, bits // dtype.bitwidth)

    def is_vec(*tys) -> bool:
        return all(isinstance(t, VecType) and t.lanes * t.dtype.bitwidth == bits for t in tys) and (
            len({t.dtype for t in tys}) == 1
        )

    # -- memory --

    @intrinsic
    def vload(typingctx, arr, i):
        if not (_contig(arr, 1) and _ints(i)):
            return None
        vty = vt(arr.dtype)

        def codegen(context, builder, sig, args):
            ptr = _ptr(context, builder, sig.args[0], args[0], args[1:], sig.args[1:])
            llty = context.get_value_type(vty)
            return builder.load(builder.bitcast(ptr, llty.as_pointer()), align=vty.dtype.bitwidth // 8)

        return vty(arr, i), codegen

    @intrinsic
    def vload2(typingctx, arr, i, j):
        if not (_contig(arr, 2) and _ints(i, j)):
            return None
        vty = vt(arr.dtype)

        def codegen(context, builder, sig, args):
            ptr = _ptr(context, builder, sig.args[0], args[0], args[1:], sig.args[1:])
            llty = context.get_value_type(vty)
            return builder.load(builder.bitcast(ptr, llty.as_pointer()), align=vty.dtype.bitwidth // 8)

        return vty(arr, i, j), codegen

    def _store_codegen(v, nontemporal):
        def codegen(context, builder, sig, args):
            ptr = _ptr(context, builder, sig.args[0], args[0], args[1:2], sig.args[1:2])
            llty = context.get_value_type(sig.args[2])
            align = (v.lanes if nontemporal else 1) * v.dtype.bitwidth // 8  # movnt needs a whole vector
            st = builder.store(args[2], builder.bitcast(ptr, llty.as_pointer()), align=align)
            if nontemporal:
                st.set_metadata("nontemporal", builder.module.add_metadata([ir.Constant(ir.IntType(32), 1)]))
            return context.get_dummy_value()

        return codegen

    @intrinsic
    def vstore(typingctx, arr, i, v):
        if not (_contig(arr, 1) and _ints(i) and is_vec(v) and v.dtype == arr.dtype):
            return None
        return types.none(arr, i, v), _store_codegen(v, False)

    @intrinsic
    def vstore2(typingctx, arr, i, j, v):
        if not (_contig(arr, 2) and _ints(i, j) and is_vec(v) and v.dtype == arr.dtype):
            return None

        def codegen(context, builder, sig, args):
            ptr = _ptr(context, builder, sig.args[0], args[0], args[1:3], sig.args[1:3])
            llty = context.get_value_type(sig.args[3])
            builder.store(args[3], builder.bitcast(ptr, llty.as_pointer()), align=v.dtype.bitwidth // 8)
            return context.get_dummy_value()

        return types.none(arr, i, j, v), codegen

    @intrinsic
    def vstream(typingctx, arr, i, v):
        if not (_contig(arr, 1) and _ints(i) and is_vec(v) and v.dtype == arr.dtype):
            return None
        return types.none(arr, i, v), _store_codegen(v, True)

    def _masked_decl(builder, vty, llty, kind):
        name = f"llvm.masked.{kind}.{_vsuffix(vty)}.p0"
        i1v = ir.VectorType(ir.IntType(1), vty.lanes)
        if kind == "load":
            fnty = ir.FunctionType(llty, [ir.PointerType(), ir.IntType(32), i1v, llty])
        else:
            fnty = ir.FunctionType(ir.VoidType(), [llty, ir.PointerType(), ir.IntType(32), i1v])
        return cgutils.get_or_insert_function(builder.module, fnty, name)

    @intrinsic
    def vloadm(typingctx, arr, i, n):
        if not (_contig(arr, 1) and _ints(i, n)):
            return None
        vty = vt(arr.dtype)

        def codegen(context, builder, sig, args):
            ptr = _ptr(context, builder, sig.args[0], args[0], args[1:2], sig.args[1:2])
            llty = context.get_value_type(vty)
            mask = _lane_mask(builder, args[2], sig.args[2], context, vty.lanes)
            fn = _masked_decl(builder, vty, llty, "load")
            align = ir.Constant(ir.IntType(32), vty.dtype.bitwidth // 8)
            zero = ir.Constant(llty, [0.0] * vty.lanes)
            return builder.call(fn, [builder.bitcast(ptr, ir.PointerType()), align, mask, zero])

        return vty(arr, i, n), codegen

    @intrinsic
    def vstorem(typingctx, arr, i, v, n):
        if not (_contig(arr, 1) and _ints(i, n) and is_vec(v) and v.dtype == arr.dtype):
            return None

        def codegen(context, builder, sig, args):
            ptr = _ptr(context, builder, sig.args[0], args[0], args[1:2], sig.args[1:2])
            vty = sig.args[2]
            llty = context.get_value_type(vty)
            mask = _lane_mask(builder, args[3], sig.args[3], context, vty.lanes)
            fn = _masked_decl(builder, vty, llty, "store")
            align = ir.Constant(ir.IntType(32), vty.dtype.bitwidth // 8)
            builder.call(fn, [args[2], builder.bitcast(ptr, ir.PointerType()), align, mask])
            return context.get_dummy_value()

        return types.none(arr, i, v, n), codegen

    def _bcast_codegen(vty):
        def codegen(context, builder, sig, args):
            ptr = _ptr(context, builder, sig.args[0], args[0], args[1:], sig.args[1:])
            scalar = builder.load(ptr, align=vty.dtype.bitwidth // 8)
            return _splat(builder, scalar, context.get_value_type(vty))

        return codegen

    @intrinsic
    def vbcast(typingctx, arr, i):
        if not (_contig(arr, 1) and _ints(i)):
            return None
        vty = vt(arr.dtype)
        return vty(arr, i), _bcast_codegen(vty)

    @intrinsic
    def vbcast2(typingctx, arr, i, j):
        if not (_contig(arr, 2) and _ints(i, j)):
            return None
        vty = vt(arr.dtype)
        return vty(arr, i, j), _bcast_codegen(vty)

    def _prefetch_codegen(rw):
        def codegen(context, builder, sig, args):
            ptr = _ptr(context, builder, sig.args[0], args[0], args[1:], sig.args[1:])
            i32 = ir.IntType(32)
            fnty = ir.FunctionType(ir.VoidType(), [ir.PointerType(), i32, i32, i32])
            fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0")
            # rw (0 read, 1 write), locality 3 (keep in all levels: prefetcht0), data cache
            builder.call(
                fn,
                [
                    builder.bitcast(ptr, ir.PointerType()),
                    ir.Constant(i32, rw),
                    ir.Constant(i32, 3),
                    ir.Constant(i32, 1),
                ],
            )
            return context.get_dummy_value()

        return codegen

    def _prefetch(rw, ndim):
        if ndim == 1:

            @intrinsic
            def pf(typingctx, arr, i):
                if not (isinstance(arr, types.Array) and arr.ndim == 1 and _ints(i)):
                    return None
                return types.none(arr, i), _prefetch_codegen(rw)

        else:

            @intrinsic
            def pf(typingctx, arr, i, j):
                if not (isinstance(arr, types.Array) and arr.ndim == 2 and _ints(i, j)):
                    return None
                return types.none(arr, i, j), _prefetch_codegen(rw)

        return pf

    # -- values --

    @intrinsic
    def vsplat(typingctx, x):
        if x not in _FLOATS:
            return None
        vty = vt(x)

        def codegen(context, builder, sig, args):
            return _splat(builder, args[0], context.get_value_type(vty))

        return vty(x), codegen

    @intrinsic
    def vzero(typingctx, like):
        dt = _float_of(like)
        if dt is None:
            return None
        vty = vt(dt)

        def codegen(context, builder, sig, args):
            return ir.Constant(context.get_value_type(vty), [0.0] * vty.lanes)

        return vty(like), codegen

    @intrinsic
    def vlanes(typingctx, like):
        dt = _float_of(like)
        if dt is None:
            return None
        n = bits // dt.bitwidth

        def codegen(context, builder, sig, args):
            return context.get_constant(types.intp, n)

        return types.intp(like), codegen

    @intrinsic
    def vfma(typingctx, a, b, c):
        if not is_vec(a, b, c):
            return None

        def codegen(context, builder, sig, args):
            llty = context.get_value_type(a)
            fn = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(llty, [llty, llty, llty]), f"llvm.fma.{_vsuffix(a)}"
            )
            return builder.call(fn, args)

        return a(a, b, c), codegen

    def _binop(method):
        @intrinsic
        def op(typingctx, a, b):
            if not is_vec(a, b):
                return None

            def codegen(context, builder, sig, args):
                return getattr(builder, method)(args[0], args[1])

            return a(a, b), codegen

        return op

    def _minmax(name):
        @intrinsic
        def op(typingctx, a, b):
            if not is_vec(a, b):
                return None

            def codegen(context, builder, sig, args):
                llty = context.get_value_type(a)
                fn = cgutils.get_or_insert_function(
                    builder.module, ir.FunctionType(llty, [llty, llty]), f"llvm.{name}.{_vsuffix(a)}"
                )
                return builder.call(fn, args)

            return a(a, b), codegen

        return op

    @intrinsic
    def vmax_keepnan(typingctx, a, b):
        if not is_vec(a, b):
            return None

        def codegen(context, builder, sig, args):
            return builder.select(builder.fcmp_ordered(">", args[1], args[0]), args[1], args[0])

        return a(a, b), codegen

    @intrinsic
    def vhsum(typingctx, v):
        if not is_vec(v):
            return None

        def codegen(context, builder, sig, args):
            x = args[0]
            n = v.lanes
            undef = ir.Constant(x.type, ir.Undefined)
            while n > 1:  # fold the upper half onto the lower half: log2(L) shuffles and adds
                half = n // 2
                idx = list(range(half, n)) + [0] * (v.lanes - half)
                hi = builder.shuffle_vector(x, undef, ir.Constant(ir.VectorType(ir.IntType(32), v.lanes), idx))
                x = builder.fadd(x, hi)
                n = half
            return builder.extract_element(x, ir.Constant(ir.IntType(32), 0))

        return v.dtype(v), codegen

    @intrinsic
    def vget(typingctx, v, k):
        if not (is_vec(v) and _ints(k)):
            return None

        def codegen(context, builder, sig, args):
            return builder.extract_element(args[0], args[1])

        return v.dtype(v, k), codegen

    return SimpleNamespace(
        bits=bits,
        vload=vload,
        vload2=vload2,
        vstore=vstore,
        vstore2=vstore2,
        vstream=vstream,
        vloadm=vloadm,
        vstorem=vstorem,
        vbcast=vbcast,
        vbcast2=vbcast2,
        vsplat=vsplat,
        vzero=vzero,
        vlanes=vlanes,
        vfma=vfma,
        vadd=_binop("fadd"),
        vsub=_binop("fsub"),
        vmul=_binop("fmul"),
        vmax=_minmax("maxnum"),
        vmin=_minmax("minnum"),
        vmax_keepnan=vmax_keepnan,
        vhsum=vhsum,
        vget=vget,
        prefetch=_prefetch(0, 1),
        prefetch2=_prefetch(0, 2),
        prefetchw=_prefetch(1, 1),
        prefetchw2=_prefetch(1, 2),
    )


@intrinsic
def sfence(typingctx):
    """Order the non-temporal stores before it (they bypass the cache's ordering) with what follows."""

    def codegen(context, builder, sig, args):
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), []), "llvm.x86.sse.sfence")
        builder.call(fn, [])
        return context.get_dummy_value()

    return types.none(), codegen


_DEFAULT = ops(BITS)
vload = _DEFAULT.vload
vload2 = _DEFAULT.vload2
vstore = _DEFAULT.vstore
vstore2 = _DEFAULT.vstore2
vstream = _DEFAULT.vstream
vloadm = _DEFAULT.vloadm
vstorem = _DEFAULT.vstorem
vbcast = _DEFAULT.vbcast
vbcast2 = _DEFAULT.vbcast2
vsplat = _DEFAULT.vsplat
vzero = _DEFAULT.vzero
vlanes = _DEFAULT.vlanes
vfma = _DEFAULT.vfma
vadd = _DEFAULT.vadd
vsub = _DEFAULT.vsub
vmul = _DEFAULT.vmul
vmax = _DEFAULT.vmax
vmin = _DEFAULT.vmin
vmax_keepnan = _DEFAULT.vmax_keepnan
vhsum = _DEFAULT.vhsum
vget = _DEFAULT.vget
prefetch = _DEFAULT.prefetch
prefetch2 = _DEFAULT.prefetch2
prefetchw = _DEFAULT.prefetchw
prefetchw2 = _DEFAULT.prefetchw2

__all__ = [
    "BITS",
    "LANES_F32",
    "LANES_F64",
    "VecType",
    "describe",
    "lanes",
    "ops",
    "prefetch",
    "prefetch2",
    "prefetchw",
    "prefetchw2",
    "sfence",
    "vadd",
    "vbcast",
    "vbcast2",
    "vec_type",
    "vfma",
    "vget",
    "vhsum",
    "vlanes",
    "vload",
    "vload2",
    "vloadm",
    "vmax",
    "vmax_keepnan",
    "vmin",
    "vmul",
    "vsplat",
    "vstore",
    "vstore2",
    "vstorem",
    "vstream",
    "vsub",
    "vzero",
]
