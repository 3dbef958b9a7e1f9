"""rooflab.kernels: WHAT is measured. Hand-written kernels, one module per family.

``cpu/`` holds numba kernels; ``cuda/`` holds CUDA C sources (*.cu) and their thin cupy launchers.
The harness (rooflab/) decides how they are verified and timed; nothing here times itself.
"""
