"""rooflab's kernels answer to one module name: imported as top-level `kernels` (a checkout's root on
sys.path), a numba cache entry would name a module that rooflab cannot import, and the next
`rooflab run --suite bgemm` died loading it (seen on the Emerald Rapids VM)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_kernels_folder_refuses_a_second_module_name_in_one_line():
    code = "import sys; sys.path.insert(0, sys.argv[1]); import kernels.cpu.amx_gemm"
    p = subprocess.run([sys.executable, "-c", code, str(ROOT)], capture_output=True, text=True, timeout=60)
    assert p.returncode != 0
    assert "ImportError: import rooflab's kernels as rooflab.kernels, not as 'kernels'" in p.stderr


def test_rooflab_kernels_still_import():
    from rooflab.kernels.cpu import amx_gemm

    assert amx_gemm.__name__ == "rooflab.kernels.cpu.amx_gemm"
