"""Elementwise, normalisation and fused-chain family (issue 14). The CUDA variants live in
``cuda.py`` (self-contained for now; ``cuda.cases`` is the GPU suite)."""
