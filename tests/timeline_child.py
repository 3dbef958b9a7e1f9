"""A measuring process for tests/test_latency_suite.py: the CPU backend's child, which appends
when it started, when it was prepared and when it measured to $ROOFLAB_TEST_TIMELINE."""

import os
import time

from rooflab import driver
from rooflab.cpu.backend import cpu_backend
from rooflab.processes import serve

LOG = os.environ["ROOFLAB_TEST_TIMELINE"]
STARTED = time.time()


def _log(what: str, t0: float, t1: float) -> None:
    with open(LOG, "a") as f:
        f.write(f"{os.getpid()} {what} {t0} {t1}\n")


_inputs, _run_case = driver.Driver.inputs, driver.Driver.run_case


def inputs(case):
    out = _inputs(case)
    _log("prepare", STARTED, time.time())
    return out


def run_case(self, case, inputs=None):
    t0 = time.time()
    rec = _run_case(self, case, inputs)
    _log("measure", t0, time.time())
    return rec


driver.Driver.inputs = staticmethod(inputs)
driver.Driver.run_case = run_case

if __name__ == "__main__":
    raise SystemExit(serve(cpu_backend))
