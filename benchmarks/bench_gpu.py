"""GPU ceilings through the CUDA backend; every benchmark is skipped (n/a) without a GPU.

time_*: host wall time including a synchronize (seconds, the regression signal);
track_*: GB/s and GFLOP/s from CUDA events (higher is better).
"""

from ._common import bench_params, prepared, require_gpu


def _sync():
    import cupy

    cupy.cuda.get_current_stream().synchronize()


def _verified(name, *args):
    import rooflab
    from rooflab.verify import check

    v = rooflab.get_variant(name)
    inputs = v.inputs(*args)
    p = v.params()
    dtype = v.result_dtype(*inputs, **p) if v.result_dtype else inputs[0].dtype
    expected = v.reference(*inputs, reps=2, **p)
    check(v.kernel(*inputs, reps=2, **p), expected, dtype=dtype, what=name, kind=v.tolerance)
    return v, inputs, p


class StreamGPU:
    params = (["read", "copy", "triad"], bench_params("gpu_stream_bytes", [256 << 20]))
    param_names = ["kernel", "bytes"]
    timeout = 300

    def setup(self, kernel, nbytes):
        require_gpu()
        k = {"read": 1, "copy": 2, "triad": 3}[kernel]
        self.v, self.inputs, self.p = prepared(
            ("gstream", kernel, nbytes), lambda: _verified(f"cuda.stream.{kernel}", nbytes // 8 // k)
        )

    def time_kernel(self, kernel, nbytes):
        self.v.kernel(*self.inputs, **self.p)
        _sync()

    def track_gbps(self, kernel, nbytes):
        from rooflab.cuda.timing import time_gpu

        t = time_gpu(lambda: self.v.kernel(*self.inputs, **self.p)).stats()["median"]
        return round(self.v.work(*self.inputs).bytes / t / 1e9, 4)

    track_gbps.unit = "GB/s"
    track_gbps.higher_is_better = True


class ComputeGPU:
    params = (["cuda.fma.f32", "cuda.fma.f64", "cuda.mma.f16", "cuda.mma.bf16", "cuda.wgmma.f16", "cuda.wgmma.bf16"],)
    param_names = ["variant"]
    timeout = 300

    def setup(self, name):
        require_gpu()
        if name.startswith("cuda.wgmma"):
            from rooflab.cuda import compiler, loader

            if not compiler.runs_on("wgmma.cu", loader.device_arch()):
                raise NotImplementedError("wgmma needs Hopper (sm_90)")
        self.v, self.inputs, self.p = prepared(("gcomp", name), lambda: _verified(name))

    def time_kernel(self, name):
        self.v.kernel(*self.inputs, reps=64, **self.p)
        _sync()

    def track_gflops(self, name):
        from rooflab.cuda.timing import time_gpu

        t = time_gpu(lambda: self.v.kernel(*self.inputs, reps=64, **self.p)).stats()["median"]
        return round(self.v.work(*self.inputs, reps=64).flops / t / 1e9, 4)

    track_gflops.unit = "GFLOP/s"
    track_gflops.higher_is_better = True


class LaunchGPU:
    timeout = 120

    def setup(self):
        require_gpu()
        self.v, self.inputs, self.p = prepared("glaunch", lambda: _verified("cuda.launch.empty"))

    def time_launch_enqueue_x100(self):
        self.v.kernel(*self.inputs, reps=100)

    def time_launch_roundtrip(self):
        self.v.kernel(*self.inputs, reps=1)
        _sync()
