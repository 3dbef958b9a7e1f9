"""GPU launch and dispatch latency (issue 14): the floor of the roofline, where a small op's time is
the cost of getting it onto the GPU rather than its FLOPs or bytes.

  cuda.launch.00-cupy-tiny-op    cupy.add on 8 floats: cupy's per-op overhead (dispatch, argument
                                 packing, launch), what an eager framework op costs at least
  cuda.launch.01-enqueue         N launches of an empty kernel back to back, one synchronisation at
                                 the end of the sample: launch throughput (host-bound)
  cuda.launch.02-roundtrip       launch + stream synchronize, N times: the latency a dependent host
                                 decision pays
  cuda.launch.03-graph-node      a CUDA graph of GRAPH_NODES empty-kernel nodes (stream capture
                                 through cupy), replayed: the per-node cost without the host
  cuda.launch.04-module-load     load the module (cuModuleLoad of the cached cubin, bypassing cupy's
                                 per-process module cache), get the kernel, launch, synchronize,
                                 unload: first-launch cost, to set against 02's steady state

The kernel is ``launch_tick`` (kernels/cuda/launch.cu): with a null counter it does nothing (what is
timed, ``count=False``), with a counter every launch adds 1 (what verification checks,
``count=True``: exactly reps launches, or reps x GRAPH_NODES graph nodes, really ran). Suites time
with params {"count": False} and verify with verify_params {"count": True}.
Figures: Work.launches is the number of launches (graph nodes) per call, so the driver's
``ns_per_launch`` is the per-launch cost. Published for H100-class parts through Python: ~2.5 us per
back-to-back launch, ~3 us for a raw cuLaunchKernel, ~1-2 us per graph node.
Run: ``rooflab run --device cuda --suite launch``, or
``python -m pytest tests/test_cuda_families_gpu.py -k launch`` on a GPU machine.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...cuda import loader
from ...cuda.args import cupy, require
from ...errors import RooflabError
from ...registry import Case, Variant, register
from ...work import Work

SOURCE = "launch.cu"
KERNEL = "launch_tick"
GRAPH_NODES = 100
TINY = 8


def _tick():
    return loader.kernel(SOURCE, KERNEL)


def _target(counter, count):
    return counter if count else np.intp(0)  # np.intp(0): a null pointer argument


def _counter_inputs(size=None, dtype=None, seed=0, threads=None):
    return (cupy().zeros(1, dtype=np.uint32),)


def _check_counter(name, counter):
    require(name, counter, "counter", dtype=np.uint32, shape=(1,))


def _count_reference(per_rep):
    def reference(counter, *rest, reps=1, count=True, **_):
        before = int(counter.get()[0]) if hasattr(counter, "get") else int(counter[0])
        return np.array([before + (per_rep * int(reps) if count else 0)], dtype=np.int64)

    return reference


def _enqueue(counter, reps=1, threads=None, count=True):
    _check_counter("cuda.launch.01-enqueue", counter)
    fn, arg = _tick(), (_target(counter, count),)
    for _ in range(int(reps)):
        fn((1,), (32,), arg)
    return counter


def _roundtrip(counter, reps=1, threads=None, count=True):
    _check_counter("cuda.launch.02-roundtrip", counter)
    fn, arg = _tick(), (_target(counter, count),)
    stream = cupy().cuda.get_current_stream()
    for _ in range(int(reps)):
        fn((1,), (32,), arg)
        stream.synchronize()
    return counter


@dataclass
class Graphs:
    """Two captured graphs of GRAPH_NODES launches: one counting (verified), one empty (timed)."""

    counting: object
    empty: object
    nodes: int


def capture(fn, nodes: int):
    cp = cupy()
    s = cp.cuda.Stream(non_blocking=True)  # the legacy default stream cannot be captured
    with s:
        s.begin_capture()
        try:
            for _ in range(nodes):
                fn()
        finally:
            graph = s.end_capture()
    return graph


def _graph_inputs(size=None, dtype=None, seed=0, threads=None):
    (counter,) = _counter_inputs()
    fn = _tick()
    counting = capture(lambda: fn((1,), (32,), (counter,)), GRAPH_NODES)
    empty = capture(lambda: fn((1,), (32,), (np.intp(0),)), GRAPH_NODES)
    return counter, Graphs(counting, empty, GRAPH_NODES)


def _graph(counter, graphs, reps=1, threads=None, count=True):
    _check_counter("cuda.launch.03-graph-node", counter)
    if not isinstance(graphs, Graphs):
        raise RooflabError("cuda.launch.03-graph-node: the second input must be the Graphs that inputs() captured")
    g = graphs.counting if count else graphs.empty
    stream = cupy().cuda.get_current_stream()  # replayed where the timer's events are recorded
    for _ in range(int(reps)):
        g.launch(stream=stream)
    return counter


def _module_load(counter, reps=1, threads=None, count=True):
    _check_counter("cuda.launch.04-module-load", counter)
    cp = cupy()
    path = loader.module(SOURCE).build.cubin_path  # compiled (and cached on disk) once
    stream = cp.cuda.get_current_stream()
    arg = (_target(counter, count),)
    for _ in range(int(reps)):
        mod = cp.cuda.function.Module()  # not cupy.RawModule: cupy memoizes those per path and device
        mod.load_file(path)
        mod.get_function(KERNEL)((1,), (32,), arg)
        stream.synchronize()
        del mod  # cuModuleUnload
    return counter


def _tiny_inputs(size=None, dtype="float32", seed=0, threads=None):
    dt = np.dtype(dtype or "float32")
    a = cupy().random.default_rng(seed).standard_normal(TINY, dtype=dt)
    return a, cupy().empty(TINY, dtype=dt)


def _tiny(a, out, reps=1, threads=None):
    require("cuda.launch.00-cupy-tiny-op", a, "a", ndim=1)
    require("cuda.launch.00-cupy-tiny-op", out, "out", dtype=a.dtype, shape=a.shape)
    cp = cupy()
    for _ in range(int(reps)):
        cp.add(a, a, out=out)
    return out


def _work(per_rep):
    return lambda *arrays, reps=1, **_: Work(launches=per_rep * int(reps))


_INT64 = lambda *a, **k: np.dtype(np.int64)  # noqa: E731

VARIANTS = {}
for _num, _tech, _kernel, _inputs, _ref, _per, _what, _res in (
    (
        0,
        "cupy-tiny-op",
        _tiny,
        _tiny_inputs,
        lambda a, out, **_: 2.0 * a.astype(np.float64),
        1,
        f"cupy.add on {TINY} floats: cupy's per-op overhead",
        None,
    ),
    (
        1,
        "enqueue",
        _enqueue,
        _counter_inputs,
        _count_reference(1),
        1,
        "empty-kernel launches back to back, one synchronisation per sample",
        _INT64,
    ),
    (
        2,
        "roundtrip",
        _roundtrip,
        _counter_inputs,
        _count_reference(1),
        1,
        "empty-kernel launch + stream synchronize",
        _INT64,
    ),
    (
        3,
        "graph-node",
        _graph,
        _graph_inputs,
        _count_reference(GRAPH_NODES),
        GRAPH_NODES,
        f"replay of a captured CUDA graph of {GRAPH_NODES} empty-kernel nodes, per node",
        _INT64,
    ),
    (
        4,
        "module-load",
        _module_load,
        _counter_inputs,
        _count_reference(1),
        1,
        "module load + first launch + synchronize + unload",
        _INT64,
    ),
):
    _name = f"cuda.launch.{_num:02d}-{_tech}"
    VARIANTS[_tech] = _name
    register(
        Variant(
            name=_name,
            family="launch",
            device="cuda",
            number=_num,
            description=_what,
            kernel=_kernel,
            reference=_ref,
            work=_work(_per),
            inputs=_inputs,
            defaults={} if _num == 0 else {"count": True},
            result_dtype=_res,
            op=None,
            dtypes=("float32", "float64") if _num == 0 else ("uint32",),
        )
    )


def cases(quick: bool, threads=None) -> list[Case]:
    """Every path once: timed with nothing counted, verified with the counter."""
    reps = {"cupy-tiny-op": 1000, "enqueue": 1000, "roundtrip": 200, "graph-node": 20, "module-load": 20}
    if quick:
        reps = {k: max(1, v // 4) for k, v in reps.items()}
    out = []
    for tech, name in VARIANTS.items():
        counted = tech != "cupy-tiny-op"
        out.append(
            Case(
                variant=name,
                size=None,
                dtype="float32" if not counted else "uint32",
                threads=0,
                params={"count": False} if counted else {},
                verify_params={"count": True} if counted else None,
                label=f"launch {tech}",
                meta={"kind": "latency", "path": tech},
                timing={"reps": reps[tech]},
            )
        )
    return out
