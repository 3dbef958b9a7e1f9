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


# The fast loop (`pytest -m "not slow"`, < 60 s on 2 cores) leaves to CI: every NVRTC/nvcc build and
# SASS check of kernels/cuda (1-9 s each; the CUDA kernel author's loop is
# `pytest tests/test_cuda_*compile*.py`), and the tests that draw whole reports or charts.
_SLOW_MODULES = ("test_cuda_compile", "test_cuda_gemm_compile", "test_cuda_families_compile")
_SLOW_TESTS = (
    "test_all_plots_writes_the_latency_chart",
    "test_report_shows_the_latency_chart_and_cycles",
    "test_asv_check",
    "test_layers_figure_bars_and_annotations",
    "test_rooflab_plot_writes_the_conv_charts",
    "test_place_runtime_cli_writes_table_plot_and_summary",
    "test_intensity_point_on_a_small_array_uses_shorter_blocks",
    "test_intensity_point_whose_kernel_skips_the_slice_fails_verification",
    "test_gpu_result_is_one_panel_and_files_are_written",
)


def pytest_collection_modifyitems(config, items):
    """Tests that need a real `rooflab run` (the quick_result fixture, ~1 min), the CUDA builds and
    the whole-chart tests are slow: the fast loop `pytest -m "not slow"` skips them; CI runs everything."""
    for item in items:
        if "quick_result" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)
        elif item.module.__name__.split(".")[-1] in _SLOW_MODULES or item.originalname in _SLOW_TESTS:
            item.add_marker(pytest.mark.slow)
