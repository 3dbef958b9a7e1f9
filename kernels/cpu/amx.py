"""AMX tile-product peaks: ``tdpbf16ps`` (bf16 pairs -> fp32) and ``tdpbssd`` (s8 quads -> s32).

One tile product multiplies a 16 x 64-byte A tile by a 16 x 64-byte B tile (in the "VNNI" layout:
row k of B holds the 2 (bf16) or 4 (int8) values of rows 2k.. / 4k.. of the logical B, column by
column) into a 16 x 16 fp32/int32 C tile: 16 x 16 x 32 bf16 products = 16 384 FLOP, or 16 x 16 x
64 int8 products = 32 768 ops (a multiply and an add per product, as FLOPs count an FMA).

The whole kernel is one block of inline assembly per thread, so no tile lives in a numba variable
and every thread loads its own tile configuration: ``ldtilecfg`` (palette 1, all eight tiles 16
rows x 64 bytes), ``tilezero`` C, ``tileloadd`` two A tiles (tmm4, tmm5) and two B tiles (tmm6,
tmm7), then ``reps`` x 4 products into ONE accumulator, ``tilestored`` C, ``tilerelease``.

Napkin math: Intel gives 16 cycles per tile product (1024 bf16 FLOP, 2048 int8 ops per cycle per
core). Measured on a 2-vCPU Emerald Rapids VM (C, inline asm): one accumulator fed back-to-back
ran 0.69 of Intel's rate at the add-chain clock measured just before and after it (2.63-2.69 GHz),
0.85 of it at the 2.18 GHz the same chain ran at with one product per 128 adds interleaved (the
clock under AMX cannot be read without counters, which the VM lacks); four independent
accumulators 1919-2139 against one's 2242-2284 GFLOP/s (0.86-0.94) in a quiet minute. In busy ones
(a neighbour on the core's other hardware thread shares the unit) both ran at about half, and an
earlier session read 0.30-0.39 for four. So the peak runs one accumulator. 2^16 reps x 4 products
is ~6 ms.

AMX needs the kernel's permission first (``request_permission``: arch_prctl ARCH_REQ_XCOMP_PERM
for XFEATURE_XTILEDATA, process-wide); without it the first tile instruction raises SIGILL, so a
unit without permission is skipped with the reason and never run.

Verified: C = reps x 2 x (A0 @ B0 + A1 @ B1) exactly (bf16 small integers, exact in fp32 while
below 2^24; int8 exact), against a numpy reference that unpacks the VNNI layout: a dropped
product, a wrong tile or a swapped layout changes it.
"""

from __future__ import annotations

import ctypes
import functools

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.extending import intrinsic

import rooflab._numba_env  # noqa: F401

from .asm_loop import missing

ROWS, ROW_BYTES = 16, 64  # every tile: 16 rows x 64 bytes
TILE_BYTES = ROWS * ROW_BYTES
PRODUCTS_PER_REP = 4
INSTRUCTION = {"bf16": "tdpbf16ps", "int8": "tdpbssd"}
OPS_PER_PRODUCT = {"bf16": 16 * 16 * 32 * 2, "int8": 16 * 16 * 64 * 2}

ARCH_GET_XCOMP_PERM, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA, SYS_ARCH_PRCTL = 0x1022, 0x1023, 18, 158


def tile_config() -> np.ndarray:
    """The 64-byte ``ldtilecfg`` operand: palette 1, each of the 8 tiles 16 rows x 64 bytes."""
    cfg = np.zeros(64, np.uint8)
    cfg[0] = 1
    cfg[16:32] = np.frombuffer(np.full(8, ROW_BYTES, np.uint16).tobytes(), np.uint8)
    cfg[48:56] = ROWS
    return cfg


def _body(instruction: str) -> str:
    pairs = [("%tmm4", "%tmm6"), ("%tmm5", "%tmm7")] * 2  # A0 B0, A1 B1, twice: one accumulator
    products = "\n".join(f"{instruction} {b}, {a}, %tmm0" for a, b in pairs)
    return "\n".join(
        [
            "ldtilecfg ($1)",
            "tilezero %tmm0",
            "movq $$64, %r8",
            "tileloadd ($2,%r8,1), %tmm4",
            f"tileloadd {TILE_BYTES}($2,%r8,1), %tmm5",
            "tileloadd ($3,%r8,1), %tmm6",
            f"tileloadd {TILE_BYTES}($3,%r8,1), %tmm7",
            "1:",
            products,
            "decq $0",
            "jnz 1b",
            "tilestored %tmm0, ($4,%r8,1)",
            "tilerelease",
        ]
    )


def _tile_loop(instruction: str):
    @intrinsic
    def loop(typingctx, cfg, a, b, out, reps):
        sig = types.void(cfg, a, b, out, reps)

        def codegen(context, builder, signature, args):
            i64 = ir.IntType(64)
            ptrs = [
                builder.ptrtoint(context.make_array(t)(context, builder, v).data, i64)
                for t, v in zip(signature.args[:4], args[:4])
            ]
            n = context.cast(builder, args[4], signature.args[4], types.int64)
            fnty = ir.FunctionType(i64, [i64] * 5)
            constraints = "=r,r,r,r,r,0,~{r8},~{memory},~{dirflag},~{fpsr},~{flags}"
            builder.asm(fnty, _body(instruction), constraints, [*ptrs, n], side_effect=True)
            return context.get_dummy_value()

        return sig, codegen

    return loop


_bf16_loop = _tile_loop(INSTRUCTION["bf16"])
_int8_loop = _tile_loop(INSTRUCTION["int8"])


@njit(parallel=True, cache=True)
def tiles_bf16(cfg, a, b, out, reps, nthreads):
    """out[t] (16 x 16 fp32) = reps x 2 x (A0 @ B0 + A1 @ B1) of thread t's tiles a[t], b[t]
    (2 tiles each, bf16 bit patterns as uint16, B in the VNNI layout)."""
    for t in prange(nthreads):
        _bf16_loop(cfg, a[t], b[t], out[t], reps)


@njit(parallel=True, cache=True)
def tiles_int8(cfg, a, b, out, reps, nthreads):
    """out[t] (16 x 16 int32) = reps x 2 x (A0 @ B0 + A1 @ B1), s8 x s8 (tdpbssd)."""
    for t in prange(nthreads):
        _int8_loop(cfg, a[t], b[t], out[t], reps)


@functools.cache
def permission() -> str | None:
    """Ask Linux for the AMX tile state (process-wide, so asked once per process: every timed call
    of an AMX kernel checks it). None when granted, else why not, in one line."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        rc = libc.syscall(
            ctypes.c_long(SYS_ARCH_PRCTL), ctypes.c_long(ARCH_REQ_XCOMP_PERM), ctypes.c_long(XFEATURE_XTILEDATA)
        )
        if rc != 0:
            return f"the kernel refused the AMX tile state (arch_prctl ARCH_REQ_XCOMP_PERM: errno {ctypes.get_errno()})"
        mask = ctypes.c_ulong(0)
        libc.syscall(ctypes.c_long(SYS_ARCH_PRCTL), ctypes.c_long(ARCH_GET_XCOMP_PERM), ctypes.byref(mask))
        if not mask.value >> XFEATURE_XTILEDATA & 1:
            return "the kernel did not grant the AMX tile state (ARCH_GET_XCOMP_PERM lacks XTILEDATA)"
    except (OSError, AttributeError) as e:  # pragma: no cover - not Linux / no libc
        return f"cannot ask the kernel for the AMX tile state ({e})"
    return None


def available(kind: str, features: str | None = None, arch: str | None = None) -> str | None:
    """None where the AMX ``kind`` ("bf16", "int8") tile product can run here, else why not: the
    CPU and numba's target need amx-tile and the kind's feature; on this host, also Linux's
    permission (asked for here, once per process)."""
    why = missing({"+amx-tile", f"+amx-{kind}"}, f"AMX {kind.upper()} ({INSTRUCTION[kind]})", features, arch)
    if why or features is not None:  # a described machine: its flags decide
        return why
    import sys

    if not sys.platform.startswith("linux"):
        return "AMX needs Linux's tile-state permission (arch_prctl), this is not Linux"
    return permission()


def inputs(kind: str, threads: int, seed: int = 0):
    """Per thread two A and two B tiles of small integers (bf16: -3..3, exact; int8: full range),
    the config, and the accumulators."""
    rng = np.random.default_rng(seed)
    if kind == "bf16":
        from .bf16 import to_bf16

        a = to_bf16(rng.integers(-3, 4, (threads, 2, ROWS, 32)).astype(np.float32))
        b = to_bf16(rng.integers(-3, 4, (threads, 2, ROWS, 32)).astype(np.float32))
        out = np.zeros((threads, ROWS, 16), np.float32)
    else:
        a = rng.integers(-128, 128, (threads, 2, ROWS, 64), dtype=np.int8)
        b = rng.integers(-128, 128, (threads, 2, ROWS, 64), dtype=np.int8)
        out = np.zeros((threads, ROWS, 16), np.int32)
    return tile_config(), a, b, out


def unpack_vnni(b: np.ndarray, per: int) -> np.ndarray:
    """A B tile in the VNNI layout (rows x 16 * per) -> the logical (rows * per) x 16 matrix."""
    rows = b.shape[-2]
    return b.reshape(*b.shape[:-2], rows, 16, per).swapaxes(-1, -2).reshape(*b.shape[:-2], rows * per, 16)


def reference(kind: str, a: np.ndarray, b: np.ndarray, reps: int) -> np.ndarray:
    """reps x 2 x (A0 @ B0 + A1 @ B1) per thread, in float64 (bf16) or int64 (int8, wrapped to int32)."""
    if kind == "bf16":
        from .bf16 import from_bf16

        A, B = from_bf16(a).astype(np.float64), unpack_vnni(from_bf16(b).astype(np.float64), 2)
    else:
        A, B = a.astype(np.int64), unpack_vnni(b.astype(np.int64), 4)
    c = (A[:, 0] @ B[:, 0] + A[:, 1] @ B[:, 1]) * 2 * int(reps)
    if kind == "bf16":
        return c.astype(np.float32)
    return ((c + 2**31) % 2**32 - 2**31).astype(np.int32)
