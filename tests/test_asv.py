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


def _conf(tmp_path) -> Path:
    """The project's asv.conf.json with every path it writes moved into ``tmp_path``: the tests
    never write into the checkout (asv writes benchmarks.json and machine files as it goes)."""
    text = (ROOT / "asv.conf.json").read_text()
    conf = json.loads("\n".join(line for line in text.splitlines() if not line.strip().startswith("//")))
    conf.update(
        repo=str(ROOT),
        benchmark_dir=str(ROOT / "benchmarks"),
        env_dir=str(tmp_path / "env"),
        results_dir=str(tmp_path / "results"),
        html_dir=str(tmp_path / "html"),
    )
    path = tmp_path / "asv.conf.json"
    path.write_text(json.dumps(conf))
    return path


def _asv(args, tmp_path, timeout=600):
    env = dict(os.environ, HOME=str(tmp_path), ROOFLAB_ASV_QUICK="1")
    before = _checkout_state()
    p = subprocess.run(
        [ASV, *args[:1], "--config", str(_conf(tmp_path)), *args[1:]],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert _checkout_state() == before, "asv wrote into the checkout"
    return p


def _checkout_state():
    asv_results = ROOT / "results" / "asv"
    return sorted((str(f), f.stat().st_mtime_ns) for f in asv_results.rglob("*") if f.is_file())


def test_config_follows_the_house_rules():
    text = (ROOT / "asv.conf.json").read_text()
    conf = json.loads("\n".join(line for line in text.splitlines() if not line.strip().startswith("//")))
    assert conf["branches"] == ["main"] and conf["environment_type"] == "virtualenv"
    assert "--no-isolation" in conf["build_command"][0] and "--no-deps" in conf["install_command"][0]
    assert conf["results_dir"].startswith("results/") and conf["matrix"]["req"]["pip+asv_runner"] == ["0.3.2"]
    ignored = (ROOT / ".gitignore").read_text()
    assert conf["html_dir"].rstrip("/") + "/" in ignored and ".asv/" in ignored


@pytest.mark.slow
def test_asv_check(tmp_path):
    p = _asv(["check", "-E", f"existing:{sys.executable}"], tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "No problems found" in p.stdout


@pytest.mark.slow
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
    from rooflab.cuda import backend

    skipped = "n/a" in out or "skipped" in out
    assert skipped == (not backend.available())  # skipped exactly when there is no GPU


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


def test_model_op_benchmark_verifies_with_the_variants_declared_tolerance(monkeypatch):
    """ModelOpCPU verifies through the one driver, so a conv op is held to conv's tolerance (its
    result_dtype "float32/conv"), not the elementwise default it once got (a fresh asv run failed
    resnet50:layer1.0.conv2 at 1.3e-6 absolute, within conv's 3e-5)."""
    sys.path.insert(0, str(ROOT))
    from benchmarks import _common, bench_models_cpu
    from rooflab import verify

    seen = []
    real = verify.check
    monkeypatch.setattr(verify, "check", lambda *a, **k: seen.append(k.get("dtype")) or real(*a, **k))
    monkeypatch.setattr(_common, "_PREPARED", {})
    run = bench_models_cpu._build("resnet50", "layer1.0.conv2")
    assert callable(run) and seen and all(str(d).endswith("/conv") for d in seen), seen
