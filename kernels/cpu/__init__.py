"""numba kernels for the CPU: stream (bandwidth), ert (FMA peak and intensity sweep),
latency (dispatch and fork/join), clock (running-clock probe)."""

import rooflab._numba_env  # noqa: F401  (vector-width and thread-pool settings before numba)
