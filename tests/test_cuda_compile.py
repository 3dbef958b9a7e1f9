"""Every .cu compiles for sm_80 and sm_90 twice: with nvcc, and with NVRTC through
rooflab.cuda.compiler (the exact call the GPU run makes, before it loads the cubin). No register
spills in the ceiling kernels, the instructions the ceilings rely on are really there, knobs and
template name expressions work, and a broken kernel fails with the compiler's log.
Needs nvcc (for the nvcc half) or cupy + NVRTC (for the NVRTC half), not a GPU."""

import re
import shutil
import subprocess

import pytest

from rooflab.cuda import compiler
from rooflab.cuda import knobs as cv
from rooflab.errors import RooflabError
from tests.cuda_tools import nvrtc_or_skip

# every test here builds CUDA with NVRTC/nvcc (1-9 s each): the CUDA kernel author's loop
pytestmark = pytest.mark.slow

NVCC = shutil.which("nvcc")
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")
ARCHS = ["sm_80", "sm_90"]
FAMILY_SOURCES = {"conv.cu", "elementwise.cu", "chase.cu"}  # compiled in test_cuda_families_compile.py
# the GEMM ladder is compiled and its SASS read in test_cuda_gemm_compile.py
SOURCES = [s for s in compiler.sources() if s not in FAMILY_SOURCES and not s.startswith("gemm")]
# the knobs the Python side compiles each source with (so the checks see what is timed)
KNOBS = {
    "stream.cu": cv.STREAM,
    "fma.cu": cv.FMA_KNOBS,
    "tensor.cu": cv.MMA_KNOBS,
    "smem.cu": cv.SMEM_KNOBS,
    "intensity.cu": cv.INTENSITY_KNOBS,
    "launch.cu": {},
    "wgmma.cu": cv.WGMMA_KNOBS,
}
# (source, arch): every source for sm_80 and sm_90, plus the architectures its `// targets:` line names
BUILDS = [(name, arch) for name in SOURCES for arch in ARCHS + (compiler.targets(name) or [])]


def _arch_flags(arch):
    """nvcc's flags for one architecture (the arch-specific sm_90a needs -gencode: `-arch=sm_90a`
    also runs a plain sm_90 pass in nvcc 13.0, which rejects wgmma)."""
    if arch.endswith("a"):
        return [f"-gencode=arch=compute_{arch[3:]},code={arch}"]
    return [f"-arch={arch}"]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ROOFLAB_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _nvcc(tmp_path, name, arch, kind="-cubin", defines=None):
    src = tmp_path / name
    src.write_text(compiler.source(name))  # exactly what NVRTC is given (includes inlined)
    out = tmp_path / f"{name}.{arch}.{kind.strip('-')}"
    opts = list(compiler.options(defines))
    p = subprocess.run(
        [NVCC, *opts, *_arch_flags(arch), kind, "-Xptxas", "-v", "-o", str(out), str(src)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    return p, out


def test_package_ships_the_sources():
    assert set(SOURCES) >= {"stream.cu", "smem.cu", "fma.cu", "tensor.cu", "intensity.cu", "launch.cu", "wgmma.cu"}
    assert set(KNOBS) == set(SOURCES), "a new .cu needs its knobs listed here"


def test_unknown_source_is_a_clear_error():
    with pytest.raises(RooflabError, match="not in the installed package"):
        compiler.source("nope.cu")


def test_includes_are_inlined_with_line_marks():
    text = compiler.source("stream.cu")
    assert '#include "common.cuh"' not in text and "block_sum" in text and "#pragma once" not in text
    assert '#line 1 "common.cuh"' in text and re.search(r'#line \d+ "stream.cu"', text)


def test_ptxas_report_parser():
    log = """ptxas info    : Compiling entry function '_Z8fma_peakIfEvPT_iS0_S0_Py' for 'sm_90'
ptxas info    : Function properties for _Z8fma_peakIfEvPT_iS0_S0_Py
    8 bytes stack frame, 12 bytes spill stores, 16 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 32768 bytes smem
ptxas info    : Compiling entry function 'k2' for 'sm_80'
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 6 registers, used 0 barriers
"""
    r = compiler.parse_ptxas(log)
    assert r["_Z8fma_peakIfEvPT_iS0_S0_Py"] == {
        "arch": "sm_90",
        "stack_bytes": 8,
        "spill_store_bytes": 12,
        "spill_load_bytes": 16,
        "registers": 40,
        "smem_bytes": 32768,
    }
    assert r["k2"]["registers"] == 6 and r["k2"]["arch"] == "sm_80"
    assert compiler.spills(r) == {"_Z8fma_peakIfEvPT_iS0_S0_Py": (12, 16)}


# ---- nvcc ----------------------------------------------------------------------------------------


@needs_nvcc
@pytest.mark.parametrize("name,arch", BUILDS)
def test_nvcc_compiles_without_spills(tmp_path, name, arch):
    p, out = _nvcc(tmp_path, name, arch, defines=KNOBS[name])
    assert p.returncode == 0, p.stderr
    assert out.stat().st_size > 0
    res = compiler.parse_ptxas(p.stderr)
    assert res and all("registers" in r for r in res.values()), p.stderr
    assert compiler.spills(res) == {}, p.stderr


@needs_nvcc
def test_fma_and_mma_kernels_contain_their_instructions(tmp_path):
    p, ptx = _nvcc(tmp_path, "fma.cu", "sm_90", "--ptx", cv.FMA_KNOBS)
    text = ptx.read_text()
    per_trip = cv.FMA_KNOBS["CHAINS"] * cv.FMA_KNOBS["UNROLL"]
    assert text.count("fma.rn.f32") >= per_trip and text.count("fma.rn.f64") >= per_trip
    p, ptx = _nvcc(tmp_path, "tensor.cu", "sm_90", "--ptx", cv.MMA_KNOBS)
    text = ptx.read_text()
    per_trip = cv.MMA_KNOBS["CHAINS"] * cv.MMA_KNOBS["UNROLL"]
    assert text.count("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32") >= per_trip
    assert text.count("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32") >= per_trip
    p, ptx = _nvcc(tmp_path, "wgmma.cu", "sm_90a", "--ptx", cv.WGMMA_KNOBS)
    text = ptx.read_text()
    assert text.count("wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16") >= cv.WGMMA_KNOBS["UNROLL"]
    assert text.count("wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16") >= cv.WGMMA_KNOBS["UNROLL"]
    p, ptx = _nvcc(tmp_path, "stream.cu", "sm_90", "--ptx", cv.STREAM)
    l2 = ptx.read_text().split(".entry l2_read")[1].split(".entry")[0]
    assert "ld.global.cg" in l2  # L2 reads must bypass L1, or the "L2" ceiling is L1's


@needs_nvcc
def test_knobs_are_injectable(tmp_path):
    p, ptx = _nvcc(tmp_path, "fma.cu", "sm_90", "--ptx", {"CHAINS": 2, "UNROLL": 4})
    assert p.returncode == 0, p.stderr
    assert ptx.read_text().count("fma.rn.f32") < cv.FMA_KNOBS["CHAINS"] * cv.FMA_KNOBS["UNROLL"]


@needs_nvcc
def test_nvcc_reports_a_broken_source(tmp_path):
    bad = tmp_path / "bad.cu"
    bad.write_text('extern "C" __global__ void k(float* x) { x[0] = undefined_fn(); }\n')
    p = subprocess.run(
        [NVCC, "-arch=sm_90", "-cubin", "-o", str(tmp_path / "b.cubin"), str(bad)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode != 0 and "undefined_fn" in p.stderr


# ---- NVRTC (the runtime path) ----------------------------------------------------------------------


@pytest.mark.parametrize("name,arch", BUILDS)
def test_nvrtc_builds_a_cubin_without_spills(cache, name, arch):
    nvrtc_or_skip()
    b = compiler.build(name, arch, KNOBS[name])
    with open(b.cubin_path, "rb") as f:
        assert f.read(4) == b"\x7fELF"
    assert b.arch == arch and not b.cached and b.resources
    assert all(r["arch"] == arch and r["registers"] > 0 for r in b.resources.values())
    assert compiler.spills(b.resources) == {}, b.log
    assert all(f"-D{k}={v}" in b.options for k, v in KNOBS[name].items())


SM_LIMITS = {
    "sm_80": {"registers": 65536, "smem": 164 << 10},
    "sm_90": {"registers": 65536, "smem": 228 << 10},
    "sm_90a": {"registers": 65536, "smem": 228 << 10},
}


@pytest.mark.parametrize("name,arch", BUILDS)
def test_every_kernel_launch_wave_fits_on_an_sm(cache, name, arch):
    """The grid each launcher uses (variants.SM_THREADS per SM) must be resident at once: ptxas's
    registers x threads and shared memory x blocks within one SM's, or part of the grid would wait
    for a second round and every bandwidth or peak figure would come out low."""
    nvrtc_or_skip()
    b = compiler.build(name, arch, KNOBS[name])
    block = {"mma_f16": cv.MMA_BLOCK, "mma_bf16": cv.MMA_BLOCK, "wgmma_f16": 128, "wgmma_bf16": 128}
    for kernel, r in b.resources.items():
        key = max((k for k in cv.SM_THREADS if k in kernel), key=len)  # mangled names contain the base name
        threads = cv.SM_THREADS[key]
        assert r["registers"] * threads <= SM_LIMITS[arch]["registers"], (kernel, r, threads)
        assert r["smem_bytes"] * (threads // block.get(key, cv.BLOCK)) <= SM_LIMITS[arch]["smem"], (kernel, r)


def test_wgmma_is_the_real_kernel_only_for_sm_90a(cache):
    """For sm_80/sm_90 wgmma.cu compiles to a NaN-writing stub (so every source builds everywhere);
    for sm_90a it is the real kernel: the 64x256 fp32 accumulator tile lives in registers."""
    nvrtc_or_skip()
    real = compiler.build("wgmma.cu", "sm_90a", cv.WGMMA_KNOBS).resources
    stub = compiler.build("wgmma.cu", "sm_90", cv.WGMMA_KNOBS).resources
    assert set(real) == set(stub) == {"wgmma_f16", "wgmma_bf16"}
    assert all(r["registers"] >= 128 and r["smem_bytes"] > 0 for r in real.values())
    assert all(r["registers"] < 32 for r in stub.values())


def test_nvrtc_name_expressions_lower_the_templates(cache):
    nvrtc_or_skip()
    exprs = ("fma_peak<float>", "fma_peak<double>")
    b = compiler.build("fma.cu", "sm_90", cv.FMA_KNOBS, exprs)
    assert set(b.lowered) == set(exprs)
    assert b.lowered["fma_peak<float>"] != b.lowered["fma_peak<double>"]
    assert set(b.lowered.values()) <= set(b.resources)  # the lowered names are the compiled kernels


def test_nvrtc_builds_are_cached_by_content(cache):
    nvrtc_or_skip()
    first = compiler.build("launch.cu", "sm_90")
    again = compiler.build("launch.cu", "sm_90")
    other = compiler.build("launch.cu", "sm_90", {"BLOCK": 128})
    assert again.cached and again.cubin_path == first.cubin_path and again.resources == first.resources
    assert not other.cached and other.cubin_path != first.cubin_path
    assert len(list(cache.glob("*/*.cubin"))) == 2


def test_nvrtc_error_carries_the_log_with_file_and_line(cache):
    nvrtc_or_skip()
    text = compiler.source("stream.cu")
    line = next(i for i, l in enumerate(compiler.source("stream.cu").splitlines()) if "s1 += v.y;" in l)
    broken = text.replace("s1 += v.y;", "s1 += v.y + undefined_thing;", 1)
    with pytest.raises(RooflabError) as e:
        compiler.build("stream.cu", "sm_90", text=broken)
    msg = str(e.value)
    assert "failed to compile with NVRTC" in msg and "undefined_thing" in msg
    # the #line marks point at the real file: the line in kernels/cuda/stream.cu, not the inlined text
    real = next(i for i, l in enumerate(open(_real_path("stream.cu")).read().splitlines(), 1) if "s1 += v.y;" in l)
    assert f"stream.cu({real})" in msg and line + 1 != real


def test_arch_specific_sources_pick_their_target():
    assert compiler.targets("wgmma.cu") == ["sm_90a"] and compiler.targets("fma.cu") is None
    assert compiler.arch_for("wgmma.cu", "sm_90") == "sm_90a" and compiler.arch_for("fma.cu", "sm_80") == "sm_80"
    with pytest.raises(RooflabError, match="runs only on sm_90a; this GPU is sm_80"):
        compiler.arch_for("wgmma.cu", "sm_80")
    assert compiler.runs_on("wgmma.cu", "sm_90") and not compiler.runs_on("wgmma.cu", "sm_80")


def test_nvrtc_refuses_an_unknown_arch(cache):
    nvrtc_or_skip()
    with pytest.raises(RooflabError, match="cannot compile for sm_12"):
        compiler.build("launch.cu", "sm_12")


def _real_path(name):
    import importlib.resources

    return str(importlib.resources.files("rooflab.kernels.cuda").joinpath(name))
