"""Run rooflab's real CUDA kernels (kernels/cuda/*.cu) on the CPU, through the real Python launch
path, so their index math, shared-memory sizes, barriers and warp reductions are tested where there
is no GPU.

``EmuGPU(monkeypatch).install()`` is tests/fake_gpu.py's numpy stand-in for cupy with one change:
``RawModule(path=cubin)`` compiles the cubin's source (with the same -D knobs NVRTC used) with g++
against tests/cuda_emu.h, and its kernels run there: one OS thread per CUDA thread, real barriers,
real 32-lane shuffles. On top of the emulation:

- a call whose argument types differ from the kernel's parameters is refused (cupy would pass the
  bytes on and the kernel would read garbage);
- every array made by ``cupy.empty/zeros/full`` or the random generator sits between two 4 KiB
  guard zones of 0xFF bytes, checked after every launch: a write out of bounds is reported with the
  kernel's name; reads out of bounds read NaN, which verification rejects; ``empty`` is NaN-filled,
  so an output element a kernel forgets to write fails too;
- launch limits are checked (1024 threads per block, 65535 blocks in y and z, 48 KiB of dynamic
  shared memory), and a full-mask shuffle with lanes missing is reported.

Slow (a thread per CUDA thread): keep shapes tiny. Needs g++ with C++20 (std::barrier); tests skip
without it.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import re
import shutil
import subprocess
import tempfile
import types
from pathlib import Path

import numpy as np

from rooflab.cuda import compiler
from tests import fake_gpu

GXX = shutil.which("g++")
HEADER = Path(__file__).with_name("cuda_emu.h")
TYPES = Path(__file__).with_name("cuda_emu") / "cuda_types.h"  # included by HEADER
GUARD = 4096
_KERNEL = re.compile(
    r'extern\s+"C"\s+__global__\s+void\s+(?:(?:__launch_bounds__\s*\((?:[^()]|\([^()]*\))*\)|[A-Z_]+)\s+)*(\w+)\s*\('
)
_DYNAMIC = re.compile(r"extern\s+__shared__\s+(\w+)\s+(\w+)\s*\[\s*\]\s*;")
_TIMER = 'asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)::"memory");'
_CTYPES = {
    np.dtype(np.int32): ctypes.c_int32,
    np.dtype(np.uint32): ctypes.c_uint32,
    np.dtype(np.int64): ctypes.c_int64,
    np.dtype(np.uint64): ctypes.c_uint64,
    np.dtype(np.float32): ctypes.c_float,
    np.dtype(np.float64): ctypes.c_double,
}
_LIBS: dict = {}
_GUARDED: dict = {}  # id(raw buffer) -> (raw, offset, nbytes)
_BUILD_DIR = Path(tempfile.gettempdir()) / "rooflab-cuda-emu"


def available() -> tuple[bool, str]:
    if GXX is None:
        return False, "g++ is not installed (the CUDA emulation compiles kernels with it)"
    return True, ""


def emulated_source(name: str, defines: dict) -> tuple[str, list[str]]:
    """The source as g++ sees it, and its kernel names."""
    text = compiler.source(name).replace(_TIMER, "t = emu_globaltimer();")
    if re.search(r"\basm\b", re.sub(r"//[^\n]*", "", text)):
        raise NotImplementedError(f"{name}: inline PTX cannot be emulated on the CPU")
    text = _DYNAMIC.sub(r"\1* \2 = reinterpret_cast<\1*>(emu_dynamic_smem());", text)
    names = _KERNEL.findall(text)
    defs = "".join(f"#define {k} {v}\n" for k, v in sorted(defines.items()))
    wrappers = "".join(
        f'extern "C" int emu_launch_{k}(const unsigned* d, unsigned long long s, void** a) '
        f"{{ return emu::launch({k}, d, s, a); }}\n"
        f'extern "C" int emu_sig_{k}(long long* z) {{ return emu::sig({k}, z); }}\n'
        for k in names
    )
    return f'{defs}#include "{HEADER}"\n{text}\n{wrappers}', names


def library(name: str, defines: dict):
    """The emulated source compiled to a shared library (cached by its text)."""
    text, names = emulated_source(name, defines)
    key = hashlib.sha256((text + HEADER.read_text() + TYPES.read_text()).encode()).hexdigest()[:16]
    lib = _LIBS.get(key)
    if lib is None:
        _BUILD_DIR.mkdir(parents=True, exist_ok=True)
        so = _BUILD_DIR / f"{Path(name).stem}-{key}.so"
        if not so.exists():
            src = _BUILD_DIR / f"{Path(name).stem}-{key}.cpp"
            src.write_text(text)
            tmp = so.with_suffix(f".{id(text)}.tmp")
            p = subprocess.run(
                [GXX, "-std=c++20", "-O1", "-fPIC", "-shared", "-pthread", "-w", "-o", str(tmp), str(src)],
                capture_output=True,
                text=True,
                timeout=600,
            )
            if p.returncode:
                raise RuntimeError(f"emulated build of {name} failed:\n{p.stderr[-4000:]}")
            tmp.replace(so)
        lib = ctypes.CDLL(str(so))
        lib.emu_first_error.restype = ctypes.c_char_p
        lib.kernel_names = names
        _LIBS[key] = lib
    return lib


# ---- guarded arrays ----------------------------------------------------------------------------------


def guarded(shape, dtype=np.float64, fill=None):
    """A cupy-like array between two guard zones (256-B aligned, like cudaMalloc); NaN-filled bytes
    unless ``fill`` is given."""
    dtype = np.dtype(dtype)
    shape = (shape,) if np.isscalar(shape) else tuple(int(s) for s in shape)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.full(nbytes + 2 * GUARD + 256, 0xFF, dtype=np.uint8)
    off = GUARD + (-(raw.ctypes.data + GUARD)) % 256
    a = fake_gpu.Array(raw[off : off + nbytes].view(dtype).reshape(shape))
    _GUARDED[id(raw)] = (raw, off, nbytes)
    if fill is not None:
        a[...] = fill
    return a


def _check_guards(kernel: str, arrays) -> None:
    for a in arrays:
        root = a
        while isinstance(root.base, np.ndarray):  # the allocation this array is a view of
            root = root.base
        info = _GUARDED.get(id(root))
        if info is None or info[0] is not root:
            continue
        raw, off, nbytes = info
        if (raw[:off] != 0xFF).any() or (raw[off + nbytes :] != 0xFF).any():
            before = int(np.count_nonzero(raw[:off] != 0xFF))
            after = int(np.count_nonzero(raw[off + nbytes :] != 0xFF))
            raise RuntimeError(
                f"cudaErrorIllegalAddress (emulated): {kernel} wrote outside an array of {nbytes} B "
                f"({before} B changed before it, {after} B after it)"
            )


class EmuKernel:
    def __init__(self, lib, name):
        if name not in lib.kernel_names:
            raise RuntimeError(f"CUDA_ERROR_NOT_FOUND: named symbol not found ({name})")
        self.lib, self.name = lib, name
        self.sizes = (ctypes.c_longlong * 64)()
        self.nargs = getattr(lib, f"emu_sig_{name}")(self.sizes)

    def __call__(self, grid, block, args, shared_mem=0):
        if fake_gpu._Stream.capturing is not None:
            fake_gpu._Stream.capturing.append(lambda: self._run(grid, block, args, shared_mem))
            return
        self._run(grid, block, args, shared_mem)

    def _run(self, grid, block, args, shared_mem):
        args = fake_gpu.kernel_args(self.name, args)
        if len(args) != self.nargs:
            raise TypeError(f"{self.name} takes {self.nargs} arguments, got {len(args)}")
        holders, arrays = [], []
        for i, a in enumerate(args):
            size = self.sizes[i]
            if isinstance(a, np.ndarray):
                if size >= 0:
                    raise TypeError(f"{self.name}: argument {i} is an array, the kernel takes a {size}-byte value")
                if not a.flags.c_contiguous:
                    raise TypeError(f"{self.name}: argument {i} is a non-contiguous array")
                holders.append(ctypes.c_void_p(a.ctypes.data))
                arrays.append(a)
            elif isinstance(a, np.generic):
                dt = a.dtype
                if size < 0:  # a pointer given as an integer (a null pointer: np.intp(0))
                    if dt.kind not in "iu" or dt.itemsize != 8:
                        raise TypeError(f"{self.name}: argument {i} is {dt}, the kernel takes a pointer")
                    holders.append(ctypes.c_void_p(int(a) or None))
                elif dt.itemsize != size or dt not in _CTYPES:
                    raise TypeError(f"{self.name}: argument {i} is {dt} ({dt.itemsize} B), the kernel takes {size} B")
                else:
                    holders.append(_CTYPES[dt](a.item()))
            else:
                raise TypeError(f"{self.name}: argument {i} is a Python {type(a).__name__}; pass numpy scalars")
        argv = (ctypes.c_void_p * max(1, len(holders)))(
            *[ctypes.cast(ctypes.pointer(h), ctypes.c_void_p) for h in holders]
        )
        g = tuple(grid) + (1,) * (3 - len(grid))
        b = tuple(block) + (1,) * (3 - len(block))
        dims = (ctypes.c_uint * 6)(*g, *b)
        rc = getattr(self.lib, f"emu_launch_{self.name}")(dims, ctypes.c_ulonglong(int(shared_mem)), argv)
        if rc:
            raise RuntimeError(f"cudaErrorLaunchFailure (emulated): {self.name}: {self.lib.emu_first_error().decode()}")
        _check_guards(self.name, arrays)


class EmuModule:
    def __init__(self, path):
        meta = json.loads(Path(path).with_suffix(".json").read_text())
        defines = dict(m.groups() for o in meta["options"] for m in [re.match(r"-D(\w+)=(.*)", o)] if m)
        self.source = Path(path).name.split("-sm_")[0] + ".cu"
        self.lib = library(self.source, defines)

    def get_function(self, name):
        return EmuKernel(self.lib, name)


class _GuardedRng:
    def __init__(self, seed):
        self.g = np.random.default_rng(seed)

    def _copy(self, a):
        out = guarded(a.shape, a.dtype)
        out[...] = a
        return out

    def standard_normal(self, size=None, dtype=np.float64, out=None):
        return self._copy(self.g.standard_normal(size, dtype=dtype))

    def random(self, size=None, dtype=np.float64, out=None):
        return self._copy(self.g.random(size, dtype=dtype))

    def integers(self, low, high=None, size=None, dtype=np.int64, endpoint=False):
        return self._copy(np.asarray(self.g.integers(low, high, size=size, dtype=dtype, endpoint=endpoint)))


class EmuGPU(fake_gpu.FakeGPU):
    """The numpy stand-in for cupy whose RawModules run the real kernels (see the module doc)."""

    def install(self):
        cp = super().install()
        cp.RawModule = lambda path=None, **_: EmuModule(path)
        cp.empty = lambda shape, dtype=np.float64, **_: guarded(shape, dtype)
        cp.zeros = lambda shape, dtype=np.float64, **_: guarded(shape, dtype, 0)
        cp.full = lambda shape, value, dtype=None, **_: guarded(
            shape, dtype if dtype is not None else np.asarray(value).dtype, value
        )
        cp.random = types.SimpleNamespace(default_rng=_GuardedRng, Generator=_GuardedRng)
        cp.matmul = fake_gpu._cupy_function(np.matmul)
        cp.cuda.function = types.SimpleNamespace(Module=_EmuDriverModule)
        cp.cuda.runtime.getDevice = lambda: 0
        return cp


class _EmuDriverModule:
    """cupy.cuda.function.Module: load_file + get_function, as the module-load variant uses them."""

    def load_file(self, path):
        self.module = EmuModule(path)

    def get_function(self, name):
        return self.module.get_function(name)
