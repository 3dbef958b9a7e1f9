"""scripts/device_check.sh, the one-shot GPU check, runs end to end here too: without a GPU it runs
the host-side tests, reports why there is no CUDA run in its log, and exits non-zero."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rooflab.cuda import backend

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(backend.probe()[0], reason="a GPU is here: the script really runs (see the device check)")
@pytest.mark.slow
def test_device_check_without_a_gpu(tmp_path):
    out = tmp_path / "out"
    env = {
        **os.environ,
        "PYTHON": sys.executable,
        "ROOFLAB_CHECK_NO_INSTALL": "1",
        "ROOFLAB_CHECK_TESTS": "tests/test_cuda_host.py",
        "ROOFLAB_CACHE_DIR": str(tmp_path / "cache"),
    }
    p = subprocess.run(
        ["bash", str(ROOT / "scripts" / "device_check.sh"), str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    log = (out / "device_check.log").read_text()
    assert p.returncode == 1, log
    assert "passed" in log  # the host-side tests ran
    assert backend.probe()[1] in log  # the one-line reason there is no CUDA run
    assert "== done in" in log and "Traceback" not in log
    assert sorted(x.name for x in out.iterdir()) == ["device_check.log"]  # nothing half-written left
