"""The tensor-core peak kernels (kernels/cuda/tensor.cu: mma.sync m16n8k16; wgmma.cu: wgmma m64n256k16)
EXECUTED on the CPU through the GEMM emulator's model of those instructions (tests/cuda_emu/emu.h:
lane-exact mma.sync fragments, wgmma computed from its shared-memory descriptors), and compared with
the closed form their variants are verified against on the device (rooflab/families/fma.py). Before
issue 25 neither kernel had ever run anywhere: the emulators refused inline PTX.

The test compiles exactly the source NVRTC compiles (includes inlined) with its PTX statements
replaced by the emulator's functions (each replacement asserted to be found), the knobs the variants
use, and launches it with tests/cuda_emu/harness.cpp --peak. What this proves: the A/B bit patterns
and fills give exactly 1.0 per instruction per accumulator, the accumulator count and the loop
structure match the declared FLOPs and the reference, wgmma's descriptors stay inside the shared
memory the kernel fills. Deliberately broken versions must fail. Needs g++ (C++20); slow."""

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import rooflab
from rooflab.cuda import compiler
from rooflab.cuda import knobs as kn
from rooflab.errors import VerificationError
from rooflab.verify import check

pytestmark = pytest.mark.slow
GXX = shutil.which("g++")
EMU = Path(__file__).parent / "cuda_emu"
FLAGS = ["-std=c++20", "-O1", "-pthread", "-Wno-unknown-pragmas", "-w"]
ITERS, GRID = 3, 2

PRELUDE = f"""#include "{EMU / "emu.h"}"
inline long long clock64() {{ return 0; }}
#define __shfl_down_sync(mask, v, o) (v)
#define __cvta_generic_to_shared(p) smem_u32(p)
"""
TIMER = 'asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)::"memory");'
MMA_START, MMA_END = 'asm volatile("mma.sync.aligned', '"r"(b0), "r"(b1));'
MMA_CALL = (
    "{ const unsigned a_[4] = {a0, a1, a2, a3}; "
    "if (TYPE[0] == 'b') mma_16816<true>(d[c], a_, b0, b1); else mma_16816<false>(d[c], a_, b0, b1); }"
)
WG_START, WG_END = 'asm volatile("{\\n.reg .pred p;', '"l"(da), "l"(db));'
WG_SMEM = "__shared__ __align__(128) unsigned smem[(A_BYTES + B_BYTES) / 4];"


def _cut(text, start, end, new):
    i = text.index(start)
    j = text.index(end, i) + len(end)
    return text[:i] + new + text[j:]


def emulated(source: str, mutate=()) -> str:
    text = compiler.source(source)  # what NVRTC compiles
    for old, new in mutate:
        assert old in text, old
        text = text.replace(old, new)
    assert TIMER in text
    text = text.replace(TIMER, "t = 0;")
    if source == "tensor.cu":
        text = _cut(text, MMA_START, MMA_END, MMA_CALL)
    else:
        text = _cut(text, WG_START, WG_END, "emu::wgmma_m64n256k16_interleave(d, da, db, TYPE[0] == 'b');")
        assert WG_SMEM in text
        text = text.replace(WG_SMEM, "unsigned* smem = (unsigned*)emu::L->dynamic;")
        text = re.sub(
            r'asm volatile\("(fence\.proxy\.async\.shared::cta|wgmma\.[a-z_.]+(?: \d)?);" ::: "memory"\);', ";", text
        )
    assert not re.search(r"\basm\b", re.sub(r"//[^\n]*", "", text)), "PTX left that the emulator does not model"
    return PRELUDE + text


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    if GXX is None:
        pytest.skip("g++ is not installed")
    out = tmp_path_factory.mktemp("peak")
    obj = out / "harness.o"
    cmd = [GXX, *FLAGS, f'-DROOFLAB_CPU_EMULATION="{EMU / "emu.h"}"', "-c", str(EMU / "harness.cpp"), "-o", str(obj)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if p.returncode:
        pytest.skip(f"{GXX} cannot build the C++20 emulator: {p.stderr.strip()[:300]}")
    return out, obj


def run(harness, source, kernel, args, knobs, block, smem=0, mutate=()):
    """The kernel's output (GRID x block floats), or a string saying how the emulation died."""
    out, obj = harness
    tag = f"{kernel}-{abs(hash(str(mutate)))}"
    src = out / f"{tag}.cpp"
    src.write_text(
        emulated(source, mutate)
        + f'\nextern "C" float* emu_peak_out;\nextern "C" void peak_entry() {{ {kernel}(emu_peak_out, {ITERS}, {args}, nullptr); }}\n'
    )
    exe = out / tag
    defs = [f"-D{k}={v}" for k, v in knobs.items()]
    p = subprocess.run(
        [GXX, *FLAGS, "-rdynamic", *defs, str(src), str(obj), "-o", str(exe)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    res = out / f"{tag}.bin"
    p = subprocess.run(
        [str(exe), "--peak", "peak_entry", str(GRID), str(block), str(smem), str(res)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if p.returncode:
        return f"status {p.returncode}: {p.stderr.strip()[-300:]}"
    return np.fromfile(res, dtype=np.float32)


def _reference(name, out_size):
    v = rooflab.get_variant(name)
    return v.reference(np.zeros(out_size, np.float32), None, reps=ITERS)


MMA = [(f"cuda.mma.{'f16' if dt == 'float16' else 'bf16'}", dt) for dt in ("float16", "bfloat16")]


@pytest.mark.parametrize("name,dtype", MMA)
def test_mma_sync_peak_kernel_gives_its_closed_form(harness, name, dtype):
    a, b = kn.MMA_BITS[dtype]
    got = run(harness, "tensor.cu", name.replace("cuda.mma.", "mma_"), f"{a}u, {b}u", kn.MMA_KNOBS, kn.MMA_BLOCK)
    assert not isinstance(got, str), got
    check(got, _reference(name, got.size), dtype="float32", what=name)
    # and the FLOPs it declares: 4096 per mma per warp, UNROLL x CHAINS mmas per iteration
    v = rooflab.get_variant(name)
    warps = got.size // 32
    assert v.work(got, None, reps=ITERS).flops == warps * ITERS * kn.MMA_KNOBS["UNROLL"] * kn.MMA_KNOBS["CHAINS"] * 4096


def test_mma_peak_with_wrong_operand_bits_fails_its_check(harness):
    a, b = kn.MMA_BITS["float16"]
    got = run(harness, "tensor.cu", "mma_f16", f"{a + 0x0400}u, {b}u", kn.MMA_KNOBS, kn.MMA_BLOCK)  # A = 1/8
    with pytest.raises(VerificationError, match="outside"):
        check(got, _reference("cuda.mma.f16", got.size), dtype="float32")


WG = [(f"cuda.wgmma.{'f16' if dt == 'float16' else 'bf16'}", dt) for dt in ("float16", "bfloat16")]
WG_SMEM_BYTES = 64 * 16 * 2 + 256 * 16 * 2


@pytest.mark.parametrize("name,dtype", WG)
def test_wgmma_peak_kernel_gives_its_closed_form(harness, name, dtype):
    got = run(
        harness,
        "wgmma.cu",
        name.replace("cuda.wgmma.", "wgmma_"),
        f"{kn.WGMMA_FILL[dtype]}u",
        kn.WGMMA_KNOBS,
        128,
        WG_SMEM_BYTES,
    )
    assert not isinstance(got, str), got
    check(got, _reference(name, got.size), dtype="float32", what=name)
    v = rooflab.get_variant(name)
    assert v.work(got, None, reps=ITERS).flops == GRID * ITERS * kn.WGMMA_KNOBS["UNROLL"] * kn.WGMMA_FLOP


@pytest.mark.parametrize(
    "mutate",
    [
        pytest.param(
            ("smem_desc(smem + A_BYTES / 4, 128, 256)", "smem_desc(smem + A_BYTES / 4, 128, 512)"),
            id="B-stride-outside-smem",
        ),
        pytest.param(("d[r] = 0.f;", "d[r] = 1.f;"), id="accumulators-not-zeroed"),
        pytest.param(
            ("i < (A_BYTES + B_BYTES) / 4; i += WG_THREADS", "i < A_BYTES / 4; i += WG_THREADS"), id="B-not-filled"
        ),
    ],
)
def test_a_wrong_wgmma_peak_kernel_is_caught(harness, mutate):
    got = run(
        harness, "wgmma.cu", "wgmma_f16", f"{kn.WGMMA_FILL['float16']}u", kn.WGMMA_KNOBS, 128, WG_SMEM_BYTES, (mutate,)
    )
    if isinstance(got, str):  # the emulation refused it: only an operand outside shared memory may
        assert "outside shared memory" in got, got
        return
    with pytest.raises(VerificationError):
        check(got, _reference("cuda.wgmma.f16", got.size), dtype="float32")
