"""Where `rooflab llm`'s decode gap against onnxruntime goes: a model's decode weight GEMVs as a stream.

    python scripts/llm_gemv_chain.py [--model smollm-135m,qwen2-0.5b] [--threads 2] [--rounds 9]
                                     [--layers N] [--variants numpy,onnxruntime,own]

One process, interleaved (so the other jobs on a shared machine cancel in the ratios): the M = 1
weight GEMMs of every layer of a decode step (q, k, v, o, gate, up, down at the model's real
shapes, from rooflab.models.llm; every layer its own weights, so the chain streams them from DRAM:
SmolLM-135M 425 MB, Qwen2-0.5B 1.43 GB, >= 4x a 32 MiB LLC), each input already in cache as in a
real step, run by:
  numpy        x @ W (OpenBLAS sgemv, its pool limited to T threads by threadpoolctl)
  onnxruntime  one graph of MatMul nodes (MLAS, intra_op_num_threads = T), weights as initializers
  own          rooflab's best own gemm variant (cpu.gemm.05-multithreaded, threads = T), called as
               the driver calls it (argument checks and output allocation included)
Every variant's every output is verified against float64 before anything is timed. Each round
runs each variant's whole chain once, in a rotating order, with --gap seconds between variants
(so a runtime's spinning pool has gone idle before the next one starts). Napkin: SmolLM's chain at
a 2-core DRAM roof of ~20-30 GB/s is 14-21 ms; the LM head is left out (ORT runs the tied head as
a Gemm with transB, a different kernel).

Measured (contended 2-core EPYC, 1 thread, earlier version with the MLP GEMVs only): numpy 7.3-7.6 GB/s,
onnxruntime 7.9-8.0 GB/s (ratio 0.93-0.95). 2-thread figures: README, section "LLMs from their config.json".
"""

import argparse
import statistics
import sys
import time

import numpy as np

from rooflab.memory import aligned_array
from rooflab.models import llm


def chain_shapes(model: str, layers: int | None) -> list[tuple[str, int, int]]:
    """(name, K, N) of each weight GEMV of a decode step, layer after layer (LM head left out)."""
    a = llm.load(model)
    ops = [o for o in llm.phase_ops(a, "decode", 1, 128, 256) if o["kind"] == "gemm" and o["count"] > 1]
    n = a.layers if layers is None else min(layers, a.layers)
    return [(f"L{i}.{o['name']}", o["shape"]["K"], o["shape"]["N"]) for i in range(n) for o in ops]


def build(shapes, seed=0):
    """Distinct weights (uniform in [-0.25, 1): no output near zero, a dropped term shows) and one
    input per K, cache-line aligned like the gemm family's."""
    rng = np.random.default_rng(seed)

    def rand(*shape):
        x = aligned_array(shape, np.float32)
        x[...] = rng.random(shape, dtype=np.float32) * 1.25 - 0.25
        return x

    xs = {K: rand(1, K) for K in sorted({K for _, K, _ in shapes})}
    return xs, [rand(K, N) for _, K, N in shapes]


def ort_session(shapes, Ws, threads: int):
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    ks = sorted({K for _, K, _ in shapes})
    nodes = [helper.make_node("MatMul", [f"x{K}", f"W{i}"], [f"y{i}"]) for i, (_, K, _) in enumerate(shapes)]
    g = helper.make_graph(
        nodes,
        "gemv_chain",
        [helper.make_tensor_value_info(f"x{K}", TensorProto.FLOAT, [1, K]) for K in ks],
        [helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, [1, N]) for i, (_, _, N) in enumerate(shapes)],
        [numpy_helper.from_array(W, f"W{i}") for i, W in enumerate(Ws)],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    blob = m.SerializeToString()
    del m, g
    return ort.InferenceSession(blob, so, providers=["CPUExecutionProvider"])


def runners(names, shapes, xs, Ws, threads):
    """name -> run(): returns the chain's outputs (list) and per-GEMV seconds (None where not timed)."""
    from threadpoolctl import threadpool_limits

    out = {}
    if "numpy" in names:
        lim = threadpool_limits(threads, user_api="blas")  # kept for the whole process

        def run_numpy():
            ys, ts = [], []
            for (_, K, _), W in zip(shapes, Ws):
                t0 = time.perf_counter()
                ys.append(xs[K] @ W)
                ts.append(time.perf_counter() - t0)
            return ys, ts

        out["numpy"] = run_numpy
        out["_limits"] = lim
    if "own" in names:
        import numba

        from rooflab.registry import best_variant

        v = best_variant("gemm", "cpu")
        numba.set_num_threads(threads)
        kern = v.kernel

        def run_own():
            ys, ts = [], []
            for (_, K, _), W in zip(shapes, Ws):
                t0 = time.perf_counter()
                ys.append(kern(xs[K], W, threads=threads))
                ts.append(time.perf_counter() - t0)
            return ys, ts

        out["own"] = run_own
        out["_own_name"] = v.name
    if "onnxruntime" in names:
        s = ort_session(shapes, Ws, threads)
        feeds = {f"x{K}": x for K, x in xs.items()}

        def run_ort():
            return s.run(None, feeds), None

        out["onnxruntime"] = run_ort
    return out


def verify(name, ys, shapes, xs, Ws) -> None:
    """Every output against float64: a wrong GEMV anywhere stops the script before any timing."""
    for (label, K, _), W, y in zip(shapes, Ws, ys):
        ref = xs[K].astype(np.float64) @ W.astype(np.float64)
        if y.shape != ref.shape or not np.allclose(y, ref, rtol=1e-4, atol=1e-5 * np.abs(ref).max()):
            sys.exit(f"error: {name} {label}: wrong result (max rel diff {np.max(np.abs(y - ref) / np.abs(ref)):.2e})")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm-135m,qwen2-0.5b")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--layers", type=int, default=None, help="first N layers only (default: all)")
    p.add_argument("--gap", type=float, default=0.05, help="seconds idle between variants")
    p.add_argument("--variants", default="numpy,onnxruntime,own")
    a = p.parse_args(argv)
    names = [v.strip() for v in a.variants.split(",")]
    bad = [v for v in names if v not in ("numpy", "onnxruntime", "own")]
    if bad or a.threads < 1 or a.rounds < 1:
        print(f"error: bad --variants {bad} / --threads / --rounds", file=sys.stderr)
        return 2
    for model in a.model.split(","):
        shapes = chain_shapes(model.strip(), a.layers)
        xs, Ws = build(shapes)
        total = sum(W.nbytes for W in Ws)
        run = runners(names, shapes, xs, Ws, a.threads)
        for n in names:
            verify(n, run[n]()[0], shapes, xs, Ws)
        times = {n: [] for n in names}
        per = {n: np.zeros(len(shapes)) for n in names}
        ratios: dict = {}
        for r in range(a.rounds):
            order = names[r % len(names) :] + names[: r % len(names)]
            got = {}
            for n in order:
                time.sleep(a.gap)
                t0 = time.perf_counter()
                _, ts = run[n]()
                got[n] = time.perf_counter() - t0
                times[n].append(got[n])
                if ts is not None and r > 0:
                    per[n] += ts
            for i, m in enumerate(names):  # every pair, per round: what the other jobs did cancels
                for n in names[i + 1 :]:
                    ratios.setdefault(f"{n}/{m}", []).append(got[n] / got[m])
        print(
            f"{model}: {len(shapes)} GEMVs, {total / 1e6:.0f} MB of weights, {a.threads} thread(s), "
            f"{a.rounds} rounds (own = {run.get('_own_name', '-')})"
        )
        for n in names:
            t = statistics.median(times[n])
            print(
                f"  {n:12s} median {t * 1e3:8.2f} ms  {total / t / 1e9:6.1f} GB/s  (min {min(times[n]) * 1e3:.2f} ms)"
            )
        for k, v in ratios.items():
            print(f"  {k:22s} median {statistics.median(v):.3f} (per round {min(v):.2f}..{max(v):.2f})")
        timed = [n for n in names if per[n].any()]
        if timed and a.rounds > 1:
            print("  per shape (sum over layers, rounds 2..): " + ", ".join(timed))
            kinds = sorted(
                {s[0].split(".", 1)[1] for s in shapes}, key=lambda k: [s[0] for s in shapes].index(f"L0.{k}")
            )
            for k in kinds:
                idx = [i for i, s in enumerate(shapes) if s[0].split(".", 1)[1] == k]
                K, N = shapes[idx[0]][1:]
                mb = sum(Ws[i].nbytes for i in idx) / 1e6
                cells = [f"{n} {per[n][idx].sum() / (a.rounds - 1) * 1e3:7.2f} ms" for n in timed]
                print(f"    {k:10s} {K:5d}x{N:<5d} {mb:6.0f} MB  " + "  ".join(cells))
        del run, Ws
    return 0


if __name__ == "__main__":
    sys.exit(main())
