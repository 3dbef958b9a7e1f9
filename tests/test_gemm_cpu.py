"""gemm family on the CPU: every rung verified on odd shapes, wrong kernels rejected, bad input refused
by name, and the micro-kernel's hot loop read from its assembly.

Fast loop (not slow): the shared math and checks, the SIMD intrinsics, rungs 00-03 on small odd
shapes, rung 04 in FP32 on a few shapes (one numba compile, cached afterwards). Slow: the whole
ladder in both dtypes, the tile and block edges, 2 threads, wrong micro-kernels, the AVX2 build
on an AVX-512 host, the assembly checks.

Run: ``python -m pytest -q tests/test_gemm_cpu.py`` (add ``-m 'not slow'`` for the fast loop).
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from numba import njit
from rooflab.kernels.cpu import gemm as K
from rooflab.kernels.cpu import gemm_ukr, simd

import rooflab
from rooflab import verify
from rooflab.cpu.backend import cpu_backend
from rooflab.driver import Driver, Settings
from rooflab.errors import RooflabError, VerificationError
from rooflab.families import gemm as fam
from rooflab.families.gemm.cpu import RUNGS
from rooflab.registry import best_variant, check_cases, list_variants

NAMES = [
    "cpu.gemm.00-numpy-blas",
    "cpu.gemm.01-naive",
    "cpu.gemm.02-loop-order",
    "cpu.gemm.03-cache-blocked",
    "cpu.gemm.04-packed-panels",
    "cpu.gemm.05-multithreaded",
]
DTYPES = ("float32", "float64")
MR32, NR32 = K.TILE["float32"]


def _tile_edges(dtype):
    mr, nr = K.TILE[dtype]
    return [(mr - 1, nr + 1, 3), (mr, nr, 2), (mr + 1, nr - 1, 17), (2 * mr + 1, 2 * nr + 3, 33)]


ODD = [(1, 1, 1), (1, 768, 3072), (7, 13, 5), (65, 17, 129), (3, 1, 40), (40, 1, 7), (5, 70, 300)]
SMALL_ODD = [(1, 1, 1), (7, 13, 5), (65, 17, 129), (1, 70, 33), (9, 1, 12)]


def check_variant(name, shape, dtype, threads=None, **shape_extra):
    v = rooflab.get_variant(name)
    args = v.inputs({"M": shape[0], "N": shape[1], "K": shape[2], **shape_extra}, dtype, seed=sum(shape))
    expected = v.reference(*args)
    got = v(*args) if threads is None else v(*args, threads=threads)
    assert got.shape == expected.shape and got.dtype == np.dtype(dtype)
    verify.check(got, expected, dtype=dtype, what=f"{name} {shape}")


# ---- registry, declared work, shapes, suite (no compile) ---------------------------------------


def test_ladder_registered_in_order():
    vs = list_variants(family="gemm", device="cpu")
    assert [v.name for v in vs] == NAMES
    assert [v.number for v in vs] == list(range(len(RUNGS)))  # numbered in order, no gaps
    assert all(v.dtypes == DTYPES for v in vs)
    assert vs[0].library and not any(v.library for v in vs[1:])


def test_roles_are_attributes_of_the_rungs():
    """What consumers pick a rung for is read from the variant, never from its number or name."""
    vs = {v.name: v for v in list_variants(family="gemm", device="cpu")}
    for r in RUNGS:
        v = vs[r.name]
        assert (v.op == "gemm") == r.model_op and ("best" in v.roles) == r.best
        assert ("threaded" in v.roles) == r.threaded and v.max_flops == r.max_flops
    # model ops run through the library and the library-class rungs, never the slow ones
    assert [v.name for v in vs.values() if v.op == "gemm"] == [NAMES[0], NAMES[4], NAMES[5]]
    (best,) = [v for v in vs.values() if "best" in v.roles]
    assert best_variant("gemm", "cpu") is best and best.name == NAMES[5]
    # conv's im2col rung builds on the family's best GEMM
    from rooflab.families.conv import cpu as conv_cpu

    assert conv_cpu.own_gemm("float32").name == best.name
    # the slow rungs stop at their FLOP limit; the fast ones and the library are not limited
    assert all(v.max_flops for v in vs.values() if v.number in (1, 2, 3))
    assert not any(v.max_flops for v in vs.values() if v.op == "gemm")


def test_a_new_rung_is_one_entry(monkeypatch):
    """A rung added to RUNGS alone is registered with its roles and picked by the suite and the best
    lookup (on a copy of the registry: nothing is left registered)."""
    from rooflab import registry
    from rooflab.families.gemm import cpu as gemm_cpu

    monkeypatch.setattr(registry, "_REGISTRY", {k: v for k, v in registry._REGISTRY.items() if ".gemm." not in k})
    new = gemm_cpu.Rung(len(RUNGS), "faster", "a new rung", into=K.gemm_packed, threaded=True, model_op=True, best=True)
    gemm_cpu.register_rungs([*(dataclasses.replace(r, best=False) for r in RUNGS), new])
    name = f"cpu.gemm.{new.number:02d}-faster"
    assert best_variant("gemm", "cpu").name == name
    assert [v.name for v in list_variants(op="gemm", device="cpu")][-1] == name
    quick = fam.cases(quick=True, threads=[1, 2])
    assert {c.threads for c in quick if c.variant == name} == {1, 2}


def test_library_variant_names_its_blas():
    from threadpoolctl import threadpool_info

    from rooflab.families.gemm.cpu import blas_info

    blas = [lib for lib in threadpool_info() if lib.get("user_api") == "blas"]
    desc = rooflab.get_variant(NAMES[0]).description
    if blas:
        assert blas[0]["internal_api"] in desc and blas[0]["version"] in desc
        assert blas_info()["internal_api"] == blas[0]["internal_api"]


def test_declared_work():
    A, B = fam.inputs({"M": 3, "N": 5, "K": 7}, "float32")
    w = fam.work(A, B, reps=2)
    assert w.flops == 2 * 2 * 3 * 5 * 7
    assert w.bytes_read == 2 * 4 * (3 * 7 + 7 * 5) and w.bytes_written == 2 * 4 * 3 * 5
    A, B, bias = fam.inputs({"M": 3, "N": 5, "K": 7, "bias": True}, "float64")
    w = fam.work(A, B, bias)
    assert w.flops == 2 * 3 * 5 * 7 + 3 * 5 and w.bytes_read == 8 * (3 * 7 + 7 * 5 + 5)


def test_inputs_fold_batch_and_add_bias():
    A, B, bias = fam.inputs({"M": 4, "N": 6, "K": 5, "batch": 3, "bias": True}, "float64", seed=3)
    assert A.shape == (12, 5) and B.shape == (5, 6) and bias.shape == (6,)
    assert all(x.flags.c_contiguous and x.dtype == np.float64 for x in (A, B, bias))
    assert A.min() >= -0.25 and A.max() < 1 and A.std() > 0.1  # random, mixed sign, mostly positive
    np.testing.assert_allclose(fam.reference(A, B, bias), A @ B + bias)
    a2, _ = fam.inputs(8, "float32", seed=3)
    b2, _ = fam.inputs(8, "float32", seed=4)
    assert a2.shape == (8, 8) and not np.array_equal(a2, b2)


def test_model_shapes_from_catalog():
    shapes = {tuple(s[k] for k in "MNK") for _, s in fam.MODEL_SHAPES}
    assert {(128, 768, 768), (128, 3072, 768), (128, 768, 3072)} <= shapes  # BERT-base s128
    assert {(1024, 2304, 768), (1024, 3072, 768)} <= shapes  # GPT-2 prefill
    assert {(1, 2304, 768), (1, 768, 3072), (1, 3072, 768)} <= shapes  # GPT-2 decode GEMVs


def test_cases_quick_and_full():
    quick = check_cases(fam.cases(quick=True, threads=[1, 2]))
    full = check_cases(fam.cases(quick=False, threads=[1, 2]))
    assert 0 < len(quick) < 40 < len(full)
    for c in quick + full:
        v = rooflab.get_variant(c.variant)
        assert c.dtype in v.dtypes and c.meta["shape"] == c.size
        if v.max_flops:
            assert 2 * c.size["M"] * c.size["N"] * c.size["K"] <= v.max_flops
        if "threaded" not in v.roles:
            assert c.threads == 1  # single-threaded rungs are not repeated per thread count
    full_keys = {(c.variant, c.dtype, c.threads, c.size["M"], c.size["N"]) for c in full}
    assert (NAMES[5], "float64", 2, 4096, 4096) in full_keys
    assert (NAMES[0], "float32", 2, 1, 768) in full_keys
    assert any(c.size["M"] == 1 for c in quick)


# ---- bad input: refused with the variant's name and the constraint ------------------------------


_SWAPPED = np.dtype(np.float32).newbyteorder()
BAD = [
    ("inner dimensions differ", lambda: (np.ones((3, 4), np.float32), np.ones((5, 2), np.float32))),
    ("not supported", lambda: (np.ones((3, 4), np.int64), np.ones((4, 2), np.int64))),
    ("not supported", lambda: (np.ones((3, 4), np.float16), np.ones((4, 2), np.float16))),
    ("C-contiguous", lambda: (np.ones((4, 3), np.float32).T, np.ones((4, 2), np.float32))),
    ("C-contiguous", lambda: (np.ones((3, 4), np.float64), np.ones((2, 4), np.float64).T)),
    ("must be 2-D", lambda: (np.ones((2, 3, 4), np.float32), np.ones((4, 2), np.float32))),
    ("must be 2-D", lambda: (np.ones((3, 4), np.float32), np.ones(4, np.float32))),
    ("A is float32 but B is float64", lambda: (np.ones((3, 4), np.float32), np.ones((4, 2), np.float64))),
    ("bias must be", lambda: (np.ones((3, 4), np.float32), np.ones((4, 2), np.float32), np.ones(3, np.float32))),
    ("numpy array", lambda: ([[1.0]], np.ones((1, 1)))),
    # float32 in the other byte order: its name is "float32" (the check once compared names, let it
    # through, and numba failed typing it); now refused by the dtype itself
    ("non-native byte order", lambda: (np.ones((3, 4), _SWAPPED), np.ones((4, 2), _SWAPPED))),
]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("constraint,make", BAD, ids=[f"{i}-{b[0]}" for i, b in enumerate(BAD)])
def test_bad_input_names_variant_and_constraint(name, constraint, make):
    v = rooflab.get_variant(name)
    with pytest.raises(RooflabError) as e:
        v(*make())
    assert name in str(e.value) and constraint in str(e.value)


def test_out_argument_checked():
    v = rooflab.get_variant(NAMES[2])
    A, B = fam.inputs((4, 5, 6), "float64")
    with pytest.raises(RooflabError, match="out must be"):
        v(A, B, out=np.empty((5, 4)))
    with pytest.raises(RooflabError, match="overlaps"):
        v(A, B, out=A.reshape(-1)[:20].reshape(4, 5))
    out = np.empty((4, 5))
    assert v(A, B, out=out) is out
    np.testing.assert_allclose(out, A @ B)


# ---- explicit SIMD ---------------------------------------------------------------------------


@njit
def _simd_all(a, b, c2, out, n):
    v = simd.vfma(simd.vload(a, 1), simd.vload(b, 0), simd.vbcast(a, 3))  # a[1:]*b + a[3]
    v = simd.vmax(simd.vsub(simd.vadd(v, simd.vzero(a)), simd.vmul(simd.vzero(a), v)), simd.vmin(v, v))
    simd.vstore(out, 0, v)
    simd.vstorem(out, 100, simd.vloadm(a, 2, n), n)
    simd.vstore2(c2, 0, 0, simd.vadd(simd.vload2(c2, 1, 2), simd.vbcast2(c2, 2, 3)))
    simd.vstore(out, 200, simd.vsplat(a[0]))
    simd.prefetch(a, 0)
    simd.prefetchw(out, 0)
    simd.prefetch2(c2, 1, 1)
    simd.prefetchw2(c2, 0, 0)
    return simd.vhsum(simd.vload(b, 0)), simd.vget(simd.vload(b, 0), 2), simd.vlanes(a)


@pytest.mark.parametrize("dtype", DTYPES)
def test_simd_intrinsics(dtype):
    L = simd.lanes(dtype)
    a = np.arange(64, dtype=dtype) + 1
    b = np.arange(64, dtype=dtype) * 0.5
    c2 = np.arange(160, dtype=dtype).reshape(4, 40)
    c2o = c2.copy()
    out = np.full(300, -7, dtype=dtype)
    hs, g, lanes = _simd_all(a, b, c2, out, 3)
    assert lanes == L == simd.BITS // (8 * np.dtype(dtype).itemsize)
    np.testing.assert_array_equal(out[:L], a[1 : 1 + L] * b[:L] + a[3])
    m = min(3, L)  # masked: only the first n lanes touch memory
    np.testing.assert_array_equal(out[100 : 100 + m], a[2 : 2 + m])
    assert (out[100 + m : 100 + L] == -7).all() and (out[200 : 200 + L] == a[0]).all()
    np.testing.assert_array_equal(c2[0, :L], c2o[1, 2 : 2 + L] + c2o[2, 3])
    assert hs == b[:L].sum() and g == b[2]


def _features_without_avx512() -> str:
    import llvmlite.binding as llb

    feats = llb.get_host_cpu_features()
    return ",".join(("-" if k.startswith("avx512") else "+" if v else "-") + k for k, v in feats.items())


def test_simd_width_follows_the_compile_target():
    code = "from rooflab.kernels.cpu import simd; print(simd.BITS, simd.LANES_F32, simd.LANES_F64)"
    env = dict(os.environ, NUMBA_CPU_FEATURES=_features_without_avx512())
    env.pop("ROOFLAB_SIMD_BITS", None)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["256", "8", "4"]
    env["ROOFLAB_SIMD_BITS"] = "300"
    bad = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert bad.returncode != 0 and "ROOFLAB_SIMD_BITS" in bad.stderr


def test_micro_kernels_match_their_generator():
    text = inspect.getsource(gemm_ukr)
    assert text.endswith(gemm_ukr.generated_source()) or text.rstrip("\n").endswith(
        gemm_ukr.generated_source().rstrip("\n")
    ), "regenerate with: python -m rooflab.kernels.cpu.gemm_ukr"


# ---- every rung verified ---------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", NAMES[:4])
@pytest.mark.parametrize("shape", SMALL_ODD)
def test_simple_rungs_small_odd_shapes(name, dtype, shape):
    check_variant(name, shape, dtype)


@pytest.mark.parametrize("shape", [(1, 1, 1), (7, 13, 5), (MR32 + 1, NR32 - 1, 17), (3, 40, 9)])
def test_packed_float32_small(shape):
    check_variant(NAMES[4], shape, "float32")


def test_bias_batch_and_reps():
    v = rooflab.get_variant(NAMES[2])
    A, B, bias = v.inputs({"M": 5, "N": 7, "K": 3, "batch": 2, "bias": True}, "float32")
    C = v(A, B, bias, reps=3)  # repeated into the same C: bias added once per product, not 3 times
    verify.check(C, v.reference(A, B, bias), dtype="float32")


def test_driver_verifies_then_times():
    r = Driver(cpu_backend(), Settings(budget_s=0.01, min_samples=3, max_attempts=1, probe_clock=False))
    v = rooflab.get_variant(NAMES[3])
    rec = r.measure(v, v.inputs({"M": 9, "N": 11, "K": 13}, "float64"), threads=1)
    assert rec["status"] == "ok" and rec["verified"] and rec["work"]["flops"] == 2 * 9 * 11 * 13 * rec["reps"]


@pytest.mark.slow
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", NAMES)
def test_every_rung_odd_shapes(name, dtype):
    for shape in ODD + _tile_edges(dtype):
        if name == NAMES[1] and shape[1] * shape[2] > 1e5:
            continue  # the naive loop at 1x768x3072 takes seconds: its small shapes suffice
        check_variant(name, shape, dtype)
    check_variant(name, (6, 9, 4), dtype, bias=True, batch=3)
    check_variant(name, (0, 5, 3), dtype)  # empty products are products too
    check_variant(name, (4, 5, 0), dtype)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", DTYPES)
def test_multithreaded_splits(dtype):
    mr, nr = K.TILE[dtype]
    shapes = ODD + [(3 * mr + 1, nr - 3, 50), (2, 1000, 64), (2 * mr + 5, 3 * nr + 7, 70)]
    for threads in (1, 2):
        for shape in shapes:
            check_variant(NAMES[5], shape, dtype, threads=threads)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", DTYPES)
def test_gemv_split_k(dtype):
    """M = 1: one stream per thread, K split unevenly, vector tails, and the partial-row sum."""
    rng = np.random.default_rng(11)
    for N, Kd in [(17, 129), (768, 3072), (1, 200), (simd.lanes(dtype) * 3, 64)]:
        A, B = fam.inputs({"M": 1, "N": N, "K": Kd}, dtype, seed=N + Kd)
        for threads in (1, 2):
            C = np.full((1, N), np.nan, dtype)
            K.gemv(A, B, C, threads=threads)
            verify.check(C, fam.reference(A, B), dtype=dtype, what=f"gemv 1x{N}x{Kd} {threads}T")
    # each thread's share of K really reaches C: dropping the second partial row is caught
    A = rng.random((1, 256)).astype(dtype) + 0.5
    B = rng.random((256, 40)).astype(dtype) + 0.5
    part = np.empty((2, 40), dtype)
    C = np.empty((1, 40), dtype)
    K.gemv_split_k(A, B, C, part)
    C_half = part[:1].copy()
    verify.check(C, fam.reference(A, B), dtype=dtype, what="split-K sum")
    with pytest.raises(VerificationError):
        verify.check(C_half, fam.reference(A, B), dtype=dtype, what="one partial row only")


@pytest.mark.slow
@pytest.mark.parametrize("dtype", DTYPES)
def test_packed_block_edges(dtype):
    """Tiny blocks: many jc/pc/ic iterations, first-pass stores then accumulation, every edge."""
    mr, nr = K.TILE[dtype]
    rng = np.random.default_rng(5)
    for M, N, Kd in [(3 * mr + 2, 2 * nr + 5, 23), (mr, nr, 7), (1, 3 * nr + 1, 9), (2 * mr, 1, 31)]:
        for threads in (1, 2):
            A = rng.random((M, Kd)).astype(dtype)
            B = rng.random((Kd, N)).astype(dtype)
            C = np.full((M, N), np.nan, dtype)
            K.gemm_packed(A, B, C, threads=threads, blocking={"mc": mr, "kc": 4, "nc": nr})
            verify.check(C, fam.reference(A, B), dtype=dtype, what=f"blocks {M}x{N}x{Kd}")


# ---- wrong kernels are rejected --------------------------------------------------------------


def _ladder_with(ukr_edit=None, block_edit=None, kc=64):
    """A copy of rung 04's loop nest (uncached) built around an edited micro-kernel or loop nest."""
    ns = dict(vars(K))
    ns.update({k: getattr(simd, k) for k in simd.__all__})
    MR, NV = K.MR, K.NV
    src = gemm_ukr.ukr_source(MR, NV).replace(", cache=True", "")
    ns["njit"] = njit
    exec((ukr_edit or (lambda s: s))(src), ns)
    ns["ukr"] = ns[f"ukr_{MR}x{NV}v"]
    for fn in ("pack_b", "pack_a", "gemm_packed_block"):
        body = textwrap.dedent(inspect.getsource(getattr(K, fn).py_func)).split("\n", 1)[1]
        if fn == "gemm_packed_block" and block_edit:
            body = block_edit(body)
        exec("@njit\n" + body, ns)
    block = ns["gemm_packed_block"]

    def kernel(A, B, bias=None, reps=1, threads=None, out=None):
        M, N, Kd = fam.check_operands("wrong.gemm", A, B, bias)
        C = np.full((M, N), np.nan, A.dtype)  # an element never written shows (np.empty may reuse a right answer)
        pl = K.plan(M, N, Kd, A.dtype, 1, {"mc": 2 * MR, "kc": kc})
        Ap, Bp, tmp = K.workspace(A.dtype, 1, pl["mc"] * pl["kc"], pl["kc"] * pl["nc"], pl["mr"], pl["nr"])
        block(A, B, C, 0, M, 0, N, Ap[0], Bp[0], tmp[0], pl["mc"], pl["kc"], pl["nc"])
        return C

    import dataclasses

    return dataclasses.replace(rooflab.get_variant(NAMES[4]), name="wrong.gemm", kernel=kernel)


WRONG = {
    # the micro-kernel stops one k short: every KC pass loses one term
    "skips-last-k": (lambda s: s.replace("for _ in range(kc):", "for _ in range(kc - 1):"), None),
    # the micro-kernel overwrites C on every KC pass instead of accumulating
    "no-accumulate": (lambda s: s.replace("    if first:", "    if True:"), None),
    # edge tiles drop their last column
    "edge-drops-column": (None, lambda s: s.replace("for j in range(nr):", "for j in range(nr - 1):")),
    # a row of the tile reads the neighbouring row's A values
    "wrong-row": (lambda s: s.replace("vbcast(Ap, a + 1)", "vbcast(Ap, a + 2)"), None),
}


@pytest.mark.slow
@pytest.mark.parametrize("bug", list(WRONG))
def test_wrong_micro_kernels_rejected(bug):
    """Each bug in one dtype, the two dtypes alternating over the bugs (each compile of an edited
    loop nest is ~6 s on a 2-core VM; a bug in the shared source is in both dtypes' code)."""
    ukr_edit, block_edit = WRONG[bug]
    v = _ladder_with(ukr_edit, block_edit)
    M, N = 2 * K.MR + 3, 2 * K.TILE["float32"][1] + 5  # full tiles and edges
    r = Driver(cpu_backend(), Settings(probe_clock=False, max_attempts=1, budget_s=0.01, min_samples=1))
    dtype, Kd = (("float32", 200), ("float64", 130))[list(WRONG).index(bug) % 2]
    rec = r.measure(v, v.inputs({"M": M, "N": N, "K": Kd}, dtype), threads=1)
    assert rec["status"] == "failed" and not rec["verified"], (bug, dtype)
    assert "at index" in rec["error"]  # names the wrong element (or the unwritten one: NaN)


@pytest.mark.slow
def test_the_untouched_copy_of_the_micro_kernel_passes():
    """The copy the WRONG bugs are made in passes unchanged: their failures are the bugs."""
    ok = _ladder_with()
    M, N = 2 * K.MR + 3, 2 * K.TILE["float32"][1] + 5
    for dtype, Kd in (("float32", 200), ("float64", 130)):
        ins = ok.inputs({"M": M, "N": N, "K": Kd}, dtype)
        verify.check(ok(*ins), ok.reference(*ins), dtype=dtype)


@pytest.mark.slow
def test_dropping_one_term_of_a_long_sum_is_caught_in_float32():
    """The tolerance is tight enough for realistic K: one k of 2048 missing fails FP32's check."""
    v = _ladder_with(WRONG["skips-last-k"][0], kc=4096)  # one pass over K: exactly one term missing
    A, B = v.inputs({"M": 16, "N": 40, "K": 2048}, "float32")
    with pytest.raises(VerificationError):
        verify.check(v(A, B), v.reference(A, B), dtype="float32")


# ---- the micro-kernel's assembly -------------------------------------------------------------


def _hot_loop(asm: str) -> list[str]:
    """Instructions of the loop with the most FMAs: from a label to the jump back to it."""
    lines = asm.splitlines()
    loops = []
    for n, line in enumerate(lines):
        m = re.match(r"^(\.?L\w+):", line)
        if not m:
            continue
        body = []
        for ins in lines[n + 1 :]:
            ins = ins.strip()
            if not ins or ins.startswith((".", "#")) or ins.endswith(":"):
                continue
            body.append(ins)
            if re.match(rf"j\w+\s+{re.escape(m.group(1))}$", ins):  # the back edge: a loop
                loops.append(body)
                break
            if ins.startswith(("jmp", "ret")):
                break
    assert loops, "no loop found in the assembly"
    return max(loops, key=lambda b: sum("vfmadd" in i for i in b))


def _ukr_asm(dtype):
    @njit(fastmath=True)
    def hot(kc, Ap, Bp, C, first):
        K.ukr(kc, Ap, 0, Bp, 0, C, 0, 0, first)

    mr, nr = K.TILE[dtype]
    hot(4, np.zeros(4 * mr, dtype), np.zeros(4 * nr, dtype), np.zeros((mr, nr), dtype), True)
    return hot.inspect_asm(hot.signatures[0])


def check_hot_loop(asm: str, dtype: str, bits: int, mr: int, nv: int) -> dict:
    loop = _hot_loop(asm)
    reg = {512: "zmm", 256: "ymm", 128: "xmm"}[bits]
    suffix = "ps" if dtype == "float32" else "pd"
    packed = [i for i in loop if re.match(rf"vfmadd\d+{suffix}\b", i) and f"%{reg}" in i]
    scalar = [i for i in loop if re.match(r"vfmadd\d+s[sd]\b", i)]
    stack = [i for i in loop if "(%rsp)" in i or "%rsp)" in i]
    assert packed and len(packed) % (mr * nv) == 0, f"{len(packed)} packed {reg} FMAs in the hot loop"
    assert len(packed) == sum("vfmadd" in i for i in loop), "every FMA in the hot loop is a packed one"
    assert not scalar and not stack, f"spills or scalar FMAs in the hot loop: {stack[:3] + scalar[:3]}"
    return {"fmas": len(packed), "instructions": len(loop)}


GOOD_LOOP = ".LBB0_5:\n\tvbroadcastss\t4(%r12), %zmm28\n\tvfmadd231ps\t%zmm27, %zmm28, %zmm21\n\tjne\t.LBB0_5\n"


@pytest.mark.parametrize(
    "bad,why",
    [
        (GOOD_LOOP.replace("\tjne", "\tvmovups\t%zmm4, -64(%rsp)\n\tjne"), "spills"),
        (GOOD_LOOP.replace("vfmadd231ps\t%zmm27, %zmm28, %zmm21", "vfmadd231ss\t%xmm1, %xmm2, %xmm3"), "packed"),
        (GOOD_LOOP.replace("zmm", "ymm"), "packed zmm"),
        (GOOD_LOOP.replace("\tjne\t.LBB0_5", "\tjne\t.LBB0_9"), "no loop"),
    ],
)
def test_asm_checker_rejects(bad, why):
    check_hot_loop(GOOD_LOOP, "float32", 512, 1, 1)
    with pytest.raises(AssertionError, match=why):
        check_hot_loop(bad, "float32", 512, 1, 1)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", DTYPES)
def test_micro_kernel_asm_packed_fma_no_spills(dtype):
    check_hot_loop(_ukr_asm(dtype), dtype, simd.BITS, K.MR, K.NV)


@pytest.mark.slow
@pytest.mark.skipif(
    simd.BITS == 256,
    reason="this host has no AVX-512: every GEMM test here already builds and checks the AVX2 path",
)
def test_avx2_build_on_this_host():
    """The AVX2 path (6x2v tile in ymm) compiled for a CPU without AVX-512: correct, and its hot loop
    is packed ymm FMAs with no spills. Runs in a subprocess with its own numba cache."""
    code = textwrap.dedent(
        """
        import json, numpy as np
        import tests.test_gemm_cpu as t
        from rooflab.kernels.cpu import gemm as K, simd
        out = {"bits": simd.BITS, "tile": [K.MR, K.NV]}
        for dt in ("float32", "float64"):
            for shape in [(1, 1, 1), (7, 13, 5), (65, 17, 129), (1, 300, 70)] + t._tile_edges(dt):
                for threads in (1, 2):
                    t.check_variant(t.NAMES[5], shape, dt, threads=threads)
            out[dt] = t.check_hot_loop(t._ukr_asm(dt), dt, simd.BITS, K.MR, K.NV)
        print(json.dumps(out))
        """
    )
    import tempfile

    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CPU_FEATURES=_features_without_avx512(), NUMBA_CACHE_DIR=cache)
        env.pop("ROOFLAB_SIMD_BITS", None)
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        res = subprocess.run([sys.executable, "-c", code], env=env, cwd=root, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-2000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["bits"] == 256 and out["tile"] == [6, 2]
