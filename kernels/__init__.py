"""rooflab.kernels: WHAT is measured. Hand-written kernels, one module per family.

``cpu/`` holds numba kernels; ``cuda/`` holds CUDA C sources (*.cu) and their thin cupy launchers.
The harness (rooflab/) decides how they are verified and timed; nothing here times itself.
"""

if __name__ != "rooflab.kernels":  # a checkout's root on sys.path makes this folder importable as `kernels`
    raise ImportError(
        f"import rooflab's kernels as rooflab.kernels, not as {__name__!r}: numba's on-disk cache keys a "
        "kernel by its file, and an entry written under a second module name names a module rooflab "
        "cannot import (`rooflab run` then dies loading it)"
    )
