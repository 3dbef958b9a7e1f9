"""The CUDA GEMM ladder on a real GPU (skipped with the reason elsewhere): every variant, every
dtype it takes, at square, tile-sized, ragged, skinny and GEMV shapes, against the float64
reference. The inputs make every FP32 partial sum exact, so the hand-written FP32/FP64 rungs must
match exactly and the FP16/BF16 ones up to the final rounding (rooflab.verify's per-dtype
tolerances are checked too, as the suite checks them). Bad input is refused by name.

Runs in scripts/device_check.sh; speed figures come from scripts/gemm_ladder_cuda.py, never from
here. Ordered SIMT, mma.sync, then wgmma last: a kernel fault poisons the CUDA context.
Run: pytest -q -m gpu tests/test_cuda_gemm_gpu.py
"""

import numpy as np
import pytest

import rooflab
from rooflab.cuda import backend

ok, why = backend.probe()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not ok, reason=why)]

SHAPES = [
    (1, 1, 1),
    (1, 3072, 768),  # GPT-2 decode: a GEMV
    (7, 13, 5),
    (64, 64, 64),
    (128, 256, 64),  # exactly one wgmma tile
    (129, 257, 72),  # one past the tiles, N odd
    (200, 264, 136),  # K, N multiples of 8 but not of the tiles: the 16-byte paths with edges
    (333, 1, 517),  # N = 1
    (512, 384, 1000),
    (1024, 1024, 1024),
]


def _variants():
    out = []
    for v in rooflab.list_variants(family="gemm", device="cuda"):
        for dt in v.dtypes:
            out.append(pytest.param(v.name, dt, id=f"{v.name}-{dt}"))
    return out


def _skip_unsupported(name, dtype):
    from rooflab.cuda import compiler, loader

    if name.endswith("09-wgmma") and not compiler.runs_on("gemm09_wgmma.cu", loader.device_arch()):
        pytest.skip(f"wgmma needs Hopper (sm_90); this GPU is {loader.device_arch()}")
    if dtype == "bfloat16":
        pytest.importorskip("ml_dtypes", reason="bfloat16 arrays need ml_dtypes (cupy's bfloat16 dtype)")


def _rounded(ref, dtype):
    """The float64 reference rounded to the output dtype (round to nearest even), as float64."""
    if dtype == "bfloat16":  # (numpy dtype objects: cupy takes them)
        u = ref.astype(np.float32).view(np.uint32).astype(np.uint64)
        u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
        return (u.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return ref.astype(dtype).astype(np.float64)


def test_work_is_2mnk_and_the_minimum_bytes():
    v = rooflab.get_variant("cuda.gemm.07-warptiling")
    A, B = v.inputs({"M": 30, "N": 20, "K": 10}, "float32")
    w = v.work(A, B, reps=2)
    assert w.flops == 2 * 2 * 30 * 20 * 10 and w.bytes_read == 2 * (300 + 200) * 4 and w.bytes_written == 2 * 600 * 4


def test_bad_input_is_refused_by_name():
    import cupy as cp

    v = rooflab.get_variant("cuda.gemm.08-mma-sync")
    A, B = (cp.ones((16, 16), dtype=np.float64),) * 2
    with pytest.raises(rooflab.RooflabError, match="08-mma-sync runs on tensor cores with FP16/BF16 inputs only"):
        v(A, B)
    s = rooflab.get_variant("cuda.gemm.05-2d-blocktiling")
    with pytest.raises(rooflab.RooflabError, match="inner dimensions differ"):
        s(cp.ones((4, 5), dtype=np.float32), cp.ones((4, 5), dtype=np.float32))
    with pytest.raises(rooflab.RooflabError, match="C-contiguous"):
        s(cp.ones((8, 4), dtype=np.float32).T, cp.ones((8, 4), dtype=np.float32))
    with pytest.raises(rooflab.RooflabError, match="2-D"):
        s(cp.ones((2, 4, 4), dtype=np.float32), cp.ones((4, 4), dtype=np.float32))
    with pytest.raises(rooflab.RooflabError, match="computes float32 and float64 only"):
        s(cp.ones((4, 4), dtype=np.float16), cp.ones((4, 4), dtype=np.float16))


def test_a_misaligned_view_takes_the_element_path():
    """A C-contiguous view that starts 4 bytes into its buffer: no 16-byte loads, same result."""
    import cupy as cp

    for name, dtype in (("cuda.gemm.07-warptiling", "float32"), ("cuda.gemm.08-mma-sync", "float16")):
        v = rooflab.get_variant(name)
        A, B = v.inputs({"M": 65, "N": 96, "K": 64}, dtype)
        shift = 4 // A.dtype.itemsize
        buf = cp.empty(A.size + shift, dtype=A.dtype)
        buf[shift:] = A.ravel()
        Av = buf[shift:].reshape(A.shape)
        assert Av.data.ptr % 16 != 0 and Av.flags.c_contiguous
        assert bool(cp.all(v(Av, B) == v(A, B)))


def test_wgmma_last_on_a_gpu_without_it_says_so():
    import cupy as cp

    from rooflab.cuda import compiler, loader

    if compiler.runs_on("gemm09_wgmma.cu", loader.device_arch()):
        pytest.skip("this GPU has wgmma (covered above)")
    v = rooflab.get_variant("cuda.gemm.09-wgmma")
    with pytest.raises(rooflab.RooflabError, match="runs only on sm_90a"):
        v(cp.ones((8, 8), dtype=np.float16), cp.ones((8, 8), dtype=np.float16))


def test_reference_is_float64_and_exact():

    v = rooflab.get_variant("cuda.gemm.00-cublas")
    A, B = v.inputs({"M": 5, "N": 6, "K": 7}, "float32")
    ref = v.reference(A, B)
    assert ref.dtype == np.float64
    np.testing.assert_array_equal(ref.get(), A.get().astype(np.float64) @ B.get().astype(np.float64))


# last: wgmma is the last variant, and a kernel fault would poison the CUDA context for what follows
@pytest.mark.parametrize("name,dtype", _variants())
def test_every_gemm_variant_verifies_at_every_shape(name, dtype):
    import cupy as cp

    from rooflab.families.gemm.cuda import as_float64
    from rooflab.verify import check_device

    _skip_unsupported(name, dtype)
    v = rooflab.get_variant(name)
    for m, n, k in SHAPES:
        A, B = v.inputs({"M": m, "N": n, "K": k}, dtype, seed=m + n + k)
        expected = v.reference(A, B)
        C = v(A, B)
        assert C.shape == (m, n) and C.dtype == A.dtype and C.flags.c_contiguous
        got = as_float64(C)
        check_device(got, expected, v.result_dtype(A, B), f"{name} {dtype} {m}x{n}x{k}")
        if v.library:
            continue
        if dtype in ("float32", "float64"):  # IEEE FMAs on exact data: the exact product
            bad = int(cp.count_nonzero(got != expected))
        else:  # the exact product rounded once, give or take one unit in the last place of the output
            # (how tensor cores align and truncate inside an MMA is not specified; IEEE would be exact)
            ulp = 2.0**-10 if dtype == "float16" else 2.0**-7
            bad = int(cp.count_nonzero(cp.abs(got - _rounded(expected, dtype)) > ulp * cp.abs(expected)))
        assert bad == 0, f"{name} {dtype} {m}x{n}x{k}: {bad} elements differ from the exact result"
    C2 = v(A, B, reps=3)  # reps repeats the same product
    assert bool(cp.all(C2 == C))
