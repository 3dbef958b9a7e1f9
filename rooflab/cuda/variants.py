"""CUDA kernel variants: the kernels of kernels/cuda/*.cu behind the same registry interface as the
CPU ones. Registering imports no cupy; the first call compiles (once) and needs a GPU.

Inputs are cupy arrays; references are closed forms (STREAM/BabelStream style), evaluated on the
device in float64 where the result is an array, so checks at benchmark size stay cheap.
"""
from __future__ import annotations

import numpy as np

from ..registry import Variant, register
from ..work import Work
from . import loader

MMA_BITS = {"float16": (0x2C002C00, 0x3C003C00), "bfloat16": (0x3D803D80, 0x3F803F80)}  # 1/16 and 1.0 pairs
FMA_CHAINS, FMA_UNROLL = 8, 16
MMA_CHAINS, MMA_UNROLL = 4, 8
BLOCK = 256


def _cp():
    import cupy

    return cupy


def sm_count() -> int:
    cp = _cp()
    return int(cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)["multiProcessorCount"])


def stream_grid() -> int:
    return sm_count() * (2048 // BLOCK)  # one full wave of resident blocks


# ---- stream ---------------------------------------------------------------------------------------

def _filled(n, value):
    cp = _cp()
    a = cp.empty(n + (n & 1), dtype=cp.float64)
    a.fill(value)
    return a


def _read(a, reps=1, threads=None, grid=None):
    cp = _cp()
    grid = grid or stream_grid()
    out = cp.zeros(grid, dtype=cp.float64)
    loader.launch(loader.kernel("stream.cu", "stream_read"), grid, BLOCK,
                  (a, np.int64(a.size // 2), np.int32(reps), out), "stream_read")
    return out.sum()


def _copy(c, a, reps=1, threads=None):
    fn = loader.kernel("stream.cu", "stream_copy")
    for _ in range(int(reps)):
        loader.launch(fn, stream_grid(), BLOCK, (c, a, np.int64(a.size // 2)), "stream_copy")
    return c


def _triad(a, b, c, s=3.0, reps=1, threads=None):
    fn = loader.kernel("stream.cu", "stream_triad")
    for _ in range(int(reps)):
        loader.launch(fn, stream_grid(), BLOCK, (a, b, c, np.float64(s), np.int64(a.size // 2)), "stream_triad")
    return a


register(Variant(
    name="cuda.stream.read", family="stream", device="cuda", description="sum of a double2 array (8 B/elem)",
    kernel=_read, reference=lambda a, reps=1, **_: float(a.size) * reps,
    work=lambda a, reps=1, **_: Work(flops=a.size * reps, bytes_read=a.nbytes * reps),
    inputs=lambda n, dtype=None, seed=0, **_: (_filled(n, 1.0),),
    result_dtype=lambda *a, **k: np.dtype(np.float64)))
register(Variant(
    name="cuda.stream.copy", family="stream", device="cuda", description="c = a (16 B/elem)",
    kernel=_copy, reference=lambda c, a, **_: np.float64(1.0),
    work=lambda c, a, reps=1, **_: Work(bytes_read=a.nbytes * reps, bytes_written=c.nbytes * reps),
    inputs=lambda n, dtype=None, seed=0, **_: (_filled(n, 0.0), _filled(n, 1.0)),
    result_dtype=lambda *a, **k: np.dtype(np.float64)))
register(Variant(
    name="cuda.stream.triad", family="stream", device="cuda", description="a = b + s*c (24 B/elem)",
    kernel=_triad, reference=lambda a, b, c, s=3.0, **_: np.float64(2.0 + s * 0.5),
    work=lambda a, b, c, reps=1, **_: Work(flops=2 * a.size * reps, bytes_read=(b.nbytes + c.nbytes) * reps,
                                           bytes_written=a.nbytes * reps),
    inputs=lambda n, dtype=None, seed=0, **_: (_filled(n, 0.0), _filled(n, 2.0), _filled(n, 0.5)),
    defaults={"s": 3.0}, result_dtype=lambda *a, **k: np.dtype(np.float64)))


# ---- shared memory -----------------------------------------------------------------------------

SMEM_FLOAT4 = 2048


def _smem(out, reps=1, threads=None):
    loader.launch(loader.kernel("smem.cu", "smem_read"), out.size // BLOCK, BLOCK, (out, np.int32(reps)), "smem_read")
    return out


register(Variant(
    name="cuda.smem.read", family="smem", device="cuda", description="shared-memory re-reads, float4, conflict-free",
    kernel=_smem, reference=lambda out, reps=1, **_: np.float64(4 * reps * SMEM_FLOAT4 // BLOCK),
    work=lambda out, reps=1, **_: Work(bytes_read=out.size * reps * (SMEM_FLOAT4 // BLOCK) * 16),
    inputs=lambda n=None, dtype=None, seed=0, **_: (_cp().zeros(sm_count() * 4 * BLOCK, dtype=_cp().float32),),
    result_dtype=lambda *a, **k: np.dtype(np.float32)))


# ---- FMA peaks ---------------------------------------------------------------------------------

def _fma(out, reps=1, threads=None, a=None, b=None):
    fn = loader.kernel("fma.cu", "fma_f32" if out.dtype == np.float32 else "fma_f64")
    m = FMA_UNROLL * int(reps)
    a0, b0 = _coeffs(m) if a is None else (a, b)
    t = out.dtype.type
    loader.launch(fn, out.size // BLOCK, BLOCK, (out, np.int32(reps), t(a0), t(b0)), "fma")
    return out


def _coeffs(m):
    alpha = 0.5 ** (1.0 / m)
    return alpha, 1.0 - alpha


def _fma_reference(out, reps=1, **_):
    cp = _cp()
    m = FMA_UNROLL * int(reps)
    alpha, beta = _coeffs(m)
    t = out.dtype.type
    alpha, beta = float(t(alpha)), float(t(beta))
    gid = cp.arange(out.size, dtype=cp.float64)
    x0 = sum((1 + k) + (gid.astype(cp.int64) & 1023) * float(t(1e-3)) for k in range(FMA_CHAINS))
    am = alpha ** m
    return x0 * am + FMA_CHAINS * beta * (1 - am) / (1 - alpha)


for _dt in ("float32", "float64"):
    register(Variant(
        name=f"cuda.fma.{'f32' if _dt == 'float32' else 'f64'}", family="fma", device="cuda",
        description=f"{FMA_CHAINS} register FMA chains x {FMA_UNROLL} unrolled, {_dt}",
        kernel=_fma, reference=_fma_reference,
        work=lambda out, reps=1, **_: Work(flops=2.0 * out.size * reps * FMA_UNROLL * FMA_CHAINS),
        inputs=lambda n=None, dtype=_dt, seed=0, **_: (_cp().zeros(sm_count() * 8 * BLOCK, dtype=dtype),)))


# ---- tensor cores ------------------------------------------------------------------------------

def _mma(out, reps=1, threads=None, dtype="float16"):
    fn = loader.kernel("tensor.cu", "mma_f16" if dtype == "float16" else "mma_bf16")
    a_bits, b_bits = MMA_BITS[dtype]
    loader.launch(fn, out.size // 128, 128, (out, np.int32(reps), np.uint32(a_bits), np.uint32(b_bits)), "mma")
    return out


for _dt in ("float16", "bfloat16"):
    register(Variant(
        name=f"cuda.mma.{'f16' if _dt == 'float16' else 'bf16'}", family="tensor", device="cuda",
        description=f"mma.sync m16n8k16 {_dt} -> fp32, {MMA_CHAINS} accumulators per warp",
        kernel=lambda out, reps=1, threads=None, _d=_dt: _mma(out, reps, threads, _d),
        reference=lambda out, reps=1, **_: np.float64(4 * MMA_CHAINS * MMA_UNROLL * int(reps)),
        work=lambda out, reps=1, **_: Work(flops=(out.size // 32) * int(reps) * MMA_UNROLL * MMA_CHAINS * 4096.0),
        inputs=lambda n=None, dtype=None, seed=0, **_: (_cp().zeros(sm_count() * 8 * 128, dtype=_cp().float32),),
        result_dtype=lambda *a, **k: np.dtype(np.float32)))


# ---- intensity sweep ---------------------------------------------------------------------------

def _intensity(a, reps=1, threads=None, nfma=1, alpha=0.999, beta=0.001):
    fn = loader.kernel("intensity.cu", "intensity_f64")
    for _ in range(int(reps)):
        loader.launch(fn, stream_grid(), BLOCK, (a, np.int64(a.size), np.int32(nfma), np.float64(alpha),
                                                  np.float64(beta)), "intensity_f64")
    return a


def _intensity_reference(a, reps=1, nfma=1, alpha=0.999, beta=0.001, **_):
    m = nfma * int(reps)
    am = alpha ** m
    return a.astype(_cp().float64) * am + beta * (1 - am) / (1 - alpha)


register(Variant(
    name="cuda.intensity.f64", family="intensity", device="cuda", description="nfma dependent FMAs per element, fp64",
    kernel=_intensity, reference=_intensity_reference,
    work=lambda a, reps=1, nfma=1, **_: Work(flops=2.0 * nfma * a.size * reps, bytes_read=a.nbytes * reps,
                                            bytes_written=a.nbytes * reps),
    inputs=lambda n, dtype=None, seed=0, **_: (_cp().random.default_rng(seed).random(n, dtype=_cp().float64) + 0.5,),
    defaults={"nfma": 1}))


# ---- launch latency ----------------------------------------------------------------------------

def _empty(flag, reps=1, threads=None):
    fn = loader.kernel("launch.cu", "empty_kernel")
    for _ in range(int(reps)):
        fn((1,), (32,), (flag,))
    return flag


register(Variant(
    name="cuda.launch.empty", family="launch", device="cuda", description="an empty kernel launch",
    kernel=_empty, reference=lambda flag, **_: np.int32(0),
    work=lambda flag, reps=1, **_: Work(launches=int(reps)),
    inputs=lambda n=None, dtype=None, seed=0, **_: (_cp().full(1, 12345, dtype=_cp().int32),),
    result_dtype=lambda *a, **k: np.dtype(np.int32)))
