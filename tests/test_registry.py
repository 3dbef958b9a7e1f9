"""The registry's rules: one registration per name, suites that name only known variants, and every
variant in a suite whose reference and declared work accept the inputs it builds."""

import numpy as np
import pytest

import rooflab
from rooflab.errors import RooflabError
from rooflab.registry import Case, Variant, check_cases, family_cases, family_suites, list_variants, register


def _twin(name):
    base = rooflab.get_variant("cpu.stream.triad")
    return Variant(
        name=name,
        family=base.family,
        device="cpu",
        description="a twin",
        kernel=base.kernel,
        reference=base.reference,
        work=base.work,
        inputs=base.inputs,
    )


def test_a_variant_registered_twice_is_refused_by_name():
    with pytest.raises(RooflabError, match="'cpu.stream.triad' is registered twice"):
        register(_twin("cpu.stream.triad"))


def test_a_variant_must_be_named_for_its_device():
    with pytest.raises(RooflabError, match="must be named cpu"):
        register(_twin("gpu.stream.triad2"))


def test_a_suite_naming_an_unknown_variant_is_refused_before_measuring():
    with pytest.raises(RooflabError, match="cpu.stream.nope"):
        check_cases([Case("cpu.stream.triad", 1024), Case("cpu.stream.nope", 1024)])


def test_every_library_variant_is_rung_zero_and_every_family_has_a_suite_or_ops():
    for v in list_variants():
        assert v.number is None or v.number >= 0
        if v.library:
            assert v.number == 0
    assert {"gemm", "elementwise", "chase"} <= set(family_suites())


def _smallest_case_per_variant(device):
    out = {}
    for family in family_suites():
        for c in family_cases(family, device, quick=True, threads=[1]):
            out.setdefault(c.variant, c)
    return sorted(out.values(), key=lambda c: c.variant)


@pytest.mark.slow
@pytest.mark.parametrize("case", _smallest_case_per_variant("cpu"), ids=lambda c: c.variant)
def test_every_cpu_suite_variant_accepts_its_own_inputs(case):
    """reference(*inputs) and work(*inputs) run on what inputs() builds, and the work is declared."""
    v = rooflab.get_variant(case.variant)
    inputs = v.inputs(case.size, np.dtype(case.dtype), seed=0, threads=case.threads)
    params = v.params(**case.params)
    expected = v.reference(*inputs, **{**params, **(case.verify_params or {})})
    assert expected is not None, v.name
    work = v.work(*inputs, reps=1, **params)
    assert work.flops >= 0 and work.bytes >= 0 and (work.flops or work.bytes or work.launches), v.name
    if v.result_dtype:  # the tolerance lookup takes the same inputs (a bias included)
        assert v.result_dtype(*inputs, **params) is not None, v.name


def test_one_variant_loads_only_its_family_and_an_unknown_one_still_names_them_all():
    """A measuring process asks for one variant: only its family's module is imported (the others'
    numba decorators and units doubled its start-up); a name no family module matches falls back to
    loading every family, so the refusal still lists every variant."""
    import subprocess
    import sys

    code = (
        "import sys; from rooflab.registry import get_variant; get_variant('cpu.latency.empty'); "
        "print(sorted(m for m in sys.modules if m.startswith('rooflab.families.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "rooflab.families.latency" in out and "rooflab.families.gemm" not in out
    code = "from rooflab.registry import get_variant; get_variant('cpu.nofamily.x')"
    err = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stderr
    assert "unknown kernel variant 'cpu.nofamily.x'" in err and "cpu.gemm.00-numpy-blas" in err
