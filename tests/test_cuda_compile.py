"""Every .cu compiles with nvcc for sm_80 and sm_90, with no register spills in the ceiling kernels,
and the instructions the ceilings rely on are really there. Needs nvcc, not a GPU."""
import re
import shutil
import subprocess

import pytest

from rooflab.cuda import loader

NVCC = shutil.which("nvcc")
pytestmark = pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")
ARCHS = ["sm_80", "sm_90"]


def _compile(tmp_path, name, arch, kind="-cubin"):
    src = tmp_path / name
    src.write_text(loader.source(name))  # exactly what NVRTC is given (includes inlined)
    out = tmp_path / f"{name}.{arch}.{kind.strip('-')}"
    p = subprocess.run([NVCC, "-std=c++17", f"-arch={arch}", kind, "-Xptxas", "-v", "-o", str(out), str(src)],
                       capture_output=True, text=True, timeout=300)
    return p, out


def test_package_ships_the_sources():
    assert set(loader.sources()) >= {"stream.cu", "smem.cu", "fma.cu", "tensor.cu", "intensity.cu", "launch.cu"}


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("name", loader.sources())
def test_compiles_without_spills(tmp_path, name, arch):
    p, out = _compile(tmp_path, name, arch)
    assert p.returncode == 0, p.stderr
    assert out.stat().st_size > 0
    spills = re.findall(r"(\d+) bytes spill stores", p.stderr)
    assert spills and all(s == "0" for s in spills), p.stderr


def test_fma_and_mma_kernels_contain_their_instructions(tmp_path):
    p, ptx = _compile(tmp_path, "fma.cu", "sm_90", "--ptx")
    text = ptx.read_text()
    assert text.count("fma.rn.f32") >= 8 * 16 and text.count("fma.rn.f64") >= 8 * 16
    p, ptx = _compile(tmp_path, "tensor.cu", "sm_90", "--ptx")
    text = ptx.read_text()
    assert text.count("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32") >= 32
    assert text.count("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32") >= 32


def test_knobs_are_injectable(tmp_path):
    src = tmp_path / "fma.cu"
    src.write_text(loader.source("fma.cu"))
    p = subprocess.run([NVCC, "-std=c++17", "-arch=sm_90", "--ptx", "-DCHAINS=2", "-DUNROLL=4", "-o",
                        str(tmp_path / "f.ptx"), str(src)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "f.ptx").read_text().count("fma.rn.f32") < 8 * 16


def test_a_broken_source_fails_with_the_compiler_log(tmp_path):
    bad = tmp_path / "bad.cu"
    bad.write_text('extern "C" __global__ void k(float* x) { x[0] = undefined_fn(); }\n')
    p = subprocess.run([NVCC, "-arch=sm_90", "-cubin", "-o", str(tmp_path / "b.cubin"), str(bad)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode != 0 and "undefined_fn" in p.stderr
