"""CPU bandwidth: read / copy / triad / update from L1-sized to DRAM-sized working sets, 1 and all threads.

time_kernel: seconds per call (each call moves >= 64 MiB, repeating small working sets inside the
compiled kernel): the regression signal. track_gbps: GB/s (STREAM byte counting), higher is better.
"""

from ._common import QUICK, bench_params, prepared, thread_counts


def _build(kernel, nbytes, threads):
    from rooflab.kernels.cpu import stream

    import rooflab
    from rooflab.cpu.backend import cpu_backend
    from rooflab.driver import Driver, Settings
    from rooflab.memory import aligned_empty

    v = rooflab.get_variant(f"cpu.stream.{kernel}")
    k = stream.ARRAYS[kernel]
    buf = aligned_empty(nbytes // 8)
    stream.fill_pattern(buf, threads)
    part = buf.size // k // 16 * 16
    inputs = tuple(buf[i * part : (i + 1) * part] for i in range(k))
    vparams = v.params(s=2.0) if kernel == "update" else v.params()  # s=1 would let a no-op pass
    Driver(cpu_backend(), Settings(probe_clock=False)).verify(v, inputs, vparams, threads)  # raises if wrong
    reps = max(1, (64 << 20) // nbytes)
    return v, inputs, reps, buf


class StreamCPU:
    params = (
        bench_params("stream_kernels", ["read", "copy", "triad"]),
        bench_params("stream_bytes_quick" if QUICK else "stream_bytes", [32 << 10, 1 << 20, 64 << 20]),
        thread_counts(),
    )
    param_names = ["kernel", "bytes", "threads"]
    timeout = 600

    def setup(self, kernel, nbytes, threads):
        import numba

        numba.set_num_threads(threads)
        self.v, self.inputs, self.reps, _ = prepared(
            ("stream", kernel, nbytes, threads), lambda: _build(kernel, nbytes, threads)
        )

    def time_kernel(self, kernel, nbytes, threads):
        self.v.kernel(*self.inputs, reps=self.reps, threads=threads)

    def track_gbps(self, kernel, nbytes, threads):
        from ._common import median_seconds

        t = median_seconds(lambda: self.v.kernel(*self.inputs, reps=self.reps, threads=threads))
        return round(self.v.work(*self.inputs, reps=self.reps).bytes / t / 1e9, 4)

    track_gbps.unit = "GB/s"
    track_gbps.higher_is_better = True
