"""SIMD intrinsics the conv kernels need beyond simd.py (which stays shared and unchanged).

  vload_even(a, i)   lanes a[i], a[i+2], ..., a[i+2(L-1)]: one 2L-element load + one shuffle
  vload_odd(a, i)    lanes a[i+1], a[i+3], ...: the same load, the other half of the shuffle
                     (used together LLVM loads once: vmovups x2 + vpermt2ps on AVX-512)

Why: a stride-2 convolution reads every other input column; de-interleaving the input into phase
planes first costs a scalar pass over the input (4x the output for 2x2 strides), these read it
straight from the padded rows. Same conventions as simd.py: 1-D C-contiguous float arrays,
unaligned, no bounds checks, no wraparound, width = simd.BITS.

Run: pytest tests/test_conv_cpu.py -k depthwise (the stride-2 depthwise kernels use them).
"""

from __future__ import annotations

from llvmlite import ir
from numba.extending import intrinsic

from .simd import BITS, _contig, _ints, _ptr, vec_type


def _strided_load(phase: int):
    @intrinsic
    def load(typingctx, arr, i):
        if not (_contig(arr, 1) and _ints(i)):
            return None
        vty = vec_type(arr.dtype, BITS // arr.dtype.bitwidth)
        n = vty.lanes

        def codegen(context, builder, sig, args):
            ptr = _ptr(context, builder, sig.args[0], args[0], args[1:], sig.args[1:])
            elem = context.get_value_type(vty.dtype)
            wide = ir.VectorType(elem, 2 * n)
            v = builder.load(builder.bitcast(ptr, wide.as_pointer()), align=vty.dtype.bitwidth // 8)
            idx = ir.Constant(ir.VectorType(ir.IntType(32), n), [2 * k + phase for k in range(n)])
            return builder.shuffle_vector(v, ir.Constant(wide, ir.Undefined), idx)

        return vty(arr, i), codegen

    return load


vload_even = _strided_load(0)
vload_odd = _strided_load(1)

__all__ = ["vload_even", "vload_odd"]
