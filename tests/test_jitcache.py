"""numba's on-disk cache never serves old code (rooflab/jitcache.py).

numba keys a cached function on its own file: a caller whose callee (in another file) changed
keeps its stale machine code. A synthetic pair of modules with the kernels' mechanism (caller.py
calls an njit function of callee.py, both cache=True) shows it: under a plain NUMBA_CACHE_DIR the
changed callee is not seen (the strict xfail pins that the mechanism is real), under the keyed
folder it is.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rooflab import jitcache

CALLEE = "from numba import njit\n\n\n@njit(cache=True)\ndef f(x):\n    return x + {add}\n"
CALLER = "from numba import njit\n\nfrom .callee import f\n\n\n@njit(cache=True)\ndef g(x):\n    return f(x) * 2\n"
CHILD = """
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from rooflab import jitcache
pk = Path(sys.argv[1]) / "pk"
if sys.argv[2] == "keyed":
    jitcache.configure(kernels=pk, extra=[])
else:  # the old scheme: one folder whatever the sources
    import numba.core.config as cfg
    cfg.CACHE_DIR = sys.argv[3]
from pk.caller import g
print(g(1))
"""


def _package(tmp_path: Path, add: int) -> Path:
    pk = tmp_path / "src" / "pk"
    pk.mkdir(parents=True, exist_ok=True)
    (pk / "__init__.py").write_text("")
    (pk / "caller.py").write_text(CALLER)
    (pk / "callee.py").write_text(CALLEE.format(add=add))
    return pk


def _child(tmp_path: Path, scheme: str) -> int:
    base = tmp_path / "numba-cache"
    env = dict(os.environ, NUMBA_CACHE_DIR=str(base))
    r = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path / "src"), scheme, str(base)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    return int(r.stdout.split()[-1])


@pytest.mark.slow  # four child processes that each import numba and compile
@pytest.mark.parametrize(
    "scheme",
    ["keyed", pytest.param("plain", marks=pytest.mark.xfail(strict=True, reason="numba keys on the caller only"))],
)
def test_changed_callee_is_seen(tmp_path, scheme):
    _package(tmp_path, add=1)
    assert _child(tmp_path, scheme) == 4  # (1 + 1) * 2, compiled and cached
    assert _child(tmp_path, scheme) == 4  # from the cache
    time.sleep(0.01)
    _package(tmp_path, add=2)  # only the callee changes
    assert _child(tmp_path, scheme) == 6  # (1 + 2) * 2: the caller was compiled again


def test_key_covers_every_kernel_source(tmp_path):
    files = {p.name for p in jitcache.sources()}
    assert {"gemm.py", "gemm_ukr.py", "simd.py", "conv.py", "stream.py", "memory.py"} <= files
    # a copy of the kernels tree: changing any file, a nested one included, moves the folder
    src = tmp_path / "kernels"
    (src / "cpu" / "gen").mkdir(parents=True)
    (src / "cpu" / "simd.py").write_text("W = 4\n")
    (src / "cpu" / "gen" / "conv_3x3.py").write_text("A = 1\n")
    key = lambda: jitcache.folder_for(tmp_path, jitcache.sources(src, extra=[]), "0.2.0", src)  # noqa: E731
    first = key()
    (src / "cpu" / "simd.py").write_text("W = 8\n")
    second = key()
    (src / "cpu" / "gen" / "conv_3x3.py").write_text("A = 2\n")
    third = key()
    assert len({first, second, third}) == 3
    assert jitcache.folder_for(tmp_path, jitcache.sources(src, extra=[]), "0.2.1", src) != third  # version too


def test_this_process_uses_the_keyed_folder():
    import numba.core.config as cfg

    assert jitcache.FOLDER and cfg.CACHE_DIR == jitcache.FOLDER == os.environ["NUMBA_CACHE_DIR"]
    assert jitcache.KEYED.match(Path(jitcache.FOLDER).name)


def test_user_folder_respected_and_keyed_once(tmp_path):
    assert jitcache.default_base({"NUMBA_CACHE_DIR": str(tmp_path)}) == tmp_path
    keyed = tmp_path / "rooflab-0.2.0-0123456789ab"
    assert jitcache.default_base({"NUMBA_CACHE_DIR": str(keyed)}) == tmp_path  # a child keeps the base
    assert jitcache.default_base({"ROOFLAB_CACHE_DIR": str(tmp_path)}) == tmp_path / "numba"


def test_prune_keeps_recent_and_current(tmp_path):
    old, recent, keep, other = (tmp_path / n for n in ("rooflab-0.1-aaaaaaaaaaaa", "rooflab-0.1-bbbbbbbbbbbb",
                                                       "rooflab-0.2-cccccccccccc", "mine"))  # fmt: skip
    for p in (old, recent, keep, other):
        p.mkdir()
    past = time.time() - 30 * 86400
    for p in (old, keep, other):
        os.utime(p, (past, past))
    assert jitcache.prune(tmp_path, keep) == [old]
    assert recent.exists() and keep.exists() and other.exists() and not old.exists()


def test_simd_width_setting_keys_the_folder(tmp_path, monkeypatch):
    src = tmp_path / "k"
    src.mkdir()
    (src / "simd.py").write_text("W = 4\n")
    monkeypatch.delenv("ROOFLAB_SIMD_BITS", raising=False)
    a = jitcache.folder_for(tmp_path, jitcache.sources(src, extra=[]), "0", src)
    monkeypatch.setenv("ROOFLAB_SIMD_BITS", "256")
    assert jitcache.folder_for(tmp_path, jitcache.sources(src, extra=[]), "0", src) != a
