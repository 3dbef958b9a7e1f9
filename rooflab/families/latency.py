"""Family `latency`: the fixed cost of asking for work (dispatch on the CPU, launch on the GPU),
and the suite that gathers every latency rooflab measures (`rooflab run --suite latency`).

Variants (CPU dispatch paths):
  cpu.latency.empty      an @njit call with no arguments and no work, results summed (~60-80 ns)
  cpu.latency.ufunc      np.add on 8 float64 elements (~0.3-1 us: numpy's dispatch and checks)
  cpu.latency.fork_join  a numba parallel region over all threads (~1-10 us: pool wake-up + barrier)
  cpu.latency.torch_aten an eager torch call, torch.add on 8 float32 elements (where torch is
                         installed): the floor every aten call of an eager model pays
                         ("dispatch: torch aten call")
  cpu.latency.ort_chain  an onnxruntime session.run of a chain of N Add nodes on 8 float32 elements,
                         at N = 1 and ORT_NODES (where onnxruntime is installed): the chain's slope is
                         onnxruntime's cost per node ("dispatch: onnxruntime node"), its N = 1 run the
                         fixed cost of a run ("dispatch: onnxruntime run")
The two runtimes' floors (``runtime_cases``) run once, at the end of a suite, after every numba
kernel was timed: importing torch loads its own OpenMP and MKL into the process, which nothing timed
before can meet (in fresh processes, 2 per case as the other paths, they took the quick run's
dispatch phase from 21 s to 87 s).
An op whose time is within 2x of these is latency-bound: making it faster means calling less. A
runtime pays its own floor once per call it makes (an eager decode step: ~5,400 aten calls for
Qwen2-0.5B), which is how `rooflab llm --runtime torch` charges it.

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
from ..registry import Variant, installed, register
from ..threads import resolve_threads
from ..work import Work

# ---- latency: dispatch paths ---------------------------------------------------------------------


def _fork_join(out, reps=1, threads=None):
    for _ in range(int(reps)):
        latency.fork_join(out)
    return out


def _add_reference(a, b, c, **_):
    return a.astype(np.float64) + b


def _add_work(a, b, c, reps=1, **_) -> Work:
    """c = a + b per call, one dispatch each (numpy's ufunc, torch's aten call)."""
    return Work(flops=a.size * reps, bytes_read=(a.nbytes + b.nbytes) * reps, bytes_written=c.nbytes * reps,
                launches=int(reps))  # fmt: skip


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
        reference=_add_reference,
        work=_add_work,
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


def torch_installed() -> bool:
    return installed("torch")


def _torch_add(a, b, c, reps=1, threads=None):
    import torch

    torch.set_num_threads(resolve_threads(threads))
    ta, tb, tc = (torch.from_numpy(x) for x in (a, b, c))
    for _ in range(int(reps)):
        torch.add(ta, tb, out=tc)
    return c


if torch_installed():
    register(
        Variant(
            name="cpu.latency.torch_aten",
            family="latency",
            device="cpu",
            description="torch.add(a, b, out=c) on 8-element float32 tensors: one eager aten call",
            kernel=_torch_add,
            reference=_add_reference,
            work=_add_work,
            inputs=lambda n=8, dtype=np.float32, seed=0, **_: random_aligned(n, np.float32, seed, 3),
        )
    )


def ort_installed() -> bool:
    return installed("onnxruntime")


ORT_NODES = 65  # the long chain: 64 nodes more than the short one, ~1-3 us each
_ORT_SESSIONS: dict = {}


def _ort_session(nodes: int, threads: int):
    """A session of ``nodes`` chained Add nodes (y = x + 1 + 1 ...), graph optimizations off so
    each node runs, built once per process."""
    key = (nodes, threads)
    if key not in _ORT_SESSIONS:
        import onnx
        from onnx import TensorProto, helper

        from .. import ort_session

        one = helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0])
        names = ["x", *(f"y{i}" for i in range(nodes - 1)), "y"]
        graph = helper.make_graph(
            [helper.make_node("Add", [names[i], "one"], [names[i + 1]]) for i in range(nodes)],
            "rooflab_ort_chain",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8])],
            [one],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        # each node runs (optimizations off); no spinning pool threads left behind in the run's
        # process (a chain of 8-element Adds uses none of them; the LLM check's sessions keep
        # onnxruntime's default)
        so = ort_session.options(threads, optimize=False, spin="off", what="the onnxruntime call floor")
        onnx.checker.check_model(model)
        _ORT_SESSIONS[key] = ort_session.session(model.SerializeToString(), so)
    return _ORT_SESSIONS[key]


def _ort_chain(x, reps=1, threads=None, nodes=1):
    sess = _ort_session(int(nodes), resolve_threads(threads))
    for _ in range(int(reps)):
        (y,) = sess.run(None, {"x": x})
    return y


if ort_installed():
    register(
        Variant(
            name="cpu.latency.ort_chain",
            family="latency",
            device="cpu",
            description="onnxruntime session.run of a chain of `nodes` Add nodes on 8 float32 elements",
            kernel=_ort_chain,
            reference=lambda x, nodes=1, **_: x.astype(np.float64) + nodes,
            work=lambda x, reps=1, nodes=1, **_: Work(flops=x.size * nodes * reps, launches=int(reps)),
            inputs=lambda n=8, dtype=np.float32, seed=0, **_: random_aligned(n, np.float32, seed, 1),
            defaults={"nodes": 1},
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
TORCH_CALLS = 1000  # ~3-10 us each: a sample of ~3-10 ms
# Paths measured in this many fresh processes, the fastest kept (rooflab.processes): the empty call
# reads ~55 or ~97 ns per process (code layout, and the state of the host's core while it runs).
# --quick takes 3 draws (~1 s each).
DISPATCH_PROCESSES = {"cpu.latency.empty": 5, "cpu.latency.ufunc": 5}
ORT_CALLS = 500  # runs per sample: ~5-20 us each (N = 1), ~100-300 us (N = ORT_NODES)
# a path's ceiling name where the variant's own name does not say it
DISPATCH_NAMES = {"torch_aten": "torch aten call"}
DISPATCH_PROCESSES_QUICK = 3
CHAIN_LENGTHS = (1, 2, 4, 8, 16, 32)
CHAIN_LENGTHS_QUICK = (1, 4, 16, 32)
TRANSFER_LATENCY_BYTES = 64 << 10  # copies up to this size are a fixed cost, not a bandwidth


def _processes(name: str, quick: bool) -> int:
    n = DISPATCH_PROCESSES.get(name, 1)
    return min(n, DISPATCH_PROCESSES_QUICK) if quick else n


def _dispatch_case(name: str, reps: int, threads: int, quick: bool, **params):
    from ..registry import Case

    runtime = name.endswith(("torch_aten", "ort_chain"))
    return Case(
        name,
        size=threads if name.endswith("fork_join") else 8,
        threads=threads,
        params=params,
        label=f"latency {name.split('.')[-1]}"
        + (f" N={params['nodes']}" if params else "")
        + (f" {threads}T" if runtime else ""),
        meta={"kernel": name.split(".")[-1], **params},
        timing={"reps": reps, "cv_limit": 0.15, "processes": _processes(name, quick)},
    )


def dispatch_cases(threads_all: int, quick: bool = False) -> list:
    """The CPU dispatch paths: empty call and 8-element ufunc on 1 thread, fork/join on all (calls
    per sample fixed, so a sample is ~1-5 ms and the per-call cost is their mean); the first two in
    several fresh processes (DISPATCH_PROCESSES)."""
    return [
        _dispatch_case(n, reps, threads_all if n.endswith("fork_join") else 1, quick)
        for n, reps in DISPATCH_CALLS.items()
    ]


def runtime_cases(threads_all: int) -> list:
    """The installed runtimes' floors at 1 thread and all (the intra-op threads a model runs with):
    torch's aten call, onnxruntime's chains of 1 and ORT_NODES nodes. Run once, last (see above)."""
    threads = sorted({1, threads_all})
    out = []
    if torch_installed():
        out += [_dispatch_case("cpu.latency.torch_aten", TORCH_CALLS, t, False) for t in threads]
    if ort_installed():
        out += [
            _dispatch_case("cpu.latency.ort_chain", ORT_CALLS // (1 if n == 1 else 8), t, False, nodes=n)
            for t in threads
            for n in (1, ORT_NODES)
        ]
    return out


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
        out += runtime_cases(threads_all)  # last: torch's import then meets nothing timed
    if device in (None, "cuda"):
        out += launch.cases(quick) + transfer.cases(quick) + chase_cuda.cases(quick)
    return out


# ---- from records to ceilings ---------------------------------------------------------------------

LAUNCH_NAMES = {"enqueue": "enqueue", "roundtrip": "roundtrip", "graph-node": "graph"}  # as the GPU suite names them


def dispatch_ceilings(records: list[dict]) -> list[dict]:
    """ "dispatch: <path>" per CPU dispatch variant and thread count: the fastest pass (a floor is a
    lower bound of what a call costs), flagged noisy when passes differ by more than
    LATENCY_PASS_SPREAD (10 %)."""
    from ..roofline import LATENCY_PASS_SPREAD, LATENCY_UNIT

    by_variant: dict = {}
    for r in records:
        if r.get("status") == "ok" and r.get("family") == "latency" and not r["variant"].endswith("ort_chain"):
            by_variant.setdefault((r["variant"], r["threads"]), []).append(r)
    out = ort_ceilings(records)
    for (variant, threads), rs in by_variant.items():
        best = min(rs, key=lambda r: r["ns_per_launch"]["median"])
        spread = 1 - best["ns_per_launch"]["median"] / max(r["ns_per_launch"]["median"] for r in rs)
        path = variant.split(".")[-1]
        out.append(
            {
                "name": f"dispatch: {DISPATCH_NAMES.get(path, path)}"
                + (f", {threads} thread{'s' if threads > 1 else ''}" if path in DISPATCH_NAMES else ""),
                "kind": "latency",
                "level": None,
                "dtype": None,
                "threads": threads,
                "value": best["ns_per_launch"]["median"],
                "unit": LATENCY_UNIT,
                "stats": best["ns_per_launch"],
                "kernel": variant,
                "noisy": bool(best["noisy"] or spread > LATENCY_PASS_SPREAD),
                "passes": len(rs),
                "pass_spread": spread,
            }
        )
    return out


def ort_ceilings(records: list[dict]) -> list[dict]:
    """onnxruntime's cost per node and per run at each thread count, from the chains' fastest passes
    (cpu.latency.ort_chain at N = 1 and N = ORT_NODES): per node = (t_N - t_1) / (N - 1), per run =
    t_1 less one node. Noisy when either chain's passes differ by more than LATENCY_PASS_SPREAD."""
    from ..roofline import LATENCY_PASS_SPREAD, LATENCY_UNIT

    chains: dict = {}
    for r in records:
        if r.get("status") == "ok" and r.get("variant") == "cpu.latency.ort_chain":
            chains.setdefault((r["threads"], int(r["params"].get("nodes", 1))), []).append(r)
    out = []
    for threads in sorted({t for t, _ in chains}):
        ns = sorted(n for t, n in chains if t == threads)
        if len(ns) < 2:
            continue
        fast, spread, noisy = {}, 0.0, False
        for n in (ns[0], ns[-1]):
            rs = chains[(threads, n)]
            best = min(rs, key=lambda r: r["ns_per_launch"]["median"])
            fast[n] = best["ns_per_launch"]
            spread = max(spread, 1 - fast[n]["median"] / max(r["ns_per_launch"]["median"] for r in rs))
            noisy = noisy or bool(best["noisy"])
        short, long_, dn = fast[ns[0]], fast[ns[-1]], ns[-1] - ns[0]
        # the slope's p20 from the long chain's p20 and the short one's p80, and so on: the widest
        node_stats = {
            k: (long_.get(ql, long_["median"]) - short.get(qs, short["median"])) / dn
            for k, ql, qs in (("median", "median", "median"), ("p20", "p20", "p80"), ("p80", "p80", "p20"))
        }
        run_stats = {
            k: short.get(q, short["median"]) - ns[0] * node_stats[k2]
            for k, q, k2 in (("median", "median", "median"), ("p20", "p20", "p80"), ("p80", "p80", "p20"))
        }
        plural = "s" if threads > 1 else ""
        for what, st in (("node", node_stats), ("run", run_stats)):
            value = st["median"]
            out.append(
                {
                    "name": f"dispatch: onnxruntime {what}, {threads} thread{plural}",
                    "kind": "latency",
                    "level": None,
                    "dtype": None,
                    "threads": threads,
                    "value": value,
                    "unit": LATENCY_UNIT,
                    "stats": st,
                    "kernel": f"cpu.latency.ort_chain N={ns[0]} and N={ns[-1]}: "
                    + ("(t_N - t_1) / (N - 1)" if what == "node" else "t_1 less one node"),
                    "noisy": bool(noisy or spread > LATENCY_PASS_SPREAD or value <= 0),
                    "passes": min(len(chains[(threads, n)]) for n in (ns[0], ns[-1])),
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
