"""The kernel families in asv (gemm, conv, elementwise, chase, latency): for each family's quick suite (the same cases `rooflab run --suite
FAMILY --quick` measures), variant 0 (the library) and the top rung of each op, so a regression of
either our best kernel or the library shows up across commits. Parameters come from the families'
own declarations (rooflab.registry.family_cases); setup builds and verifies once per process; a
kernel that fails its check fails its benchmark instead of producing a number."""

from ._common import prepared

FAMILIES = ("gemm", "conv", "elementwise", "chase", "latency")


def _selected(family):
    """Quick-suite cases of variant 0 and of the highest rung of each (family prefix, op)."""
    from rooflab.registry import family_cases, get_variant

    try:
        cases = family_cases(family, "cpu", quick=True, threads=[1])
    except Exception:  # a rooflab without this family
        return []
    top: dict = {}
    for c in cases:
        v = get_variant(c.variant)
        key = (c.variant.rsplit(".", 1)[0], v.op)
        top[key] = max(top.get(key, -1), v.number or 0)
    keep = []
    for c in cases:
        v = get_variant(c.variant)
        if v.library or (v.number or 0) == top[(c.variant.rsplit(".", 1)[0], v.op)]:
            keep.append(c)
    return keep


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


class ConvCPU(_Family):
    family = "conv"
    params = (_labels("conv"),)
    param_names = ["case"]


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
