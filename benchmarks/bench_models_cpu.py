"""Real model ops on the CPU through numpy/BLAS (the framework path), one per kind of bottleneck."""

from ._common import bench_params, prepared, thread_counts


def _build(model, layer):
    from rooflab.models import catalog, execute
    from rooflab.verify import check

    ops = catalog.model_ops(model)
    op = next(o for o in ops if o["name"] == layer)
    impl = execute.build(op)
    check(impl.run(), impl.reference(), dtype=op["dtype"], rtol=2e-3, atol=2e-3, what=layer)
    return impl


class ModelOpCPU:
    params = ([f"{m}:{layer}" for m, layer in bench_params("model_ops", [])],)
    param_names = ["op"]
    timeout = 300

    def setup(self, key):
        from threadpoolctl import threadpool_limits

        model, layer = key.split(":", 1)
        self.impl = prepared(("model", key), lambda: _build(model, layer))
        self._limit = threadpool_limits(thread_counts()[-1], user_api="blas")

    def time_op(self, key):
        self.impl.run()
