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
def quick_result(tmp_path_factory, worker_id):
    """One tiny `rooflab run --quick` shared by the CLI, report and models tests: made once per test
    run, by the first pytest-xdist worker that asks (the others wait on a file lock and read it)."""
    from filelock import FileLock

    from rooflab import cli

    root = tmp_path_factory.getbasetemp() if worker_id == "master" else tmp_path_factory.getbasetemp().parent
    out = root / "quick-result"
    with FileLock(str(root / "quick-result.lock")):
        files = sorted(out.glob("*/rooflab-ceilings-cpu-*.json"))
        if not files:
            rc = cli.main(["run", *TINY, "--out", str(out)])
            assert rc == 0
            files = sorted(out.glob("*/rooflab-ceilings-cpu-*.json"))
    assert len(files) == 1
    return files[0]


@pytest.fixture(scope="session")
def probe_compiled(tmp_path_factory, worker_id):
    """The `probe` suite's kernels in numba's on-disk cache before a fleet test starts its nodes:
    one tiny probe run per test run (file-locked as above). Without it, on a fresh machine, a
    4-node fleet compiles the same kernels in 4 processes at once on 2 cores (the Ray
    one-result-per-node test: 33 s with a cold cache, 17 s warm)."""
    from filelock import FileLock

    from rooflab import cli

    root = tmp_path_factory.getbasetemp() if worker_id == "master" else tmp_path_factory.getbasetemp().parent
    out = root / "probe-compiled"
    with FileLock(str(root / "probe-compiled.lock")):
        if not list(out.glob("*/rooflab-probe-cpu-*.json")):
            argv = ["run", "--suite", "probe", "--threads", "1", "--budget", "0.02", "--no-plot", "--out", str(out)]
            assert cli.main(argv) == 0
    return out


# The fast loop (`pytest -m "not slow"`) leaves to CI the tests marked `@pytest.mark.slow` where they
# are written (a decorator, or `pytestmark` for a whole module such as the CUDA builds): a renamed test
# keeps its mark. A test that asks for `quick_result` (a real `rooflab run`, ~1 min) must carry the mark:
# one that does not is refused at collection, so it cannot slip into the fast loop.


def pytest_collection_modifyitems(config, items):
    unmarked = [
        item.nodeid
        for item in items
        if "quick_result" in getattr(item, "fixturenames", ()) and item.get_closest_marker("slow") is None
    ]
    if unmarked:
        raise pytest.UsageError(
            "tests that use the quick_result fixture (a real `rooflab run`) must be marked @pytest.mark.slow: "
            + ", ".join(unmarked)
        )
