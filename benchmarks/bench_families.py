"""The kernel families in asv (gemm, qgemm, qconv, conv, elementwise, chase, latency): for each family's quick suite (the same cases `rooflab run --suite
FAMILY --quick` measures), variant 0 (the library) and the best rung of each op, so a regression of
either our best kernel or the library shows up across commits. Parameters come from the families'
own declarations (rooflab.registry.family_cases); setup builds and verifies once per process; a
kernel that fails its check fails its benchmark instead of producing a number."""

from ._common import bench_params, prepared

# families whose quick suite runs, per case, the library and the one rung that takes that shape
# (qconv: im2col for a dense conv, the direct kernel for a depthwise one): every case is kept
EVERY_CASE = ("qconv",)
FAMILIES = ("gemm", "qgemm", "qconv", "conv", "elementwise", "chase", "latency")


def _selected(family):
    """Quick-suite cases of variant 0 and of the best rung of each (family prefix, op): its "best" role, else its highest."""
    from rooflab.registry import best_of, family_cases, get_variant

    try:
        cases = family_cases(family, "cpu", quick=True, threads=[1])
    except Exception:  # a rooflab without this family
        return []
    # the family's own rungs (a GEMM family's suite also runs its units' peaks: asv tracks those in
    # bench_ceilings's low-precision benchmarks)
    if family != "lowprec":
        cases = [c for c in cases if not c.variant.startswith("cpu.lowprec.")]
    if family in EVERY_CASE:
        return cases
    ladders: dict = {}  # one ladder per (variant prefix, op): the library and its best rung (registry.best_of)
    for c in cases:
        v = get_variant(c.variant)
        ladders.setdefault((c.variant.rsplit(".", 1)[0], v.op), {})[v.name] = v
    best = {key: best_of(vs.values()) for key, vs in ladders.items()}
    keep = []
    for c in cases:
        v = get_variant(c.variant)
        # a variant without a rung number (a stream kernel, a dispatch path) is no ladder's rung: kept
        if v.library or v.number is None or v is best[(c.variant.rsplit(".", 1)[0], v.op)]:
            keep.append(c)
    # a suite may repeat a case in passes spread over the run (the latency suite's dispatch paths):
    # one benchmark per label
    first: dict = {}
    for c in keep:
        first.setdefault(c.label or c.variant, c)
    return list(first.values())


NONE = "none"  # the parameter of a family this rooflab does not have (asv shows the benchmark skipped)


def _labels(family, skip=()):
    """Parameter values: the selected cases' labels, less those of the families in ``skip``."""
    return [c.label or c.variant for c in _selected(family) if c.variant.split(".")[1] not in skip] or [NONE]


def _prepare(family, label):

    from rooflab.cpu.backend import cpu_backend
    from rooflab.driver import Driver, Settings
    from rooflab.registry import get_variant

    (case,) = [c for c in _selected(family) if (c.label or c.variant) == label]
    v = get_variant(case.variant)
    inputs = Driver.inputs(case)
    params = v.params(**case.params)
    driver = Driver(cpu_backend(probe=False), Settings())
    driver.verify(v, inputs, v.params(**{**params, **(case.verify_params or {})}), case.threads)  # raises if wrong
    return lambda: v.kernel(*inputs, threads=case.threads, **params)


class _Family:
    family = ""
    timeout = 600

    def setup(self, label):
        if label == NONE:
            raise NotImplementedError(f"this rooflab has no {self.family} family")
        self.call = prepared((self.family, label), lambda: _prepare(self.family, label))

    def time_case(self, label):
        self.call()


class GemmCPU(_Family):
    family = "gemm"
    params = (_labels("gemm"),)
    param_names = ["case"]


class QgemmCPU(_Family):
    """The quantized rungs: INT8 GEMM and the 4-bit GEMV, each beside onnxruntime's MLAS kernel."""

    family = "qgemm"
    params = (_labels("qgemm"),)
    param_names = ["case"]


class QconvCPU(_Family):
    """The 8-bit convs: im2col into the INT8 GEMM and depthwise, each beside onnxruntime's QLinearConv."""

    family = "qconv"
    params = (_labels("qconv"),)
    param_names = ["case"]


class ConvCPU(_Family):
    family = "conv"
    params = (_labels("conv"),)
    param_names = ["case"]


def _prepare_conv(layer, variant):
    """One ResNet-50 3x3 layer (batch 1, 1 thread) on one conv variant, verified in setup."""
    import numba
    import numpy as np
    from threadpoolctl import threadpool_limits

    from rooflab.families import conv as F
    from rooflab.registry import get_variant
    from rooflab.verify import check

    (s,) = [s for s in F.resnet50_3x3_targets(1) if s["name"] == layer]
    v = get_variant(variant)
    params = F.params_for(s)
    x, w = F.make_inputs(s, np.float32)
    numba.set_num_threads(1)  # for this benchmark's process (asv runs each in its own)
    limits = threadpool_limits(limits=1, user_api="blas")
    check(v(x, w, **params), F.reference(x, w, **params), dtype=v.result_dtype(x, w, **params), what=variant)

    def call():
        v(x, w, **params)

    call.limits = limits  # kept alive with the call
    return call


class ConvAlgorithmsCPU:
    """Issue 13: the best variant of each algorithm (im2col + BLAS, blocked direct, Winograd
    F(4x4,3x3), FFT) on two ResNet-50 3x3 layers at batch 1, 1 thread; verified once in setup."""

    params = (bench_params("conv_layers", []), bench_params("conv_algorithms", []))
    param_names = ["layer", "variant"]
    timeout = 600

    def setup(self, layer, variant):
        self.call = prepared(("conv-alg", layer, variant), lambda: _prepare_conv(layer, variant))

    def time_conv(self, layer, variant):
        self.call()


class ElementwiseCPU(_Family):
    family = "elementwise"
    params = (_labels("elementwise"),)
    param_names = ["case"]


class ChaseCPU(_Family):
    family = "chase"
    params = (_labels("chase"),)
    param_names = ["case"]


class LatencyCPU(_Family):
    """The `latency` suite's CPU paths (dispatch, tiny chains op by op and fused); its pointer chase
    is ChaseCPU's. One call per sample: asv repeats it."""

    family = "latency"
    params = (_labels("latency", skip=("chase",)),)
    param_names = ["case"]
