"""rooflab: the empirical roofline of a machine, measured, with real model operations placed on it.

    >>> import rooflab
    >>> rooflab.list_variants(family="stream", device="cpu")   # what can be measured
    >>> v = rooflab.get_variant("cpu.stream.triad"); v(*v.inputs(1 << 20))  # run one on numpy arrays

See README.md for the CLI (`rooflab info | run | plot | place | compare | report`).
"""

from . import _numba_env  # noqa: F401  (must run before numba is imported)
from .errors import DeviceUnavailable, RooflabError, VerificationError
from .registry import Variant, get_variant, list_families, list_variants
from .work import Work

__version__ = "0.2.0"


def place_torch(model, example_inputs, **kwargs) -> dict:
    """A PyTorch module's per-operator times (torch.profiler) placed on this machine's measured
    roofline beside rooflab's own re-execution (needs `pip install 'rooflab[torch]'`); keyword
    arguments: out, ceilings, threads, quick, own, runs. See rooflab/models/runtimes/pytorch.py."""
    from .models.runtimes.pytorch import place_torch as _place_torch

    return _place_torch(model, example_inputs, **kwargs)


__all__ = [
    "list_variants",
    "get_variant",
    "list_families",
    "Variant",
    "Work",
    "RooflabError",
    "VerificationError",
    "DeviceUnavailable",
    "place_torch",
    "__version__",
]
