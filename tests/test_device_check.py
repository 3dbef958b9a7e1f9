"""scripts/device_check.sh, the one-call GPU check: its stage limits fit the 480 s it may take; without a
GPU it says why in one line and exits 2; rehearsed on the CPU stand-in for cupy (--rehearse) every
stage runs and writes its file (at most 8, at the top of OUTDIR), the summary table comes last, and a
wrong kernel makes the exit status 1 with the failing stage named."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rooflab.cuda import backend

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "device_check.sh"
STAGES = ["facts", "smoke", "run", "peers", "ladder", "families"]


def _run(out, *args, env=None, timeout=300):
    env = {**os.environ, "PYTHON": sys.executable, **(env or {})}
    return subprocess.run(
        ["bash", str(SCRIPT), *args, str(out)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )


def test_stage_limits_fit_480_seconds():
    text = SCRIPT.read_text()
    stages = dict(re.findall(r"^stage (\w+) (\d+)$", text, re.M))
    assert list(stages) == STAGES  # in order of value
    others = [int(x) for x in re.findall(r"\btimeout (\d+) ", text)]  # install, nvidia-smi, summary
    kill = int(re.search(r"timeout --kill-after=(\d+) \"\$limit\"", text).group(1))
    total = sum(map(int, stages.values())) + sum(others) + kill * len(stages)
    assert len(others) == 3 and total <= 480, (stages, others, total)


@pytest.mark.skipif(backend.probe()[0], reason="a GPU is here: the check really runs")
def test_without_a_gpu_one_line_and_exit_2(tmp_path):
    p = _run(tmp_path / "out")
    log = (tmp_path / "out" / "device_check.log").read_text()
    assert p.returncode == 2, log
    assert [ln for ln in log.splitlines() if ln.startswith("device_check: error:")] == [
        f"device_check: error: {backend.probe()[1]}"
    ]
    assert "Traceback" not in log


@pytest.mark.slow  # ~40 s: every stage on the numpy stand-in
def test_rehearsal_runs_every_stage_and_a_wrong_kernel_fails_it(tmp_path):
    pytest.importorskip("cupy")
    from rooflab.cuda import compiler

    try:
        compiler._nvrtc()
    except Exception as e:
        pytest.skip(str(e))
    out = tmp_path / "out"
    env = {"ROOFLAB_CACHE_DIR": str(tmp_path / "cache"), "ROOFLAB_REHEARSE_WRONG": "stream_triad"}
    p = _run(out, "--rehearse", env=env)
    log = (out / "device_check.log").read_text()
    assert p.returncode == 1, log  # the triad is 1 % off: smoke and run fail, the rest is fine
    files = sorted(x.name for x in out.iterdir())
    assert files == sorted(["device_check.log", "summary.txt", *(f"{s}.json" for s in STAGES)]) and len(files) <= 8
    summary = (out / "summary.txt").read_text()
    assert log.rstrip().splitlines()[-1].startswith("== done in") and summary.strip() in log
    states = dict(re.findall(r"^(\w+) +(ok|FAILED \(exit \d\))$", summary, re.M))
    assert states == {**dict.fromkeys(STAGES, "ok"), "smoke": "FAILED (exit 1)", "run": "FAILED (exit 1)"}, summary
    assert "FAILED cuda.stream.triad" in log and "best float32 GEMM rung / cuBLAS" in summary
    assert "Traceback" not in log
    built = list((tmp_path / "cache" / "cuda").glob("*.cubin"))  # what scripts/build_cubins.sh keeps
    assert any("wgmma" in f.name and "sm_90a" in f.name for f in built) and any("conv" in f.name for f in built)
