"""Load the project's .cu files from the installed package, compile once, launch.

Sources are read with importlib.resources (so they come from the wheel asv installs), the local
``#include "common.cuh"`` is resolved here (NVRTC has no include path to the package), knobs are
passed as -D options, and each (file, options) pair is compiled once per process and cached:
nothing is ever compiled inside a timed region. A compile failure raises with NVRTC's log; a
launch failure names the CUDA error.
"""
from __future__ import annotations

import importlib.resources
import re

from ..errors import RooflabError

_MODULES: dict = {}
_INCLUDE = re.compile(r'^\s*#include\s+"([^"]+)"\s*$', re.M)


def source(name: str) -> str:
    """Text of kernels/cuda/<name> with local includes inlined."""
    pkg = importlib.resources.files("rooflab.kernels.cuda")
    try:
        text = pkg.joinpath(name).read_text()
    except FileNotFoundError:
        raise RooflabError(f"CUDA source {name!r} is not in the installed package") from None

    def inline(m):
        return pkg.joinpath(m.group(1)).read_text()

    return _INCLUDE.sub(inline, text)


def sources() -> list[str]:
    pkg = importlib.resources.files("rooflab.kernels.cuda")
    return sorted(p.name for p in pkg.iterdir() if p.name.endswith(".cu"))


def options(defines: dict | None = None) -> tuple:
    return ("-std=c++17",) + tuple(f"-D{k}={v}" for k, v in sorted((defines or {}).items()))


def module(name: str, defines: dict | None = None):
    """cupy.RawModule for kernels/cuda/<name>, compiled (NVRTC, cubin for this GPU) and cached."""
    key = (name, tuple(sorted((defines or {}).items())))
    if key in _MODULES:
        return _MODULES[key]
    import cupy

    mod = cupy.RawModule(code=source(name), options=options(defines))
    try:
        mod.compile()
    except Exception as e:  # cupy.cuda.compiler.CompileException carries the NVRTC log
        log = getattr(e, "get_message", lambda: str(e))()
        raise RooflabError(f"{name} failed to compile with NVRTC {options(defines)}:\n{log}") from None
    _MODULES[key] = mod
    return mod


def kernel(name: str, function: str, defines: dict | None = None):
    return module(name, defines).get_function(function)


def launch(fn, grid, block, args, what: str, sync: bool = False):
    """Launch (asynchronously unless ``sync``); a CUDA error becomes a RooflabError naming it, so
    the suite records it and goes on. Errors of an asynchronous launch surface at the next
    synchronisation (the verification that follows every first launch, or the timer's event)."""
    import cupy

    try:
        fn((int(grid),), (int(block),), args)
        if sync:
            cupy.cuda.get_current_stream().synchronize()
    except Exception as e:
        raise RooflabError(f"{what}: launch failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from None
