"""A measuring process for tests/test_latency_suite.py: the CPU backend's child that first writes
256 KiB of warnings to stderr, more than a pipe holds, before it is ready."""

import sys

from rooflab.cpu.backend import cpu_backend
from rooflab.processes import serve

if __name__ == "__main__":
    sys.stderr.write(("warning: " + "x" * 1014 + "\n") * 256)
    sys.stderr.flush()
    raise SystemExit(serve(cpu_backend))
