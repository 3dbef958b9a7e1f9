"""Every GEMM kernel of kernels/cuda/gemm*.cu EXECUTED on the CPU, without a GPU: the source NVRTC
compiles (includes inlined), built with g++ against tests/cuda_emu/emu.h, which gives the kernels'
PTX wrappers (cp.async, ldmatrix, mma.sync, wgmma, cvt) in plain C++ as the PTX ISA specifies
them, and launched by tests/cuda_emu/harness.cpp with the launcher's own plan (grid, block,
dynamic shared memory) from rooflab.families.gemm.cuda.plan.

Threads of a block are fibers that run as far ahead as the barriers let them, so a missing
__syncthreads shows as wrong data every time. What this proves: the index math, edge guards (any M, N, K), 16-byte and element paths, shared
memory layouts and swizzles, wgmma descriptors, ldmatrix/mma fragment maps, epilogues and the
cp.async / wgmma pipelines (copies and MMAs landing as early or as late as the PTX rules allow)
give the EXACT product; reads or writes past any array fault on a guard page. What it cannot: real
hardware timing and memory ordering, bank conflicts, and whether the PTX ISA is read right (the
emulator and the kernels share that reading; the wgmma layouts follow CUTLASS's canonical layouts,
cross-checked with ThunderKittens' descriptors). Deliberately broken kernels must fail here.

Needs g++ with C++20 (std::barrier); skips otherwise. Builds ~17 small programs: marked slow.
Run: pytest -q tests/test_cuda_gemm_emulated.py
"""

import concurrent.futures
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from rooflab.cuda import compiler
from rooflab.families.gemm import cuda as g

pytestmark = pytest.mark.slow
GXX = shutil.which("g++")
EMU = Path(__file__).parent / "cuda_emu"
ITEMSIZE = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2}

CP_LATE, WG_LATE = 1, 2  # harness LATE bits: copies land at their wait_group / wgmma runs at its wait_group
MODES = {8: (0, CP_LATE), 9: (0, CP_LATE, WG_LATE, CP_LATE | WG_LATE)}

SHAPES = [
    (1, 1, 1),
    (7, 13, 5),  # nothing aligned: element paths everywhere
    (1, 264, 40),  # a GEMV row
    (300, 8, 24),
    (64, 128, 36),  # K a multiple of 8 (and 4) but not of the K step
    (130, 67, 41),
    (129, 257, 72),
    (200, 264, 136),  # 16-byte paths with ragged tiles, several K steps
]


FLAGS = ["-std=c++20", "-O1", "-pthread", "-Wno-unknown-pragmas"]


def _harness(out_dir: Path) -> Path:
    """tests/cuda_emu/harness.cpp compiled once per session."""
    obj = out_dir / "harness.o"
    if not obj.exists():
        cmd = [
            GXX,
            *FLAGS,
            f'-DROOFLAB_CPU_EMULATION="{EMU / "emu.h"}"',
            "-c",
            str(EMU / "harness.cpp"),
            "-o",
            str(obj),
        ]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if p.returncode:
            if "barrier" in p.stderr or "c++20" in p.stderr:
                pytest.skip(f"{GXX} cannot build the C++20 emulator: {p.stderr.strip()[:200]}")
            raise AssertionError(p.stderr[-4000:])
    return obj


def _build(out_dir: Path, source: str, knobs: dict, replace=None) -> Path:
    text = compiler.source(source)  # exactly what NVRTC compiles
    for old, new in replace or ():
        assert old in text, old
        text = text.replace(old, new)
    tag = "-".join(f"{k}{v}" for k, v in sorted(knobs.items())) + (f"-mut{abs(hash(str(replace)))}" if replace else "")
    src = out_dir / f"{Path(source).stem}-{tag}.cu"
    exe = src.with_suffix("")
    src.write_text(text)
    cmd = [GXX, *FLAGS, "-rdynamic", f'-DROOFLAB_CPU_EMULATION="{EMU / "emu.h"}"']
    cmd += [*[f"-D{k}={v}" for k, v in knobs.items()], "-x", "c++", str(src), "-x", "none", str(_harness(out_dir))]
    p = subprocess.run([*cmd, "-o", str(exe)], capture_output=True, text=True, timeout=600)
    if p.returncode:
        raise AssertionError(p.stderr[-4000:])
    return exe


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    """The production kernels (the launcher's knobs), built a few at a time."""
    if GXX is None:
        pytest.skip("g++ is not installed")
    out = tmp_path_factory.mktemp("emu")
    _harness(out)
    with concurrent.futures.ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as ex:
        futures = {r.number: ex.submit(_build, out, r.source, r.knobs) for r in g.RUNGS}
        return {n: f.result() for n, f in futures.items()}, out


def _data(m, n, k, seed):
    rng = np.random.default_rng(seed)
    r = g.value_range(k)
    a = (np.floor(rng.random((m, k)) * (2 * r + 1)) - r) * 0.25
    b = (np.floor(rng.random((k, n)) * (2 * r + 1)) - r) * 0.25
    return a, b


def _encode(x, dtype):
    if dtype == "bfloat16":  # exact: few significant bits
        return (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    return x.astype(dtype)


def _decode(c, dtype):
    if dtype == "bfloat16":
        return (c.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return c.astype(np.float64)


def _expected(ref, dtype):
    """The exact product rounded once to the output type (round to nearest even)."""
    if dtype == "bfloat16":
        u = ref.astype(np.float32).view(np.uint32).astype(np.uint64)
        return ((((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint32)) << 16).view(np.float32).astype(np.float64)
    return ref.astype(dtype).astype(np.float64)


def _pad(nbytes, aligned):
    """Bytes between an array's end and the guard page: 16-byte aligned start, or none at all."""
    return (16 - nbytes % 16) % 16 if aligned else 0


def run(exe, number, m, n, k, dtype, late=0, aligned=True, smem_offset=80, knobs=None, tmp=None):
    """(result, expected) of one emulated launch, or a string saying how the process died."""
    r = g.with_knobs(g.BY_NUMBER[number], knobs)
    bm, bn = r.tile
    grid = -(-m // bm) * -(-n // bn)
    a, b = _data(m, n, k, seed=m * 7 + n * 3 + k)
    A, B = _encode(a, dtype), _encode(b, dtype)
    es = ITEMSIZE[dtype]
    tmp.mkdir(parents=True, exist_ok=True)
    A.tofile(tmp / "A.bin")
    B.tofile(tmp / "B.bin")
    pads = [_pad(x * es, aligned) for x in (m * k, k * n, m * n)]
    args = [r.function(dtype), grid, r.threads, r.dynamic_smem(dtype), m, n, k, es, late, *pads, smem_offset, tmp]
    p = subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True, timeout=900)
    if p.returncode:
        return f"process ended with status {p.returncode}: {p.stderr.strip()[-300:]}", None
    c = np.fromfile(tmp / "C.bin", dtype=A.dtype).reshape(m, n)
    return _decode(c, dtype), _expected(a @ b, dtype)


def _assert_exact(got, want, what):
    assert not isinstance(got, str), f"{what}: {got}"
    bad = got != want
    if bad.any():
        i = tuple(int(x) for x in np.argwhere(bad)[0])
        raise AssertionError(f"{what}: {int(bad.sum())} of {bad.size} wrong, first at {i}: {got[i]} != {want[i]}")


CASES = [pytest.param(r.number, dt, id=f"{r.number:02d}-{r.slug}-{dt}") for r in g.RUNGS for dt in r.dtypes]


@pytest.mark.parametrize("number,dtype", CASES)
def test_every_kernel_computes_the_exact_product(builds, tmp_path, number, dtype):
    exes, _ = builds
    for i, (m, n, k) in enumerate(SHAPES):
        for late in MODES.get(number, (0,)):
            aligned = (i + late) % 2 == 0 or (m, n, k) == (200, 264, 136)  # both pad kinds, every shape
            got, want = run(exes[number], number, m, n, k, dtype, late, aligned, tmp=tmp_path)
            _assert_exact(got, want, f"rung {number} {dtype} {m}x{n}x{k} late={late} aligned={aligned}")


@pytest.mark.parametrize("smem_offset", [0, 16, 1008])
def test_wgmma_aligns_its_dynamic_shared_memory(builds, tmp_path, smem_offset):
    """Wherever the block's dynamic shared memory starts, the kernel works on 1024-byte atoms."""
    exes, _ = builds
    got, want = run(exes[9], 9, 130, 264, 136, "float16", CP_LATE | WG_LATE, True, smem_offset, tmp=tmp_path)
    _assert_exact(got, want, f"offset {smem_offset}")


OTHER_KNOBS = [pytest.param(n, c, id=f"{n:02d}-{c}") for n, cs in g.CANDIDATES.items() for c in cs] + [
    pytest.param(8, {"GROUP_M": 2}, id="08-grouped-by-2"),  # 5 x 3 tiles in groups of 2 tile rows: a ragged last group
    pytest.param(9, {"GROUP_M": 2}, id="09-grouped-by-2"),
]


@pytest.mark.parametrize("number,knobs", OTHER_KNOBS)
def test_other_knobs(builds, tmp_path, number, knobs):
    """The sweep's candidate knob sets (and grouped tile order) compute the exact product too."""
    _, out = builds
    r = g.with_knobs(g.BY_NUMBER[number], knobs)
    exe = _build(out, r.source, r.knobs)
    m, n, k = (600, 300, 64) if "GROUP_M" in knobs else (300, 520, 200)
    for late in MODES.get(number, (0,)):
        got, want = run(exe, number, m, n, k, r.dtypes[-1], late, True, knobs=knobs, tmp=tmp_path)
        _assert_exact(got, want, f"{knobs} late={late}")


# ---- deliberately wrong kernels: the emulation must reject every one -------------------------------

WRONG = [
    pytest.param(9, ("kk * 16 * 128, BK * 128, 1024)", "kk * 16 * 128, BK * 64, 1024)"), (0,), id="wgmma-B-LBO"),
    pytest.param(9, ("a_base + kk * 32", "a_base + kk * 16"), (0,), id="wgmma-A-k-step"),
    pytest.param(9, ("wgmma_wait<1>();", "wgmma_wait<2>();"), (WG_LATE,), id="wgmma-refill-while-read"),
    pytest.param(9, ("cp_async_wait<STAGES - 3>();", "cp_async_wait<STAGES - 2>();"), (CP_LATE,), id="wgmma-no-wait"),
    pytest.param(8, ("kk + (lane / 16) * 8)", "kk + (lane % 2) * 8)"), (0,), id="mma-ldmatrix-lanes"),
    pytest.param(8, ("cp_async_wait<STAGES - 2>();", "cp_async_wait<STAGES - 1>();"), (CP_LATE,), id="mma-no-wait"),
    pytest.param(7, ("As[buf][(k + e) * AS + r]", "As[buf][(k + e) * BM + r]"), (0,), id="warptile-pitch"),
    pytest.param(6, ("if (vec_a && gr < M && gk < K)", "if (vec_a && gr < M && gk <= K)"), (0,), id="vector-guard"),
    pytest.param(7, ("store(buf ^ 1);\n        __syncthreads();", "store(buf ^ 1);\n"), (0,), id="warptile-no-barrier"),
    pytest.param(
        9,
        ("        __syncthreads();              // everyone's;", "        // everyone's;"),
        (0,),
        id="wgmma-no-barrier",
    ),
]


@pytest.mark.parametrize("number,replace,modes", WRONG)
def test_a_wrong_kernel_is_caught(builds, tmp_path, number, replace, modes):
    _, out = builds
    r = g.BY_NUMBER[number]
    exe = _build(out, r.source, r.knobs, [replace])
    dtype = r.dtypes[0]
    outcomes = []
    for m, n, k in [(256, 512, 320), (64, 128, 36)]:
        for late in modes:
            got, want = run(exe, number, m, n, k, dtype, late, aligned=True, tmp=tmp_path)
            outcomes.append(isinstance(got, str) or bool((got != want).any()))
    assert any(outcomes), f"the emulation did not notice {replace}"
