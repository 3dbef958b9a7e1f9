"""CPU compute: FMA peak per dtype and thread count, the INT8 and BF16 dot peaks per unit
(vpmaddubsw ymm, vpdpbusd zmm, vdpbf16ps zmm) where this CPU runs them, and points of the intensity sweep.

time_fma / time_dot: seconds per call (~1e9 FLOP or int8 ops); track_gflops / track_gops: higher is
better.
"""

import numpy as np

from ._common import bench_params, dram_bytes, prepared, thread_counts


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


def _lowprec_units():
    try:
        from rooflab.families.lowprec import available
    except ImportError:  # an older rooflab without the low-precision roofs
        return []
    return [u for u, why in available().items() if why is None]


def _build_dot(unit, threads):
    import rooflab
    from rooflab.cpu.backend import cpu_backend
    from rooflab.driver import Driver, Settings

    v = rooflab.get_variant(f"cpu.lowprec.{unit}")
    inputs = v.inputs(threads)
    Driver(cpu_backend(), Settings(probe_clock=False)).verify(v, inputs, v.params(reps=3), threads)
    reps = max(1, int(1e9 / v.work(*inputs).flops))
    return v, inputs, reps


class LowPrecPeakCPU:
    """INT8 (GOPS), BF16 and FP16 (GFLOP/s) dot and tile peaks; skipped (NotImplementedError in setup)
    for a unit this CPU cannot run (AMX: also where Linux refuses the tile state)."""

    params = (bench_params("lowprec_units", ["int8-avx2", "int8-vnni", "bf16-avx512"]), thread_counts())
    param_names = ["unit", "threads"]
    timeout = 300

    def setup(self, unit, threads):
        if unit not in _lowprec_units():
            raise NotImplementedError(f"this CPU does not run the {unit} unit")
        self.v, self.inputs, self.reps = prepared(("lowprec", unit, threads), lambda: _build_dot(unit, threads))

    def time_dot(self, unit, threads):
        self.v.kernel(*self.inputs, reps=self.reps, threads=threads)

    def track_gops(self, unit, threads):
        from ._common import median_seconds

        t = median_seconds(lambda: self.v.kernel(*self.inputs, reps=self.reps, threads=threads))
        return round(self.v.work(*self.inputs, reps=self.reps).flops / t / 1e9, 4)

    track_gops.unit = "GOPS (INT8) or GFLOP/s (BF16, FP16)"
    track_gops.higher_is_better = True


SWEEP_CONFIGS = ["1-stream-L1-blocks", "8-streams-L2-blocks"]  # rooflab.suite_ceilings.intensity_configs


def _build_sweep(K, passes, config):
    """The suite's own sweep point: cpu.intensity.ert-rotating on a DRAM-sized array (where the
    suite's probe finds DRAM, at least 256 MiB; shared by every point), all threads, in one of the suite's two (streams, block) configurations."""
    import rooflab
    from rooflab import suite_ceilings
    from rooflab.cpu import machine as cpu_machine
    from rooflab.cpu.backend import cpu_backend
    from rooflab.driver import Driver, Settings
    from rooflab.threads import max_threads

    caches = cpu_machine.read_caches()
    l1 = caches[0]["size_bytes"] if caches else 32 << 10
    l2 = next((c["size_bytes"] for c in caches if c["level"] == 2), 8 * l1)
    configs = bench_params("intensity_configs", SWEEP_CONFIGS)  # the names the benchmark's params use
    S, block = suite_ceilings.intensity_configs(l1, l2)[configs.index(config)]
    t = max_threads()
    v = rooflab.get_variant("cpu.intensity.ert-rotating")
    nbytes = dram_bytes()  # one array for every point: kept while the points run
    inputs = prepared(("sweep-array", nbytes, t), lambda: v.inputs(nbytes, np.dtype(np.float64), threads=t), "array")
    params = v.params(K=K, S=S, block=block, target_s=0.05)
    Driver(cpu_backend(), Settings(probe_clock=False)).verify(v, inputs, {**params, "reps": passes}, t)
    return v, inputs, params, t


class IntensitySweepCPU:
    """One point of the intensity sweep as the ceilings suite runs it (cpu.intensity.ert-rotating, all
    threads, each call on the next slice of a DRAM-sized array): FLOP/B = K * passes / 8. (It
    replaces IntensityCPU, which timed cpu.ert.fma with S = 4 over a 256 MiB array: not what the
    suite measures, so its history ends there.)"""

    params = (
        [f"{k}x{p}" for k, p in bench_params("intensity_K_passes", [(1, 1), (32, 64)])],
        bench_params("intensity_configs", SWEEP_CONFIGS),
    )
    param_names = ["K_x_passes", "config"]
    timeout = 300

    def setup(self, kp, config):
        import numba

        K, passes = map(int, kp.split("x"))
        self.passes = passes
        self.v, self.inputs, self.p, self.t = prepared(("sweep", kp, config), lambda: _build_sweep(K, passes, config))
        numba.set_num_threads(self.t)

    def time_sweep(self, kp, config):
        self.v.kernel(*self.inputs, reps=self.passes, threads=self.t, **self.p)

    def track_gflops(self, kp, config):
        from ._common import median_seconds

        call = lambda: self.v.kernel(*self.inputs, reps=self.passes, threads=self.t, **self.p)  # noqa: E731
        t = median_seconds(call, min_samples=3)
        return round(self.v.work(*self.inputs, reps=self.passes, **self.p).flops / t / 1e9, 4)

    track_gflops.unit = "GFLOP/s"
    track_gflops.higher_is_better = True
