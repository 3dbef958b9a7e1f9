"""Family ``gemm``: C = A x B, a ladder of hand-written kernels from naive to library-class.

Placeholder on the gemm-cuda branch: the shared part of the family (shapes, float64 reference,
validation, the suite's cases) is written on another branch; ``cuda.py`` here is self-contained
until the two are merged.
"""
