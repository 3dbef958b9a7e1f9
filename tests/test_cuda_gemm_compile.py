"""The GEMM ladder's CUDA sources (kernels/cuda/gemm*.cu) without a GPU: each compiles on its own
with nvcc and through rooflab.cuda.compiler (NVRTC, the runtime path) for sm_80 and sm_90, plus
sm_90a for the wgmma rung; no kernel spills registers; a block fits on an SM (registers x threads,
shared memory); the knobs the launcher passes are the files' own defaults and really change the
code; and the SASS holds what each rung claims: FFMA/DFMA for the SIMT rungs, 128-bit global and
shared loads (LDG.*.128, LDS.128) and stores where rungs 06-07 claim them, HMMA + LDSM + LDGSTS for
mma.sync, HGMMA (transposed B) + LDGSTS for wgmma on sm_90a and a stub elsewhere.

Needs nvcc for the nvcc half, cupy + NVRTC for the rest, cuobjdump for the SASS checks (pip install
nvidia-cuda-cuobjdump, part of the dev extra); each part skips with the reason when its tool is missing.
Run: pytest -q tests/test_cuda_gemm_compile.py
"""

import collections
import re
import shutil
import subprocess

import pytest

import rooflab.families.gemm as gemm_family
from rooflab.cuda import compiler
from rooflab.errors import RooflabError
from rooflab.families.gemm import cuda as g
from tests.cuda_tools import cuobjdump, nvrtc_or_skip, private_cache

# every test here builds CUDA with NVRTC/nvcc (1-9 s each): the CUDA kernel author's loop
pytestmark = pytest.mark.slow

NVCC = shutil.which("nvcc")
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")
RUNG = {r.source: r for r in g.RUNGS}
BUILDS = [(r.source, a) for r in g.RUNGS for a in ["sm_80", "sm_90"] + (compiler.targets(r.source) or [])]
# per-SM limits: 64K registers; the most shared memory one block may use (opt-in)
SMEM_PER_BLOCK = {"sm_80": 163 << 10, "sm_90": 227 << 10, "sm_90a": 227 << 10}


CUOBJDUMP = cuobjdump()


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    yield from private_cache(tmp_path_factory, "cache")


def _arch_flags(arch):
    return [f"-gencode=arch=compute_{arch[3:]},code={arch}"] if arch.endswith("a") else [f"-arch={arch}"]


def test_every_gemm_source_is_a_rung_of_the_launcher():
    assert sorted(s for s in compiler.sources() if s.startswith("gemm")) == sorted(RUNG)
    assert compiler.targets("gemm09_wgmma.cu") == ["sm_90a"]
    assert all(compiler.targets(s) is None for s in RUNG if s != "gemm09_wgmma.cu")


@needs_nvcc
@pytest.mark.parametrize("name,arch", BUILDS)
def test_nvcc_compiles_each_source_alone_without_spills(tmp_path, name, arch):
    """The source exactly as NVRTC gets it (gemm_common.cuh inlined), with the launcher's knobs."""
    src = tmp_path / name
    src.write_text(compiler.source(name))
    opts = list(compiler.options(RUNG[name].knobs))
    p = subprocess.run(
        [NVCC, *opts, *_arch_flags(arch), "-cubin", "-Xptxas", "-v", "-o", str(tmp_path / "k.cubin"), str(src)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr
    res = compiler.parse_ptxas(p.stderr)
    assert len(res) == 2 and all(r["registers"] > 0 for r in res.values()), p.stderr
    assert compiler.spills(res) == {}, p.stderr
    assert "Potential Performance Loss" not in p.stderr, p.stderr  # e.g. serialized wgmma


@needs_nvcc
def test_nvcc_builds_a_file_without_any_define(tmp_path):
    """Every knob has an #ifndef default: the file builds as it is, from its own directory."""
    src = str(compiler._package().joinpath("gemm07_warptile.cu"))  # includes gemm_common.cuh beside it
    p = subprocess.run(
        [NVCC, "-std=c++17", "-arch=sm_90", "-cubin", "-o", str(tmp_path / "k.cubin"), src],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr


@pytest.mark.parametrize("name,arch", BUILDS)
def test_nvrtc_builds_fit_an_sm_without_spills(cache, name, arch):
    nvrtc_or_skip()
    r = RUNG[name]
    b = compiler.build(name, arch, r.knobs)
    with open(b.cubin_path, "rb") as f:
        cubin = f.read()
    assert cubin[:4] == b"\x7fELF" and compiler.whole_elf(cubin) == cubin  # a complete ELF file
    assert len(b.resources) == 2 and compiler.spills(b.resources) == {}, b.log
    assert "Potential Performance Loss" not in b.log, b.log
    stub = arch not in (compiler.targets(name) or [arch])  # wgmma for sm_80 / sm_90: never launched
    dtype = {v: k for k, v in gemm_family.SUFFIX.items()}
    for kernel, res in b.resources.items():  # the launcher's block: its registers and shared memory fit
        dynamic = 0 if stub else r.dynamic_smem(dtype[kernel.rsplit("_", 1)[1]])
        assert res["registers"] * r.threads <= 65536, (kernel, res, r.threads)
        assert res["smem_bytes"] + dynamic <= SMEM_PER_BLOCK[arch], (kernel, res, dynamic)


CANDIDATES = [pytest.param(n, c, id=f"{n:02d}-{c}") for n, cs in g.CANDIDATES.items() for c in cs]


@pytest.mark.parametrize("number,knobs", CANDIDATES)
def test_sweep_candidates_build_without_spills_and_fit(cache, number, knobs):
    """The knob sets scripts/gemm_ladder_cuda.py --sweep tries on a GPU (emulated in the CPU tests)."""
    nvrtc_or_skip()
    r = g.with_knobs(g.BY_NUMBER[number], knobs)
    arch = (compiler.targets(r.source) or ["sm_90"])[0]
    b = compiler.build(r.source, arch, r.knobs)
    assert compiler.spills(b.resources) == {}, b.log
    for kernel, res in b.resources.items():
        assert res["registers"] * r.threads <= 65536, (kernel, res)
        assert res["smem_bytes"] + max(r.dynamic_smem(d) for d in r.dtypes) <= SMEM_PER_BLOCK[arch], (kernel, res)


def test_unknown_knobs_are_refused():
    with pytest.raises(RooflabError, match="09-wgmma: unknown knob.*BK.*its knobs are BM, BN, GROUP_M, STAGES"):
        g.with_knobs(g.BY_NUMBER[9], {"BK": 32})


def test_file_defaults_are_the_launcher_knobs(cache):
    """A build without -D is the kernel the launcher runs (the knobs repeat the #ifndef defaults):
    the same shared memory, stack and spills, and registers within 5 % (both compiled fresh; one CI
    run's NVRTC 13.5 gave gemm07's f64 kernel 242 registers plain and 234 with the -D, which no
    rerun here repeated). A knob that differs from its default moves the tile sizes, and with them
    the shared memory or the register count far more than that."""
    nvrtc_or_skip()
    for r in g.RUNGS:
        arch = (compiler.targets(r.source) or ["sm_90"])[0]
        plain = compiler.build(r.source, arch, fresh=True).resources
        tuned = compiler.build(r.source, arch, r.knobs, fresh=True).resources
        assert plain.keys() == tuned.keys(), r.source
        for kernel, p in plain.items():
            t = tuned[kernel]
            assert {k: v for k, v in p.items() if k != "registers"} == {
                k: v for k, v in t.items() if k != "registers"
            }, (r.source, kernel)
            assert abs(p["registers"] - t["registers"]) <= 0.05 * t["registers"], (r.source, kernel, p, t)


def test_knobs_change_the_kernel(cache):
    nvrtc_or_skip()
    base = compiler.build("gemm09_wgmma.cu", "sm_90a", g.BY_NUMBER[9].knobs).resources["gemm09_wgmma_f16"]
    narrow = compiler.build("gemm09_wgmma.cu", "sm_90a", {**g.BY_NUMBER[9].knobs, "BN": 128}).resources
    assert narrow["gemm09_wgmma_f16"]["registers"] < base["registers"]  # 64 accumulators instead of 128
    if CUOBJDUMP is None:
        pytest.skip("cuobjdump is not installed (pip install nvidia-cuda-cuobjdump)")
    k7 = g.BY_NUMBER[7].knobs
    ffma = _sass(compiler.build("gemm07_warptile.cu", "sm_90", k7).cubin_path)["gemm07_warptile_f32"]["FFMA"]
    shallow = _sass(compiler.build("gemm07_warptile.cu", "sm_90", {**k7, "BM": 64, "BN": 64, "WM": 32}).cubin_path)
    assert 2 * shallow["gemm07_warptile_f32"]["FFMA"] == ffma  # 4 x 8 per thread instead of 8 x 8


# ---- SASS ----------------------------------------------------------------------------------------

_INSN = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:(@!?U?P[T0-9]+)\s+)?([A-Z][A-Za-z0-9_.]*)([^;]*);")


def _sass(cubin_path) -> dict:
    """{kernel: Counter of mnemonics} from cuobjdump -sass (operand flags such as .tnspB kept as
    extra keys 'MNEMONIC+flag')."""
    out = subprocess.run([CUOBJDUMP, "-sass", cubin_path], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    kernels = {}
    for part in re.split(r"\n\s*Function : ", out.stdout)[1:]:
        name = part.split("\n", 1)[0].strip()
        c = collections.Counter()
        for predicate, mnemonic, operands in _INSN.findall(part):
            if predicate == "@!PT":
                continue  # never executed (the LDS RZ, [RZ] fillers next to LDGSTS)
            c[mnemonic] += 1
            if ".tnspB" in operands:
                c[mnemonic + "+tnspB"] += 1
        kernels[name] = c
    return kernels


def _ldg128(c) -> int:
    return sum(v for k, v in c.items() if k.startswith("LDG.") and ".128" in k)


needs_cuobjdump = pytest.mark.skipif(
    CUOBJDUMP is None, reason="cuobjdump is not installed (pip install nvidia-cuda-cuobjdump)"
)


@needs_cuobjdump
@pytest.mark.parametrize("name,arch", BUILDS)
def test_sass_has_the_instructions_each_rung_claims(cache, name, arch):
    nvrtc_or_skip()
    r = RUNG[name]
    k = r.knobs
    sass = _sass(compiler.build(name, arch, k).cubin_path)
    assert set(sass) == {r.function(d) for d in r.dtypes}
    for dtype in r.dtypes:
        c = sass[r.function(dtype)]
        generic = {m: v for m, v in c.items() if m.startswith(("LD.", "ST."))}
        assert not generic, f"generic loads/stores: shared memory not seen as shared ({generic})"
        if r.number <= 7:  # SIMT: FMA of the type, at least one unrolled K step of the thread tile
            fma, other = ("FFMA", "DFMA") if dtype == "float32" else ("DFMA", "FFMA")
            per_step = {1: 1, 2: 1, 3: k.get("TILE"), 4: k.get("BK", 0) * k.get("TM", 0)}.get(r.number)
            if per_step is None:  # rungs 05-07: a BK step of the whole thread tile
                per_step = k["BK"] * k["BM"] * k["BN"] // r.threads
            assert c[fma] >= per_step and c[other] == 0, (dtype, c)
            assert not any(m.startswith(("HMMA", "HGMMA")) for m in c)
            if r.number in (6, 7):  # the 128-bit rungs: global and shared loads, C stores
                assert _ldg128(c) >= 2 and c["LDS.128"] >= 2 and c["STG.E.128"] >= 1, (dtype, c)
            else:
                assert _ldg128(c) == 0, (dtype, c)
        elif r.number == 8:
            hmma = "HMMA.16816.F32.BF16" if dtype == "bfloat16" else "HMMA.16816.F32"
            per_step = (k["BK"] // 16) * (k["WM"] // 16) * (k["WN"] // 8)
            assert c[hmma] >= per_step, c
            assert c["LDSM.16.M88.4"] >= 1 and c["LDSM.16.MT88.4"] >= 1 and c["LDGSTS.E.BYPASS.128"] >= 2, c
        elif arch == "sm_90a":
            hgmma = "HGMMA.64x128x16.F32.BF16" if dtype == "bfloat16" else "HGMMA.64x128x16.F32"
            per_step = (64 // 16) * (k["BN"] // 128)
            assert c[hgmma] >= per_step and c[hgmma + "+tnspB"] == c[hgmma], c
            assert c["LDGSTS.E.BYPASS.128"] >= 2 and not any(m.startswith("HMMA") for m in c), c
        else:  # wgmma built for a target without it: the NaN stub
            assert not any(m.startswith(("HGMMA", "HMMA", "LDGSTS")) for m in c), c


@needs_cuobjdump
def test_sass_reader_counts_the_existing_peak_kernels(cache):
    """The reader itself: tensor.cu and wgmma.cu hold the 320 HMMA and 40 HGMMA known from their sources."""
    nvrtc_or_skip()
    from rooflab.cuda import knobs as cv

    mma = _sass(compiler.build("tensor.cu", "sm_90", cv.MMA_KNOBS).cubin_path)
    assert sum(c["HMMA.16816.F32"] + c["HMMA.16816.F32.BF16"] for c in mma.values()) == 320
    wg = _sass(compiler.build("wgmma.cu", "sm_90a", cv.WGMMA_KNOBS).cubin_path)
    assert sum(v for c in wg.values() for m, v in c.items() if m.startswith("HGMMA") and "+" not in m) == 40


def test_whole_elf_restores_the_byte_cupy_drops():
    """cupy's nvrtc.getCUBIN returns the cubin one byte short; compiler.whole_elf puts it back."""
    import struct

    body = bytearray(0x200)
    body[:6] = b"\x7fELF\x02\x01"
    struct.pack_into("<QQ", body, 0x20, 0x100, 0x40)  # e_phoff, e_shoff
    struct.pack_into("<HHHH", body, 0x36, 56, 2, 64, 3)  # phentsize, phnum, shentsize, shnum
    end = 0x100 + 2 * 56  # program headers end last
    whole = bytes(body[:end])
    assert compiler.whole_elf(whole) == whole
    assert compiler.whole_elf(whole[:-1]) == whole
    assert compiler.whole_elf(whole[:-2]) == whole[:-2]  # anything else is left alone
    assert compiler.whole_elf(b"not an elf") == b"not an elf"
