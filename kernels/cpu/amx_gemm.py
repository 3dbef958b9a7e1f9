"""AMX GEMM: C = A @ B on the tile unit, bf16 in / fp32 out (``tdpbf16ps``) or u8 x s8 in / int32 out
(``tdpbusd``, with MatMulInteger's activation zero point: C = A @ B - za * colsum(B), as
kernels/cpu/qgemm_i8.py and MLAS do).

Packing (once per weight matrix for B, as MLAS and oneDNN prepack a constant; per call for A):
  Ap[ib][kb]  the 16 x 64-byte A tile of rows 16 ib.. and the KS = 64 / itemsize columns kb KS..
  Bp[jb][kb]  the B tile of columns 16 jb.. and rows kb KS.., in the VNNI layout: tile row r holds,
              column by column, the PER = 4 / itemsize consecutive k values PER r .. PER r + PER - 1
Both zero-padded to whole tiles (M, N to 32, K to KS).

Micro-kernel (one block of inline assembly; each thread loads the tile configuration once before its
calls and releases it after, and no tile is live between calls, so none crosses a block or a
thread): a 32 x 32 block of C in four accumulator tiles (tmm0-3), started from a row (zeros, or
MatMulInteger's zero-point term) loaded with stride 0, the
whole K loop inside, each step loading two A tiles and two B tiles between the four products, the
loads interleaved with the products. The C block is stored with C's row stride.

Every tile, the init row and C start on a 64-byte line (rooflab.memory.aligned_array): a tile row
then is one cache line. Measured on a 2-vCPU Emerald Rapids VM (bf16, C prototype of this
micro-kernel, 2 x 64 steps of tiles in L2): 1700 GFLOP/s aligned, 347 with the tiles 16 bytes into
a line as numpy places its arrays (every row load touches two lines); with the tiles in L1, 2080,
the one-accumulator peak. The rung ran at 0.2 of the peak until its buffers were aligned.

Loop nest: pairs of 16-column B panels (32 columns) split over threads (prange); each thread takes
its panels B_BLOCK_BYTES at a time (1 MiB: 8 pairs at K = 2048, kept in L2) and walks every pair of
A row tiles past them; all of K per micro-kernel call (K = 2048: 64 steps, 256 tile products).
Without the blocking A (8 MiB in bf16 at 2048) streamed from memory once per panel pair: 0.17 of
the peak. A is packed on every call, its row blocks split over the threads.

Napkin math (1 core, Intel's rate): 1024 bf16 FLOP/cycle at 3 GHz = 3.1 TFLOP/s; 2048^3 (17.2
GFLOP) then takes 5.6 ms; the packing of A (8 MB in bf16) ~2-4 ms at memory speed on top.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.extending import intrinsic

import rooflab._numba_env  # noqa: F401
from rooflab.memory import aligned_array

from . import amx

ROWS, ROW_BYTES, TILE = amx.ROWS, amx.ROW_BYTES, amx.TILE_BYTES
BLOCK = 32  # C rows and columns per micro-kernel call (2 x 2 tiles)
B_BLOCK_BYTES = 1 << 20  # B panels per L2 block: half a 2 MiB L2 (256 or 512 KiB ran 0.7-0.9x of it at 2048^3)
INSTRUCTION = {"bf16": "tdpbf16ps", "int8": "tdpbusd"}


def _ukr_asm(instruction: str) -> str:
    """The thread has loaded the tile configuration (``_tiles_on``). Operands: $0-$3 the A0, A1, B0,
    B1 tile pointers and $4 the step count (in/out), $5 C, $6 C's row stride in bytes, $7 the row
    every C row starts from (the block's 32 columns of ``init``: zeros, or MatMulInteger's
    zero-point term), loaded with stride 0."""
    p = instruction
    return "\n".join(
        [
            "xorq %r10, %r10",
            "tileloadd ($7,%r10,1), %tmm0",
            "tileloadd 64($7,%r10,1), %tmm1",
            "tileloadd ($7,%r10,1), %tmm2",
            "tileloadd 64($7,%r10,1), %tmm3",
            "movq $$64, %r8",
            "1:",
            "tileloadd ($0,%r8,1), %tmm4",
            "tileloadd ($2,%r8,1), %tmm6",
            f"{p} %tmm6, %tmm4, %tmm0",
            "tileloadd ($3,%r8,1), %tmm7",
            f"{p} %tmm7, %tmm4, %tmm1",
            "tileloadd ($1,%r8,1), %tmm5",
            f"{p} %tmm6, %tmm5, %tmm2",
            f"{p} %tmm7, %tmm5, %tmm3",
            f"addq $${TILE}, $0",
            f"addq $${TILE}, $1",
            f"addq $${TILE}, $2",
            f"addq $${TILE}, $3",
            "decq $4",
            "jnz 1b",
            "tilestored %tmm0, ($5,$6,1)",
            "leaq 64($5), %r9",
            "tilestored %tmm1, (%r9,$6,1)",
            "movq $6, %r9",
            "shlq $$4, %r9",
            "addq $5, %r9",
            "tilestored %tmm2, (%r9,$6,1)",
            "addq $$64, %r9",
            "tilestored %tmm3, (%r9,$6,1)",
        ]
    )


def _ukr(instruction: str):
    @intrinsic
    def ukr(typingctx, ap, a_off0, a_off1, bp, b_off0, b_off1, c, c_off, ldc_bytes, steps, init, i_off):
        """One 32 x 32 block: C[c_off ..] (row stride ldc_bytes) = init[i_off ..] + A tiles at
        ap[a_off0 / a_off1 ..] x B tiles at bp[b_off0 / b_off1 ..] over ``steps`` k steps (byte
        offsets into the arrays)."""
        sig = types.void(ap, a_off0, a_off1, bp, b_off0, b_off1, c, c_off, ldc_bytes, steps, init, i_off)

        def codegen(context, builder, signature, args):
            i64 = ir.IntType(64)
            a = signature.args

            def base(i):
                return builder.ptrtoint(context.make_array(a[i])(context, builder, args[i]).data, i64)

            def val(i):
                return context.cast(builder, args[i], a[i], types.int64)

            ap_p, bp_p, c_p, init_p = base(0), base(3), base(6), base(10)
            tied = [builder.add(ap_p, val(1)), builder.add(ap_p, val(2)), builder.add(bp_p, val(4)),
                    builder.add(bp_p, val(5)), val(9)]  # fmt: skip
            inputs = [builder.add(c_p, val(7)), val(8), builder.add(init_p, val(11))]
            out_t = ir.LiteralStructType([i64] * 5)
            fnty = ir.FunctionType(out_t, [i64] * 8)  # $5-$7, then the tied $0-$4
            constraints = "=r,=r,=r,=r,=r,r,r,r,0,1,2,3,4,~{r8},~{r9},~{r10},~{memory},~{dirflag},~{fpsr},~{flags}"
            builder.asm(fnty, _ukr_asm(instruction), constraints, [*inputs, *tied], side_effect=True)
            return context.get_dummy_value()

        return sig, codegen

    return ukr


@intrinsic
def _tiles_on(typingctx, cfg):
    """``ldtilecfg``: this thread's tile configuration, once before its micro-kernel calls."""
    sig = types.void(cfg)

    def codegen(context, builder, signature, args):
        i64 = ir.IntType(64)
        p = builder.ptrtoint(context.make_array(signature.args[0])(context, builder, args[0]).data, i64)
        builder.asm(ir.FunctionType(ir.VoidType(), [i64]), "ldtilecfg ($0)", "r,~{memory}", [p], side_effect=True)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def _tiles_off(typingctx):
    """``tilerelease``: the thread's tile state back to init, after its last micro-kernel call."""
    sig = types.void()

    def codegen(context, builder, signature, args):
        builder.asm(ir.FunctionType(ir.VoidType(), []), "tilerelease", "~{memory}", [], side_effect=True)
        return context.get_dummy_value()

    return sig, codegen


_ukr_bf16 = _ukr(INSTRUCTION["bf16"])
_ukr_int8 = _ukr(INSTRUCTION["int8"])


# ---- packing -------------------------------------------------------------------------------------
@njit(parallel=True, cache=True)
def pack_a(A, Ap, ks, nthreads):
    """Ap (bytes) = A's 16 x ks tiles, row block major then k step: Ap[ib][kb][r][c] = A[16 ib + r,
    ks kb + c] (zero-padded); ``A`` as a 2-D array of 1- or 2-byte elements; row blocks split over
    ``nthreads`` (A is packed on every call: on one thread it was 13 % of a 2-thread 2048^3 product)."""
    M, K = A.shape
    mb, kb_n = Ap.shape[0], Ap.shape[1]
    for t in prange(nthreads):
        for ib in range(mb * t // nthreads, mb * (t + 1) // nthreads):
            for kb in range(kb_n):
                for r in range(ROWS):
                    i = ib * ROWS + r
                    for c in range(ks):
                        k = kb * ks + c
                        Ap[ib, kb, r, c] = A[i, k] if (i < M and k < K) else 0


@njit(cache=True)
def pack_b(B, Bp, ks, per):
    """Bp[jb][kb][r][per c + e] = B[ks kb + per r + e, 16 jb + c] (zero-padded): the VNNI layout."""
    K, N = B.shape
    nb, kb_n = Bp.shape[0], Bp.shape[1]
    for jb in range(nb):
        for kb in range(kb_n):
            for r in range(ROWS):
                for c in range(16):
                    n = jb * 16 + c
                    for e in range(per):
                        k = kb * ks + per * r + e
                        Bp[jb, kb, r, per * c + e] = B[k, n] if (k < K and n < N) else 0


# ---- the loop nest -------------------------------------------------------------------------------
@njit(parallel=True, cache=True)
def gemm_blocks(cfg, Ap, Bp, C, init, nthreads, int8, block_pairs):
    """C (Mp x Np, both multiples of 32; fp32 from bf16 tiles, int32 from u8 / s8 tiles with
    ``int8``) from the packed tiles; column pairs split over threads."""
    Mp, Np = C.shape
    steps = Ap.shape[1]
    step_bytes = steps * TILE
    pairs = Np // BLOCK
    a8 = Ap.reshape(-1).view(np.uint8)
    b8 = Bp.reshape(-1).view(np.uint8)
    c8 = C.reshape(-1).view(np.uint8)
    i8 = init.view(np.uint8)
    for t in prange(nthreads):
        _tiles_on(cfg)
        p1 = pairs * (t + 1) // nthreads
        for q in range(pairs * t // nthreads, p1, block_pairs):  # a block of B panels stays in L2 ...
            for ib in range(0, Mp // ROWS, 2):  # ... while every pair of A row tiles passes
                for p in range(q, min(q + block_pairs, p1)):
                    a0, a1, b0, b1 = (
                        ib * step_bytes,
                        (ib + 1) * step_bytes,
                        2 * p * step_bytes,
                        (2 * p + 1) * step_bytes,
                    )
                    c_off, i_off = (ib * ROWS * Np + p * BLOCK) * 4, p * BLOCK * 4
                    if int8:
                        _ukr_int8(a8, a0, a1, b8, b0, b1, c8, c_off, Np * 4, steps, i8, i_off)
                    else:
                        _ukr_bf16(a8, a0, a1, b8, b0, b1, c8, c_off, Np * 4, steps, i8, i_off)
        _tiles_off()


def _ceil(x: int, m: int) -> int:
    return -(-max(int(x), 1) // m) * m


def pack_weights(B: np.ndarray, kind: str) -> np.ndarray:
    """Bp for B (K x N: bf16 bit patterns as uint16, or int8): once per weight matrix."""
    K, N = B.shape
    ks, per = (32, 2) if kind == "bf16" else (64, 4)
    Bp = aligned_array((_ceil(N, BLOCK) // 16, _ceil(K, ks) // ks, ROWS, 64 // B.itemsize), B.dtype)
    pack_b(B, Bp, ks, per)
    return Bp


def matmul(
    A: np.ndarray,
    Bp: np.ndarray,
    N: int,
    kind: str,
    threads: int = 1,
    out=None,
    init=None,
    block_bytes: int = B_BLOCK_BYTES,
):
    """C (M x N; fp32 for bf16, int32 for int8) = init + A @ B from B's packing; A: bf16 bit patterns
    (uint16) or uint8, M x K; ``init``: one row added to every row of C (MatMulInteger's zero-point
    term -za * colsum(B)), started from in the tiles, so it costs no pass over C. Written straight
    into ``out`` when M and N are whole blocks."""
    M, K = A.shape
    ks = 32 if kind == "bf16" else 64
    steps = Bp.shape[1]
    if _ceil(K, ks) // ks != steps:
        raise ValueError(f"A has K = {K}, the packed B {steps * ks} (padded)")
    Mp, Np = _ceil(M, BLOCK), Bp.shape[0] * 16
    dtype = np.float32 if kind == "bf16" else np.int32
    Ap = aligned_array((Mp // ROWS, steps, ROWS, 64 // A.itemsize), A.dtype)
    nthreads = max(1, min(int(threads), Np // BLOCK))
    pack_a(A, Ap, ks, max(1, min(nthreads, Mp // ROWS)))
    row = aligned_array(Np, dtype, zero=True)
    if init is not None:
        row[:N] = init
    direct = (
        out is not None
        and (Mp, Np) == (M, N)
        and out.dtype == dtype
        and out.flags.c_contiguous
        and out.ctypes.data % ROW_BYTES == 0
    )
    C = out if direct else aligned_array((Mp, Np), dtype)
    block_pairs = max(1, block_bytes // (2 * steps * TILE))
    gemm_blocks(amx.tile_config(), Ap, Bp, C, row, nthreads, kind == "int8", block_pairs)
    if out is None:
        return C[:M, :N] if (Mp, Np) != (M, N) else C
    if not direct:
        out[...] = C[:M, :N]
    return out
