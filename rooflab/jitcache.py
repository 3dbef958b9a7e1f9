"""Where numba keeps the compiled kernels: one folder per hash of every kernel source.

numba's ``cache=True`` keys a cached function on its own file only (path, mtime, size). A kernel
that calls or inlines an njit function from another file keeps its cached machine code when that
other file changes: every GEMM rung inlines kernels/cpu/gemm_ukr.py and simd.py, the conv
modules inline simd.py. So the cache folder itself is keyed: sha256 over every ``.py`` under the
kernels package (checked-in or generated alike), the other rooflab modules that hold a kernel,
rooflab's version and the settings that pick the SIMD width (KEY_ENV). Change any of them and the next process compiles into a new, empty folder.

Where: ``$NUMBA_CACHE_DIR`` when the user set it (respected, keyed below it), else
``$ROOFLAB_CACHE_DIR/numba``, else ``$XDG_CACHE_HOME/rooflab/numba`` (~/.cache), then
``rooflab-<version>-<hash12>/``. Tests, the CLI, asv and every child process share it (the folder
is exported in NUMBA_CACHE_DIR, and a process that finds it there keeps its base). Folders of other
hashes unused for PRUNE_DAYS days are removed.

Napkin math: ~0.6 MB of kernel source hashed at ~1 GB/s is under 1 ms per process; a cold cache
costs the ~60 s of compiling every kernel once, a warm one ~1 s of loading.

    python -c "import rooflab.jitcache as j; print(j.FOLDER)"   # the folder this checkout uses
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import sys
import time
from pathlib import Path

PRUNE_DAYS = 7
KEYED = re.compile(r"^rooflab-[^/]*-[0-9a-f]{12}$")
# rooflab modules outside kernels/ that define njit(cache=True) functions
EXTRA_MODULES = ("memory.py",)
# settings read while a kernel is compiled that numba's own key does not see (simd.py's width)
KEY_ENV = ("ROOFLAB_SIMD_BITS", "ROOFLAB_PREFER_256")

FOLDER: str | None = None  # the folder configure() chose (None before it ran)


def _package_root() -> Path:
    return Path(__file__).resolve().parent


def _kernels_root() -> Path | None:
    """The kernels package folder (kernels/ in a checkout, rooflab/kernels in a wheel), found
    without importing it."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("rooflab.kernels")
    except (ImportError, ValueError):
        spec = None
    locs = list(spec.submodule_search_locations or []) if spec else []
    if locs:
        return Path(locs[0]).resolve()
    for cand in (_package_root() / "kernels", _package_root().parent / "kernels"):
        if cand.is_dir():
            return cand
    return None


def sources(kernels: Path | None = None, extra: list[Path] | None = None) -> list[Path]:
    """Every file the key covers: all .py under ``kernels`` (recursively) plus ``extra``."""
    kernels = kernels if kernels is not None else _kernels_root()
    out = sorted(p for p in kernels.rglob("*.py") if "__pycache__" not in p.parts) if kernels else []
    if extra is None:
        extra = [_package_root() / m for m in EXTRA_MODULES]
    return out + [p for p in extra if p.is_file()]


def source_hash(files: list[Path], version: str, root: Path | None = None) -> str:
    """sha256 over (relative name, content) of every file, the version and KEY_ENV: 12 hex digits."""
    h = hashlib.sha256(version.encode())
    for v in KEY_ENV:
        h.update(f"\0{v}={os.environ.get(v, '')}".encode())
    for p in files:
        name = str(p.relative_to(root)) if root and p.is_relative_to(root) else p.name
        h.update(b"\0" + name.encode() + b"\0")
        h.update(p.read_bytes())
    return h.hexdigest()[:12]


def _version() -> str:
    text = (_package_root() / "__init__.py").read_text()
    m = re.search(r'^__version__\s*=\s*"([^"]+)"', text, re.M)
    return m.group(1) if m else "0"


def default_base(env: dict | None = None) -> Path:
    env = os.environ if env is None else env
    if env.get("NUMBA_CACHE_DIR"):
        base = Path(env["NUMBA_CACHE_DIR"])
        # a parent process already keyed it: keep its base (the key may differ if files changed)
        return base.parent if KEYED.match(base.name) else base
    if env.get("ROOFLAB_CACHE_DIR"):
        return Path(env["ROOFLAB_CACHE_DIR"]) / "numba"
    xdg = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(xdg) / "rooflab" / "numba"


def folder_for(base: Path, files: list[Path], version: str, root: Path | None = None) -> Path:
    return base / f"rooflab-{version}-{source_hash(files, version, root)}"


def prune(base: Path, keep: Path, days: float = PRUNE_DAYS) -> list[Path]:
    """Remove keyed folders other than ``keep`` not used for ``days`` (another checkout may still
    use a recent one: several worktrees can share the base)."""
    removed = []
    try:
        entries = list(base.iterdir())
    except OSError:
        return removed
    now = time.time()
    for p in entries:
        if p == keep or not KEYED.match(p.name) or not p.is_dir():
            continue
        try:
            if now - p.stat().st_mtime > days * 86400:
                shutil.rmtree(p, ignore_errors=True)
                removed.append(p)
        except OSError:
            continue
    return removed


def configure(kernels: Path | None = None, extra: list[Path] | None = None) -> str | None:
    """Point numba's cache at the keyed folder of this source tree (before any kernel is
    decorated: numba reads config.CACHE_DIR when ``cache=True`` sets up a function's cache).
    ``kernels``/``extra``: another package to key on (tests)."""
    global FOLDER
    root = kernels if kernels is not None else _kernels_root()
    files = sources(root, extra)
    if not files:
        return None
    base = default_base()
    folder = folder_for(base, files, _version(), root)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        os.utime(folder)  # in use: prune() keeps it
    except OSError:
        return None  # not writable: numba falls back to its own locators (and says so)
    prune(base, folder)
    os.environ["NUMBA_CACHE_DIR"] = str(folder)
    if "numba" in sys.modules or "numba.core.config" in sys.modules:
        import numba.core.config as cfg

        cfg.CACHE_DIR = str(folder)
    FOLDER = str(folder)
    return FOLDER
