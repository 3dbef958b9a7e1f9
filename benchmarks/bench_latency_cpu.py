"""Dispatch latency on the CPU: empty @njit call, 8-element ufunc, numba parallel region.

time_*: seconds for 1000 calls (regression signal). track_*_seconds: median seconds per call from
rooflab's own timer (unit "seconds": asv formats it, lower is better).
"""

import numpy as np

from ._common import prepared, thread_counts


def _ops():
    import rooflab
    from rooflab.cpu.backend import cpu_backend
    from rooflab.driver import Driver, Settings

    r = Driver(cpu_backend(), Settings(probe_clock=False))
    t = thread_counts()[-1]
    empty = rooflab.get_variant("cpu.latency.empty")
    ufunc = rooflab.get_variant("cpu.latency.ufunc")
    fj = rooflab.get_variant("cpu.latency.fork_join")
    u_in = ufunc.inputs(8)
    f_in = (np.zeros(t),)
    r.verify(empty, (), {}, 1)
    r.verify(ufunc, u_in, {}, 1)
    r.verify(fj, f_in, {}, t)
    from rooflab.kernels.cpu import latency

    a, b, c = u_in
    return {
        "empty": latency.empty,
        "ufunc": lambda: np.add(a, b, out=c),
        "fork_join": lambda: latency.fork_join(f_in[0]),
    }


class Dispatch:
    timeout = 120

    def setup(self):
        self.ops = prepared("dispatch", _ops)

    def time_empty_njit_x1000(self):
        f = self.ops["empty"]
        for _ in range(1000):
            f()

    def time_ufunc_8_x1000(self):
        f = self.ops["ufunc"]
        for _ in range(1000):
            f()

    def time_fork_join_x100(self):
        f = self.ops["fork_join"]
        for _ in range(100):
            f()

    def track_empty_njit_seconds(self):
        from rooflab.cpu.timing import time_per_call
        from rooflab.timing import summarize

        return summarize(time_per_call(self.ops["empty"], 10000, budget_s=0.2).seconds)["median"]

    track_empty_njit_seconds.unit = "seconds"

    def track_ufunc_8_seconds(self):
        from rooflab.cpu.timing import time_per_call
        from rooflab.timing import summarize

        return summarize(time_per_call(self.ops["ufunc"], 5000, budget_s=0.2).seconds)["median"]

    track_ufunc_8_seconds.unit = "seconds"
