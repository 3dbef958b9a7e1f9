"""The CUDA family kernels (conv.cu, elementwise.cu, chase.cu, launch.cu) run for real on the CPU
emulation of the CUDA execution model (tests/cuda_emu.py), through their real Python launchers:
every variant verified against its float64 reference at tiny shapes, bad input refused, and the
emulation itself shown to catch the mistakes it is there for (a missing barrier, an out-of-bounds
write, a launcher passing the wrong argument type). The same checks run on a GPU in
tests/test_cuda_families_gpu.py. Needs g++ (C++20) and cupy's NVRTC (the cubin each kernel is
loaded from is really compiled); skips without them."""

import numpy as np
import pytest

import rooflab
from rooflab.errors import RooflabError, VerificationError
from rooflab.families.conv import cuda as conv
from rooflab.families.elementwise import cuda as ew
from tests import cuda_emu
from tests import cuda_family_checks as checks

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not cuda_emu.available()[0], reason=cuda_emu.available()[1]),
]


@pytest.fixture(scope="module")
def cubins(tmp_path_factory):
    return tmp_path_factory.mktemp("emu-cubins")


@pytest.fixture
def emu(monkeypatch, cubins):
    pytest.importorskip("cupy")
    from rooflab.cuda import compiler

    try:
        compiler._nvrtc()
    except RooflabError as e:
        pytest.skip(str(e))
    monkeypatch.setenv("ROOFLAB_CACHE_DIR", str(cubins))
    return cuda_emu.EmuGPU(monkeypatch).install()


def test_conv_variants_verify(emu):
    errors = checks.check_conv_variants()
    # Winograd F(4x4) is the least accurate, yet far inside its declared tolerance (1e-3 of max|y|)
    f4 = max(e for (n, _), e in errors.items() if "f4x4" in n)
    assert 0 < f4 < 1e-4


def test_conv_library_in_float64(emu):
    checks.check_conv_library_float64()


def test_conv_bad_input_is_refused(emu):
    checks.check_conv_rejects_bad_input()


def test_conv_results_just_outside_the_tolerance_fail(emu):
    checks.check_conv_wrong_results_rejected()


def test_elementwise_variants_verify(emu):
    checks.check_elementwise_variants()


def test_elementwise_unaligned_views(emu):
    checks.check_elementwise_unaligned()


def test_elementwise_nan_is_kept(emu):
    checks.check_elementwise_nan()


def test_elementwise_bad_input_is_refused(emu):
    checks.check_elementwise_rejects_bad_input()


def test_fused_chains_equal_unfused(emu):
    checks.check_fused_equals_unfused()


def test_chase(emu):
    checks.check_chase()


def test_launch_paths_count_their_launches(emu):
    checks.check_launch()


def test_transfers(emu):
    checks.check_transfer()


# ---- the emulation catches what it is there to catch (deliberately wrong kernels) ---------------------


def _patched(monkeypatch, source, old, new):
    """Emulate ``source`` with ``old`` replaced by ``new`` (a deliberately broken kernel)."""
    real = cuda_emu.emulated_source

    def broken(name, defines):
        text, names = real(name, defines)
        if name == source:
            assert old in text, old
            text = text.replace(old, new, 1)
        return text, names

    monkeypatch.setattr(cuda_emu, "emulated_source", broken)


def test_a_missing_barrier_is_caught(emu, monkeypatch):
    """conv_tiled without the barrier between filling and reading its shared tile reads shared
    memory no thread has written yet (NaN-filled in the emulation): verification fails."""
    _patched(
        monkeypatch,
        "conv.cu",
        "        __syncthreads();\n        for (int c = 0; c < cn; ++c) {",
        "        for (int c = 0; c < cn; ++c) {",
    )
    v = rooflab.get_variant("cuda.conv.02-direct-tiled")
    shape = checks.CONV_SHAPES[1]
    x, w, out = v.inputs(shape)
    p = conv.conv_params(shape)
    with pytest.raises(VerificationError):
        checks.verify_conv(v, v(x, w, out, **p), v.reference(x, w, out, **p))


def test_a_wrong_winograd_transform_is_caught(emu, monkeypatch):
    _patched(monkeypatch, "conv.cu", "o[3] = fmaf(8.f, d, b) + m[5];", "o[3] = fmaf(8.f, d, b) - m[5];")
    v = rooflab.get_variant("cuda.conv.06-winograd-f4x4")
    shape = checks.CONV_SHAPES[0]
    x, w, out = v.inputs(shape)
    p = conv.conv_params(shape)
    with pytest.raises(VerificationError):
        checks.verify_conv(v, v(x, w, out, **p), v.reference(x, w, out, **p))


def test_a_block_reduction_that_forgets_warps_is_caught(emu, monkeypatch):
    """softmax_block combining only its own warp's partial (no cross-warp step) is wrong."""
    _patched(monkeypatch, "elementwise.cu", "a = lane < ROW_BLOCK / 32 ? part[lane] : MaxSum{NEG_INF, 0.f};", "")
    from rooflab.verify import check_device

    v = rooflab.get_variant("cuda.elementwise.softmax.01-kernel")
    arrays = v.inputs({"rows": 3, "cols": 2051})
    expected = v.reference(*arrays)
    with pytest.raises(VerificationError):
        check_device(v(*arrays), expected, np.float32, v.name)


def test_an_out_of_bounds_write_is_reported(emu, monkeypatch):
    _patched(monkeypatch, "elementwise.cu", "for (I i = done + tid; i < n; i += stride) op.one(i);",
             "for (I i = done + tid; i <= n; i += stride) op.one(i);")  # fmt: skip
    v = rooflab.get_variant("cuda.elementwise.relu.01-kernel")
    arrays = v.inputs({"numel": 1001})
    with pytest.raises(RooflabError, match="wrote outside an array"):
        v(*arrays)


def test_a_launcher_passing_the_wrong_argument_type_is_refused(emu):
    from rooflab.cuda import loader

    fn = loader.kernel("elementwise.cu", "ew_relu", ew.KNOBS)
    x = emu.zeros(64, dtype=np.float32)
    with pytest.raises(TypeError, match="argument 2 is int32"):
        fn((1,), (256,), (x, x, np.int32(64)))  # n is an i64 in the kernel
    with pytest.raises(TypeError, match="Python int"):
        fn((1,), (256,), (x, x, 64))


def test_a_full_mask_shuffle_with_lanes_missing_is_reported(emu, monkeypatch):
    """A warp-per-row kernel launched with a block that is not a multiple of 32 threads."""
    from rooflab.cuda import loader

    fn = loader.kernel("elementwise.cu", "softmax_warp", ew.KNOBS)
    x = emu.zeros((2, 64), dtype=np.float32)
    with pytest.raises(RuntimeError, match="lanes missing"):
        fn((1,), (48,), (x, x, np.int32(2), np.int32(64)))
