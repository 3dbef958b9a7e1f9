"""Family ``gemm``: C = A @ B (+ bias), A (M x K), B (K x N), both devices share what is here.

What it measures: how close hand-written kernels get to the library (variant 0 = numpy/BLAS on the
CPU, cupy/cuBLAS on CUDA) from a triple loop up, and where each rung sits on the roofline.
Variants: cpu.py (numba, 00-numpy-blas .. 05-multithreaded); cuda.py (CUDA C, its own ladder).

Shared here: the shapes (square 64..4096; BERT-base seq 128 and GPT-2 prefill/decode projections
and FFN, taken from rooflab/workloads/catalog.py), the float64 reference, the declared work, the input
builder from a shape dict, the argument checks every variant runs, and the suite (``cases``).

Declared work (all reps): FLOPs = 2 M N K (+ M N with bias); minimum bytes = (M K + K N + M N
(+ N)) x itemsize, each operand read or written once. Napkin: n = 2048 FP32 is 17.2 GFLOP over
48 MiB -> intensity 341 FLOP/B, far right of any ridge (compute-bound); the GPT-2 decode GEMV
1 x 768 x 3072 is 4.7 MFLOP over 9.4 MB -> 0.5 FLOP/B (FP32): bandwidth-bound, ~0.3 ms at 30 GB/s.

Inputs: uniform in [-0.25, 1): mostly positive, so no element of C sits near zero where the
per-element relative tolerance of verify.py would be meaningless, while a sign or a dropped term
still shows (dropping one k of K changes C by ~1/K >= 2.4e-4 relative for K <= 4096, above FP32's
1e-4 rtol). ``batch`` in a shape dict (a linear layer applied to batch x M rows) folds into M:
the operands stay 2-D.

Run: ``rooflab run --suite gemm``, or
    >>> import rooflab; v = rooflab.registry.best_variant("gemm", "cpu")
    >>> A, B = v.inputs({"M": 7, "N": 13, "K": 5}, "float32"); C = v(A, B)
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ...errors import RooflabError
from ...memory import aligned_array
from ...registry import Case
from ...work import Work

FAMILY = "gemm"
DTYPES = ("float32", "float64")
SUFFIX = {"float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16"}  # CUDA kernel name endings


@dataclass(frozen=True)
class Rung:
    """One rung of a GEMM ladder, CPU (cpu.py's RUNGS) or CUDA (cuda.py's): a new rung is one entry
    of its device's RUNGS (plus its kernel and test). Every rung has its number, the technique it
    adds (``slug``: the variant name's suffix), roles and how far the suite times it; its device
    says how it runs:
      CPU   ``into(A, B, C[, threads])`` fills C (``threaded``: it takes a thread count)
      CUDA  ``source`` holds ``kernel``_<dtype suffix>, built with the -D ``knobs`` and launched with
            ``block_threads(knobs)`` threads and ``smem(knobs, itemsize)`` bytes of dynamic shared
            memory (None: static only)."""

    number: int
    slug: str
    description: str = ""
    device: str = "cpu"
    dtypes: tuple = DTYPES
    threaded: bool = False  # timed at every thread count of the suite
    model_op: bool = False  # model ops run on it (the library-class rungs)
    best: bool = False  # the best own rung: what the placement and conv's im2col use beside the library
    max_flops: float | None = None  # the suite times it only up to this many FLOPs per call
    into: Callable | None = None
    source: str | None = None
    kernel: str | None = None
    knobs: dict = field(default_factory=dict)
    block_threads: Callable[[dict], int] | None = None
    smem: Callable[[dict, int], int] | None = None

    @property
    def name(self) -> str:
        return f"{self.device}.{FAMILY}.{self.number:02d}-{self.slug}"

    @property
    def threads(self) -> int:
        """CUDA: threads per block."""
        return self.block_threads(self.knobs)

    @property
    def tile(self) -> tuple[int, int]:
        """CUDA: rows x columns of C per block."""
        k = self.knobs
        return (k["TILE"], k["TILE"]) if "TILE" in k else (k["BM"], k["BN"])

    def dynamic_smem(self, dtype: str = "float32") -> int:
        """CUDA: dynamic shared memory per block in bytes for the dtype named (0: static only), 1 KiB
        of alignment slack included."""
        if self.smem is None:
            return 0
        from ...workloads.ops import ITEMSIZE

        return self.smem(self.knobs, ITEMSIZE[dtype]) + 1024

    def function(self, dtype: str) -> str:
        """CUDA: the kernel's name for ``dtype``."""
        return f"{self.kernel}_{SUFFIX[dtype]}"


SQUARE = (64, 128, 256, 512, 1024, 2048, 4096)


def _model_shapes() -> list[tuple[str, dict]]:
    """Distinct GEMM shapes of BERT-base (seq 128) and GPT-2 small (prefill 1024, decode)."""
    from ...workloads import catalog

    out, seen = [], set()
    for ops in (catalog.bert_base(128), catalog.gpt2("prefill", prompt=1024), catalog.gpt2("decode")):
        for o in ops:
            if o["kind"] != "gemm":
                continue
            s = {k: o["shape"][k] for k in ("M", "N", "K")} | {"bias": bool(o["shape"].get("bias"))}
            key = tuple(s.items())
            if key not in seen:
                seen.add(key)
                out.append((f"{o['model']} {o['name'].split('.', 1)[-1]}", s))
    return out


MODEL_SHAPES = _model_shapes()
# the issue's decode GEMV "1 x 768 x 3072" (M x N x K): one token through GPT-2's mlp.c_proj
# (3072 -> 768); its twin c_fc (768 -> 3072) is 1 x 3072 x 768 and moves the same 9.4 MB of weights
# ---- shapes ----------------------------------------------------------------------------------


def shape_of(size) -> dict:
    """Normalize a size (n for n x n x n, (M, N, K), or a dict with M N K [bias batch]) to a dict."""
    if isinstance(size, dict):
        missing = [k for k in ("M", "N", "K") if k not in size]
        if missing:
            raise RooflabError(f"gemm shape {size!r} lacks {', '.join(missing)}", "give M, N and K")
        s = {"M": size["M"], "N": size["N"], "K": size["K"]}
        s["bias"] = bool(size.get("bias", False))
        s["batch"] = size.get("batch", 1)
    elif isinstance(size, (tuple, list)) and len(size) == 3:
        s = {"M": size[0], "N": size[1], "K": size[2], "bias": False, "batch": 1}
    elif isinstance(size, (int, np.integer)):
        s = {"M": int(size), "N": int(size), "K": int(size), "bias": False, "batch": 1}
    else:
        raise RooflabError(f"gemm size {size!r} is not understood", "pass n, (M, N, K) or {'M':..,'N':..,'K':..}")
    for k in ("M", "N", "K", "batch"):
        if not isinstance(s[k], (int, np.integer)) or s[k] < (1 if k == "batch" else 0):
            raise RooflabError(f"gemm shape: {k}={s[k]!r} must be a non-negative integer (batch >= 1)")
        s[k] = int(s[k])
    return s


def label(s: dict) -> str:
    return f"{s['M']}x{s['N']}x{s['K']}" + ("+bias" if s.get("bias") else "")


# ---- inputs, reference, work -----------------------------------------------------------------


def inputs(size, dtype="float32", seed: int = 0, threads=None) -> tuple:
    """Fresh random (A, B) or (A, B, bias): C-contiguous and cache-line aligned, A of batch*M rows."""
    s = shape_of(size)
    dt = np.dtype(dtype)
    if dt.name not in DTYPES:
        raise RooflabError(f"gemm inputs: dtype {dt.name} is not supported", f"use one of {', '.join(DTYPES)}")
    rng = np.random.default_rng(seed)

    def rand(*shape):  # on a cache line: the M = 1 path reads B straight, 1.04-1.19x faster aligned
        a = aligned_array(shape, dt)
        a[...] = rng.random(shape) * 1.25 - 0.25
        return a

    A = rand(s["batch"] * s["M"], s["K"])
    B = rand(s["K"], s["N"])
    return (A, B, rand(s["N"])) if s["bias"] else (A, B)


def reference(A, B, bias=None, **_) -> np.ndarray:
    """float64 A @ B (+ bias): numpy's float64 matmul (exact products, pairwise-blocked sums)."""
    C = np.asarray(A, np.float64) @ np.asarray(B, np.float64)
    if bias is not None:
        C += np.asarray(bias, np.float64)
    return C


def work(A, B, bias=None, reps=1, **_) -> Work:
    M, K = A.shape
    N = B.shape[1]
    e = A.dtype.itemsize
    flops = 2.0 * M * N * K + (M * N if bias is not None else 0)
    read = e * (M * K + K * N + (N if bias is not None else 0))
    return Work(flops=flops, bytes_read=read, bytes_written=e * M * N).scaled(reps)


def result_dtype(A, *_, **__):
    return A.dtype


# ---- argument checks shared by every variant -----------------------------------------------


@functools.cache
def _dtype_set(names: tuple) -> frozenset:
    return frozenset(np.dtype(n) for n in names)


def check_operands(name: str, A, B, bias=None, dtypes=DTYPES, out=None) -> tuple[int, int, int]:
    """Refuse what a variant cannot do, naming the variant and the constraint. Returns (M, N, K)."""
    for what, x in (("A", A), ("B", B)):
        if not isinstance(x, np.ndarray):
            raise RooflabError(f"{name}: {what} must be a numpy array, got {type(x).__name__}", "pass np.ndarray")
        if x.ndim != 2:
            raise RooflabError(
                f"{name}: {what} must be 2-D, got shape {x.shape}",
                "fold batch dimensions into M (A.reshape(-1, K)) or call once per matrix",
            )
        if x.dtype not in _dtype_set(tuple(dtypes)):  # (not dtype.name: 3-7 us a call, the size of a decode GEMV)
            order = "" if x.dtype.isnative else " (non-native byte order)"
            raise RooflabError(
                f"{name}: dtype {x.dtype.name}{order} of {what} is not supported",
                f"use one of {', '.join(dtypes)}"
                + (", native byte order: x.astype(x.dtype.newbyteorder('='))" if order else ""),
            )
        if not x.flags.c_contiguous:
            raise RooflabError(f"{name}: {what} must be C-contiguous", "pass np.ascontiguousarray(x)")
    if A.dtype != B.dtype:
        raise RooflabError(f"{name}: A is {A.dtype.name} but B is {B.dtype.name}", "give both the same dtype")
    M, K = A.shape
    K2, N = B.shape
    if K != K2:
        raise RooflabError(
            f"{name}: inner dimensions differ: A is {M}x{K}, B is {K2}x{N}", "A's columns must equal B's rows"
        )
    if bias is not None:
        if not isinstance(bias, np.ndarray) or bias.shape != (N,) or bias.dtype != A.dtype:
            raise RooflabError(
                f"{name}: bias must be a {A.dtype.name} vector of N={N} elements, got "
                f"{getattr(bias, 'dtype', type(bias).__name__)} {getattr(bias, 'shape', '')}",
                "pass bias of shape (N,) in the dtype of A",
            )
    if out is not None:
        if not isinstance(out, np.ndarray) or out.shape != (M, N) or out.dtype != A.dtype:
            raise RooflabError(f"{name}: out must be a {A.dtype.name} array of shape ({M}, {N})")
        if not out.flags.c_contiguous or not out.flags.writeable:
            raise RooflabError(f"{name}: out must be C-contiguous and writeable")
        if np.shares_memory(out, A) or np.shares_memory(out, B):
            raise RooflabError(f"{name}: out overlaps an input", "pass a separate output array")
    return M, N, K


# ---- the suite ---------------------------------------------------------------------------------

QUICK_SQUARE = (128, 1024)
QUICK_MODEL = ("bert-base-s128-b1 intermediate (FFN1)", "gpt2-decode mlp.c_proj")


def shapes(quick: bool) -> list[tuple[str, dict]]:
    """(label, shape) measured by the suite."""
    sq = QUICK_SQUARE if quick else SQUARE
    out = [(f"square {n}", {"M": n, "N": n, "K": n, "bias": False}) for n in sq]
    out += [(name, s) for name, s in MODEL_SHAPES if not quick or name in QUICK_MODEL]
    return out


def footprint(size, dtype) -> int:
    """Bytes alive at once for one case: A, B, C (and bias) in the dtype, the float64 reference C and
    the float64 copies of A and B it is computed from (a 16384^3 float32 case: 3 GiB + 6 GiB)."""
    s = shape_of(size)
    m, n, k = s["batch"] * s["M"], s["N"], s["K"]
    return np.dtype(dtype).itemsize * (m * k + k * n + m * n + n) + 8 * (m * n + m * k + k * n)


def cases(quick: bool = False, threads: list[int] | None = None, device: str = "cpu") -> list[Case]:
    """Every (variant, shape, dtype, threads) the suite verifies and times.

    The single-threaded rungs run at the smallest thread count only; the library and the
    multi-threaded rungs (role "threaded") at every count. Slow rungs stop at their ``max_flops``
    per call (the naive loop at n=4096 would take minutes)."""
    from ...registry import list_variants

    threads = sorted(set(threads or [1]))
    dtypes = ("float32",) if quick else DTYPES
    out = []
    for v in list_variants(family=FAMILY, device=device):
        for t in threads if "threaded" in v.roles else threads[:1]:
            for dt in dtypes:
                if v.dtypes and dt not in v.dtypes:
                    continue
                for name, s in shapes(quick):
                    flops = 2.0 * s["M"] * s["N"] * s["K"]
                    if v.max_flops is not None and flops > v.max_flops:
                        continue
                    out.append(
                        Case(
                            variant=v.name,
                            size=s,
                            dtype=dt,
                            threads=t,
                            label=f"{v.name} {dt} {label(s)} ({name})",
                            meta={"shape": dict(s), "shape_label": name},
                            footprint=footprint(s, dt),
                        )
                    )
    return out
