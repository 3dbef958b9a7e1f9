"""Where `rooflab llm`'s decode gap against onnxruntime goes (python scripts/llm_gemv_chain.py).

One process, interleaved: a chain of 120 distinct GEMVs of SmolLM-135M's MLP shapes (576 -> 1536 -> 576,
3.5 MB each, 425 MB in all: streamed from DRAM) in numpy (OpenBLAS) and in one onnxruntime graph (MLAS), 1 thread.
Measured (contended 2-core EPYC): numpy 7.3-7.6 GB/s, onnxruntime 7.9-8.0 GB/s (ratio 0.93-0.95),
while the same GEMVs measured alone after a cache flush (rooflab's cold time) ran at 11-14 GB/s."""

import statistics
import time

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from threadpoolctl import threadpool_limits

h, I, n = 576, 1536, 120
rng = np.random.default_rng(0)
Ws = [
    (
        rng.standard_normal((h, I) if i % 2 == 0 else (I, h), dtype=np.float32)
        / np.float32(np.sqrt(h if i % 2 == 0 else I))
    )
    for i in range(n)
]
nodes, inits, cur = [], [], "x"
for i, W in enumerate(Ws):
    inits.append(numpy_helper.from_array(W, f"W{i}"))
    nodes.append(helper.make_node("MatMul", [cur, f"W{i}"], [f"y{i}"]))
    cur = f"y{i}"
g = helper.make_graph(
    nodes,
    "g",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, h])],
    [helper.make_tensor_value_info(cur, TensorProto.FLOAT, [1, 1, h])],
    inits,
)
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
m.ir_version = 8
so = ort.SessionOptions()
so.intra_op_num_threads = 1
s = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
x = rng.standard_normal((1, 1, h), dtype=np.float32)


def np_chain(x):
    for W in Ws:
        x = x @ W
    return x


assert np.allclose(s.run(None, {"x": x})[0], np_chain(x), rtol=1e-3, atol=1e-3)
tn, to = [], []
with threadpool_limits(1):
    for _ in range(15):
        t0 = time.perf_counter()
        np_chain(x)
        tn.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        s.run(None, {"x": x})
        to.append(time.perf_counter() - t0)
b = sum(W.nbytes for W in Ws)
a, o = statistics.median(tn), statistics.median(to)
print(
    f"chain of {n} GEMVs ({b / 1e6:.0f} MB): numpy {a * 1e3:.1f} ms ({b / a / 1e9:.1f} GB/s), onnxruntime {o * 1e3:.1f} ms ({b / o / 1e9:.1f} GB/s), ort/numpy {o / a:.2f}"
)
