"""Family `stream`: bandwidth of every memory level, STREAM-style kernels on the CPU and the GPU.

CPU (kernels/cpu/stream.py, numba): read (8 B/element), copy (16), triad (24, 1 FMA), update (16,
in place: no write-allocate). GPU (kernels/cuda/stream.cu, smem.cu): device-memory read/copy/triad
over one resident wave of blocks, an L2-resident re-read with __ldcg loads, and shared-memory
re-reads. A 64 B/cycle L1 at 3 GHz is ~190 GB/s per core; DRAM on a VM slice 10-30 GB/s; an H200's
HBM3e ~4.8 TB/s: a 2 GiB triad pass is ~0.1 s on the CPU and ~0.5 ms on the GPU, so ``reps``
repeats the pass inside one call until a sample lasts milliseconds.
"""

from __future__ import annotations

import numpy as np

from ..cuda import knobs as kn
from ..cuda import loader
from ..kernels.cpu import stream
from ..memory import aligned_empty
from ..registry import Variant, register
from ..threads import resolve_threads
from ..work import Work

# ---- stream: read, copy, triad -------------------------------------------------------------------


def _inputs(count):
    """``count`` cache-line aligned arrays of n elements, each with its own pseudo-random pattern in
    [0.5, 1.5) (a parallel first touch: each thread's chunk lands on its own pages, and a 2 GiB
    set takes ~0.1 s instead of seconds of random numbers). No two arrays are equal, so a copy that
    copies nothing, or a triad that ignores one operand, fails its check."""

    def inputs(n, dtype=np.float64, seed=0, threads=None, **_):
        out = []
        for k in range(count):
            a = aligned_empty(int(n), dtype or np.float64)
            stream.fill_pattern(a, resolve_threads(threads), seed * count + k + 1)
            out.append(a)
        return tuple(out)

    return inputs


def _read(a, reps=1, threads=None):
    return stream.read_sum(a, int(reps), resolve_threads(threads))


def _copy(dst, src, reps=1, threads=None):
    stream.copy(dst, src, int(reps), resolve_threads(threads), dst.dtype.type(0.0))
    return dst


def _triad(a, b, c, s=3.0, reps=1, threads=None):
    stream.triad(a, b, c, a.dtype.type(s), int(reps), resolve_threads(threads))
    return a


register(
    Variant(
        name="cpu.stream.read",
        family="stream",
        device="cpu",
        description="s += a[i] over 4 interleaved streams (8 B/element read)",
        kernel=_read,
        reference=lambda a, reps=1, **_: np.float64(reps) * np.sum(a, dtype=np.float64),
        work=lambda a, reps=1, **_: Work(flops=a.size * reps, bytes_read=a.nbytes * reps),
        inputs=_inputs(1),
        result_dtype=lambda a, **_: a.dtype,
    )
)

register(
    Variant(
        name="cpu.stream.copy",
        family="stream",
        device="cpu",
        description="c[i] = a[i] as an explicit load/store loop (16 B/element)",
        kernel=_copy,
        reference=lambda dst, src, **_: src.copy(),  # exact: a copy must reproduce every bit
        work=lambda dst, src, reps=1, **_: Work(bytes_read=src.nbytes * reps, bytes_written=dst.nbytes * reps),
        inputs=_inputs(2),
    )
)

register(
    Variant(
        name="cpu.stream.triad",
        family="stream",
        device="cpu",
        description="a[i] = b[i] + s*c[i] (24 B/element, 1 FMA)",
        kernel=_triad,
        reference=lambda a, b, c, s=3.0, **_: (
            np.asarray(b, np.float64) + np.float64(a.dtype.type(s)) * np.asarray(c, np.float64)
        ),
        work=lambda a, b, c, reps=1, **_: Work(
            flops=2 * a.size * reps, bytes_read=(b.nbytes + c.nbytes) * reps, bytes_written=a.nbytes * reps
        ),
        inputs=_inputs(3),
        defaults={"s": 3.0},
    )
)


def _update(a, s=1.0, reps=1, threads=None):
    stream.update(a, a.dtype.type(s), int(reps), resolve_threads(threads))
    return a


register(
    Variant(
        name="cpu.stream.update",
        family="stream",
        device="cpu",
        description="a[i] = s*a[i] in place (16 B/element, no write-allocate); s=1 when timed",
        kernel=_update,
        reference=lambda a, s=1.0, reps=1, **_: np.asarray(a, np.float64) * np.float64(a.dtype.type(s)) ** int(reps),
        work=lambda a, reps=1, **_: Work(
            flops=a.size * reps, bytes_read=a.nbytes * reps, bytes_written=a.nbytes * reps
        ),
        inputs=_inputs(1),
        defaults={"s": 1.0},
    )
)


# ---- GPU: device memory and L2 ----


def _reduce(a, partial, reps, function):
    """One launch; each block writes its partial sum to ``partial`` (allocated with the inputs, so
    nothing is allocated or reduced inside the timed region)."""
    loader.launch(
        loader.kernel("stream.cu", function, kn.STREAM),
        partial.size,
        kn.BLOCK,
        (a, np.int64(a.size // 2), np.int32(reps), partial),
        function,
    )
    return partial


def _read(a, partial, reps=1, threads=None):
    return _reduce(a, partial, reps, "stream_read")


def _l2_read(a, partial, reps=1, threads=None):
    return _reduce(a, partial, reps, "l2_read")


L2_ROTATE = kn.STREAM["L2_ROTATE"]  # l2_read: block b reads slice (b + 97 r) mod blocks in repetition r


def _partials_reference(a, partial, reps=1, rotate=0, **_):
    """Every block's partial sum, from the data: a thread with global index t of a grid of G blocks
    reads the double2 elements t, t + G*BLOCK, ... below n2; in repetition r block b reads the slice
    of block (b + rotate r) mod G. The inputs are patterned (knobs.patterned), so a kernel that
    skips or re-reads addresses gets other sums; the values make every partial exact in float64."""
    xp = kn.cp()
    blocks, n2 = partial.size, a.size // 2
    stride = blocks * kn.BLOCK
    pairs = a[: 2 * n2].reshape(n2, 2).sum(axis=1)
    pairs = xp.concatenate([pairs, xp.zeros((-n2) % stride, dtype=xp.float64)])
    per_slice = pairs.reshape(-1, stride).sum(axis=0).reshape(blocks, kn.BLOCK).sum(axis=1)
    b = xp.arange(blocks)
    return sum(per_slice[(b + rotate * r) % blocks] for r in range(int(reps)))


def _patterned_and_partials(function):
    def inputs(n, dtype=None, seed=0, **_):
        return kn.patterned(n, seed), kn.cp().zeros(kn.grid(function), dtype=kn.cp().float64)

    return inputs


def _copy(c, a, reps=1, threads=None):
    fn = loader.kernel("stream.cu", "stream_copy", kn.STREAM)
    for _ in range(int(reps)):
        loader.launch(fn, kn.grid("stream_copy"), kn.BLOCK, (c, a, np.int64(a.size // 2)), "stream_copy")
    return c


def _triad(a, b, c, s=3.0, reps=1, threads=None):
    fn = loader.kernel("stream.cu", "stream_triad", kn.STREAM)
    for _ in range(int(reps)):
        loader.launch(
            fn, kn.grid("stream_triad"), kn.BLOCK, (a, b, c, np.float64(s), np.int64(a.size // 2)), "stream_triad"
        )
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
        inputs=_patterned_and_partials("stream_read"),
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
        inputs=_patterned_and_partials("l2_read"),
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
        reference=lambda c, a, **_: a.copy(),
        work=lambda c, a, reps=1, **_: Work(bytes_read=a.nbytes * reps, bytes_written=c.nbytes * reps),
        inputs=lambda n, dtype=None, seed=0, **_: (kn.filled(n, 0.0), kn.patterned(n, seed)),
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
        reference=lambda a, b, c, s=3.0, **_: b + s * c,
        work=lambda a, b, c, reps=1, **_: Work(
            flops=2 * a.size * reps, bytes_read=(b.nbytes + c.nbytes) * reps, bytes_written=a.nbytes * reps
        ),
        inputs=lambda n, dtype=None, seed=0, **_: (kn.filled(n, 0.0), kn.patterned(n, seed), kn.patterned(n, seed + 1)),
        defaults={"s": 3.0},
        result_dtype=_f64,
    )
)


# ---- shared memory -----------------------------------------------------------------------------


def _smem(out, reps=1, threads=None):
    loader.launch(
        loader.kernel("smem.cu", "smem_read", kn.SMEM_KNOBS),
        out.size // kn.BLOCK,
        kn.BLOCK,
        (out, np.int32(reps)),
        "smem_read",
    )
    return out


def _smem_reference(out, reps):
    """Every thread's sum (smem.cu): in repetition r, thread t reads words (t + j BLOCK + 32 r) mod W
    for j < W / BLOCK; word i holds (i>>5)&3 + i&1 + (i>>1)&1 + (i>>9)&1 over its 4 floats. The
    rotation repeats every W/32 repetitions, so whole periods are summed once and scaled."""
    words = kn.SMEM_KNOBS["SMEM_FLOAT4"]
    i = np.arange(words)
    value = ((i >> 5) & 3) + (i & 1) + ((i >> 1) & 1) + ((i >> 9) & 1)
    t = np.arange(kn.BLOCK)[:, None, None]
    j = np.arange(words // kn.BLOCK)[None, :, None]
    period = words // 32
    r = np.arange(period)[None, None, :]
    per_rep = value[(t + j * kn.BLOCK + 32 * r) % words].sum(axis=1)  # (BLOCK, period)
    reps = int(reps)
    per_thread = (reps // period) * per_rep.sum(axis=1) + per_rep[:, : reps % period].sum(axis=1)
    blocks = out.size // kn.BLOCK
    return kn.cp().asarray(np.tile(per_thread.astype(np.float64), blocks))


_SMEM_PER_THREAD = kn.SMEM_KNOBS["SMEM_FLOAT4"] // kn.BLOCK  # float4 reads per thread per repetition

register(
    Variant(
        name="cuda.smem.read",
        family="smem",
        device="cuda",
        description="shared-memory re-reads, float4, conflict-free",
        kernel=_smem,
        reference=lambda out, reps=1, **_: _smem_reference(out, reps),
        work=lambda out, reps=1, **_: Work(bytes_read=out.size * reps * _SMEM_PER_THREAD * 16),
        inputs=lambda n=None, dtype=None, seed=0, **_: (
            kn.cp().zeros(kn.grid("smem_read") * kn.BLOCK, dtype=kn.cp().float32),
        ),
        result_dtype=lambda *a, **k: np.dtype(np.float32),
    )
)


def _cupy_copy(c, a, reps=1, threads=None):
    cp = kn.cp()
    for _ in range(int(reps)):
        cp.copyto(c, a)
    return c


register(
    Variant(
        name="cuda.stream.00-cupy-copy",
        family="stream",
        device="cuda",
        number=0,
        description="cupy.copyto: the library's device-to-device copy, beside stream_copy (16 B/elem)",
        kernel=_cupy_copy,
        reference=lambda c, a, **_: a.copy(),
        work=lambda c, a, reps=1, **_: Work(bytes_read=a.nbytes * reps, bytes_written=c.nbytes * reps),
        inputs=lambda n, dtype=None, seed=0, **_: (kn.filled(n, 0.0), kn.patterned(n, seed)),
        result_dtype=_f64,
    )
)
