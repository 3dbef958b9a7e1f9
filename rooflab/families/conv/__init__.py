"""Convolution family (issue 13). The CUDA variants live in ``cuda.py`` (self-contained for now:
its shape validation, float64 reference, tolerances and suite cases will move here once the CPU
half lands; ``cuda.cases`` is the GPU suite)."""
