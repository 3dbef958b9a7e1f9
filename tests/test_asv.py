"""The asv suite: config is valid, benchmarks import and run (a small subset, once), GPU benchmarks
skip without a GPU, and a kernel that fails verification fails its benchmark instead of timing."""

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ASV = shutil.which("asv") or str(Path(sys.executable).parent / "asv")
pytestmark = pytest.mark.skipif(not Path(ASV).exists(), reason="asv is not installed (pip install -e '.[dev]')")


def _asv(args, tmp_path, timeout=600):
    env = dict(os.environ, HOME=str(tmp_path), ROOFLAB_ASV_QUICK="1")
    return subprocess.run([ASV, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def test_config_follows_the_house_rules():
    text = (ROOT / "asv.conf.json").read_text()
    conf = json.loads("\n".join(line for line in text.splitlines() if not line.strip().startswith("//")))
    assert conf["branches"] == ["main"] and conf["environment_type"] == "virtualenv"
    assert "--no-isolation" in conf["build_command"][0] and "--no-deps" in conf["install_command"][0]
    assert conf["results_dir"].startswith("results/") and conf["matrix"]["req"]["pip+asv_runner"] == ["0.3.2"]
    ignored = (ROOT / ".gitignore").read_text()
    assert conf["html_dir"].rstrip("/") + "/" in ignored and ".asv/" in ignored


def test_asv_check(tmp_path):
    p = _asv(["check", "-E", f"existing:{sys.executable}"], tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "No problems found" in p.stdout


def test_asv_dry_run_subset_and_gpu_skips(tmp_path):
    assert _asv(["machine", "--yes", "--machine", "ci"], tmp_path).returncode == 0
    p = _asv(
        [
            "run",
            "-E",
            f"existing:{sys.executable}",
            "--machine",
            "ci",
            "--quick",
            "--dry-run",
            "--show-stderr",
            "-b",
            "Dispatch.time_empty|FmaPeakCPU.track_gflops|LaunchGPU",
        ],
        tmp_path,
    )
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    assert "FmaPeakCPU.track_gflops" in out and "failed" not in out
    gpu = "n/a" in out or "skipped" in out
    try:
        from rooflab.cuda import backend

        has_gpu = backend.available()
    except Exception:
        has_gpu = False
    assert gpu or has_gpu


def test_benchmark_with_a_wrong_kernel_fails_loudly(monkeypatch):
    sys.path.insert(0, str(ROOT))
    import rooflab.registry as reg
    from benchmarks import _common, bench_stream_cpu
    from rooflab import VerificationError

    base = reg.get_variant("cpu.stream.triad")
    wrong = dataclasses.replace(base, kernel=lambda a, b, c, s=3.0, reps=1, threads=None: a)
    monkeypatch.setitem(reg._REGISTRY, "cpu.stream.triad", wrong)
    monkeypatch.setattr(_common, "_PREPARED", {})
    with pytest.raises(VerificationError):
        bench_stream_cpu.StreamCPU().setup("triad", 32 << 10, 1)
