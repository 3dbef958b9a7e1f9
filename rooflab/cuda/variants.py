"""CUDA kernel variants: the kernels of kernels/cuda/*.cu behind the same registry interface as the
CPU ones. Registering imports no cupy; the first call compiles (once) and needs a GPU.

Every knob a kernel's work depends on (chains, unroll, block size, shared-memory size) is set here
and passed to the compiler with -D, so the FLOPs and bytes declared below always describe what was
compiled. Inputs are cupy arrays; references are closed forms (STREAM/BabelStream style), evaluated
on the device in float64 where the result is an array, so checks at benchmark size stay cheap.

Tensor cores two ways: mma.sync (any sm_80+) and wgmma (Hopper only, the instruction cuBLAS uses
there). The compute-peak variants (fma, tensor) take a second input, a (2 x blocks) uint64 buffer that the
kernel fills with (SM cycles, ns) per block: ``measured_clock(clk)`` turns it into the SM clock in
GHz during the launch, for "fraction of the theoretical peak at the measured clock".
"""

from __future__ import annotations

import numpy as np

from ..registry import Variant, register
from ..work import Work
from . import loader

BLOCK = 256
STREAM = {"BLOCK": BLOCK, "ILP": 4, "TRIAD_SM_THREADS": 1024, "L2_ROTATE": 97}
FMA_KNOBS = {"BLOCK": BLOCK, "CHAINS": 8, "UNROLL": 16}
MMA_KNOBS = {"CHAINS": 4, "UNROLL": 8}
MMA_BLOCK = 128
SMEM_KNOBS = {"BLOCK": BLOCK, "SMEM_FLOAT4": 2048}  # 32 KiB of shared memory per block
INTENSITY_KNOBS = {"BLOCK": BLOCK, "ELEMS": 4}
MMA_BITS = {"float16": (0x2C002C00, 0x3C003C00), "bfloat16": (0x3D803D80, 0x3F803F80)}  # 1/16 and 1.0 pairs
MMA_FLOP = 2 * 16 * 8 * 16  # one m16n8k16 per warp
MMA_SM_THREADS = 1024
WGMMA_KNOBS = {"UNROLL": 4}
WGMMA_PER_SM = 2  # warpgroups (blocks of 128 threads) per SM: 154 registers each, two fit with room
WGMMA_FILL = {"float16": 0x34003400, "bfloat16": 0x3E803E80}  # 0.25 in every half of every word
WGMMA_FLOP = 2 * 64 * 256 * 16  # one m64n256k16 per warpgroup

# Resident threads per SM each kernel is launched with: one wave, every block resident at once, so
# a grid-stride loop gives every block the same share and no block waits for a second round. The
# compile tests check each against ptxas's report (registers x threads <= 64K registers per SM).
SM_THREADS = {
    "stream_read": 2048,
    "l2_read": 2048,
    "stream_copy": 2048,
    "stream_triad": STREAM["TRIAD_SM_THREADS"],
    "smem_read": 4 * BLOCK,
    "fma_peak": 2048,
    "mma_f16": MMA_SM_THREADS,
    "mma_bf16": MMA_SM_THREADS,
    "intensity_f64": 2048,
    "wgmma_f16": 128 * WGMMA_PER_SM,
    "wgmma_bf16": 128 * WGMMA_PER_SM,
    "empty_kernel": 32,
    "launch_tick": 32,  # launch.cu's countable empty kernel (rooflab/families/launch/cuda.py)
}


def _cp():
    import cupy

    return cupy


def grid(kernel: str, block: int = BLOCK) -> int:
    """Blocks of ``block`` threads for one wave of ``kernel`` (SM_THREADS) on this GPU."""
    return loader.one_wave(block, SM_THREADS[kernel])


# ---- stream and L2 ------------------------------------------------------------------------------


def _filled(n, value):
    cp = _cp()
    a = cp.empty(n + (n & 1), dtype=cp.float64)
    a.fill(value)
    return a


def _reduce(a, partial, reps, function):
    """One launch; each block writes its partial sum to ``partial`` (allocated with the inputs, so
    nothing is allocated or reduced inside the timed region)."""
    loader.launch(
        loader.kernel("stream.cu", function, STREAM),
        partial.size,
        BLOCK,
        (a, np.int64(a.size // 2), np.int32(reps), partial),
        function,
    )
    return partial


def _read(a, partial, reps=1, threads=None):
    return _reduce(a, partial, reps, "stream_read")


def _l2_read(a, partial, reps=1, threads=None):
    return _reduce(a, partial, reps, "l2_read")


L2_ROTATE = STREAM["L2_ROTATE"]  # l2_read: block b reads slice (b + 97 r) mod blocks in repetition r


def _partials_reference(a, partial, reps=1, rotate=0, **_):
    """Closed form of every block's partial sum of an all-ones array: a thread with global index t
    of a grid of G blocks reads the double2 elements t, t + G*BLOCK, ... below n2, 2 doubles each."""
    blocks, n2 = partial.size, a.size // 2
    stride = blocks * BLOCK
    t = np.arange(stride, dtype=np.int64)
    per_slice = (2 * np.maximum(0, -(-(n2 - t) // stride))).reshape(blocks, BLOCK).sum(axis=1)
    b = np.arange(blocks)
    total = sum(per_slice[(b + rotate * r) % blocks] for r in range(int(reps)))
    return _cp().asarray(total.astype(np.float64))


def _ones_and_partials(function):
    def inputs(n, dtype=None, seed=0, **_):
        return _filled(n, 1.0), _cp().zeros(grid(function), dtype=_cp().float64)

    return inputs


def _copy(c, a, reps=1, threads=None):
    fn = loader.kernel("stream.cu", "stream_copy", STREAM)
    for _ in range(int(reps)):
        loader.launch(fn, grid("stream_copy"), BLOCK, (c, a, np.int64(a.size // 2)), "stream_copy")
    return c


def _triad(a, b, c, s=3.0, reps=1, threads=None):
    fn = loader.kernel("stream.cu", "stream_triad", STREAM)
    for _ in range(int(reps)):
        loader.launch(fn, grid("stream_triad"), BLOCK, (a, b, c, np.float64(s), np.int64(a.size // 2)), "stream_triad")
    return a


def _read_work(a, partial=None, reps=1, **_):
    return Work(flops=a.size * reps, bytes_read=a.nbytes * reps)


def _f64(*a, **k):
    return np.dtype(np.float64)


register(
    Variant(
        name="cuda.stream.read",
        family="stream",
        device="cuda",
        description="sum of a double2 array (8 B/elem)",
        kernel=_read,
        reference=_partials_reference,
        work=_read_work,
        inputs=_ones_and_partials("stream_read"),
        result_dtype=_f64,
    )
)
register(
    Variant(
        name="cuda.l2.read",
        family="l2",
        device="cuda",
        description="sum of an L2-resident double2 array, __ldcg loads, slices rotated over the SMs",
        kernel=_l2_read,
        reference=lambda a, partial, reps=1, **_: _partials_reference(a, partial, reps, L2_ROTATE),
        work=_read_work,
        inputs=_ones_and_partials("l2_read"),
        result_dtype=_f64,
    )
)
register(
    Variant(
        name="cuda.stream.copy",
        family="stream",
        device="cuda",
        description="c = a (16 B/elem)",
        kernel=_copy,
        reference=lambda c, a, **_: np.float64(1.0),
        work=lambda c, a, reps=1, **_: Work(bytes_read=a.nbytes * reps, bytes_written=c.nbytes * reps),
        inputs=lambda n, dtype=None, seed=0, **_: (_filled(n, 0.0), _filled(n, 1.0)),
        result_dtype=_f64,
    )
)
register(
    Variant(
        name="cuda.stream.triad",
        family="stream",
        device="cuda",
        description="a = b + s*c (24 B/elem)",
        kernel=_triad,
        reference=lambda a, b, c, s=3.0, **_: np.float64(2.0 + s * 0.5),
        work=lambda a, b, c, reps=1, **_: Work(
            flops=2 * a.size * reps, bytes_read=(b.nbytes + c.nbytes) * reps, bytes_written=a.nbytes * reps
        ),
        inputs=lambda n, dtype=None, seed=0, **_: (_filled(n, 0.0), _filled(n, 2.0), _filled(n, 0.5)),
        defaults={"s": 3.0},
        result_dtype=_f64,
    )
)


# ---- shared memory -----------------------------------------------------------------------------


def _smem(out, reps=1, threads=None):
    loader.launch(
        loader.kernel("smem.cu", "smem_read", SMEM_KNOBS), out.size // BLOCK, BLOCK, (out, np.int32(reps)), "smem_read"
    )
    return out


_SMEM_PER_THREAD = SMEM_KNOBS["SMEM_FLOAT4"] // BLOCK  # float4 reads per thread per repetition

register(
    Variant(
        name="cuda.smem.read",
        family="smem",
        device="cuda",
        description="shared-memory re-reads, float4, conflict-free",
        kernel=_smem,
        reference=lambda out, reps=1, **_: np.float64(4 * reps * _SMEM_PER_THREAD),
        work=lambda out, reps=1, **_: Work(bytes_read=out.size * reps * _SMEM_PER_THREAD * 16),
        inputs=lambda n=None, dtype=None, seed=0, **_: (_cp().zeros(grid("smem_read") * BLOCK, dtype=_cp().float32),),
        result_dtype=lambda *a, **k: np.dtype(np.float32),
    )
)


# ---- the SM clock probe ------------------------------------------------------------------------


def _clock_buffer(blocks):
    return _cp().zeros(2 * blocks, dtype=_cp().uint64)


def measured_clock(clk) -> dict | None:
    """SM clock (GHz) during the last launch that filled ``clk``: total cycles / total ns over the
    blocks, with the per-block spread. None when the probe did not run or is implausible."""
    v = np.asarray(clk.get() if hasattr(clk, "get") else clk, dtype=np.float64).reshape(-1, 2)
    v = v[(v[:, 0] > 0) & (v[:, 1] > 0)]
    if v.size == 0:
        return None
    per_block = v[:, 0] / v[:, 1]
    ghz = float(v[:, 0].sum() / v[:, 1].sum())
    return {
        "ghz": ghz,
        "median_block_ghz": float(np.median(per_block)),
        "min_block_ghz": float(per_block.min()),
        "max_block_ghz": float(per_block.max()),
        "blocks": int(len(per_block)),
        "mean_block_ns": float(v[:, 1].mean()),
        "method": "clock64 / %globaltimer per block",
    }


# ---- FMA peaks ---------------------------------------------------------------------------------


def _coeffs(m):
    alpha = 0.5 ** (1.0 / m)  # alpha^m = 1/2: values stay near 1 however long the chain
    return alpha, 1.0 - alpha


def _fma(out, clk, reps=1, threads=None):
    name = "fma_peak<float>" if out.dtype == np.float32 else "fma_peak<double>"
    fn = loader.kernel("fma.cu", name, FMA_KNOBS, ("fma_peak<float>", "fma_peak<double>"))
    a0, b0 = _coeffs(FMA_KNOBS["UNROLL"] * int(reps))
    t = out.dtype.type
    loader.launch(fn, out.size // BLOCK, BLOCK, (out, np.int32(reps), t(a0), t(b0), clk), name)
    return out


def _fma_reference(out, clk=None, reps=1, **_):
    cp = _cp()
    chains, m = FMA_KNOBS["CHAINS"], FMA_KNOBS["UNROLL"] * int(reps)
    alpha, beta = _coeffs(m)
    t = out.dtype.type
    alpha, beta = float(t(alpha)), float(t(beta))  # the kernel's coefficients, rounded as it sees them
    gid = cp.arange(out.size, dtype=cp.int64)
    x0 = sum((1 + k) + (gid & 1023).astype(cp.float64) * float(t(1e-3)) for k in range(chains))
    am = alpha**m
    return x0 * am + chains * beta * (1 - am) / (1 - alpha)


def _fma_inputs(n=None, dtype="float32", seed=0, **_):
    blocks = grid("fma_peak")
    return _cp().zeros(blocks * BLOCK, dtype=dtype), _clock_buffer(blocks)


for _dt in ("float32", "float64"):
    register(
        Variant(
            name=f"cuda.fma.{'f32' if _dt == 'float32' else 'f64'}",
            family="fma",
            device="cuda",
            description=f"{FMA_KNOBS['CHAINS']} register FMA chains x {FMA_KNOBS['UNROLL']} unrolled, {_dt}",
            kernel=_fma,
            reference=_fma_reference,
            work=lambda out, clk=None, reps=1, **_: Work(
                flops=2.0 * out.size * reps * FMA_KNOBS["UNROLL"] * FMA_KNOBS["CHAINS"]
            ),
            inputs=lambda n=None, dtype=None, seed=0, _d=_dt, **_: _fma_inputs(dtype=_d),
        )
    )


# ---- tensor cores ------------------------------------------------------------------------------


def _mma(out, clk, reps=1, dtype="float16"):
    name = "mma_f16" if dtype == "float16" else "mma_bf16"
    a_bits, b_bits = MMA_BITS[dtype]
    loader.launch(
        loader.kernel("tensor.cu", name, MMA_KNOBS),
        out.size // MMA_BLOCK,
        MMA_BLOCK,
        (out, np.int32(reps), np.uint32(a_bits), np.uint32(b_bits), clk),
        name,
    )
    return out


def _register_tensor(instruction, launch, block, blocks, per_rep, sums_per_thread, unit_threads, flop, description):
    """The tensor-core variants of one instruction (FP16 and BF16). Each instruction adds exactly 1.0
    to every accumulator, so a thread's output is sums_per_thread x per_rep x reps; FLOPs = issuing
    units (warps or warpgroups of ``unit_threads``) x per_rep x reps x ``flop`` per instruction."""

    def inputs(n=None, dtype=None, seed=0, **_):
        nb = blocks()
        return _cp().zeros(nb * block, dtype=_cp().float32), _clock_buffer(nb)

    for dt in ("float16", "bfloat16"):
        register(
            Variant(
                name=f"cuda.{instruction}.{'f16' if dt == 'float16' else 'bf16'}",
                family="tensor",
                device="cuda",
                description=description.format(dtype=dt),
                kernel=lambda out, clk, reps=1, threads=None, _d=dt: launch(out, clk, reps, _d),
                reference=lambda out, clk=None, reps=1, **_: np.float64(sums_per_thread * per_rep * int(reps)),
                work=lambda out, clk=None, reps=1, **_: Work(
                    flops=(out.size // unit_threads) * per_rep * int(reps) * float(flop)
                ),
                inputs=inputs,
                result_dtype=lambda *a, **k: np.dtype(np.float32),
            )
        )


_register_tensor(
    "mma",
    _mma,
    MMA_BLOCK,
    lambda: grid("mma_f16", MMA_BLOCK),
    per_rep=MMA_KNOBS["UNROLL"] * MMA_KNOBS["CHAINS"],
    sums_per_thread=4,
    unit_threads=32,
    flop=MMA_FLOP,
    description=f"mma.sync m16n8k16 {{dtype}} -> fp32, {MMA_KNOBS['CHAINS']} accumulators per warp",
)


# ---- intensity sweep ---------------------------------------------------------------------------


def _intensity(a, reps=1, threads=None, nfma=1, alpha=0.999, beta=0.001):
    fn = loader.kernel("intensity.cu", "intensity_f64", INTENSITY_KNOBS)
    for _ in range(int(reps)):
        loader.launch(
            fn,
            grid("intensity_f64"),
            BLOCK,
            (a, np.int64(a.size), np.int32(nfma), np.float64(alpha), np.float64(beta)),
            "intensity_f64",
        )
    return a


def _intensity_reference(a, reps=1, nfma=1, alpha=0.999, beta=0.001, **_):
    m = nfma * int(reps)
    am = alpha**m
    return a.astype(_cp().float64) * am + beta * (1 - am) / (1 - alpha)


register(
    Variant(
        name="cuda.intensity.f64",
        family="intensity",
        device="cuda",
        description="nfma dependent FMAs per element, fp64",
        kernel=_intensity,
        reference=_intensity_reference,
        work=lambda a, reps=1, nfma=1, **_: Work(
            flops=2.0 * nfma * a.size * reps, bytes_read=a.nbytes * reps, bytes_written=a.nbytes * reps
        ),
        inputs=lambda n, dtype=None, seed=0, **_: (
            _cp().random.default_rng(seed).random(n, dtype=_cp().float64) + 0.5,
        ),
        defaults={"nfma": 1},
    )
)


# ---- launch latency ----------------------------------------------------------------------------


def empty_kernel():
    return loader.kernel("launch.cu", "empty_kernel")


def _empty(flag, reps=1, threads=None):
    fn = empty_kernel()
    for _ in range(int(reps)):
        fn((1,), (32,), (flag,))
    return flag


register(
    Variant(
        name="cuda.launch.empty",
        family="launch",
        device="cuda",
        description="an empty kernel launch",
        kernel=_empty,
        reference=lambda flag, **_: np.int32(0),
        work=lambda flag, reps=1, **_: Work(launches=int(reps)),
        inputs=lambda n=None, dtype=None, seed=0, **_: (_cp().full(1, 12345, dtype=_cp().int32),),
        result_dtype=lambda *a, **k: np.dtype(np.int32),
    )
)


# ---- tensor cores through wgmma (Hopper). Registered last: were it ever to fault, a CUDA error
# poisons the context, and everything listed before it has run by then. ----------------------------


def _wgmma(out, clk, reps=1, dtype="float16"):
    name = "wgmma_f16" if dtype == "float16" else "wgmma_bf16"
    loader.launch(
        loader.kernel("wgmma.cu", name, WGMMA_KNOBS),
        out.size // 128,
        128,
        (out, np.int32(reps), np.uint32(WGMMA_FILL[dtype]), clk),
        name,
    )
    return out


_register_tensor(
    "wgmma",
    _wgmma,
    128,
    lambda: grid("wgmma_f16", 128),
    per_rep=WGMMA_KNOBS["UNROLL"],
    sums_per_thread=128,
    unit_threads=128,
    flop=WGMMA_FLOP,
    description="wgmma m64n256k16 {dtype} -> fp32 from shared memory (Hopper, sm_90a)",
)
