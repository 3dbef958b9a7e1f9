"""Kernel families: one module (or package) per family, each registering its variants.

Every module below this package is imported by the registry on first use, so a new family is a
new module here and nothing else. A family declares, next to its kernels: its variants (variant 0 =
the library), their references, declared work and inputs, and the suite of cases it is measured at.
"""
