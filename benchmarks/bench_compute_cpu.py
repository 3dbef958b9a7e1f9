"""CPU compute: FMA peak per dtype and thread count, and points of the intensity sweep.

time_fma: seconds per call (~1e9 FLOP); track_gflops: GFLOP/s, higher is better.
"""

import numpy as np

from ._common import bench_params, prepared, thread_counts


def _build_fma(dtype, threads):
    from rooflab.kernels.cpu import ert

    import rooflab
    from rooflab.cpu import machine as cpu_machine
    from rooflab.cpu.backend import cpu_backend
    from rooflab.driver import Driver, Settings

    K, S = bench_params("fma_config", (64, 8))
    caches = cpu_machine.read_caches()
    l1 = caches[0]["size_bytes"] if caches else 32 << 10
    block = ert.block_elements(l1, np.dtype(dtype).itemsize, S)
    v = rooflab.get_variant("cpu.ert.fma")
    (a,) = v.inputs(block * threads, np.dtype(dtype))
    params = {"K": K, "S": S, "block": block}
    Driver(cpu_backend(), Settings(probe_clock=False)).verify(v, (a,), v.params(reps=2, **params), threads)
    reps = max(1, int(1e9 / (2 * K * a.size)))
    return v, a, params, reps


class FmaPeakCPU:
    params = (bench_params("fma_dtypes", ["float64", "float32"]), thread_counts())
    param_names = ["dtype", "threads"]
    timeout = 300

    def setup(self, dtype, threads):
        import numba

        numba.set_num_threads(threads)
        self.v, self.a, self.p, self.reps = prepared(("fma", dtype, threads), lambda: _build_fma(dtype, threads))

    def time_fma(self, dtype, threads):
        self.v.kernel(self.a, reps=self.reps, threads=threads, **self.p)

    def track_gflops(self, dtype, threads):
        from ._common import median_seconds

        t = median_seconds(lambda: self.v.kernel(self.a, reps=self.reps, threads=threads, **self.p))
        return round(self.v.work(self.a, reps=self.reps, **self.p).flops / t / 1e9, 4)

    track_gflops.unit = "GFLOP/s"
    track_gflops.higher_is_better = True


def _build_sweep(K, passes):
    from rooflab.kernels.cpu import ert, stream

    import rooflab
    from rooflab.cpu.backend import cpu_backend
    from rooflab.driver import Driver, Settings
    from rooflab.memory import aligned_empty
    from rooflab.threads import max_threads

    t = max_threads()
    block = ert.block_elements(32 << 10, 8)
    n = (256 << 20) // 8 // (block * t) * (block * t)
    a = aligned_empty(n)
    stream.fill_pattern(a, t)
    v = rooflab.get_variant("cpu.ert.fma")
    params = {"K": K, "S": ert.DEFAULT_S, "block": block}
    Driver(cpu_backend(), Settings(probe_clock=False)).verify(v, (a,), v.params(reps=passes, **params), t)
    return v, a, params, t


class IntensityCPU:
    """One point of the intensity sweep on a 256 MiB array at all threads: FLOP/B = K * passes / 8."""

    params = ([f"{k}x{p}" for k, p in bench_params("intensity_K_passes", [(1, 1), (32, 64)])],)
    param_names = ["K_x_passes"]
    timeout = 300

    def setup(self, kp):
        import numba

        K, passes = map(int, kp.split("x"))
        self.passes = passes
        self.v, self.a, self.p, self.t = prepared(("sweep", kp), lambda: _build_sweep(K, passes))
        numba.set_num_threads(self.t)

    def time_sweep(self, kp):
        self.v.kernel(self.a, reps=self.passes, threads=self.t, **self.p)

    def track_gflops(self, kp):
        from ._common import median_seconds

        t = median_seconds(lambda: self.v.kernel(self.a, reps=self.passes, threads=self.t, **self.p), min_samples=3)
        return round(self.v.work(self.a, reps=self.passes, **self.p).flops / t / 1e9, 4)

    track_gflops.unit = "GFLOP/s"
    track_gflops.higher_is_better = True
