"""Compile kernels/cuda/*.cu to cubin with NVRTC, without needing a GPU.

One function does it, ``build(name, arch, defines, name_expressions)``, and both the runtime loader
(rooflab.cuda.loader, which then loads the cubin through cupy.RawModule) and the CI tests call it, so
the code that compiles on the GPU machine is the code CI compiles on every commit.

- The source comes from the installed package (importlib.resources: asv's wheel holds it too) with
  local ``#include "x.cuh"`` inlined, since NVRTC has no include path into the package.
- Knobs are ``-DNAME=value`` options; C++ templates are instantiated through NVRTC name
  expressions, and the lowered (mangled) names come back with the cubin.
- ``-Xptxas=-v`` is always on: the ptxas report (registers, stack, spill bytes, shared memory per
  kernel) is parsed into ``Build.resources`` and kept in every GPU result file.
- Builds are cached on disk (``$ROOFLAB_CACHE_DIR``, default ~/.cache/rooflab/cuda), keyed by the
  source text, options, arch and NVRTC major version: asv's spawned benchmark processes compile
  once, and cubins prebuilt elsewhere (scripts/build_cubins.sh) are used by any NVRTC 13.x (CUDA's
  minor-version compatibility: a 13.y cubin loads on any 13.x driver; the loader rebuilds one that
  does not load). The result file names the NVRTC that built each cubin.

A compile error raises RooflabError carrying NVRTC's whole log; a missing NVRTC or cupy raises
DeviceUnavailable with the package that provides it.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import json
import os
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..errors import DeviceUnavailable, RooflabError, first_line

STD = "-std=c++17"
_INCLUDE = re.compile(r'^[ \t]*#include[ \t]+"([^"]+)"[ \t]*$', re.M)
_ONCE = re.compile(r"^\s*#pragma\s+once\s*$", re.M)


@dataclass
class Build:
    """One compiled source: the cubin and everything known about it without a device."""

    source: str  # file name under kernels/cuda
    arch: str  # e.g. "sm_90"
    options: tuple
    nvrtc_version: str
    cubin_path: str
    log: str
    lowered: dict = field(default_factory=dict)  # name expression -> mangled name
    resources: dict = field(default_factory=dict)  # kernel (mangled) -> ptxas figures
    compile_seconds: float = 0.0
    cached: bool = False

    def summary(self) -> dict:
        d = asdict(self)
        d.pop("log")
        d["options"] = list(self.options)
        return d


# ---- sources -------------------------------------------------------------------------------------


def _package():
    return importlib.resources.files("rooflab.kernels.cuda")


def source(name: str) -> str:
    """Text of kernels/cuda/<name> with its local includes inlined (each once), with #line marks so
    that compiler messages name the right file and line."""
    pkg = _package()
    try:
        text = pkg.joinpath(name).read_text()
    except (FileNotFoundError, IsADirectoryError):
        raise RooflabError(
            f"CUDA source {name!r} is not in the installed package", f"use one of: {', '.join(sources())}"
        ) from None
    return _inline(text, name, pkg, set())


def _inline(text: str, fname: str, pkg, seen: set) -> str:
    def one(m):
        inc = m.group(1)
        if inc in seen:
            return "\n"
        seen.add(inc)
        body = _ONCE.sub("", pkg.joinpath(inc).read_text())  # inlined once here: no #pragma once
        resume = text.count("\n", 0, m.start(1)) + 2  # the line after the #include
        return f'\n#line 1 "{inc}"\n{_inline(body, inc, pkg, seen)}\n#line {resume} "{fname}"'

    return _INCLUDE.sub(one, text)


def sources() -> list[str]:
    return sorted(p.name for p in _package().iterdir() if p.name.endswith(".cu"))


_TARGETS = re.compile(r"^//\s*targets:\s*(.+)$", re.M)


def targets(name: str) -> list[str] | None:
    """The only architectures a source builds for, from its ``// targets: sm_90a`` line (sources
    using arch-specific instructions such as wgmma); None for a source that builds for any."""
    m = _TARGETS.search(source(name))
    return m.group(1).split() if m else None


def arch_for(name: str, device_arch: str) -> str:
    """The architecture to build ``name`` for on a device of ``device_arch`` (e.g. sm_90 -> sm_90a
    for wgmma.cu); RooflabError when the source cannot run on that device."""
    wanted = targets(name)
    if not wanted:
        return device_arch
    for t in wanted:
        if re.sub(r"[af]$", "", t) == device_arch:
            return t
    raise RooflabError(f"{name} runs only on {', '.join(wanted)}; this GPU is {device_arch}")


def runs_on(name: str, device_arch: str) -> bool:
    """Whether kernels/cuda/<name> has a build for a device of ``device_arch`` (wgmma.cu: sm_90 only)."""
    try:
        arch_for(name, device_arch)
        return True
    except RooflabError:
        return False


def options(defines: dict | None = None) -> tuple:
    return (STD,) + tuple(f"-D{k}={v}" for k, v in sorted((defines or {}).items()))


# ---- ptxas report --------------------------------------------------------------------------------

_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '(\w+)'")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers(?:.*?(\d+) bytes smem)?")


def parse_ptxas(log: str) -> dict:
    """Per-kernel registers, stack frame, spill stores/loads and static shared memory, from the
    ``ptxas -v`` report that nvcc (stderr) and NVRTC (program log) print in the same format."""
    out: dict[str, dict] = {}
    current = None
    for line in log.splitlines():
        m = _ENTRY.search(line)
        if m:
            current = out.setdefault(m.group(1), {"arch": m.group(2)})
            continue
        if current is None:
            continue
        m = _FRAME.search(line)
        if m:
            current.update(
                stack_bytes=int(m.group(1)), spill_store_bytes=int(m.group(2)), spill_load_bytes=int(m.group(3))
            )
            continue
        m = _USED.search(line)
        if m:
            current.update(registers=int(m.group(1)), smem_bytes=int(m.group(2) or 0))
    return out


def spills(resources: dict) -> dict:
    """{kernel: (spill stores, spill loads)} for the kernels that spill."""
    return {
        k: (r.get("spill_store_bytes", 0), r.get("spill_load_bytes", 0))
        for k, r in resources.items()
        if r.get("spill_store_bytes", 0) or r.get("spill_load_bytes", 0)
    }


# ---- NVRTC ---------------------------------------------------------------------------------------


def _nvrtc():
    try:
        from cupy.cuda import nvrtc  # `import cupy.cuda.nvrtc` fails: it is an attribute alias
    except Exception as e:
        raise DeviceUnavailable(
            f"cupy is not installed ({type(e).__name__}), so NVRTC cannot be reached", "pip install 'rooflab[cuda]'"
        ) from None
    try:
        version = nvrtc.getVersion()
    except Exception as e:
        raise DeviceUnavailable(
            f"NVRTC (libnvrtc) was not found: {first_line(e)}",
            "pip install 'nvidia-cuda-nvrtc>=13,<14' (part of rooflab[cuda])",
        ) from None
    return nvrtc, f"{version[0]}.{version[1]}"


def cache_dir() -> Path:
    base = os.environ.get("ROOFLAB_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "rooflab"
    )
    return Path(base) / "cuda"


def build(
    name: str, arch: str, defines: dict | None = None, name_expressions=(), *, text: str | None = None, fresh=False
) -> Build:
    """Compile kernels/cuda/<name> (or ``text``, named ``name``) to a cubin for ``arch``
    (``fresh``: ignore a cached build)."""
    nvrtc, version = _nvrtc()
    arch = arch if arch.startswith("sm_") else f"sm_{arch}"
    src = source(name) if text is None else text
    opts = options(defines)
    exprs = tuple(name_expressions)
    major = version.split(".")[0]
    key = hashlib.sha256(json.dumps([src, opts, arch, major, exprs]).encode()).hexdigest()[:20]
    folder = cache_dir()
    stem = folder / f"{Path(name).stem}-{arch}-{key}"
    cubin_path, meta_path = stem.with_suffix(".cubin"), stem.with_suffix(".json")
    if cubin_path.exists() and meta_path.exists() and not fresh:
        try:
            meta = json.loads(meta_path.read_text())
            return Build(
                source=name,
                arch=arch,
                options=opts,
                nvrtc_version=meta.get("nvrtc_version", version),
                cubin_path=str(cubin_path),
                log=meta["log"],
                lowered=meta["lowered"],
                resources=parse_ptxas(meta["log"]),
                compile_seconds=0.0,
                cached=True,
            )
        except (OSError, ValueError, KeyError):
            pass  # a damaged cache entry is rebuilt below
    supported = [f"sm_{a}" for a in nvrtc.getSupportedArchs()]
    if re.sub(r"[af]$", "", arch) not in supported:  # sm_90a: the arch-specific (wgmma) flavour of sm_90
        raise RooflabError(
            f"NVRTC {version} cannot compile for {arch} (it supports {', '.join(supported)})",
            "install an NVRTC that knows this GPU: pip install -U 'nvidia-cuda-nvrtc>=13,<14'",
        )
    t0 = time.perf_counter()
    prog = nvrtc.createProgram(src, name, (), ())
    try:
        for e in exprs:
            nvrtc.addNameExpression(prog, e)
        try:
            nvrtc.compileProgram(prog, opts + (f"-arch={arch}", "-Xptxas=-v"))
        except Exception as e:
            log = _log(nvrtc, prog)
            raise RooflabError(
                f"{name} failed to compile with NVRTC {version} for {arch} {' '.join(opts)} "
                f"({first_line(e)}):\n{log.strip()}"
            ) from None
        log = _log(nvrtc, prog)
        cubin = whole_elf(nvrtc.getCUBIN(prog))
        lowered = {e: nvrtc.getLoweredName(prog, e) for e in exprs}
    finally:
        nvrtc.destroyProgram(prog)
    seconds = time.perf_counter() - t0
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmp = cubin_path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(cubin)
        os.replace(tmp, cubin_path)  # atomic: concurrent asv processes never read half a file
        tmp = meta_path.with_suffix(f".{os.getpid()}.tmp")
        meta = {"log": log, "lowered": lowered, "options": list(opts), "arch": arch, "nvrtc_version": version}
        tmp.write_text(json.dumps(meta))
        os.replace(tmp, meta_path)
    except OSError as e:
        raise RooflabError(
            f"cannot write the compiled kernel to {folder}: {e}", "set ROOFLAB_CACHE_DIR to a writable folder"
        ) from None
    return Build(
        source=name,
        arch=arch,
        options=opts,
        nvrtc_version=version,
        cubin_path=str(cubin_path),
        log=log,
        lowered=lowered,
        resources=parse_ptxas(log),
        compile_seconds=seconds,
    )


def whole_elf(cubin: bytes) -> bytes:
    """The cubin as NVRTC made it. cupy's ``nvrtc.getCUBIN`` (cupy 13-14) returns it one byte
    short, as if it were a NUL-terminated string: the ELF's last table (the program headers) then
    ends one byte past the file, and cuobjdump / nvdisasm refuse the file. The lost byte is the top
    byte of the last header's alignment, always 0: put it back when exactly one byte is missing."""
    if len(cubin) < 64 or cubin[:5] != b"\x7fELF\x02":  # not a 64-bit ELF: leave it alone
        return cubin
    le = lambda off, n: int.from_bytes(cubin[off : off + n], "little")  # noqa: E731
    end = max(le(0x20, 8) + le(0x36, 2) * le(0x38, 2), le(0x28, 8) + le(0x3A, 2) * le(0x3C, 2))
    return cubin + b"\x00" if end == len(cubin) + 1 else cubin


def _log(nvrtc, prog) -> str:
    try:
        return nvrtc.getProgramLog(prog) or ""
    except Exception:
        return ""
