"""The quantized GEMM rungs (rooflab/families/qgemm.py): INT8 exact against int64 at odd shapes and
M = 1, the 4-/8-bit weight-only products against the dequantized float64 product, a misplaced block
scale rejected, the format's round trip, the other dot paths (AVX2, plain IR) built in a subprocess,
bad input refused in one line, and the suite through the driver."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import tempfile
import textwrap

import numpy as np
import pytest
from rooflab.kernels.cpu import qgemm_i8, qgemm_ukr, qgemm_w
from rooflab.kernels.cpu.simd_q import dot_path

import rooflab
from rooflab import verify
from rooflab.errors import RooflabError, VerificationError
from rooflab.families import qgemm as Q

try:
    import onnxruntime  # noqa: F401

    HAVE_ORT = True
except ImportError:  # pragma: no cover
    HAVE_ORT = False

ODD_INT8 = [(1, 1, 1), (1, 70, 33), (7, 13, 5), (qgemm_i8.MR + 1, qgemm_i8.NR - 1, 130), (3, 64, 4), (25, 97, 257)]


def run(name, shape, threads=1):
    v = rooflab.get_variant(name)
    inputs = v.inputs(shape)
    got = v.kernel(*inputs, threads=threads)
    return inputs, got, v.reference(*inputs)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shape", ODD_INT8)
def test_int8_gemm_is_exact(shape, threads):
    M, N, K = shape
    _, got, ref = run("cpu.qgemm.01-packed-dpbusd", {"M": M, "N": N, "K": K}, threads)
    assert got.dtype == np.int32 and np.array_equal(got, ref)


def test_int8_zero_point_and_every_byte_count():
    v = rooflab.get_variant("cpu.qgemm.01-packed-dpbusd")
    A, B, za = v.inputs({"M": 5, "N": 40, "K": 36})
    base = v.kernel(A, B, za)
    B2 = B.copy()
    B2[35, 39] ^= 1  # the last byte of the last column: a dropped k-group tail would not see it
    assert not np.array_equal(v.kernel(A, B2, za)[:, 39], base[:, 39])
    assert not np.array_equal(v.kernel(A, B, np.array(0, np.uint8)), base)  # the zero point's term is applied
    assert np.array_equal(v.kernel(A, B, np.array(0, np.uint8)), A.astype(np.int64) @ B.astype(np.int64))


@pytest.mark.skipif(not HAVE_ORT, reason="onnxruntime is not installed")
@pytest.mark.parametrize("shape", [(1, 70, 33), (7, 13, 5), (33, 64, 130)])
def test_int8_library_variant_is_exact(shape):
    M, N, K = shape
    _, got, ref = run("cpu.qgemm.00-ort-matmulinteger", {"M": M, "N": N, "K": K})
    assert np.array_equal(got, ref)


NBITS = [(1, 4, 32), (1, 13, 64), (3, 9, 96), (qgemm_w.ROWS_GEMV + 3, 70, 64), (1, 256, 1024)]


@pytest.mark.parametrize("bits", Q.BITS)
@pytest.mark.parametrize("shape", NBITS)
def test_weight_only_within_the_quant_tolerance(shape, bits):
    M, N, K = shape
    for threads in (1, 2):
        _, got, ref = run("cpu.qgemm.01-dequant-in-registers", {"M": M, "N": N, "K": K, "bits": bits}, threads)
        verify.check(got, ref, dtype="float32/quant")


@pytest.mark.skipif(not HAVE_ORT, reason="onnxruntime is not installed")
@pytest.mark.parametrize("bits", Q.BITS)
def test_weight_only_library_variant_agrees(bits):
    _, got, ref = run("cpu.qgemm.00-ort-matmulnbits", {"M": 2, "N": 24, "K": 64, "bits": bits})
    verify.check(got, ref, dtype="float32/quant")


def _misplaced_scale(A, packed, scales):
    """A wrong kernel: block 1 of every column takes block 0's scale."""
    s = scales.copy()
    s[:, 1] = s[:, 0]
    return A.astype(np.float64) @ Q.dequantize(packed, s, Q.bits_of(packed)).T


@pytest.mark.parametrize("K", [64, 4096])
@pytest.mark.parametrize("bits", Q.BITS)
def test_a_misplaced_block_scale_fails_the_check(bits, K):
    A, packed, scales = Q.nbits_inputs({"M": 1, "N": 64, "K": K, "bits": bits})
    ref = Q.nbits_reference(A, packed, scales)
    with pytest.raises(VerificationError):
        verify.check(_misplaced_scale(A, packed, scales).astype(np.float32), ref, dtype="float32/quant")
    dropped = scales.copy()
    dropped[:, -1] = 1.0  # a block scale ignored (taken as 1)
    with pytest.raises(VerificationError):
        verify.check(Q.nbits_reference(A, packed, dropped).astype(np.float32), ref, dtype="float32/quant")


W4A8_SHAPES = [(1, 37, 96), (2, 9, 160), (3, 64, 4096), (1, 5, 32 * 17)]  # tail blocks, groups and both


@pytest.mark.parametrize("shape", W4A8_SHAPES)
def test_int8_activation_gemv_matches_its_reference(shape):
    """4-bit weights x int8 activations (accuracy level 4): against the float64 product of the
    activations quantized per block and the dequantized weights, with whole groups of blocks, the
    blocks past the last group, and an all-zero activation block (scale 1)."""
    M, N, K = shape
    v = rooflab.get_variant("cpu.qgemm.01-w4a8-dpbusd")
    A, packed, scales = v.inputs({"M": M, "N": N, "K": K, "bits": 4})
    A[0, :32] = 0.0
    for threads in (1, 2):
        verify.check(
            v.kernel(A, packed, scales, threads=threads), v.reference(A, packed, scales), dtype="float32/quant"
        )
    # ... and it is not the fp32-activation product: the int8 activations are what it computes with
    fp32 = Q.nbits_reference(A, packed, scales)
    assert np.abs(v.reference(A, packed, scales) - fp32).max() > 1e-3


@pytest.mark.skipif(not HAVE_ORT, reason="onnxruntime is not installed")
def test_int8_activation_library_variant_agrees():
    _, got, ref = run("cpu.qgemm.00-ort-matmulnbits-a8", {"M": 2, "N": 24, "K": 256, "bits": 4})
    verify.check(got, ref, dtype="float32/quant")


def test_int8_activation_check_catches_a_lost_scale():
    A, packed, scales = Q.w4a8_inputs({"M": 1, "N": 64, "K": 4096, "bits": 4})
    ref = Q.w4a8_reference(A, packed, scales)
    s = scales.copy()
    s[:, 1] = s[:, 0]  # block 1 takes block 0's weight scale
    with pytest.raises(VerificationError):
        verify.check(Q.w4a8_reference(A, packed, s).astype(np.float32), ref, dtype="float32/quant")
    B = A.copy()
    B[:, 32:64] *= 1.5  # an activation block's scale taken from a neighbour: its codes read 1.5x
    with pytest.raises(VerificationError):
        verify.check(Q.w4a8_reference(B, packed, scales).astype(np.float32), ref, dtype="float32/quant")


@pytest.mark.parametrize("bits", Q.BITS)
def test_quantize_round_trip_and_layout(bits):
    rng = np.random.default_rng(1)
    W = rng.standard_normal((64, 5))
    packed, scales = Q.quantize(W, bits)
    assert packed.shape == (5, 2, 32 * bits // 8) and scales.shape == (5, 2)
    back = Q.dequantize(packed, scales, bits).T
    step = np.repeat(scales.T, 32, axis=0)  # per weight: its block's scale
    assert np.all(np.abs(back - W) <= step / 2 + 1e-6)
    if bits == 4:  # element 2j in the low nibble of byte j (MatMulNBits)
        q = np.rint(W[:32, 0] / scales[0, 0]) + 8
        assert packed[0, 0, 0] == (int(q[0]) | (int(q[1]) << 4))
    assert Q.bytes_per_weight(4) == 0.625 and Q.bytes_per_weight(8) == 1.125


def test_bad_input_one_line_each():
    with pytest.raises(RooflabError, match="multiple of the block size"):
        Q.nbits_inputs({"M": 1, "N": 4, "K": 40, "bits": 4})
    with pytest.raises(RooflabError, match="3-bit weights are not modelled"):
        Q.nbits_inputs({"M": 1, "N": 4, "K": 32, "bits": 3})
    v = rooflab.get_variant("cpu.qgemm.01-packed-dpbusd")
    A, B, za = v.inputs({"M": 2, "N": 3, "K": 4})
    with pytest.raises(RooflabError, match="must be a C-contiguous 2-D int8"):
        v.kernel(A, B.astype(np.int16), za)
    with pytest.raises(RooflabError, match="inner dimensions differ"):
        v.kernel(A, B[:3], za)
    w = rooflab.get_variant("cpu.qgemm.01-dequant-in-registers")
    A, P, S = w.inputs({"M": 1, "N": 4, "K": 64, "bits": 4})
    with pytest.raises(RooflabError, match="disagree"):
        w.kernel(A[:, :32].copy(), P, S)


def test_dot_path_follows_the_features():
    assert dot_path("+avx2,+avx512f,+avx512vnni", 512) == "vnni-512"
    assert dot_path("+avx2,+avx512f,+avx512vnni,+avx512vl", 256) == "vnni-256"  # ROOFLAB_SIMD_BITS=256
    assert dot_path("+avx2,+avxvnni", 256) == "vnni-256"
    assert dot_path("+avx2,+fma", 256) == "avx2"  # Zen 3
    assert dot_path("+avx,-avx2", 256) == "none"  # Sandy Bridge: plain IR, never an AVX2 intrinsic
    assert dot_path("+neon", 128) == "none"


def test_micro_kernels_match_their_generator():
    text = inspect.getsource(qgemm_ukr)
    assert text.rstrip("\n").endswith(qgemm_ukr.generated_source().rstrip("\n")), (
        "regenerate with: python -m rooflab.kernels.cpu.qgemm_ukr"
    )


@pytest.mark.slow
@pytest.mark.parametrize("bits", ["256", "128"])
def test_other_dot_paths_build_and_are_exact(bits):
    """The AVX2 sequence (256 bits, VNNI switched off) and the plain-IR path (128 bits) compiled in a
    subprocess with its own numba cache: exact INT8 and in-tolerance 4-bit results."""
    import llvmlite.binding as llb

    feats = ",".join(
        ("-" if (k.startswith("avx512") or "vnni" in k or k.startswith("amx")) else "+" if v else "-") + k
        for k, v in llb.get_host_cpu_features().items()
    )
    code = textwrap.dedent(
        """
        import json, numpy as np, rooflab
        from rooflab import verify
        from rooflab.kernels.cpu.simd_q import DOT_PATH
        v = rooflab.get_variant("cpu.qgemm.01-packed-dpbusd")
        for s in [(1, 1, 1), (7, 13, 5), (9, 33, 130)]:
            A, B, za = v.inputs(dict(zip("MNK", s)))
            assert np.array_equal(v.kernel(A, B, za, threads=2), v.reference(A, B, za)), s
        w = rooflab.get_variant("cpu.qgemm.01-dequant-in-registers")
        for b in (4, 8):
            x = w.inputs({"M": 2, "N": 9, "K": 64, "bits": b})
            verify.check(w.kernel(*x), w.reference(*x), dtype="float32/quant")
        a8 = rooflab.get_variant("cpu.qgemm.01-w4a8-dpbusd")
        for s in [(1, 37, 96), (2, 9, 544)]:
            x = a8.inputs({"M": s[0], "N": s[1], "K": s[2], "bits": 4})
            verify.check(a8.kernel(*x, threads=2), a8.reference(*x), dtype="float32/quant")
        print(json.dumps({"path": DOT_PATH}))
        """
    )
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CPU_FEATURES=feats, NUMBA_CACHE_DIR=cache, ROOFLAB_SIMD_BITS=bits)
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        res = subprocess.run([sys.executable, "-c", code], env=env, cwd=root, capture_output=True, text=True)
    if res.returncode and "avx2" not in feats.split(",") and "+avx2" not in feats:  # pragma: no cover
        pytest.skip("this host has no AVX2")
    assert res.returncode == 0, res.stderr[-2000:]
    path = json.loads(res.stdout.strip().splitlines()[-1])["path"]
    import platform

    x86 = platform.machine() in ("x86_64", "AMD64")
    assert path == ("avx2" if bits == "256" and x86 and "+avx2" in feats else "none")


def test_suite_cases_name_registered_variants_and_the_driver_runs_one():
    from rooflab.cpu.backend import cpu_backend
    from rooflab.driver import Driver, Settings

    for quick in (True, False):
        cases = Q.cases(quick=quick, threads=[1, 2])
        rooflab.registry.check_cases(cases)
        assert {c.threads for c in cases} == {1, 2}
    small = [
        rooflab.registry.Case(variant="cpu.qgemm.01-packed-dpbusd", size={"M": 9, "N": 40, "K": 20}, dtype="uint8"),
        rooflab.registry.Case(
            variant="cpu.qgemm.01-dequant-in-registers", size={"M": 1, "N": 40, "K": 64, "bits": 4}, dtype="float32"
        ),
        Q._streamed(
            rooflab.registry.Case(
                variant="cpu.qgemm.01-w4a8-dpbusd", size={"M": 1, "N": 40, "K": 256, "bits": 4}, dtype="float32"
            )
        ),
    ]
    assert sum(bool(c.meta.get("cold")) for c in Q.cases(quick=True, threads=[1])) == 4
    d = Driver(cpu_backend(), Settings(budget_s=0.0, min_samples=1, probe_clock=False, max_attempts=1))
    for c in small:
        rec = d.run_case(c)
        assert rec.status == "ok", rec.error
    # the streamed case rotated over distinct codes and scales (activations shared), each copy verified
    assert rec.meta["rotation_copies"] == Q.STREAM_MAX_COPIES  # a tiny GEMV: the cap
    A, P, S = rooflab.get_variant(small[-1].variant).inputs(small[-1].size)
    assert rec.meta["rotation_bytes"] == A.nbytes + (P.nbytes + S.nbytes) * Q.STREAM_MAX_COPIES


def test_op_formulas_for_quantized_gemms():
    from rooflab.workloads import ops

    q = ops.normalize({"kind": "qgemm_nbits", "name": "w4", "shape": {"M": 2, "N": 64, "K": 96, "bits": 4}})
    assert ops.flops(q) == 2 * 2 * 64 * 96 and ops.weight_bytes(q) == 64 * 96 * (0.5 + 4 / 32)
    assert ops.min_bytes(q) == 4 * (2 * 96 + 2 * 64) + 64 * 96 * 0.625
    i8 = ops.normalize({"kind": "qgemm_int8", "name": "i8", "shape": {"M": 2, "N": 64, "K": 96}})
    assert ops.min_bytes(i8) == 2 * 96 + 96 * 64 + 4 * 2 * 64 and ops.params(i8) == 96 * 64
    with pytest.raises(RooflabError, match="3-bit weights are not modelled"):
        ops.normalize({"kind": "qgemm_nbits", "name": "w3", "shape": {"M": 1, "N": 4, "K": 32, "bits": 3}})
    with pytest.raises(RooflabError, match="multiple of the quantization block"):
        ops.normalize({"kind": "qgemm_nbits", "name": "k40", "shape": {"M": 1, "N": 4, "K": 40, "bits": 4}})


def test_quantized_ops_are_placed_on_the_roof_of_their_unit():
    """An integer GEMM on the INT8 peak, a 4-bit weight-only GEMM on the measured dequantize-and-FMA
    roof where the ceilings have it, else on the FP32 peak said to be an upper bound."""
    from rooflab.models import place
    from rooflab.workloads import ops
    from tests.test_plots import synthetic

    d = synthetic(op_threads=())
    fp32 = next(c for c in d["ceilings"] if c["kind"] == "compute" and c["dtype"] == "float32" and c["threads"] == 2)
    w4 = ops.normalize({"kind": "qgemm_nbits", "name": "w", "shape": {"M": 1, "N": 4096, "K": 4096, "bits": 4}})
    i8 = ops.normalize({"kind": "qgemm_int8", "name": "i", "shape": {"M": 512, "N": 512, "K": 512}})
    bare = place.Roofs(d, 2)
    assert "upper bound" in place.place_op(w4, 1e-3, 1, bare, "own-cpu")["peak_used"]
    for dtype, name, value in (("w4", "W4 dequantize-and-FMA peak", 40.0), ("int8", "INT8 peak", 900.0)):
        d["ceilings"].append(dict(fp32, dtype=dtype, name=f"{name}, 2 threads", value=value))
    roofs = place.Roofs(d, 2)
    p = place.place_op(w4, 1e-3, 1, roofs, "own-cpu")
    assert p["peak_used"].startswith("W4 dequantize-and-FMA") and "upper bound" not in p["peak_used"]
    assert place.place_op(i8, 1e-3, 1, roofs, "own-cpu")["peak_used"].startswith("INT8 peak")
    prefill = ops.normalize({"kind": "qgemm_nbits", "name": "p", "shape": {"M": 128, "N": 4096, "K": 4096, "bits": 4}})
    p = place.place_op(prefill, 1e-3, 1, roofs, "own-cpu")  # each panel widened once for 128 rows: FP32 FMAs
    assert p["peak_used"] == fp32["name"] + " (codes widened once per packed panel, then FP32 FMAs)"


@pytest.mark.skipif(not HAVE_ORT, reason="onnxruntime not installed")
def test_an_ort_rotation_is_one_merged_graph_each_output_verified():
    """A rotation over weight copies of an onnxruntime rung runs as one session of every copy's node
    (as a decode step's graph runs its layers), timed only after each of its outputs matches its
    copy's reference; a merged graph that crossed two copies' weights fails the record."""
    from rooflab.cpu.backend import cpu_backend
    from rooflab.driver import Driver, Settings

    v = rooflab.get_variant("cpu.qgemm.00-ort-matmulnbits")
    shape = {"M": 1, "N": 24, "K": 64, "bits": 4}
    first = v.inputs(shape)
    copies = [first, *((first[0], *v.inputs(shape, seed=i)[1:]) for i in (1, 2))]
    run_all = v.rotate(copies, threads=1)
    outs = run_all()
    assert len(outs) == 3
    for c, got in zip(copies, outs):
        np.testing.assert_array_equal(got, v.kernel(*c, threads=1))  # the same MLAS kernel, node for node
    assert v.rotate([first, v.inputs(shape, seed=1)], threads=1) is None  # activations not shared: per copy
    used = []
    spied = v.__class__(**{**v.__dict__, "rotate": lambda cs, **k: used.append(1) or v.rotate(cs, **k)})
    d = Driver(cpu_backend(probe=False), Settings(budget_s=0.0, min_samples=1, max_attempts=1))
    assert d.measure(spied, copies[0], reps=1, rotation=copies[1:]).status == "ok" and used

    def crossed(cs, **k):
        run = v.rotate(cs, **k)
        return lambda: [run()[1], *run()[1:]]

    bad = v.__class__(**{**v.__dict__, "rotate": crossed})
    rec = d.measure(bad, copies[0], reps=1, rotation=copies[1:])
    assert rec.status == "failed" and "rotation" in rec.error
