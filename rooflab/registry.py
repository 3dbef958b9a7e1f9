"""One registry of kernel variants. It feeds the CLI, the asv benchmarks, the tests and the plots.

A variant is a kernel plus everything the harness needs to trust and time it:

  kernel(*arrays, reps=1, threads=None, **params) -> result   what is measured
  reference(*arrays, **params) -> expected                     numpy (float64) truth, computed
                                                               *before* the kernel runs, so
                                                               in-place kernels can be checked
  work(*arrays, reps=1, **params) -> Work                      declared FLOPs and bytes
  inputs(n, dtype, seed, threads) -> tuple of arrays            random test inputs of n elements

Public API (also re-exported as rooflab.list_variants / rooflab.get_variant):

  >>> import numpy as np, rooflab
  >>> [v.name for v in rooflab.list_variants(family="stream", device="cpu")]
  ['cpu.stream.read', 'cpu.stream.copy', 'cpu.stream.triad', 'cpu.stream.update']
  >>> v = rooflab.get_variant("cpu.stream.triad")
  >>> a, b, c = v.inputs(1 << 16, np.float64)
  >>> out = v(a, b, c, s=3.0)          # runs the numba kernel on your arrays
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from .errors import RooflabError

DEVICES = ("cpu", "cuda")

# What the asv suite measures (benchmarks/ reads these). APPEND ONLY: asv keys results by parameter
# value, so removing or changing an entry orphans that benchmark's history across commits.
BENCH_PARAMS = {
    "stream_kernels": ["read", "copy", "triad", "update"],
    "stream_bytes": [32 << 10, 1 << 20, 64 << 20, 512 << 20],
    "stream_bytes_quick": [32 << 10, 1 << 20, 64 << 20],
    "fma_dtypes": ["float64", "float32"],
    "fma_config": (64, 8),
    "intensity_K_passes": [(1, 1), (8, 1), (32, 4), (32, 64)],
    "model_ops": [
        ("bert-base", "layer0.intermediate (FFN1)"),
        ("bert-base", "layer0.softmax"),
        ("bert-base", "layer0.attention.LayerNorm"),
        ("gpt2-decode", "h0.mlp.c_fc"),
        ("resnet50", "layer1.0.conv2"),
    ],
    "gpu_stream_bytes": [256 << 20, 2 << 30],
}


@dataclass(frozen=True)
class Variant:
    name: str
    family: str
    device: str
    description: str
    kernel: Callable
    reference: Callable
    work: Callable
    inputs: Callable
    defaults: dict = field(default_factory=dict)
    result_dtype: Callable | None = None  # dtype whose tolerance applies; default: first input's

    def __call__(self, *arrays, **params):
        return self.kernel(*arrays, **{**self.defaults, **params})

    def params(self, **params) -> dict:
        return {**self.defaults, **params}


_REGISTRY: dict[str, Variant] = {}
_LOADED = False


def register(variant: Variant) -> Variant:
    if variant.device not in DEVICES:
        raise ValueError(f"unknown device {variant.device!r}")
    _REGISTRY[variant.name] = variant
    return variant


def _load() -> None:
    global _LOADED
    if not _LOADED:
        _LOADED = True
        from . import cpu_variants  # noqa: F401  (registers the CPU kernels)
        from .cuda import variants  # noqa: F401  (registers CUDA kernels; imports no cupy)


def list_variants(family: str | None = None, device: str | None = None) -> list[Variant]:
    """Variants in registration order, optionally filtered by family and device."""
    _load()
    return [v for v in _REGISTRY.values()
            if (family is None or v.family == family) and (device is None or v.device == device)]


def get_variant(name: str) -> Variant:
    _load()
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY))
        raise RooflabError(f"unknown kernel variant {name!r}", f"use one of: {known}") from None


def families(device: str | None = None) -> list[str]:
    return sorted({v.family for v in list_variants(device=device)})
