"""One registry of kernel variants. Everything reads it: the CLI, the driver, the suites, the asv
benchmarks, the plots, the model-op placement and the tests (the GPU stand-in too).

A variant is a kernel plus everything the harness needs to trust and time it:

  kernel(*arrays, reps=1, threads=None, **params) -> result   what is measured
  reference(*arrays, **params) -> expected                     float64 truth (or a closed form),
                                                               computed *before* the kernel runs,
                                                               so in-place kernels can be checked
  work(*arrays, reps=1, **params) -> Work                      declared FLOPs, bytes, dispatches
  inputs(size, dtype, seed=0, threads=None) -> tuple            fresh random inputs; ``size`` is
                                                               the family's: elements for stream,
                                                               an op shape dict for gemm and conv

Variants live in their family's module under ``rooflab/families/`` (discovered automatically: a new
family is a new module there). A ladder is numbered by sophistication and each rung is named by
the one technique it adds (``cpu.gemm.03-packed-panels``); rung 0 is the library (numpy/BLAS,
cupy/cuBLAS), so every table can say "% of the library". A variant that computes a model op
declares it with ``op`` ("gemm", "conv2d", "softmax", ...): the placement of model ops executes
an op through the variants of that op, variant 0 being the framework path.

Public API (also re-exported as rooflab.list_variants / rooflab.get_variant):

  >>> import numpy as np, rooflab
  >>> [v.name for v in rooflab.list_variants(family="stream", device="cpu")]
  ['cpu.stream.read', 'cpu.stream.copy', 'cpu.stream.triad', 'cpu.stream.update']
  >>> v = rooflab.get_variant("cpu.stream.triad")
  >>> a, b, c = v.inputs(1 << 16, np.float64)
  >>> out = v(a, b, c, s=3.0)          # runs the numba kernel on your arrays
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .errors import RooflabError

DEVICES = ("cpu", "cuda")


@dataclass(frozen=True)
class Variant:
    name: str
    family: str
    device: str
    description: str  # the one technique this variant adds (a ladder's rung)
    kernel: Callable
    reference: Callable
    work: Callable
    inputs: Callable
    defaults: dict = field(default_factory=dict)
    result_dtype: Callable | None = None  # dtype whose tolerance applies; default: the result's
    number: int | None = None  # rung of the family's ladder; 0 = the library
    op: str | None = None  # model-op kind this variant executes (inputs then take op shapes)
    dtypes: tuple = ()  # dtypes it accepts (empty: any the family declares)
    tolerance: str = "default"  # column of rooflab.verify.TOLERANCES its results are held to
    # what consumers pick it for, so no one keys on rung numbers or name suffixes: "best" (its
    # family's best own rung on this device: what other families build on, e.g. conv's im2col),
    # "threaded" (uses every thread it is given: a suite times it at every thread count)
    roles: tuple = ()
    max_flops: float | None = None  # a suite times it up to this many FLOPs per call (slow rungs)
    after_run: Callable | None = None  # after_run(*inputs) -> dict: what the kernel measured on the chip
    # rotate(copies, threads, **params) -> a callable that runs every copy once, or None: how a library
    # that runs graphs is timed over a rotation of weight copies (one session whose nodes hold the
    # copies, as a model's layers), where the default calls the kernel once per copy
    rotate: Callable | None = None

    def __call__(self, *arrays, **params):
        return self.kernel(*arrays, **{**self.defaults, **params})

    def params(self, **params) -> dict:
        return {**self.defaults, **params}

    @property
    def library(self) -> bool:
        return self.number == 0


@dataclass(frozen=True)
class Case:
    """One measurement of a suite: which variant, at what size, dtype and thread count.

    A suite is a list of cases (data); the driver runs any list on any device. ``timing`` overrides
    the driver's settings for this case (reps, budget_s, cv_limit, max_attempts, target_s;
    processes: measured in that many fresh interpreters, rooflab.processes);
    ``meta`` is copied into the record (kernel, level, intensity ...)."""

    variant: str
    size: Any = None
    dtype: str = "float64"
    threads: int = 1
    params: dict = field(default_factory=dict)
    verify_params: dict | None = None
    label: str | None = None
    meta: dict = field(default_factory=dict)
    timing: dict = field(default_factory=dict)
    sweep: str | None = None  # "bandwidth" / "intensity": also kept as a compact sweep point
    # bytes its inputs, outputs, workspace and float64 reference hold at once, where the family
    # knows them: the driver refuses a case over --max-working-set or free memory before allocating
    footprint: int | None = None


_REGISTRY: dict[str, Variant] = {}
_LOADED = False


def installed(module: str) -> bool:
    """Whether an optional package (torch, onnxruntime) can be imported: found, not imported, so a
    family can register the variants that need it without loading it into every process."""
    return importlib.util.find_spec(module) is not None


def register(variant: Variant) -> Variant:
    """Add a variant; a second registration of the same name is a bug and says so at import."""
    if variant.device not in DEVICES:
        raise RooflabError(
            f"variant {variant.name!r}: unknown device {variant.device!r}", f"use one of {', '.join(DEVICES)}"
        )
    if not variant.name.startswith(f"{variant.device}."):
        raise RooflabError(f"variant {variant.name!r} must be named {variant.device}.<family>.<rung>")
    if variant.name in _REGISTRY:
        raise RooflabError(
            f"variant {variant.name!r} is registered twice", "give each variant one registration in its family module"
        )
    _REGISTRY[variant.name] = variant
    return variant


def _load() -> None:
    """Import every module of rooflab.families once (each registers its variants)."""
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    pkg = importlib.import_module(__package__ + ".families")  # the package, not the function below

    for mod in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
        importlib.import_module(mod.name)


def list_variants(family: str | None = None, device: str | None = None, op: str | None = None) -> list[Variant]:
    """Variants in registration order, optionally filtered by family, device and model op."""
    _load()
    return [
        v
        for v in _REGISTRY.values()
        if (family is None or v.family == family)
        and (device is None or v.device == device)
        and (op is None or v.op == op)
    ]


def _load_family_of(name: str) -> None:
    """Import only the family module a variant's name points to ("cpu.latency.empty" -> families/
    latency): a measuring process (rooflab.processes) asks for one variant, and importing every
    family (numba's decorators, the AMX and BF16 kernels) doubled its start-up (1.5 s -> 0.8 s). A
    name whose module this does not find falls back to importing them all."""
    parts = name.split(".")
    if len(parts) < 3 or not parts[1].isidentifier():
        return
    module = f"{__package__}.families.{parts[1]}"
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name != module:  # a dependency the family lacks: said as loading them all would say it
            raise


def get_variant(name: str) -> Variant:
    if name not in _REGISTRY and not _LOADED:
        _load_family_of(name)
    if name not in _REGISTRY:
        _load()
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY))
        raise RooflabError(f"unknown kernel variant {name!r}", f"use one of: {known}") from None


def best_of(variants) -> Variant | None:
    """The best own variant among ``variants`` (one ladder): the one with the "best" role, else its
    highest non-library rung (None when it has none)."""
    own = [v for v in variants if not v.library]
    return next((v for v in own if "best" in v.roles), max(own, key=lambda v: v.number or 0, default=None))


def best_variant(family: str, device: str) -> Variant | None:
    """A family's best own variant on a device (best_of its variants)."""
    return best_of(list_variants(family, device))


def list_families(device: str | None = None) -> list[str]:
    return sorted({v.family for v in list_variants(device=device)})


def check_cases(cases: list[Case]) -> list[Case]:
    """Refuse a suite that names an unknown variant, before anything is measured."""
    _load()
    unknown = sorted({c.variant for c in cases if c.variant not in _REGISTRY})
    if unknown:
        raise RooflabError(
            f"suite names unknown variant(s): {', '.join(unknown)}",
            "register them in their family module or fix the suite",
        )
    return cases


def _suite_modules(family: str, device: str | None = None) -> list:
    """Modules of a family that declare ``cases(quick, threads)``: the package, and its per-device
    module (``families/<family>/cuda.py``) where the device's suite differs."""
    out = []
    for suffix in ("", *((f".{device}",) if device else (".cpu", ".cuda"))):
        try:
            mod = importlib.import_module(f"{__package__}.families.{family}{suffix}")
        except ImportError:
            continue
        if callable(getattr(mod, "cases", None)) and mod not in out:
            out.append(mod)
    return out


def family_suites() -> list[str]:
    """Families that declare a suite: `rooflab run --suite NAME`."""
    _load()
    return [name for name in sorted({v.family for v in _REGISTRY.values()}) if _suite_modules(name)]


def family_cases(family: str, device: str, quick: bool, threads: list[int]) -> list[Case]:
    """The cases of a family's suite that run on ``device``, checked against the registry."""
    cases = []
    for mod in _suite_modules(family, device):
        cases += [c for c in mod.cases(quick=quick, threads=threads) if get_variant(c.variant).device == device]
    return check_cases(cases)


def family_ceilings(family: str, device: str, data: dict) -> list[dict]:
    """Ceilings a family's suite derives from its records (modules that declare ``ceilings(data)``:
    the `latency` and `chase` suites give `latency` ceilings), or none."""
    out = []
    for mod in _suite_modules(family, device):
        fn = getattr(mod, "ceilings", None)
        if callable(fn):
            out += fn(data)
    return out
