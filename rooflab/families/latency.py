"""Family `latency`: the fixed cost of asking for work (dispatch on the CPU, launch on the GPU),
and the suite that gathers every latency rooflab measures (`rooflab run --suite latency`).

Variants (CPU dispatch paths):
  cpu.latency.empty      an @njit call with no arguments and no work, results summed (~60-80 ns)
  cpu.latency.ufunc      np.add on 8 float64 elements (~0.3-1 us: numpy's dispatch and checks)
  cpu.latency.fork_join  a numba parallel region over all threads (~1-10 us: pool wake-up + barrier)
An op whose time is within 2x of these is latency-bound: making it faster means calling less.

The suite (``cases``): on the CPU the three dispatch paths, the elementwise family's tiny chain
(N ops on 8 elements, numpy op by op versus one fused @njit call, N = 1 .. 32: dispatch overhead
grows ~N x ufunc for the first and stays ~1 call for the second) and the memory pointer chase (1
thread, 8 KiB to 4x the LLC); on CUDA the launch family's paths, small and large host<->device
copies (transfer family) and the GPU pointer chase. ``ceilings(data)`` turns one run's records into
`latency` ceilings: "dispatch: <path>" (the names the CPU ceilings suite uses), "memory latency
<level> (pointer chase)", "launch: <path>" and "transfer: <direction> <bytes>".
Run: ``rooflab run --suite latency [--quick] [--device cuda]``.
"""

from __future__ import annotations

import numpy as np

from ..cuda import knobs as kn
from ..cuda import loader
from ..kernels.cpu import latency
from ..memory import random_aligned
from ..registry import Variant, register
from ..threads import resolve_threads
from ..work import Work

# ---- latency: dispatch paths ---------------------------------------------------------------------


def _fork_join(out, reps=1, threads=None):
    for _ in range(int(reps)):
        latency.fork_join(out)
    return out


def _empty_calls(reps=1, threads=None):
    """``reps`` calls of the empty @njit function; returns how many ran (each returns 1)."""
    n = 0
    for _ in range(int(reps)):
        n += latency.empty()
    return np.int64(n)


register(
    Variant(
        name="cpu.latency.empty",
        family="latency",
        device="cpu",
        description="an @njit call with no arguments and no work (the results summed: the calls counted)",
        kernel=_empty_calls,
        reference=lambda reps=1, **_: np.int64(reps),  # every call made, none skipped
        work=lambda reps=1, **_: Work(launches=int(reps)),
        inputs=lambda n=0, dtype=None, seed=0, **_: (),
        result_dtype=lambda **_: np.dtype(np.int64),
    )
)

register(
    Variant(
        name="cpu.latency.ufunc",
        family="latency",
        device="cpu",
        description="np.add(a, b, out=c) on 8-element float64 arrays",
        kernel=lambda a, b, c, reps=1, threads=None: [latency.ufunc_add(a, b, c) for _ in range(int(reps))][-1],
        reference=lambda a, b, c, **_: a.astype(np.float64) + b,
        work=lambda a, b, c, reps=1, **_: Work(
            flops=a.size * reps,
            bytes_read=(a.nbytes + b.nbytes) * reps,
            bytes_written=c.nbytes * reps,
            launches=int(reps),
        ),
        inputs=lambda n=8, dtype=np.float64, seed=0, **_: random_aligned(n, dtype, seed, 3),
    )
)

register(
    Variant(
        name="cpu.latency.fork_join",
        family="latency",
        device="cpu",
        description="a numba parallel region that writes one value per thread (pool wake-up + barrier)",
        kernel=_fork_join,
        reference=lambda out, **_: np.arange(1, out.size + 1, dtype=np.float64),
        work=lambda out, reps=1, **_: Work(launches=int(reps)),
        inputs=lambda n=None, dtype=np.float64, seed=0, threads=None, **_: (np.zeros(resolve_threads(threads)),),
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
        inputs=lambda n=None, dtype=None, seed=0, **_: (kn.cp().full(1, 12345, dtype=kn.cp().int32),),
        result_dtype=lambda *a, **k: np.dtype(np.int32),
    )
)


# ---- the suite -----------------------------------------------------------------------------------

DISPATCH_CALLS = {"cpu.latency.empty": 20000, "cpu.latency.ufunc": 5000, "cpu.latency.fork_join": 200}
# Paths measured in this many fresh processes, the fastest kept (rooflab.processes): the empty call
# reads ~55 or ~97 ns per process (code layout, and the state of the host's core while it runs).
# --quick takes 3 draws (~1 s each).
DISPATCH_PROCESSES = {"cpu.latency.empty": 5, "cpu.latency.ufunc": 5}
DISPATCH_PROCESSES_QUICK = 3
CHAIN_LENGTHS = (1, 2, 4, 8, 16, 32)
CHAIN_LENGTHS_QUICK = (1, 4, 16, 32)
TRANSFER_LATENCY_BYTES = 64 << 10  # copies up to this size are a fixed cost, not a bandwidth


def _processes(name: str, quick: bool) -> int:
    n = DISPATCH_PROCESSES.get(name, 1)
    return min(n, DISPATCH_PROCESSES_QUICK) if quick else n


def dispatch_cases(threads_all: int, quick: bool = False) -> list:
    """The CPU dispatch paths: empty call and 8-element ufunc on 1 thread, fork/join on all (calls
    per sample fixed, so a sample is ~1-5 ms and the per-call cost is their mean); the first two in
    several fresh processes (DISPATCH_PROCESSES)."""
    from ..registry import Case

    return [
        Case(
            name,
            size=threads_all if name.endswith("fork_join") else 8,
            threads=threads_all if name.endswith("fork_join") else 1,
            label=f"latency {name.split('.')[-1]}",
            meta={"kernel": name.split(".")[-1]},
            timing={"reps": reps, "cv_limit": 0.15, "processes": _processes(name, quick)},
        )
        for name, reps in DISPATCH_CALLS.items()
    ]


def chain_cases(quick: bool) -> list:
    """The elementwise family's tiny chain at N = 1 .. 32, op by op and fused (1 thread)."""
    from .elementwise import latency_cases

    return latency_cases(quick, lengths=CHAIN_LENGTHS_QUICK if quick else CHAIN_LENGTHS)


def cases(quick: bool, threads: list[int] | None = None, device: str | None = None) -> list:
    """The `latency` suite on ``device`` (None: both; the registry keeps the cases of the device
    it runs on). CPU: dispatch paths, tiny chains, pointer chase. CUDA: launch paths, transfers,
    pointer chase."""
    from . import chase
    from .chase import cuda as chase_cuda
    from .launch import cuda as launch
    from .transfer import cuda as transfer

    out = []
    if device in (None, "cpu"):
        threads_all = max(threads or [resolve_threads(None)])
        # dispatch paths in 3 passes spread over the suite, the fastest kept (dispatch_ceilings): on a
        # shared host they slow down for seconds to minutes at a time (the empty call ~55 -> ~97 ns,
        # fork/join 1.4 -> 2.9 us, without a trace in the clock probe: an SMT sibling or a neighbour)
        dispatch = dispatch_cases(threads_all, quick)
        out += dispatch + chain_cases(quick) + dispatch + chase.cases(quick, [1]) + dispatch
    if device in (None, "cuda"):
        out += launch.cases(quick) + transfer.cases(quick) + chase_cuda.cases(quick)
    return out


# ---- from records to ceilings ---------------------------------------------------------------------

LAUNCH_NAMES = {"enqueue": "enqueue", "roundtrip": "roundtrip", "graph-node": "graph"}  # as the GPU suite names them


def dispatch_ceilings(records: list[dict]) -> list[dict]:
    """ "dispatch: <path>" per CPU dispatch variant and thread count: the fastest pass (a floor is a
    lower bound of what a call costs), flagged noisy when passes differ by more than 10 %."""
    from ..roofline import LATENCY_UNIT

    by_variant: dict = {}
    for r in records:
        if r.get("status") == "ok" and r.get("family") == "latency":
            by_variant.setdefault((r["variant"], r["threads"]), []).append(r)
    out = []
    for (variant, threads), rs in by_variant.items():
        best = min(rs, key=lambda r: r["ns_per_launch"]["median"])
        spread = 1 - best["ns_per_launch"]["median"] / max(r["ns_per_launch"]["median"] for r in rs)
        out.append(
            {
                "name": f"dispatch: {variant.split('.')[-1]}",
                "kind": "latency",
                "level": None,
                "dtype": None,
                "threads": threads,
                "value": best["ns_per_launch"]["median"],
                "unit": LATENCY_UNIT,
                "stats": best["ns_per_launch"],
                "kernel": variant,
                "noisy": bool(best["noisy"] or spread > 0.10),
                "passes": len(rs),
                "pass_spread": spread,
            }
        )
    return out


def _one(name: str, r: dict, **extra) -> dict:
    from ..roofline import LATENCY_UNIT

    return {
        "name": name,
        "kind": "latency",
        "level": None,
        "dtype": None,
        "threads": 0,
        "value": r["ns_per_launch"]["median"],
        "unit": LATENCY_UNIT,
        "stats": r["ns_per_launch"],
        "kernel": r["variant"],
        "noisy": bool(r.get("noisy")),
        **extra,
    }


def launch_ceilings(records: list[dict]) -> list[dict]:
    """ "launch: <path>" per launch-family record (per launch, or per graph node)."""
    out = []
    for r in records:
        if r.get("status") == "ok" and r.get("family") == "launch" and r.get("ns_per_launch"):
            path = r.get("kernel") or LAUNCH_NAMES.get(r.get("path"), r.get("path") or r["variant"].split(".")[-1])
            out.append(_one(f"launch: {path}", r))
    return out


def transfer_ceilings(records: list[dict], max_bytes: int = TRANSFER_LATENCY_BYTES) -> list[dict]:
    """ "transfer: <H2D|D2H> <pinned|pageable> <size>": the time of one small copy (up to
    ``max_bytes``, where the fixed cost dominates), the interconnect's latency."""
    from ..memory import fmt_bytes

    out = []
    for r in records:
        if r.get("status") != "ok" or r.get("family") != "transfer" or not r.get("ns_per_launch"):
            continue
        nbytes = int((r.get("shape") or {}).get("bytes") or r.get("transfer_bytes") or 0)
        if not nbytes or nbytes > max_bytes:
            continue
        direction = (r.get("direction") or r["variant"].split(".")[-1].split("-")[1]).upper()
        pinned = r.get("pinned", "pinned" in r["variant"])
        out.append(
            _one(
                f"transfer: {direction} {'pinned' if pinned else 'pageable'} {fmt_bytes(nbytes)}",
                r,
                level="host",
                transfer_bytes=nbytes,
            )
        )
    return out


def ceilings(data: dict) -> list[dict]:
    """Every latency ceiling of a `latency` suite result."""
    from . import chase

    recs = data.get("records", [])
    return dispatch_ceilings(recs) + chase.ceilings(data) + launch_ceilings(recs) + transfer_ceilings(recs)
