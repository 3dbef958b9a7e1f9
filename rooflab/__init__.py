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
__all__ = [
    "list_variants",
    "get_variant",
    "list_families",
    "Variant",
    "Work",
    "RooflabError",
    "VerificationError",
    "DeviceUnavailable",
    "__version__",
]
