"""Process settings that must be in place before numba (and OpenBLAS) are first used.

Why each one:
- AVX-512 hosts: LLVM's tuning for Intel server cores sets ``prefer-256-bit``, so numba's loop
  vectorizer emits ymm (256-bit) code and every kernel tops out at half of the machine's FMA and L1
  load throughput. We drop that tuning flag so vector code uses zmm where the CPU has it
  (set ROOFLAB_PREFER_256=1 to keep LLVM's choice and measure the 256-bit path instead).
Thread-pool wait policies (OMP_WAIT_POLICY, OPENBLAS_THREAD_TIMEOUT) are left as the user set
them and recorded in every result: passive waiting would make each parallel region cost ~75 us
here instead of a few, and that is a property of the user's configuration to be measured, not
hidden. Suites that alternate numba-parallel and BLAS calls pause between the two instead.
- numba's on-disk cache goes to a folder keyed on every kernel source (rooflab/jitcache.py), so a
  changed callee in another file never leaves a stale compiled caller behind.
"""

from __future__ import annotations

import os
import sys

VECTOR_NOTE = "LLVM default"


def _host_features_without_prefer256() -> str | None:
    try:
        import llvmlite.binding as llb
    except Exception:  # pragma: no cover - llvmlite ships with numba
        return None
    try:
        feats = llb.get_host_cpu_features()
    except Exception:
        return None
    if not feats.get("avx512f", False):
        return None
    flat = feats.flatten()
    return flat + ",-prefer-256-bit"


def configure() -> str:
    """Apply the settings; returns a short note describing the vector width policy."""
    global VECTOR_NOTE
    if os.environ.get("ROOFLAB_PREFER_256") == "1" or os.environ.get("NUMBA_CPU_FEATURES"):
        VECTOR_NOTE = "as configured by the environment"
        return VECTOR_NOTE
    feats = _host_features_without_prefer256()
    if feats is None:
        VECTOR_NOTE = "LLVM default (no AVX-512)"
        return VECTOR_NOTE
    if "numba" in sys.modules:
        # numba already imported: its config is read again when the CPU target is first built.
        import numba.core.config as cfg

        cfg.CPU_FEATURES = feats
    else:
        os.environ["NUMBA_CPU_FEATURES"] = feats
    VECTOR_NOTE = "AVX-512 enabled (LLVM prefer-256-bit tuning removed)"
    return VECTOR_NOTE


configure()

from . import jitcache  # noqa: E402

jitcache.configure()
