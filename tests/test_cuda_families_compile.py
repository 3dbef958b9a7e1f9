"""The CUDA sources of the kernel families (conv.cu, elementwise.cu, chase.cu) compile for sm_80 and
sm_90 with nvcc and with NVRTC (rooflab.cuda.compiler, the call a GPU run makes), with the knobs
their family modules set: no spills, no stack frame (every register array stays in registers), the
fixed grids resident in one wave, and in the machine code (SASS, where cuobjdump is installed) the
instructions each design relies on. No GPU needed.

nvcc, cupy + NVRTC and cuobjdump (pip install nvidia-cuda-cuobjdump) are each optional: the tests
that need one skip with the reason where it is missing.
"""

import re
import shutil
import subprocess

import pytest

from rooflab.cuda import compiler
from rooflab.errors import RooflabError
from rooflab.families.chase import cuda as chase
from rooflab.families.conv import cuda as conv
from rooflab.families.elementwise import cuda as ew
from tests.cuda_tools import cuobjdump, nvrtc_or_skip, private_cache

# every test here builds CUDA with NVRTC/nvcc (1-9 s each): the CUDA kernel author's loop
pytestmark = pytest.mark.slow

NVCC = shutil.which("nvcc")
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")
ARCHS = ["sm_80", "sm_90"]
# every family source and the knobs its module compiles it with (so the checks see what is timed)
FAMILY_KNOBS = {conv.SOURCE: conv.KNOBS, ew.SOURCE: ew.KNOBS, chase.SOURCE: chase.KNOBS}
BUILDS = [(name, arch) for name in FAMILY_KNOBS for arch in ARCHS]
SM_LIMITS = {"sm_80": {"registers": 65536, "smem": 164 << 10}, "sm_90": {"registers": 65536, "smem": 228 << 10}}


CUOBJDUMP = cuobjdump()
needs_cuobjdump = pytest.mark.skipif(
    CUOBJDUMP is None or NVCC is None, reason="nvcc or cuobjdump is not installed (pip install nvidia-cuda-cuobjdump)"
)


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    yield from private_cache(tmp_path_factory)


def _nvcc(tmp_path, name, arch, kind="-cubin"):
    src = tmp_path / name
    src.write_text(compiler.source(name))  # exactly what NVRTC is given (includes inlined)
    out = tmp_path / f"{name}.{arch}.{kind.strip('-')}"
    opts = list(compiler.options(FAMILY_KNOBS[name]))
    p = subprocess.run(
        [NVCC, *opts, f"-arch={arch}", kind, "-Xptxas", "-v", "-o", str(out), str(src)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    return p, out


def _clean(resources):
    """No spills and no stack frame in any kernel."""
    assert resources and all("registers" in r for r in resources.values())
    assert compiler.spills(resources) == {}
    assert {k: r["stack_bytes"] for k, r in resources.items() if r.get("stack_bytes")} == {}


def test_every_family_source_is_compiled_here():
    ceilings = {"stream.cu", "smem.cu", "fma.cu", "tensor.cu", "intensity.cu", "launch.cu", "wgmma.cu"}
    gemm = {s for s in compiler.sources() if s.startswith("gemm")}  # tests/test_cuda_gemm_compile.py
    assert gemm, "the GEMM ladder's sources"
    assert set(compiler.sources()) == ceilings | set(FAMILY_KNOBS) | gemm, "a new .cu needs its compile test"


@needs_nvcc
@pytest.mark.parametrize("name,arch", BUILDS)
def test_nvcc_compiles_without_spills(tmp_path, name, arch):
    p, out = _nvcc(tmp_path, name, arch)
    assert p.returncode == 0, p.stderr
    assert out.stat().st_size > 0
    _clean(compiler.parse_ptxas(p.stderr))


@pytest.mark.parametrize("name,arch", BUILDS)
def test_nvrtc_builds_without_spills(cache, name, arch):
    nvrtc_or_skip()
    b = compiler.build(name, arch, FAMILY_KNOBS[name])
    with open(b.cubin_path, "rb") as f:
        assert f.read(4) == b"\x7fELF"
    assert all(r["arch"] == arch for r in b.resources.values())
    _clean(b.resources)
    assert all(f"-D{k}={v}" in b.options for k, v in FAMILY_KNOBS[name].items())


def test_every_kernel_a_module_launches_exists(cache):
    """The kernel names the Python launchers use are the ones the sources define."""
    nvrtc_or_skip()
    conv_names = set(compiler.build(conv.SOURCE, "sm_90", conv.KNOBS).resources)
    assert conv_names == {
        "conv_naive",
        "conv_tiled",
        "conv_depthwise",
        "im2col",
        *(f"winograd_{s}_f{m}" for s in ("filter", "input", "output") for m in (2, 4)),
    }
    ew_names = set(compiler.build(ew.SOURCE, "sm_90", ew.KNOBS).resources)
    assert ew_names == set(ew.SM_THREADS)
    assert set(compiler.build(chase.SOURCE, "sm_90", chase.KNOBS).resources) == {"chase_ca", "chase_cg"}


@pytest.mark.parametrize("arch", ARCHS)
def test_elementwise_waves_are_resident(cache, arch):
    """The grid-stride kernels are launched as one wave of SM_THREADS per SM (and the row kernels
    up to it): registers x threads must fit in an SM's register file, or blocks wait for a second
    round and the bandwidth figure comes out low."""
    nvrtc_or_skip()
    res = compiler.build(ew.SOURCE, arch, ew.KNOBS).resources
    for kernel, r in res.items():
        threads = ew.SM_THREADS[kernel]
        block = ew.BLOCK_OF.get(kernel, ew.EW_BLOCK)
        assert threads % block == 0, kernel
        assert r["registers"] * threads <= SM_LIMITS[arch]["registers"], (kernel, r, threads)
        assert r["smem_bytes"] * (threads // block) <= SM_LIMITS[arch]["smem"], (kernel, r)


@pytest.mark.parametrize("arch", ARCHS)
def test_conv_blocks_fit_an_sm(cache, arch):
    """Each conv kernel's block (threads x registers, static + the largest dynamic shared memory the
    launchers ask for) fits on one SM, at least twice for the tiled kernels (latency hiding)."""
    nvrtc_or_skip()
    res = compiler.build(conv.SOURCE, arch, conv.KNOBS).resources
    k = conv.KNOBS
    blocks = {"conv_tiled": k["DT_P"] * k["DT_Q"], "conv_depthwise": k["DW_P"] * k["DW_Q"]}
    for kernel, r in res.items():
        threads = blocks.get(kernel, k["CONV_BLOCK"])
        dynamic = conv.SMEM_LIMIT if kernel in blocks else 0
        per_block_regs = r["registers"] * threads
        assert 2 * per_block_regs <= SM_LIMITS[arch]["registers"], (kernel, r)
        assert 2 * (r["smem_bytes"] + dynamic) <= SM_LIMITS[arch]["smem"], (kernel, r)


def test_tiled_plans_stay_within_the_shared_memory_they_declare():
    """conv_tiled's chunk of input channels shrinks until the tile fits 48 KiB; filters that cannot
    fit even one channel are refused by name (never launched with too little shared memory)."""
    for R, stride in ((1, 1), (3, 1), (3, 2), (7, 2), (11, 1), (15, 1)):
        s = conv.make_spec("t", 1, 64, 64, 64, 32, 64, R, R, stride, R // 2, 1)
        cb, smem, grid = conv.tiled_plan(s)
        assert 1 <= cb <= conv.CB_MAX and smem <= conv.SMEM_LIMIT
        assert grid == (-(-s.P // 8) * -(-s.Q // 16), 2, 1)
    huge = conv.make_spec("t", 1, 1, 400, 400, 1, 1, 60, 60, 4, 0, 1)
    with pytest.raises(RooflabError, match="shared memory"):
        conv.tiled_plan(huge, "cuda.conv.02-direct-tiled")


# ---- machine code --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sass_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("sass")


_CUBINS: dict = {}


def _sass(workdir, source, arch, function):
    """SASS of one kernel, from nvcc's cubin of the same text and knobs (the pip cuobjdump 13.x
    reads nvcc 13.0's cubins; NVRTC 13.5's are newer than it knows). One nvcc build per source and
    arch for the whole module."""
    cubin = _CUBINS.get((source, arch))
    if cubin is None:
        p, cubin = _nvcc(workdir, source, arch)
        assert p.returncode == 0, p.stderr
        _CUBINS[source, arch] = cubin
    p = subprocess.run([CUOBJDUMP, "-sass", "-fun", function, str(cubin)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return [line.split(";")[0] for line in p.stdout.splitlines() if re.search(r"/\*[0-9a-f]{4}\*/", line)]


def _ops(lines):
    return [line.split("*/", 1)[1].split()[0] for line in lines]


@needs_cuobjdump
@pytest.mark.parametrize("arch", ARCHS)
def test_chase_hops_are_a_chain_of_loads(sass_dir, arch):
    """Every load of the unrolled timed loop takes its address straight from the previous load's
    result (no address arithmetic inside a hop), .cg loads are GPU-scope (served by L2, not L1) and
    .ca loads are not."""
    nvrtc_or_skip()
    load = re.compile(r"LDG\.E\.64(\.\S+)?\s+(R\d+),\s*(?:desc\[\w+\])?\[(R\d+)\.64\]")
    for function, scope in (("chase_ca", ".STRONG.SM"), ("chase_cg", ".STRONG.GPU")):
        loads = [m.groups() for line in _sass(sass_dir, chase.SOURCE, arch, function) for m in [load.search(line)] if m]
        assert loads, function
        assert all(q == scope for q, _, _ in loads), (function, {q for q, _, _ in loads})
        run = best = 1
        for (_, dst, _), (_, _, addr) in zip(loads, loads[1:]):
            run = run + 1 if addr == dst else 1
            best = max(best, run)
        assert best >= chase.KNOBS["CHASE_UNROLL"], (function, loads)


@needs_cuobjdump
@pytest.mark.parametrize("arch", ARCHS)
def test_conv_tiled_feeds_four_fmas_per_shared_load(sass_dir, arch):
    """The register-blocked inner loop: weights come as 128-bit shared loads (broadcast), each
    feeding 4 FMAs, DT_KB accumulators per input value."""
    ops = _ops(_sass(sass_dir, conv.SOURCE, arch, "conv_tiled"))
    lds128, ffma = ops.count("LDS.128"), ops.count("FFMA")
    assert lds128 >= conv.KNOBS["DT_KB"] // 4 and ffma == 4 * lds128, (lds128, ffma)


@needs_cuobjdump
@pytest.mark.parametrize("arch", ARCHS)
def test_elementwise_moves_128_bit_vectors(sass_dir, arch):
    for kernel in ("ew_add", "ew_gelu", "ew_channel_affine", "fused_bias_gelu_residual", "fused_bn_add_relu"):
        ops = _ops(_sass(sass_dir, ew.SOURCE, arch, kernel))
        assert any(o.startswith("LDG.E.128") for o in ops), kernel
        assert any(o.startswith("STG.E.128") for o in ops), kernel


@needs_cuobjdump
@pytest.mark.parametrize("arch", ARCHS)
def test_row_kernels_reduce_in_registers(sass_dir, arch):
    """Warp-per-row kernels reduce with butterfly shuffles and never touch a barrier; block-per-row
    kernels combine warps through shared memory behind barriers."""
    for which in ("softmax", "layernorm"):
        warp = _ops(_sass(sass_dir, ew.SOURCE, arch, f"{which}_warp"))
        block = _ops(_sass(sass_dir, ew.SOURCE, arch, f"{which}_block"))
        assert warp.count("SHFL.BFLY") >= 5 and not any(o.startswith("BAR") for o in warp), which
        assert block.count("SHFL.BFLY") >= 10 and any(o.startswith("BAR") for o in block), which


@needs_nvcc
def test_knobs_change_what_is_compiled(tmp_path):
    """The register block of conv_tiled is a knob: DT_KB=8 halves the FMAs per input value."""
    src = tmp_path / "conv.cu"
    src.write_text(compiler.source("conv.cu"))
    counts = {}
    for kb in (8, 16):
        out = tmp_path / f"conv{kb}.ptx"
        opts = compiler.options({**conv.KNOBS, "DT_KB": kb})
        p = subprocess.run(
            [NVCC, *opts, "-arch=sm_90", "--ptx", "-o", str(out), str(src)], capture_output=True, text=True
        )
        assert p.returncode == 0, p.stderr
        body = out.read_text().split(".entry conv_tiled")[1].split(".entry")[0]
        counts[kb] = body.count("fma.rn.f32")
    assert counts[16] == 2 * counts[8], counts
    p = subprocess.run(
        [NVCC, *compiler.options({**conv.KNOBS, "DT_KB": 6}), "-arch=sm_90", "--ptx", "-o", "/dev/null", str(src)],
        capture_output=True,
        text=True,
    )
    assert p.returncode != 0 and "multiple of 4" in p.stderr  # a knob the kernel cannot honour is refused
