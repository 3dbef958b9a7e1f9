import numpy as np
import pytest

import rooflab  # noqa: F401  (numba settings before numba is imported by the tests)


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def pytest_report_header(config):
    from rooflab import machine

    cpu = machine.describe_cpu()
    return f"rooflab on {cpu['model']} ({cpu['physical_cores']} cores, simd: {' '.join(cpu['simd'][:6])}...)"
