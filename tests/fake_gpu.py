"""A numpy stand-in for the part of cupy that rooflab's CUDA ceilings suite touches, so that the
suite's whole control flow (plan, compile, load, verify, calibrate, time, record, derive, plot,
report) runs in CI, where there is no GPU.

What is real: the NVRTC compile of every kernel (cupy's own NVRTC binding, so the test skips where
cupy or NVRTC is missing), the build reports, the harness, the result file and the plots.
What is not: kernels are emulated in numpy by name (their closed forms, with the knobs read from
the build's options), and "CUDA events" are host clocks around the emulation. The FMA, tensor-core
and intensity emulations compute the same closed forms as the variants' references: they exercise
the control flow only and prove nothing about the formulas. What they can show is that the checks
bite: ``wrong=`` puts one value 1 % off, and tests/test_cuda_suite_fake.py asserts that each such
kernel gets an error and no figure. The figures this
produces are meaningless and no test looks at their values, only at their structure.
"""

from __future__ import annotations

import functools
import json
import re
import sys
import time
import types
import weakref
from pathlib import Path

import numpy as np

# cupy's own words (cupy/_core/core.pyx __array__)
REFUSED = (
    "Implicit conversion to a NumPy array is not allowed. Please use `.get()` to construct a NumPy array explicitly."
)
_CUPY_NDARRAY_ATTRS: set = set()  # what the real cupy.ndarray offers (FakeGPU.install fills it)
_CUPY_GENERATOR_ATTRS: set = set()  # what the real cupy.random.Generator offers


class Array(np.lib.mixins.NDArrayOperatorsMixin):
    """A device array as strict as cupy's: numpy never converts it implicitly (``np.asarray``,
    ``np.array``, a numpy array in the same expression all raise TypeError, as cupy does); the
    host copy is explicit (``.get()``, ``cupy.asnumpy``). Arithmetic, numpy functions and the
    methods the real ``cupy.ndarray`` has run on the numpy buffer it wraps, and return Arrays (a
    reduction returns a 0-d Array, as cupy's does). Kernels (the emulations) get the buffer."""

    __slots__ = ("_a", "__weakref__")
    __hash__ = None

    def __init__(self, a):
        assert isinstance(a, np.ndarray), type(a)
        self._a = a

    # ---- conversion: only explicit ------------------------------------------------------------
    def __array__(self, *a, **k):
        raise TypeError(REFUSED)

    def get(self, stream=None, order="C", out=None, blocking=True):
        if out is not None:
            out[...] = self._a
            return out
        return np.array(self._a, order=order, copy=True)

    def set(self, arr, stream=None):
        if isinstance(arr, Array) or not isinstance(arr, np.ndarray):
            raise TypeError(f"Only numpy.ndarray can be set to cupy.ndarray, got {type(arr).__name__}")
        self._a[...] = arr

    # ---- numpy protocols ----------------------------------------------------------------------
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        _refuse_host(inputs, ufunc.__name__)
        _refuse_host(kwargs.get("out", ()), ufunc.__name__)
        if "out" in kwargs:
            kwargs["out"] = _unwrap(kwargs["out"])
        return _wrap(getattr(ufunc, method)(*_unwrap(inputs), **kwargs))

    def __array_function__(self, func, types, args, kwargs):
        _refuse_host(args, func.__name__)
        _refuse_host(tuple(kwargs.values()), func.__name__)
        return _wrap(func(*_unwrap(args), **_unwrap(kwargs)))

    # ---- attributes ---------------------------------------------------------------------------
    shape = property(lambda self: self._a.shape)
    dtype = property(lambda self: self._a.dtype)
    size = property(lambda self: self._a.size)
    ndim = property(lambda self: self._a.ndim)
    nbytes = property(lambda self: self._a.nbytes)
    itemsize = property(lambda self: self._a.itemsize)
    strides = property(lambda self: self._a.strides)
    flags = property(lambda self: self._a.flags)
    T = property(lambda self: Array(self._a.T))
    real = property(lambda self: Array(self._a.real))
    imag = property(lambda self: Array(self._a.imag))

    @property
    def data(self):  # cupy's MemoryPointer: the device address
        return types.SimpleNamespace(ptr=int(self._a.ctypes.data))

    def __getattr__(self, name):
        if name.startswith("_") or (_CUPY_NDARRAY_ATTRS and name not in _CUPY_NDARRAY_ATTRS):
            raise AttributeError(f"'cupy.ndarray' object has no attribute {name!r}")
        attr = getattr(self._a, name)
        if not callable(attr):
            return _wrap(attr)

        def method(*a, **k):
            _refuse_host(a, name)
            return _wrap(attr(*_unwrap(a), **_unwrap(k)))

        return method

    def __getitem__(self, key):
        return _wrap(self._a[_unwrap(key)])

    def __setitem__(self, key, value):  # cupy copies a numpy value to the device
        self._a[_unwrap(key)] = _unwrap(value)

    def __len__(self):
        return len(self._a)

    def __iter__(self):
        return (Array(np.asarray(x)) for x in self._a)

    def __float__(self):
        return float(self._a)

    def __int__(self):
        return int(self._a)

    def __index__(self):
        return self._a.__index__()

    def __bool__(self):
        return bool(self._a)

    def __complex__(self):
        return complex(self._a)

    def __format__(self, spec):
        return format(self._a.item() if self._a.ndim == 0 else self._a, spec)

    def __repr__(self):
        return f"fake_gpu.{np.array_repr(self._a)}"

    def __copy__(self):
        return Array(self._a.copy())

    def __dlpack__(self, *a, **k):
        raise TypeError("the stand-in has no DLPack")


Array.__module__ = "cupy"  # as cupy.ndarray's: code that asks type(a).__module__ sees a cupy array


def _is_host_array(x) -> bool:
    return isinstance(x, np.ndarray) and x.ndim > 0


def _refuse_host(values, what):
    """cupy refuses numpy arrays where it computes: 'Unsupported type <class 'numpy.ndarray'>'."""
    for x in values:
        if _is_host_array(x):
            raise TypeError(f"{what}: Unsupported type {type(x)} (a host numpy array where cupy needs a device one)")
        if isinstance(x, (list, tuple)):
            _refuse_host(x, what)


def _unwrap(x):
    if isinstance(x, Array):
        return x._a
    if type(x) in (list, tuple):
        return type(x)(_unwrap(v) for v in x)
    if type(x) is dict:
        return {k: _unwrap(v) for k, v in x.items()}
    return x


def _wrap(r):
    if isinstance(r, np.ndarray):
        return Array(r)
    if isinstance(r, np.generic) and not isinstance(r, (np.str_, np.bytes_)):
        return Array(np.asarray(r))  # cupy's reductions and element reads are 0-d device arrays
    if type(r) in (list, tuple):
        return type(r)(_wrap(v) for v in r)
    return r


def _arr(a):
    return a if isinstance(a, Array) else Array(np.asarray(a))


def asnumpy(a, stream=None, order="C", out=None, *, blocking=True):
    return a.get(order=order, out=out) if isinstance(a, Array) else np.asarray(a, order=order)


def _cupy_function(f, host_ok=False):
    """numpy's ``f`` as a cupy function: device Arrays in and out; host arrays refused unless
    ``host_ok`` (the constructors that copy host data to the device: asarray, array)."""

    def wrapped(*a, **k):
        if not host_ok:
            _refuse_host(a, getattr(f, "__name__", "cupy"))
            _refuse_host(tuple(k.values()), getattr(f, "__name__", "cupy"))
        return _wrap(f(*_unwrap(a), **_unwrap(k)))

    return wrapped


class _Namespace(types.ModuleType):
    """A numpy submodule (lib, fft, linalg, lib.stride_tricks) seen as cupy's."""

    def __init__(self, mod):
        super().__init__(f"cupy.{mod.__name__.split('.', 1)[-1]}")
        self._mod = mod

    def __getattr__(self, name):
        return _convert(getattr(self._mod, name), name)


def _convert(f, name):
    if isinstance(f, types.ModuleType):
        return _Namespace(f)
    if isinstance(f, type) or not callable(f):  # dtypes (cupy.float32 is numpy.float32), constants
        return f
    return _cupy_function(f, host_ok=name in ("asarray", "array", "ascontiguousarray"))


def _numpy_fallback(name):
    """Everything else cupy offers that rooflab uses (add, exp, einsum, pad, lib.stride_tricks,
    fft ...): numpy's, on the stand-in's device Arrays."""
    if name.startswith("_"):
        raise AttributeError(name)
    return _convert(getattr(np, name), name)


class _Rng:
    """cupy.random.Generator: only the methods the real one has (no permutation, no choice)."""

    def __init__(self, seed):
        self.g = np.random.default_rng(seed)

    def random(self, size=None, dtype=np.float64, out=None):
        return _arr(self.g.random(size, dtype=dtype))

    def standard_normal(self, size=None, dtype=np.float64, out=None):
        return _arr(self.g.standard_normal(size, dtype=dtype))

    def integers(self, low, high=None, size=None, dtype=np.int64, endpoint=False):
        return _arr(self.g.integers(low, high, size=size, dtype=dtype, endpoint=endpoint))

    def __getattr__(self, name):
        if name.startswith("_") or (_CUPY_GENERATOR_ATTRS and name not in _CUPY_GENERATOR_ATTRS):
            raise AttributeError(f"'cupy.random._generator_api.Generator' object has no attribute {name!r}")
        f = getattr(self.g, name)
        return lambda *a, **k: _arr(f(*a, **k))


class _Event:
    def record(self, stream=None):
        self.t = time.perf_counter()

    def synchronize(self):
        pass


class _Graph:
    def __init__(self, calls):
        self.calls = calls

    def launch(self, stream=None):
        for c in self.calls:
            c()


class _Stream:
    capturing = None

    def __init__(self, non_blocking=False):
        pass

    def synchronize(self):
        pass

    def begin_capture(self):
        _Stream.capturing = []

    def end_capture(self):
        g, _Stream.capturing = _Graph(_Stream.capturing), None
        return g

    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def _knobs(cubin_path: str) -> dict:
    meta = json.loads(Path(cubin_path).with_suffix(".json").read_text())
    return {m.group(1): int(m.group(2)) for o in meta["options"] for m in [re.match(r"-D(\w+)=(\d+)", o)] if m}


EMULATIONS: dict = {}  # kernel name (or name prefix ending in "*") -> emulation(args, knobs)


def emulates(*names):
    def add(fn):
        for n in names:
            EMULATIONS[n] = fn
        return fn

    return add


def emulation_for(name: str):
    """The emulation of a kernel by its name; templates arrive lowered (_Z8fma_peakIfE...)."""
    if name in EMULATIONS:
        return name, EMULATIONS[name]
    for key, fn in EMULATIONS.items():
        if key.endswith("*") and key[:-1] in name:
            return key, fn
    raise NotImplementedError(f"fake_gpu has no emulation of {name}")  # a new kernel needs one here


def _clock(clk):
    clk[0::2] = 1_900_000  # cycles
    clk[1::2] = 1_000_000  # ns: 1.9 GHz


@emulates("stream_read", "l2_read")
def _reads(args, k, n):  # what each block of the grid-stride loop reads and sums
    a, n2, reps, out = args
    blocks, bs = k["_grid"][0], k["_block"][0]
    pairs = np.asarray(a[: 2 * int(n2)]).reshape(-1, 2).sum(axis=1)
    pairs = np.concatenate([pairs, np.zeros(-len(pairs) % (blocks * bs))])
    per_slice = pairs.reshape(-1, blocks, bs).sum(axis=(0, 2))
    rotate = k["L2_ROTATE"] if n == "l2_read" else 0
    r = np.arange(int(reps))[:, None]
    out[...] = per_slice[(np.arange(blocks)[None, :] + rotate * r) % blocks].sum(axis=0)


@emulates("stream_copy")
def _copy(args, k, n):
    c, a, n2 = args
    c[: 2 * int(n2)] = a[: 2 * int(n2)]


@emulates("stream_triad")
def _triad(args, k, n):
    a, b, c, s, n2 = args
    a[...] = b + float(s) * c


@emulates("smem_read")
def _smem(args, k, n):
    out, reps = args  # the kernel's loops, one rotation period at a time (it repeats every W/32)
    words, bs = k["SMEM_FLOAT4"], k["BLOCK"]
    i = np.arange(words)
    buf = np.stack([(i >> 5) & 3, i & 1, (i >> 1) & 1, (i >> 9) & 1], axis=1).astype(np.float32)
    t = np.arange(bs)
    period_sums = []
    for r in range(min(int(reps), words // 32)):
        rot = (r * 32) & (words - 1)
        period_sums.append(sum(buf[(t + j * bs + rot) & (words - 1)].sum(axis=1) for j in range(words // bs)))
    full, rest = divmod(int(reps), words // 32)
    acc = full * np.sum(period_sums, axis=0) + np.sum(period_sums[:rest], axis=0)
    out[...] = np.tile(acc, out.size // bs)


@emulates("fma_peak*")
def _fma(args, k, n):
    out, iters, a, b, clk = args
    m = int(iters) * k["UNROLL"]
    gid = np.arange(out.size)
    x0 = sum((1 + c) + (gid & 1023) * 1e-3 for c in range(k["CHAINS"]))
    am = float(a) ** m
    out[...] = x0 * am + k["CHAINS"] * float(b) * (1 - am) / (1 - float(a))
    _clock(clk)


@emulates("mma_f16", "mma_bf16")
def _mma(args, k, n):
    out, iters, _, _, clk = args
    out[...] = 4.0 * k["CHAINS"] * k["UNROLL"] * int(iters)
    _clock(clk)


@emulates("wgmma_f16", "wgmma_bf16")
def _wgmma(args, k, n):
    out, iters, _, clk = args
    out[...] = 128.0 * k["UNROLL"] * int(iters)
    _clock(clk)


@emulates("intensity_f64")
def _intensity(args, k, n):
    a, size, nfma, alpha, beta = args
    am = float(alpha) ** int(nfma)
    a[...] = a * am + float(beta) * (1 - am) / (1 - float(alpha))


@emulates("gemm0*")
def _gemm(args, k, n):  # the GEMM ladder (C = A x B): the exact product, rounded to C's type
    A, B, C, M, N, K = args
    assert A.shape == (int(M), int(K)) and B.shape == (int(K), int(N)) and C.shape == (int(M), int(N))
    if n.endswith("_bf16"):  # BF16 arrives as its 16-bit patterns; round the result to nearest even
        f64 = lambda x: (np.asarray(x, np.uint32) << 16).view(np.float32).astype(np.float64)  # noqa: E731
        u = (f64(A) @ f64(B)).astype(np.float32).view(np.uint32).astype(np.uint64)
        C[...] = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    else:
        C[...] = (np.asarray(A, np.float64) @ np.asarray(B, np.float64)).astype(C.dtype)


@emulates("empty_kernel")
def _empty(args, k, n):
    (flag,) = args
    if isinstance(flag, np.ndarray) and flag[0] == 12345:
        flag[0] = 0


@emulates("launch_tick")
def _tick(args, k, n):  # a null counter (np.intp(0)) is the timed, empty launch
    (counter,) = args
    if isinstance(counter, np.ndarray):
        counter[0] += 1


ALLOCATIONS: weakref.WeakValueDictionary[int, np.ndarray] = weakref.WeakValueDictionary()  # address -> buffer


def _zeros(*a, **k):
    """cupy.zeros that remembers the array by its address: a kernel argument that is a raw pointer
    (the pointer chase's ``base``) can then be resolved to the array it points into."""
    arr = _arr(np.zeros(*a, **k))
    ALLOCATIONS[arr.data.ptr] = arr._a
    return arr


def _jump(nxt: np.ndarray, start: int, hops: int) -> int:
    """Where ``hops`` hops of the successor table ``nxt`` lead from ``start`` (pointer doubling:
    log2(hops) gathers, not one Python step per hop)."""
    pos, step, k = int(start), nxt.copy(), int(hops)
    while k:
        if k & 1:
            pos = int(step[pos])
        step = step[step]
        k >>= 1
    return pos


def _chase_ns(nbytes: int, l2_bytes: int = 4 << 20) -> float:
    """The stand-in's latency per hop: a staircase by working set (figures of no meaning)."""
    return 30.0 if nbytes <= 256 << 10 else 150.0 if nbytes <= l2_bytes else 600.0


@emulates("chase_ca", "chase_cg")
def _chase(args, k, n):
    """Follow the chain the host built: slot s holds base + next(s) x stride in its first word."""
    start, warm, hops, base, stride, out = args
    chain = ALLOCATIONS[int(base)]
    heads = np.asarray(chain).reshape(-1, int(stride) // 8)[:, 0]
    nxt = ((heads - np.uint64(base)) // np.uint64(stride)).astype(np.int64)
    first = (int(start) - int(base)) // int(stride)
    final = _jump(nxt, _jump(nxt, first, int(warm)), int(hops))
    ns = _chase_ns(chain.nbytes) * int(hops)
    out[...] = [final, int(ns * 1.9), int(ns), int(hops)]


class _Kernel:
    """Launch-compatible emulation of one kernel of kernels/cuda (by its name)."""

    def __init__(self, name, knobs, device):
        self.name, self.knobs, self.device = name, knobs, device

    def __call__(self, grid, block, args, shared_mem=0):
        if _Stream.capturing is not None:
            _Stream.capturing.append(lambda: self._run(grid, block, args))
            return
        self._run(grid, block, args)

    def _run(self, grid, block, args):
        args = kernel_args(self.name, args)
        if block[0] > 1024:
            raise self.device.launch_error("cudaErrorInvalidValue: invalid argument")
        if self.name in self.device.failing:
            raise self.device.launch_error("cudaErrorIllegalAddress: an illegal memory access was encountered")
        key, emulation = emulation_for(self.name)
        self.device.launched.add(key)
        emulation(args, {**self.knobs, "_grid": grid, "_block": block}, self.name)
        if self.name in self.device.wrong or key in self.device.wrong:
            args[0][-1] *= 1.01  # one value 1 % off


def kernel_args(name, args) -> list:
    """A launch's arguments as the kernel sees them: device Arrays become their buffers; a host
    numpy array is refused, as cupy refuses it (a kernel cannot read host memory)."""
    out = []
    for i, a in enumerate(args):
        if isinstance(a, np.ndarray):
            raise TypeError(f"{name}: argument {i} is a host numpy array: Unsupported type {type(a)}")
        out.append(a._a if isinstance(a, Array) else a)
    return out


class _RawModule:
    def __init__(self, device, path):
        self.device, self.knobs = device, _knobs(path)

    def get_function(self, name):  # templates arrive by their lowered names, e.g. _Z8fma_peakIfE...
        return _Kernel(name, self.knobs, self.device)


class _DriverModule:
    """cupy.cuda.function.Module: load_file + get_function (the module-load launch variant)."""

    def __init__(self, device):
        self.device = device

    def load_file(self, path):
        self.module = _RawModule(self.device, path)

    def get_function(self, name):
        return self.module.get_function(name)


class FakeGPU:
    """Install with ``FakeGPU(monkeypatch).install()``: a 4-SM sm_90 device with 4 MiB of L2."""

    def __init__(self, monkeypatch, free_bytes=128 << 20, failing=(), wrong=(), compile=True):
        import cupy as real_cupy
        from cupy.cuda import nvrtc  # the real NVRTC: kernels really compile

        _CUPY_NDARRAY_ATTRS.update(dir(real_cupy.ndarray))  # the stand-in offers no more than cupy
        _CUPY_GENERATOR_ATTRS.update(dir(real_cupy.random.Generator))

        if compile:  # compile=False: tests of host-side code that builds no kernel need no NVRTC
            nvrtc.getVersion()  # load libnvrtc now, through the real cupy, before the stand-in replaces it
        self.mp, self.nvrtc, self.free, self.failing = monkeypatch, nvrtc, free_bytes, set(failing)
        self.wrong = set(wrong)  # kernels whose emulation is off by a little: the checks must catch them
        self.launched = set()  # emulations used: the suite's declaration must use every one (tests)

    @staticmethod
    def launch_error(text):
        return RuntimeError(text)  # worded as cupy words a CUDARuntimeError

    def props(self):
        return {
            "name": b"Fake GPU (numpy)",
            "major": 9,
            "minor": 0,
            "multiProcessorCount": 4,
            "totalGlobalMem": 16 << 30,
            "sharedMemPerMultiprocessor": 228 << 10,
            "l2CacheSize": 4 << 20,
            "memoryBusWidth": 6144,
        }

    def install(self):
        attrs = {
            "cudaDevAttrClockRate": (1, 1_980_000),
            "cudaDevAttrMemoryClockRate": (2, 2_619_000),
            "cudaDevAttrGlobalMemoryBusWidth": (3, 6144),
            "cudaDevAttrL2CacheSize": (4, 4 << 20),
            "cudaDevAttrMaxSharedMemoryPerBlockOptin": (5, 227 << 10),
            "cudaDevAttrMultiProcessorCount": (6, 4),
        }
        values = dict(attrs.values())
        runtime = types.SimpleNamespace(
            getDeviceCount=lambda: 1,
            getDevice=lambda: 0,
            getDeviceProperties=lambda i: self.props(),
            deviceGetAttribute=lambda a, i: values[a],
            driverGetVersion=lambda: 13000,
            runtimeGetVersion=lambda: 13000,
            memGetInfo=lambda: (self.free, 16 << 30),
            **{k: v[0] for k, v in attrs.items()},
        )
        device = types.SimpleNamespace(id=0, compute_capability="90", use=lambda: None)
        stream = _Stream()
        cuda = types.ModuleType("cupy.cuda")
        cuda.__dict__.update(
            runtime=runtime,
            nvrtc=self.nvrtc,
            Device=lambda i=0: device,
            Event=_Event,
            Stream=_Stream,
            get_current_stream=lambda: stream,
            get_elapsed_time=lambda a, b: (b.t - a.t) * 1e3,
            function=types.SimpleNamespace(Module=lambda: _DriverModule(self)),
        )
        cp = types.ModuleType("cupy")
        cp.__dict__.update(
            __version__="fake",
            ndarray=Array,
            cuda=cuda,
            RawModule=lambda path: _RawModule(self, path),
            get_default_memory_pool=lambda: types.SimpleNamespace(free_all_blocks=lambda: None),
            zeros=_zeros,
            asnumpy=asnumpy,
            matmul=self._matmul,
            random=types.SimpleNamespace(default_rng=_Rng, Generator=_Rng),
            float16=np.float16,
            float32=np.float32,
            float64=np.float64,
            int32=np.int32,
            int64=np.int64,
            uint64=np.uint64,
            __getattr__=_numpy_fallback,
        )
        cupyx = types.ModuleType("cupyx")
        cupyx.empty_pinned = lambda shape, dtype=np.float64, order="C": np.empty(shape, dtype=dtype, order=order)
        for name, mod in (("cupy", cp), ("cupy.cuda", cuda), ("cupyx", cupyx)):
            self.mp.setitem(sys.modules, name, mod)
        from rooflab.cuda import backend, loader

        self.mp.setattr(backend, "probe", lambda: (True, "1 CUDA device(s) (tests/fake_gpu.py)"))  # undone after
        self.mp.setattr(loader, "_MODULES", {})
        # a fresh per-device SM-count cache, so neither this device nor a real one leaks into the other
        self.mp.setattr(loader, "_sm_count", functools.lru_cache(maxsize=None)(loader._sm_count.__wrapped__))
        self.mp.setattr(backend, "nvml_state", lambda index: {})
        return cp

    @staticmethod
    def _matmul(a, b, out=None):
        _refuse_host((a, b, out), "matmul")
        a, b = _unwrap(a), _unwrap(b)
        wide = np.complex128 if np.iscomplexobj(a) or np.iscomplexobj(b) else np.float64
        r = np.matmul(a.astype(wide), b.astype(wide)).astype(np.result_type(a, b))
        if out is not None:
            out[...] = r
            return out
        return Array(r)
