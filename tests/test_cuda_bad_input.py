"""A GPU run that cannot happen is one clear line on stderr and exit status 2, and with
``--device all`` the CPU results of the same run are kept (issue 25): no cupy, no driver, a driver
older than cupy's CUDA runtime, a GPU index that does not exist."""

import types

import pytest

from rooflab import cli
from rooflab.cuda import backend
from tests.conftest import TINY


def _one_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.startswith("rooflab: error:")]
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize(
    "why",
    [
        "cupy is not installed (ModuleNotFoundError); install rooflab[cuda]",
        "no NVIDIA driver on this machine (libcuda.so.1 cannot be loaded)",
    ],
)
def test_no_gpu_is_one_line_and_exit_2(monkeypatch, capsys, tmp_path, why):
    monkeypatch.setattr(backend, "probe", lambda: (False, why))
    assert cli.main(["run", "--device", "cuda", "--quick", "--out", str(tmp_path)]) == 2
    assert why in _one_line(capsys.readouterr().err)
    assert not list(tmp_path.rglob("*.json"))


@pytest.mark.slow  # a whole (tiny) CPU probe run
def test_device_all_keeps_the_cpu_results(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(backend, "probe", lambda: (False, "no NVIDIA driver on this machine"))
    argv = ["run", "--device", "all", "--suite", "probe", *TINY, "--no-plot", "--out", str(tmp_path)]
    assert cli.main(argv) == 2
    line = _one_line(capsys.readouterr().err)
    assert "no NVIDIA driver" in line and "CPU results above are kept" in line
    (f,) = tmp_path.glob("*/rooflab-probe-cpu-*.json")
    assert '"status": "complete' in f.read_text()


def test_a_driver_older_than_cupys_runtime_is_named(monkeypatch):
    def count():
        raise RuntimeError("cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA runtime version")

    rt = types.SimpleNamespace(getDeviceCount=count, driverGetVersion=lambda: 12020, runtimeGetVersion=lambda: 13000)
    fake = types.ModuleType("cupy")
    fake.__version__ = "14.2.0"
    fake.cuda = types.SimpleNamespace(runtime=rt)
    monkeypatch.setitem(__import__("sys").modules, "cupy", fake)
    monkeypatch.setattr(backend, "_driver_present", lambda: True)
    ok, why = backend.probe.__wrapped__()
    assert not ok and "driver (CUDA 12.2) is older than the CUDA runtime cupy 14.2.0 was built for (CUDA 13.0)" in why


def test_a_gpu_index_that_does_not_exist(monkeypatch, capsys, tmp_path):
    pytest.importorskip("cupy")
    from tests import fake_gpu

    fake_gpu.FakeGPU(monkeypatch, compile=False).install()
    assert cli.main(["run", "--device", "cuda", "--gpu", "3", "--quick", "--out", str(tmp_path)]) == 2
    assert "CUDA device 3 does not exist (this machine has 1)" in _one_line(capsys.readouterr().err)
