"""What the CUDA compile tests share: NVRTC or a skip with the reason, where cuobjdump is, and a
private cubin cache per test module (so a build is really compiled, never read from the user's)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from rooflab.cuda import compiler
from rooflab.errors import RooflabError


def nvrtc_or_skip():
    """cupy's NVRTC binding, or skip the test naming what is missing."""
    try:
        return compiler._nvrtc()
    except RooflabError as e:
        pytest.skip(str(e))


def cuobjdump() -> str | None:
    """cuobjdump on PATH, else from the pip wheel nvidia-cuda-cuobjdump (nvidia/cu*/bin)."""
    exe = shutil.which("cuobjdump")
    if exe:
        return exe
    for base in sys.path:
        for p in sorted(Path(base).glob("nvidia/*/bin/cuobjdump")):
            return str(p)
    return None


def private_cache(tmp_path_factory, name: str = "cubins"):
    """Generator for a module fixture: ROOFLAB_CACHE_DIR points at a fresh folder while it lasts."""
    path = tmp_path_factory.mktemp(name)
    old = os.environ.get("ROOFLAB_CACHE_DIR")
    os.environ["ROOFLAB_CACHE_DIR"] = str(path)
    yield path
    if old is None:
        os.environ.pop("ROOFLAB_CACHE_DIR", None)
    else:
        os.environ["ROOFLAB_CACHE_DIR"] = old
