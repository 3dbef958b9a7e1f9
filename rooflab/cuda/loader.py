"""Load compiled kernels onto the current GPU and launch them.

``module(name, defines, name_expressions)`` compiles kernels/cuda/<name> for the current device's
architecture (rooflab.cuda.compiler: NVRTC -> cubin, cached on disk), loads the cubin once per
process with ``cupy.RawModule(path=...)`` and caches it; nothing is ever compiled or loaded inside a
timed region. ``kernel(...)`` returns a launchable function (a template is asked for by its name
expression, e.g. ``"fma_peak<float>"``). ``launch(...)`` turns a CUDA error into a RooflabError
that names it, so a suite records the failure and goes on.

Launch-configuration helpers: ``sm_count()``, ``one_wave(block, per_sm_threads)`` (a grid that fills
every SM once), ``device_arch()``.
"""

from __future__ import annotations

import functools

from ..errors import RooflabError, first_line
from . import compiler

_MODULES: dict = {}


class Module:
    """A loaded cubin plus its build report (registers, spills, lowered template names)."""

    def __init__(self, raw, build: compiler.Build):
        self.raw, self.build = raw, build
        self._functions: dict = {}

    def function(self, name: str):
        fn = self._functions.get(name)
        if fn is None:
            mangled = self.build.lowered.get(name, name)
            try:
                fn = self.raw.get_function(mangled)
            except Exception as e:
                known = ", ".join(sorted(self.build.resources)) or "none"
                raise RooflabError(
                    f"{self.build.source} has no kernel {name!r} ({first_line(e)}); its kernels: {known}"
                ) from None
            self._functions[name] = fn
        return fn


def device_arch() -> str:
    import cupy

    return f"sm_{cupy.cuda.Device().compute_capability}"


def module(name: str, defines: dict | None = None, name_expressions=()) -> Module:
    """kernels/cuda/<name> compiled for this GPU and loaded (once per process and device)."""
    import cupy

    key = (name, tuple(sorted((defines or {}).items())), tuple(name_expressions), cupy.cuda.Device().id)
    mod = _MODULES.get(key)  # looked up on every launch: no file or device query before this hit
    if mod is None:
        arch = compiler.arch_for(name, device_arch())
        b = compiler.build(name, arch, defines, name_expressions)
        try:
            raw = cupy.RawModule(path=b.cubin_path)
        except Exception as e:
            if not b.cached:
                raise RooflabError(f"{name}: the {arch} cubin did not load: {first_line(e)}") from None
            # a cached cubin from another NVRTC (scripts/build_cubins.sh) this driver refuses: rebuild
            b = compiler.build(name, arch, defines, name_expressions, fresh=True)
            try:
                raw = cupy.RawModule(path=b.cubin_path)
            except Exception as e2:
                raise RooflabError(f"{name}: the {arch} cubin did not load: {first_line(e2)}") from None
        mod = _MODULES[key] = Module(raw, b)
    return mod


def kernel(name: str, function: str, defines: dict | None = None, name_expressions=()):
    """A launchable kernel: ``kernel(...)((grid,), (block,), args)``."""
    return module(name, defines, name_expressions).function(function)


def builds() -> list[dict]:
    """Build reports of every module loaded in this process (for the result file)."""
    return [m.build.summary() for m in _MODULES.values()]


def launch(fn, grid, block, args, what: str, sync: bool = False, shared_mem: int = 0):
    """Launch (asynchronously unless ``sync``); a CUDA error becomes a RooflabError naming it, so
    the suite records it and goes on. Errors of an asynchronous launch surface at the next
    synchronisation (the verification that follows every first launch, or the timer's event).
    ``grid`` and ``block`` are an int or a tuple of up to 3 ints (x, y, z)."""
    try:
        fn(_dims(grid), _dims(block), args, shared_mem=int(shared_mem))
        if sync:
            import cupy

            cupy.cuda.get_current_stream().synchronize()
    except Exception as e:
        raise RooflabError(f"{what}: launch failed: {cuda_error(e)}") from None


def _dims(d) -> tuple:
    return tuple(int(x) for x in d) if isinstance(d, (tuple, list)) else (int(d),)


def cuda_error(e: BaseException) -> str:
    """'cudaErrorIllegalAddress: an illegal memory access...' for CUDA errors, the type and first
    line for anything else."""
    text = first_line(e)
    return text if text.startswith(("cuda", "CUDA", "nvrtc", "NVRTC")) else f"{type(e).__name__}: {text}"


def sm_count() -> int:
    import cupy

    return _sm_count(cupy.cuda.Device().id)


@functools.cache
def _sm_count(device: int) -> int:  # launchers size their grids on every call: ask the device once
    import cupy

    rt = cupy.cuda.runtime
    return int(rt.deviceGetAttribute(rt.cudaDevAttrMultiProcessorCount, device))


def one_wave(block: int, per_sm_threads: int = 2048) -> int:
    """Blocks that fill every SM exactly once at ``per_sm_threads`` resident threads per SM."""
    return sm_count() * max(1, per_sm_threads // block)
