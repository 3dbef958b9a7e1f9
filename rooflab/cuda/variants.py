"""CUDA kernel variants (registered by rooflab.cuda.suite when a GPU is present)."""
