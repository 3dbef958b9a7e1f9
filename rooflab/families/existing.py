"""Transitional: the CPU and CUDA variants of the ceilings families, until they move here."""

from .. import cpu_variants  # noqa: F401
from ..cuda import variants  # noqa: F401
