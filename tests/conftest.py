import numpy as np
import pytest

import rooflab  # noqa: F401  (numba settings before numba is imported by the tests)


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def pytest_report_header(config):
    from rooflab.cpu import machine as cpu_machine

    cpu = cpu_machine.describe_cpu()
    return f"rooflab on {cpu['model']} ({cpu['physical_cores']} cores, simd: {' '.join(cpu['simd'][:6])}...)"


TINY = ["--quick", "--max-working-set", "256K", "--budget", "0.005"]


@pytest.fixture(scope="session")
def quick_result(tmp_path_factory):
    """One tiny `rooflab run --quick` shared by the CLI, report and models tests."""
    from rooflab import cli

    out = tmp_path_factory.mktemp("results")
    rc = cli.main(["run", *TINY, "--out", str(out)])
    assert rc == 0
    files = sorted(out.glob("*/rooflab-ceilings-cpu-*.json"))
    assert len(files) == 1
    return files[0]


# CUDA compile checks kept in the fast loop: every source through NVRTC for sm_90 (sm_90a for wgmma).
# The same checks for sm_80, nvcc's stand-alone builds and the knob sweeps (1-6 s each) run in CI.
_SLOW_COMPILES = (
    "[sm_80]",
    "-sm_80]",
    "test_nvcc_",
    "test_sweep_candidates_",
    "test_file_defaults_are_the_launcher_knobs",
)


def pytest_collection_modifyitems(config, items):
    """Tests that need a real `rooflab run` (the quick_result fixture, ~1 min) and the second-arch /
    nvcc duplicates of the CUDA compile checks are slow: the fast loop `pytest -m "not slow"` skips
    them; CI runs everything."""
    for item in items:
        if "quick_result" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)
        elif "compile" in item.module.__name__ and any(k in item.nodeid for k in _SLOW_COMPILES):
            item.add_marker(pytest.mark.slow)
