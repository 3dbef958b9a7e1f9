"""Launch and dispatch latency, the floor of the roofline (issue 14). The CUDA variants live in
``cuda.py`` (``cuda.cases`` is the GPU suite); the ceilings suite's ``cuda.launch.empty`` stays in
rooflab/cuda/variants.py for now."""
