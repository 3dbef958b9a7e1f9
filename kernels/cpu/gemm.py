"""GEMM C = A @ B in numba, FP32 and FP64: the ladder from a triple loop to a BLIS-class kernel.

Rungs (each adds one technique; C-contiguous A (M x K), B (K x N), C (M x N) of any shape):
  01 naive        i-j-k triple loop: the inner loop walks a column of B (stride N), one scalar chain
  02 loop order   i-k-j: the inner loop is C[i, :] += A[i, p] * B[p, :], unit stride, vectorized by LLVM;
                  but every FMA loads and stores C (store-bound) and B is re-read from DRAM per row
  03 cache blocks the i-k-j loop on KB x NB blocks of B (256 KiB, L2-resident) and NB-wide C row
                  segments (L1-resident), so B is read from memory once per NB column block
  04 packed       BLIS loop nest jc(NC) -> pc(KC) -> pack B -> ic(MC) -> pack A -> jr(NR) -> ir(MR)
                  -> micro-kernel (gemm_ukr.py): A and B copied into zero-padded panels in the order
                  the micro-kernel reads them; a MR x NR register tile of C in vector registers
                  (explicit SIMD via simd.py); edge tiles go through a small buffer. Skinny M (<=
                  SMALL_M rows) streams B once instead: C[i] += A[i, p:p+8] @ B[p:p+8]; M = 1 (the
                  decode GEMV) reads B as one sequential stream per thread, row by row (gemv)
  05 threads      04 over blocks of C with numba prange: N split into slabs (M when N is narrow),
                  one task per thread, each with private packing buffers; the GEMV splits K instead
                  (each core streams its own contiguous part of B) and sums T partial rows

Napkin (Zen 4, 1 core, ~3.7 GHz): 32 FP32 / 16 FP64 FLOP per cycle -> ~118 / 59 GFLOP/s peak.
The 12x32 FP32 tile performs 24 zmm FMAs per 2 B loads + 12 broadcasts; A block MC x KC = 144 x 1024
x 4 B = 576 KiB stays in the 1 MiB L2, a B micro-panel KC x 32 x 4 B = 128 KiB streams from L2.
Per pass over C (K / KC passes) C is loaded and stored once: larger KC = fewer passes, which is why
KC = 512-1024 beats textbook 256 here (research/numba-gemm-conv.md 1.1).
GEMV (M = 1): 2 FLOP per element of B -> intensity 0.5 (FP32): memory-bound, B streamed once.

Run: ``rooflab run --suite gemm`` or ``python -c "import numpy as np; from rooflab.kernels.cpu import
gemm; ..."`` (see rooflab/families/gemm/cpu.py for the checked public call ``C = v(A, B)``).
"""

from __future__ import annotations

import numba
import numpy as np
from numba import njit, prange

from . import simd
from .gemm_ukr import ukr_6x2v, ukr_12x2v
from .simd import vadd, vbcast2, vfma, vload, vloadm, vmul, vstore, vstorem, vzero

# ---- the register tile follows the vector ISA: 32 zmm (AVX-512) hold 24 accumulators -------------
if simd.BITS >= 512:
    MR, NV = 12, 2
    ukr = ukr_12x2v
else:
    MR, NV = 6, 2
    ukr = ukr_6x2v
TILE = {dt: (MR, NV * simd.lanes(dt)) for dt in ("float32", "float64")}  # (MR, NR) per dtype

# blocking (elements): MC rows of A per L2 block, KC depth per pass over C, NC columns of B per
# packed slab. Deep KC wins (fewer passes over C): Zen 4 sweep at n=2048 (interleaved, 15 rounds)
# put KC=1024/512 (FP32/FP64) 2-5 % above KC=512/256, and MC=144 level with 288; the AVX2 values
# are research/numba-gemm-conv.md's Zen 3 optimum. The A block is 576 KiB (AVX-512) / 1.1 MiB.
_MC = 144 if simd.BITS >= 512 else 288
BLOCKING = {"float32": {"mc": _MC, "kc": 1024, "nc": 4096}, "float64": {"mc": _MC, "kc": 512, "nc": 4096}}
SMALL_M = 4  # rows up to which 04/05 stream B (axpy form) instead of packing


# ---- 01: naive -----------------------------------------------------------------------------------
@njit(cache=True)
def gemm_naive(A, B, C):
    """C must be zero on entry (its element type then types the accumulator: no float64 promotion)."""
    M, K = A.shape
    N = B.shape[1]
    for i in range(M):
        for j in range(N):
            acc = C[i, j]
            for p in range(K):
                acc += A[i, p] * B[p, j]
            C[i, j] = acc


# ---- 02: loop order ------------------------------------------------------------------------------
@njit(cache=True)
def gemm_ikj(A, B, C):
    M, K = A.shape
    N = B.shape[1]
    for i in range(M):
        c = C[i]
        c[:] = 0
        for p in range(K):
            a = A[i, p]
            b = B[p]
            for j in range(N):
                c[j] += a * b[j]


# ---- 03: cache blocking --------------------------------------------------------------------------
@njit(cache=True)
def gemm_blocked(A, B, C, kb, nb):
    M, K = A.shape
    N = B.shape[1]
    C[:] = 0
    for jj in range(0, N, nb):
        je = min(jj + nb, N)
        for pp in range(0, K, kb):
            pe = min(pp + kb, K)
            for i in range(M):
                c = C[i, jj:je]
                for p in range(pp, pe):
                    a = A[i, p]
                    b = B[p, jj:je]
                    for j in range(je - jj):
                        c[j] += a * b[j]


# ---- 04: packed panels + SIMD micro-kernel -------------------------------------------------------
@njit(cache=True)
def pack_b(B, pc, kc, jc, nc, Bp, NR):
    """Bp[(jr/NR)*NR*kc + p*NR + j] = B[pc+p, jc+jr+j], zero-padded to a multiple of NR columns."""
    L = simd.vlanes(Bp)
    for jr in range(0, nc, NR):
        nr = min(NR, nc - jr)
        base = jr * kc
        if nr == NR:
            for p in range(kc):
                row = B[pc + p]
                for v in range(0, NR, L):
                    vstore(Bp, base + p * NR + v, vload(row, jc + jr + v))
        else:
            for p in range(kc):
                o = base + p * NR
                for j in range(nr):
                    Bp[o + j] = B[pc + p, jc + jr + j]
                for j in range(nr, NR):
                    Bp[o + j] = 0


@njit(cache=True)
def pack_a(A, ic, mc, pc, kc, Ap, MR):
    """Ap[(ir/MR)*MR*kc + p*MR + i] = A[ic+ir+i, pc+p], zero-padded to a multiple of MR rows."""
    for ir in range(0, mc, MR):
        mr = min(MR, mc - ir)
        base = ir * kc
        for i in range(mr):
            row = A[ic + ir + i, pc : pc + kc]
            for p in range(kc):
                Ap[base + p * MR + i] = row[p]
        for i in range(mr, MR):
            for p in range(kc):
                Ap[base + p * MR + i] = 0


@njit(cache=True)
def gemm_packed_block(A, B, C, m0, m1, n0, n1, Ap, Bp, tmp, mc_blk, kc_blk, nc_blk):
    """C[m0:m1, n0:n1] = A[m0:m1] @ B[:, n0:n1] with the BLIS loop nest (K >= 1)."""
    K = A.shape[1]
    NR = tmp.shape[1]
    for jc in range(n0, n1, nc_blk):
        nc = min(nc_blk, n1 - jc)
        for pc in range(0, K, kc_blk):
            kc = min(kc_blk, K - pc)
            first = pc == 0
            pack_b(B, pc, kc, jc, nc, Bp, NR)
            for ic in range(m0, m1, mc_blk):
                mc = min(mc_blk, m1 - ic)
                pack_a(A, ic, mc, pc, kc, Ap, MR)
                for jr in range(0, nc, NR):
                    nr = min(NR, nc - jr)
                    bo = jr * kc
                    for ir in range(0, mc, MR):
                        mr = min(MR, mc - ir)
                        ao = ir * kc
                        if mr == MR and nr == NR:
                            ukr(kc, Ap, ao, Bp, bo, C, ic + ir, jc + jr, first)
                        else:  # edge tile: full tile into tmp, then the valid part into C
                            ukr(kc, Ap, ao, Bp, bo, tmp, 0, 0, True)
                            for i in range(mr):
                                for j in range(nr):
                                    if first:
                                        C[ic + ir + i, jc + jr + j] = tmp[i, j]
                                    else:
                                        C[ic + ir + i, jc + jr + j] += tmp[i, j]


@njit(cache=True)  # no fastmath: it would fold the two FMA chains into one 9-deep chain
def gemm_skinny_block(A, B, C, m0, m1, n0, n1, kb):
    """C[m0:m1, n0:n1] = A[m0:m1] @ B[:, n0:n1] for few rows: C[i] += A[i, p] * B[p] over p,
    8 rows of B per pass over the C segment (which stays in L1) in two FMA chains; B streamed
    once, in kb-row blocks that stay in L2 while every row of A uses them. Tails are masked."""
    K = A.shape[1]
    L = simd.vlanes(C)
    n = n1 - n0
    nfull = n - n % L
    r = n - nfull
    for i in range(m0, m1):
        c = C[i, n0:n1]
        for j in range(0, nfull, L):
            vstore(c, j, vzero(c))
        if r:
            vstorem(c, nfull, vzero(c), r)
    for pp in range(0, K, kb):
        pe = min(pp + kb, K)
        for i in range(m0, m1):
            c = C[i, n0:n1]
            p = pp
            while p + 8 <= pe:
                a0 = vbcast2(A, i, p)
                a1 = vbcast2(A, i, p + 1)
                a2 = vbcast2(A, i, p + 2)
                a3 = vbcast2(A, i, p + 3)
                a4 = vbcast2(A, i, p + 4)
                a5 = vbcast2(A, i, p + 5)
                a6 = vbcast2(A, i, p + 6)
                a7 = vbcast2(A, i, p + 7)
                b0 = B[p, n0:n1]
                b1 = B[p + 1, n0:n1]
                b2 = B[p + 2, n0:n1]
                b3 = B[p + 3, n0:n1]
                b4 = B[p + 4, n0:n1]
                b5 = B[p + 5, n0:n1]
                b6 = B[p + 6, n0:n1]
                b7 = B[p + 7, n0:n1]
                for j in range(0, nfull, L):
                    x = vfma(a0, vload(b0, j), vload(c, j))
                    y = vmul(a1, vload(b1, j))
                    x = vfma(a2, vload(b2, j), x)
                    y = vfma(a3, vload(b3, j), y)
                    x = vfma(a4, vload(b4, j), x)
                    y = vfma(a5, vload(b5, j), y)
                    x = vfma(a6, vload(b6, j), x)
                    y = vfma(a7, vload(b7, j), y)
                    vstore(c, j, vadd(x, y))
                if r:
                    x = vfma(a0, vloadm(b0, nfull, r), vloadm(c, nfull, r))
                    y = vmul(a1, vloadm(b1, nfull, r))
                    x = vfma(a2, vloadm(b2, nfull, r), x)
                    y = vfma(a3, vloadm(b3, nfull, r), y)
                    x = vfma(a4, vloadm(b4, nfull, r), x)
                    y = vfma(a5, vloadm(b5, nfull, r), y)
                    x = vfma(a6, vloadm(b6, nfull, r), x)
                    y = vfma(a7, vloadm(b7, nfull, r), y)
                    vstorem(c, nfull, vadd(x, y), r)
                p += 8
            while p < pe:
                a0 = vbcast2(A, i, p)
                b0 = B[p, n0:n1]
                for j in range(0, nfull, L):
                    vstore(c, j, vfma(a0, vload(b0, j), vload(c, j)))
                if r:
                    vstorem(c, nfull, vfma(a0, vloadm(b0, nfull, r), vloadm(c, nfull, r)), r)
                p += 1


@njit(inline="always")
def _gemv_rows(A, B, c, k0, k1):
    """c[:] = A[0, k0:k1] @ B[k0:k1]: one row of B at a time, so B is read as ONE sequential
    stream (what the hardware prefetcher follows best; interleaving 2-8 rows measured 35-40 %
    slower cold on Zen 4). c (N wide) stays in L1 and is loaded and stored once per row of B."""
    N = c.shape[0]
    L = simd.vlanes(c)
    nfull = N - N % L
    r = N - nfull
    for j in range(0, nfull, L):
        vstore(c, j, vzero(c))
    if r:
        vstorem(c, nfull, vzero(c), r)
    for p in range(k0, k1):
        a0 = vbcast2(A, 0, p)
        b0 = B[p]
        for j in range(0, nfull, L):
            vstore(c, j, vfma(a0, vload(b0, j), vload(c, j)))
        if r:
            vstorem(c, nfull, vfma(a0, vloadm(b0, nfull, r), vloadm(c, nfull, r)), r)


@njit(cache=True)
def gemv_serial(A, B, C):
    """M = 1 on one thread: B streamed once, row by row."""
    _gemv_rows(A, B, C[0], 0, B.shape[0])


@njit(parallel=True, cache=True)
def gemv_split_k(A, B, C, part):
    """M = 1 over T = part.shape[0] threads: thread t streams its own contiguous K/T rows of B
    into part[t] (one sequential stream per core), then the T partial rows are summed into C."""
    K = B.shape[0]
    T = part.shape[0]
    for t in prange(T):
        _gemv_rows(A, B, part[t], K * t // T, K * (t + 1) // T)
    c = C[0]
    for j in range(c.shape[0]):
        x = part[0, j]
        for t in range(1, T):
            x += part[t, j]
        c[j] = x


@njit(cache=True)
def gemm_tasks_serial(A, B, C, tasks, Ap, Bp, tmp, mc, kc, nc, skinny_kb):
    for t in range(tasks.shape[0]):
        _run_task(A, B, C, tasks, t, Ap[t], Bp[t], tmp[t], mc, kc, nc, skinny_kb)


@njit(parallel=True, cache=True)
def gemm_tasks_parallel(A, B, C, tasks, Ap, Bp, tmp, mc, kc, nc, skinny_kb):
    for t in prange(tasks.shape[0]):
        _run_task(A, B, C, tasks, t, Ap[t], Bp[t], tmp[t], mc, kc, nc, skinny_kb)


@njit(inline="always")
def _run_task(A, B, C, tasks, t, Ap, Bp, tmp, mc, kc, nc, skinny_kb):
    m0, m1, n0, n1 = tasks[t, 0], tasks[t, 1], tasks[t, 2], tasks[t, 3]
    if skinny_kb > 0:
        gemm_skinny_block(A, B, C, m0, m1, n0, n1, skinny_kb)
    else:
        gemm_packed_block(A, B, C, m0, m1, n0, n1, Ap, Bp, tmp, mc, kc, nc)


# ---- Python-level entries: C is allocated and checked by the caller (families/gemm/cpu.py) ------


def _ceil(x: int, m: int) -> int:
    return -(-x // m) * m


def plan(M: int, N: int, K: int, dtype, ntasks: int, blocking: dict | None = None) -> dict:
    """Blocking and the split of C into ``ntasks`` blocks (one per thread) for an M x N x K product."""
    name = np.dtype(dtype).name
    mr, nr = TILE[name]
    blk = dict(BLOCKING[name], **(blocking or {}))
    skinny = M <= SMALL_M
    # N-split (each task packs all of A, its own slab of B) unless N is too narrow to share
    align = simd.lanes(dtype) if skinny else nr
    if N >= ntasks * align or M < ntasks * mr or skinny:
        cuts = [min(N, _ceil(N * t // ntasks, align)) for t in range(ntasks + 1)]
        tasks = [(0, M, cuts[t], cuts[t + 1]) for t in range(ntasks) if cuts[t + 1] > cuts[t]]
    else:
        cuts = [min(M, _ceil(M * t // ntasks, mr)) for t in range(ntasks + 1)]
        tasks = [(cuts[t], cuts[t + 1], 0, N) for t in range(ntasks) if cuts[t + 1] > cuts[t]]
    if not tasks:
        tasks = [(0, M, 0, N)]
    kc = min(blk["kc"], K)
    return {
        "tasks": np.array(tasks, dtype=np.int64),
        "mc": min(max(mr, blk["mc"] // mr * mr), _ceil(M, mr)),  # a multiple of MR: panels fit in Ap
        "kc": kc,
        "nc": min(max(nr, blk["nc"] // nr * nr), _ceil(N, nr)),
        # skinny: kb rows of B (N wide) kept in L2 while all rows of A use them (~256 KiB)
        "skinny_kb": max(8, (256 * 1024) // max(1, N * np.dtype(dtype).itemsize) // 8 * 8) if skinny else 0,
        "mr": mr,
        "nr": nr,
    }


_WORKSPACE: dict = {}


def workspace(dtype, ntasks: int, a_elems: int, b_elems: int, mr: int, nr: int):
    """Per-task packing buffers, kept between calls (page-aligned; no page faults per call).

    Grown when a larger product needs more; private per task, so threads never share a panel.
    (Calls hold the GIL, so two Python threads never use the same buffers at once.)"""
    key = (np.dtype(dtype).name, ntasks, mr, nr)
    ws = _WORKSPACE.get(key)
    if ws is None or ws[0].shape[1] < a_elems or ws[1].shape[1] < b_elems:
        from rooflab.memory import aligned_empty

        a_elems = max(a_elems, 0 if ws is None else ws[0].shape[1])
        b_elems = max(b_elems, 0 if ws is None else ws[1].shape[1])
        a_pad = _ceil(max(a_elems, 1), 64)
        b_pad = _ceil(max(b_elems, 1), 64)
        Ap = aligned_empty(ntasks * a_pad, dtype).reshape(ntasks, a_pad)
        Bp = aligned_empty(ntasks * b_pad, dtype).reshape(ntasks, b_pad)
        tmp = np.zeros((ntasks, mr, nr), dtype=dtype)
        ws = _WORKSPACE[key] = (Ap, Bp, tmp)
        _PLANS.clear()  # cached plans hold the old (smaller) buffers
    return ws


_PLANS: dict = {}


def gemm_packed(A, B, C, threads: int = 1, blocking: dict | None = None) -> None:
    """Rungs 04 (threads=1) and 05: C = A @ B with packed panels, over ``threads`` blocks of C."""
    M, K = A.shape
    N = B.shape[1]
    if M == 0 or N == 0:
        return
    if K == 0:
        C[:] = 0
        return
    if M == 1 and blocking is None:
        gemv(A, B, C, threads)
        return
    key = (M, N, K, A.dtype.char, threads, None if blocking is None else tuple(sorted(blocking.items())))
    args = _PLANS.get(key)
    if args is None:  # plan and buffers once per shape: a call costs one numba dispatch (~us)
        pl = plan(M, N, K, A.dtype, max(1, int(threads)), blocking)
        ntasks = pl["tasks"].shape[0]
        Ap, Bp, tmp = workspace(A.dtype, ntasks, pl["mc"] * pl["kc"], pl["kc"] * pl["nc"], pl["mr"], pl["nr"])
        fn = gemm_tasks_parallel if ntasks > 1 else gemm_tasks_serial
        args = (fn, pl["tasks"], Ap, Bp, tmp, pl["mc"], pl["kc"], pl["nc"], pl["skinny_kb"])
        if len(_PLANS) > 256:
            _PLANS.clear()
        _PLANS[key] = args
    args[0](A, B, C, *args[1:])


GEMV_MIN_ROWS = 64  # rows of B per thread below which splitting K is not worth a fork/join


def gemv(A, B, C, threads: int = 1) -> None:
    """M = 1 (the decode GEMV): one sequential stream of B per thread, K split across threads."""
    K, N = B.shape
    T = max(1, min(int(threads), K // GEMV_MIN_ROWS))
    if T == 1:
        gemv_serial(A, B, C)
        return
    key = ("gemv", A.dtype.char, T, N)
    part = _PLANS.get(key)
    if part is None:
        part = _PLANS[key] = np.empty((T, N), A.dtype)
    gemv_split_k(A, B, C, part)


def gemm_naive_into(A, B, C) -> None:
    C[:] = 0
    gemm_naive(A, B, C)


def gemm_ikj_into(A, B, C) -> None:
    gemm_ikj(A, B, C)


def gemm_blocked_into(A, B, C, kb: int = 256, nb: int = 256) -> None:
    gemm_blocked(A, B, C, kb, nb)


def threading_layer() -> str:
    try:
        return numba.threading_layer()
    except ValueError:  # no parallel region has run yet
        return "not initialised"
