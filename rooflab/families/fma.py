"""Family `fma`: the compute peaks. FMA chains on the CPU (ERT-style, L1-resident) and the GPU
(FP32/FP64 register chains), tensor cores on the GPU (mma.sync everywhere, wgmma on Hopper).

Napkin math: a core with 2 FMA pipes x 8 FP32 lanes (AVX2) at 3 GHz peaks at 96 GFLOP/s; an FMA has
4-5 cycles latency, so >= 10 independent chains must be in flight (ERT's S streams x unrolled K).
The GPU compute variants also record the SM clock during the launch (clock64 / %globaltimer per
block) for "fraction of the theoretical peak at the measured clock".
"""

from __future__ import annotations

import numpy as np

from ..cuda import knobs as kn
from ..cuda import loader
from ..kernels.cpu import ert
from ..memory import random_aligned
from ..registry import Variant, register
from ..threads import resolve_threads
from ..work import Work

# ---- ert: FMA chains (peak) and the intensity sweep ----------------------------------------------


def _ert(a, K=ert.DEFAULT_K, S=ert.DEFAULT_S, block=None, reps=1, threads=None, alpha=None, beta=None):
    """K FMAs per element per pass, ``reps`` passes over each L1 block, a updated in place."""
    nthreads = resolve_threads(threads)
    block = int(block or a.size // nthreads)
    if a.size % (block * nthreads):
        raise ValueError(f"array of {a.size} elements is not a whole number of {nthreads} x {block} blocks")
    if alpha is None:
        alpha, beta = ert.alpha_beta(K * reps, a.dtype)
    ert.ert_kernel(int(K), int(S))(a, block, int(reps), a.dtype.type(alpha), a.dtype.type(beta), nthreads)
    return a


def _ert_reference(a, K=ert.DEFAULT_K, reps=1, alpha=None, beta=None, **_):
    if alpha is None:
        alpha, beta = ert.alpha_beta(K * reps, a.dtype)
    return ert.reference(a, K * reps, alpha, beta)


register(
    Variant(
        name="cpu.ert.fma",
        family="ert",
        device="cpu",
        description="x = x*alpha + beta, K dependent FMAs x S streams per element, L1-blocked passes",
        kernel=_ert,
        reference=_ert_reference,
        work=lambda a, K=ert.DEFAULT_K, reps=1, **_: Work(
            flops=2.0 * K * reps * a.size, bytes_read=a.nbytes, bytes_written=a.nbytes
        ),
        inputs=lambda n, dtype=np.float64, seed=0, **_: random_aligned(n, dtype, seed, 1),
        defaults={"K": ert.DEFAULT_K, "S": ert.DEFAULT_S},
    )
)


# ---- FMA peaks ---------------------------------------------------------------------------------


def _coeffs(m):
    alpha = 0.5 ** (1.0 / m)  # alpha^m = 1/2: values stay near 1 however long the chain
    return alpha, 1.0 - alpha


def _sm_clock(out, clk, *_):
    """The SM clock the kernel measured on the chip during its last launch (knobs.measured_clock)."""
    return {"sm_clock": kn.measured_clock(clk)}


def _fma(out, clk, reps=1, threads=None):
    name = "fma_peak<float>" if out.dtype == np.float32 else "fma_peak<double>"
    fn = loader.kernel("fma.cu", name, kn.FMA_KNOBS, ("fma_peak<float>", "fma_peak<double>"))
    a0, b0 = _coeffs(kn.FMA_KNOBS["UNROLL"] * int(reps))
    t = out.dtype.type
    loader.launch(fn, out.size // kn.BLOCK, kn.BLOCK, (out, np.int32(reps), t(a0), t(b0), clk), name)
    return out


def _fma_reference(out, clk=None, reps=1, **_):
    cp = kn.cp()
    chains, m = kn.FMA_KNOBS["CHAINS"], kn.FMA_KNOBS["UNROLL"] * int(reps)
    alpha, beta = _coeffs(m)
    t = out.dtype.type
    alpha, beta = float(t(alpha)), float(t(beta))  # the kernel's coefficients, rounded as it sees them
    gid = cp.arange(out.size, dtype=cp.int64)
    x0 = sum((1 + k) + (gid & 1023).astype(cp.float64) * float(t(1e-3)) for k in range(chains))
    am = alpha**m
    return x0 * am + chains * beta * (1 - am) / (1 - alpha)


def _fma_inputs(n=None, dtype="float32", seed=0, **_):
    blocks = kn.grid("fma_peak")
    return kn.cp().zeros(blocks * kn.BLOCK, dtype=dtype), kn.clock_buffer(blocks)


for _dt in ("float32", "float64"):
    register(
        Variant(
            name=f"cuda.fma.{'f32' if _dt == 'float32' else 'f64'}",
            family="fma",
            device="cuda",
            description=f"{kn.FMA_KNOBS['CHAINS']} register FMA chains x {kn.FMA_KNOBS['UNROLL']} unrolled, {_dt}",
            kernel=_fma,
            reference=_fma_reference,
            work=lambda out, clk=None, reps=1, **_: Work(
                flops=2.0 * out.size * reps * kn.FMA_KNOBS["UNROLL"] * kn.FMA_KNOBS["CHAINS"]
            ),
            inputs=lambda n=None, dtype=None, seed=0, _d=_dt, **_: _fma_inputs(dtype=_d),
            after_run=_sm_clock,
        )
    )


# ---- tensor cores ------------------------------------------------------------------------------


def _mma(out, clk, reps=1, dtype="float16"):
    name = "mma_f16" if dtype == "float16" else "mma_bf16"
    a_bits, b_bits = kn.MMA_BITS[dtype]
    loader.launch(
        loader.kernel("tensor.cu", name, kn.MMA_KNOBS),
        out.size // kn.MMA_BLOCK,
        kn.MMA_BLOCK,
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
        return kn.cp().zeros(nb * block, dtype=kn.cp().float32), kn.clock_buffer(nb)

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
                after_run=_sm_clock,
            )
        )


_register_tensor(
    "mma",
    _mma,
    kn.MMA_BLOCK,
    lambda: kn.grid("mma_f16", kn.MMA_BLOCK),
    per_rep=kn.MMA_KNOBS["UNROLL"] * kn.MMA_KNOBS["CHAINS"],
    sums_per_thread=4,
    unit_threads=32,
    flop=kn.MMA_FLOP,
    description=f"mma.sync m16n8k16 {{dtype}} -> fp32, {kn.MMA_KNOBS['CHAINS']} accumulators per warp",
)


# ---- tensor cores through wgmma (Hopper). Registered last: were it ever to fault, a CUDA error
# poisons the context, and everything listed before it has run by then. ----------------------------


def _wgmma(out, clk, reps=1, dtype="float16"):
    name = "wgmma_f16" if dtype == "float16" else "wgmma_bf16"
    loader.launch(
        loader.kernel("wgmma.cu", name, kn.WGMMA_KNOBS),
        out.size // 128,
        128,
        (out, np.int32(reps), np.uint32(kn.WGMMA_FILL[dtype]), clk),
        name,
    )
    return out


_register_tensor(
    "wgmma",
    _wgmma,
    128,
    lambda: kn.grid("wgmma_f16", 128),
    per_rep=kn.WGMMA_KNOBS["UNROLL"],
    sums_per_thread=128,
    unit_threads=128,
    flop=kn.WGMMA_FLOP,
    description="wgmma m64n256k16 {dtype} -> fp32 from shared memory (Hopper, sm_90a)",
)
