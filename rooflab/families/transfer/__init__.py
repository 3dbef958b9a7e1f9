"""Host <-> device transfers (issue 14): CUDA only, in ``cuda.py`` (``cuda.cases`` is the suite)."""
