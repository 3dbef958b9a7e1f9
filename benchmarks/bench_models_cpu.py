"""Real model ops on the CPU through numpy/BLAS (the framework path), one per kind of bottleneck."""

from ._common import bench_params, prepared, thread_counts


def _build(model, layer):
    """Variant 0 (the framework path) of the op's kind on the op's shape, verified once by the one
    driver (the variant's declared result dtype picks its tolerance: conv's is "float32/conv")."""
    import numpy as np

    from rooflab.cpu.backend import cpu_backend
    from rooflab.driver import Driver, Settings
    from rooflab.models import measure
    from rooflab.workloads import catalog

    op = next(o for o in catalog.model_ops(model) if o["name"] == layer)
    (v,), _ = measure.variants_for(op, "cpu")
    shape = dict(op["shape"])
    inputs = v.inputs(shape, np.dtype(measure.executed_dtype(op["dtype"], v.device, op["kind"])), seed=0)
    params = measure.op_params(v, shape)
    Driver(cpu_backend(), Settings(probe_clock=False)).verify(v, inputs, params, thread_counts()[-1])
    return lambda: v.kernel(*inputs, **params)


class ModelOpCPU:
    params = ([f"{m}:{layer}" for m, layer in bench_params("model_ops", [])],)
    param_names = ["op"]
    timeout = 300

    def setup(self, key):
        from threadpoolctl import threadpool_limits

        model, layer = key.split(":", 1)
        self.run = prepared(("model", key), lambda: _build(model, layer))
        self._limit = threadpool_limits(thread_counts()[-1], user_api="blas")

    def time_op(self, key):
        self.run()
