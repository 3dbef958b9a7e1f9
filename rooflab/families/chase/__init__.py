"""Memory latency by dependent pointer chase (issue 14). The CUDA variants live in ``cuda.py``
(self-contained for now; the CPU chase is written separately; ``cuda.cases`` is the GPU suite)."""
