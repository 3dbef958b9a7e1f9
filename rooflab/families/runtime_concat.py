"""Family `runtime_concat`: a runtime's own copy of a decode step's KV cache, timed as the runtime
runs it, so `rooflab llm --runtime onnxruntime|torch` charges the step's cache copies at what that
runtime takes for them.

An exported decode step (rooflab/models/llm/export.py, as ONNX exports without a shared KV buffer)
makes each layer's present key and value as Concat(past (B, KV heads, L - 1, hd), new (B, KV heads,
1, hd), axis 2): 2 per layer, each copying the whole cache. The variant:
  cpu.runtime_concat.ort-kv-concat  one Concat node, past and new graph inputs, as in the graph;
  over a rotation (Variant.rotate) one session of one Concat per copy, each copy's past its own
  graph input and the new position shared, as a step runs its layers: each past comes from DRAM
  (written a step ago, evicted by the weights since) and each present is allocated by onnxruntime.
  cpu.runtime_concat.torch-kv-cat  torch.cat([past, new], dim=-2), as transformers' DynamicCache
  grows each layer's keys and values every decode step (cache_utils: self.keys = torch.cat(...)),
  each past's cache kept between calls as the model keeps it (a new tensor each step, the last
  freed); a rotation's copies called one by one by the driver, as eager torch runs its layers.
No variant 0 of a ladder (op None: the LLM check asks for it by name).

Why not rooflab's concat op: SmolLM-135M's 60 Concats at context 128 (96 KB each) took 2.83 ms in
onnxruntime's profile of the decode graph (47 us each); numpy's concatenate took 5.5 us warm and
~107 us alone after a cache flush (the flush also evicts the call path: a 128-byte concat after it
took 26-40 us). onnxruntime's one-node Concat took 15.6 us a run warm, of which 9.0 us is its
run floor (Zen 3, 1 thread).

Napkin: a context-1024 SmolLM cache (3 KV heads x 64) is 768 KB per Concat, read and written once:
1.5 MB per node, ~0.1 ms at 15 GB/s, 6 ms per step for 60 nodes.
"""

from __future__ import annotations

import weakref

import numpy as np

from ..registry import Variant, installed, register
from ..threads import resolve_threads, torch_threads
from ..work import Work
from .qgemm import OrtRotation

FAMILY = "runtime_concat"
ORT_KV_CONCAT = f"cpu.{FAMILY}.ort-kv-concat"
TORCH_KV_CAT = f"cpu.{FAMILY}.torch-kv-cat"


def kv_shape(batch: int, heads: int, context: int, head_dim: int) -> dict:
    """The variant's size for a decode step at KV length ``context`` (past holds context - 1)."""
    return {"batch": int(batch), "heads": int(heads), "context": int(context), "head_dim": int(head_dim)}


def inputs(size: dict, dtype="float32", seed=0, threads=None) -> tuple:
    """(new, past): the new position's keys (B, H, 1, hd) and the past cache (B, H, L - 1, hd), random
    float32 from ``seed`` (a rotation's copies: the past from other seeds, the new one shared)."""
    b, h, n, d = (int(size[k]) for k in ("batch", "heads", "context", "head_dim"))
    if n < 2:
        raise ValueError(f"{FAMILY}: context {n}: the cache needs the new position and one past")
    rng = np.random.default_rng(seed)
    past = rng.standard_normal((b, h, n - 1, d), dtype=np.float32)
    new = rng.standard_normal((b, h, 1, d), dtype=np.float32)
    return new, past


def reference(new, past, **_):
    return np.concatenate([past.astype(np.float64), new.astype(np.float64)], axis=2)


def work(new, past, reps=1, **_) -> Work:
    moved = new.nbytes + past.nbytes
    return Work(flops=0, bytes_read=moved * reps, bytes_written=moved * reps, launches=int(reps))


def concat_model(new_shape: tuple, past_shape: tuple, copies: int = 1) -> bytes:
    """``copies`` Concat nodes side by side: inputs "new" (shared) and past_k, outputs present_k."""
    from onnx import TensorProto, helper

    def value(name, shape):
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape))

    out_shape = (*past_shape[:2], past_shape[2] + 1, past_shape[3])
    pasts = [value(f"past_{k}", past_shape) for k in range(copies)]
    nodes = [helper.make_node("Concat", [f"past_{k}", "new"], [f"present_{k}"], axis=2) for k in range(copies)]
    outs = [value(f"present_{k}", out_shape) for k in range(copies)]
    g = helper.make_graph(nodes, FAMILY, [value("new", new_shape), *pasts], outs)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


_sessions: dict = {}  # (shapes, threads) -> the one-node session


def _session(new_shape, past_shape, threads):
    from ..ort_session import weight_session

    key = (new_shape, past_shape, threads)
    if key not in _sessions:
        _sessions.clear()  # one shape at a time: an LLM's ops are measured one after the other
        _sessions[key] = weight_session(concat_model(new_shape, past_shape), threads, ORT_KV_CONCAT)
    return _sessions[key]


def _check(new, past, what=ORT_KV_CONCAT):
    ok = new.ndim == past.ndim == 4 and new.shape[:2] == past.shape[:2] and new.shape[3] == past.shape[3]
    if not ok or new.shape[2] != 1 or new.dtype != np.float32 or past.dtype != np.float32:
        raise ValueError(
            f"{what}: takes float32 new (B, H, 1, hd) and past (B, H, L - 1, hd), "
            f"got {new.dtype}{new.shape} and {past.dtype}{past.shape}"
        )


def _ort_kv_concat(new, past, reps=1, threads=None):
    _check(new, past)
    s = _session(new.shape, past.shape, resolve_threads(threads))
    feeds = {"new": new, "past_0": past}
    for _ in range(int(reps)):
        (y,) = s.run(None, feeds)
    return y


_torch_caches: dict = {}  # id(past) -> the cache as DynamicCache holds it, while past lives


def _torch_cache(past):
    """``past``'s cache as DynamicCache keeps it between steps: the first call's a view of ``past``,
    then the previous result cropped back to L - 1 positions (the same values: the timed decode
    crops its cache after each step), so each cat allocates the step's new cache and frees the last,
    as the model does (60 cats keeping their caches took 7.6 ms a step, dropping each result 5.7).
    The entry goes when ``past`` does (a rotation's copies freed after their time)."""
    import torch

    key = id(past)
    if key not in _torch_caches:
        _torch_caches[key] = torch.from_numpy(past)
        weakref.finalize(past, _torch_caches.pop, key, None)
    return _torch_caches[key]


def _torch_kv_cat(new, past, reps=1, threads=None):
    import torch

    _check(new, past, TORCH_KV_CAT)
    with torch_threads(resolve_threads(threads)):
        n, keep = torch.from_numpy(new), past.shape[2]
        for _ in range(int(reps)):
            y = torch.cat([_torch_cache(past), n], dim=-2)
            _torch_caches[id(past)] = y[:, :, :keep, :]  # no longer a view of past: past may go
    return y.numpy()


class _Rotation(OrtRotation):
    """Variant.rotate: one session of one Concat per copy (copies share ``new``, each its own past as
    a graph input), fed every copy's past; OrtRotation keeps the last one while its pasts live."""

    def build(self, copies, threads: int, **_):
        from ..ort_session import options, session

        for c in copies:
            _check(*c)
        model = concat_model(copies[0][0].shape, copies[0][1].shape, len(copies))
        return session(model, options(threads, what=ORT_KV_CONCAT))

    def feeds(self, copies) -> dict:
        return {"new": copies[0][0], **{f"past_{k}": c[1] for k, c in enumerate(copies)}}


_KV = dict(family=FAMILY, device="cpu", reference=reference, work=work, inputs=inputs, dtypes=("float32",))
if installed("onnxruntime"):
    register(
        Variant(
            name=ORT_KV_CONCAT,
            description="onnxruntime's Concat of a decode graph's KV cache (past + the new position, axis 2)",
            kernel=_ort_kv_concat,
            rotate=_Rotation(what=ORT_KV_CONCAT),
            **_KV,
        )
    )
if installed("torch"):
    register(
        Variant(
            name=TORCH_KV_CAT,
            description="torch.cat of a decode step's KV cache (past + the new position, dim -2), as DynamicCache grows it",
            kernel=_torch_kv_cat,
            **_KV,
        )
    )
