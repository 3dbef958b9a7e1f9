"""GPU tests of the CUDA families (conv, elementwise, chase, launch, transfer): the checks of
tests/cuda_family_checks.py on the real device (every variant verified at small shapes, bad input
refused, results just outside the tolerance rejected), then every case of each family's quick suite
verified and timed once, so the suites are known to run on the GPU within the device check's budget.
No assertion looks at a figure. With ROOFLAB_FAMILY_FIGURES=FILE the figures of the quick suites
are written there as JSON (scripts/device_check.sh sets it and prints a summary).

Skipped without a CUDA device (cupy, driver and GPU); run by scripts/device_check.sh."""

from __future__ import annotations

import importlib
import json
import os

import pytest

import rooflab
from rooflab.cuda import backend
from rooflab.errors import RooflabError
from tests import cuda_family_checks as checks

ok, why = backend.probe()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not ok, reason=why)]

FIGURES: dict = {}


def test_conv_variants_verify():
    errors = checks.check_conv_variants()
    FIGURES["conv accuracy (max|err| / max|ref|, small shapes)"] = {f"{n} {s}": e for (n, s), e in errors.items()}


def test_conv_library_in_float64():
    checks.check_conv_library_float64()


def test_conv_bad_input_is_refused():
    checks.check_conv_rejects_bad_input()


def test_conv_results_just_outside_the_tolerance_fail():
    checks.check_conv_wrong_results_rejected()


def test_elementwise_variants_verify():
    checks.check_elementwise_variants()


def test_elementwise_unaligned_views():
    checks.check_elementwise_unaligned()


def test_elementwise_nan_is_kept():
    checks.check_elementwise_nan()


def test_elementwise_bad_input_is_refused():
    checks.check_elementwise_rejects_bad_input()


def test_fused_chains_equal_unfused():
    checks.check_fused_equals_unfused()


def test_chase():
    checks.check_chase()


def test_launch_paths_count_their_launches():
    checks.check_launch()


def test_transfers():
    checks.check_transfer()


def test_host_arrays_are_refused():
    v = rooflab.get_variant("cuda.conv.02-direct-tiled")
    x, w, out = v.inputs()
    with pytest.raises(RooflabError, match="must be a cupy array"):
        v(x.get(), w, out, pad=1)
    add = rooflab.get_variant("cuda.elementwise.add.01-kernel")
    a, b, y = add.inputs({"numel": 64})
    with pytest.raises(RooflabError, match="must be a cupy array"):
        add(a, b.get(), y)


# ---- the quick suites, verified and timed through the one driver ---------------------------------


def _measure(case, budget_s=0.05) -> dict:
    """One case through rooflab.driver (verify with the variant's tolerance from the one table,
    calibrate, time with CUDA events), summarised for the device check's table."""
    import cupy as cp

    from rooflab.cuda.backend import driver_backend
    from rooflab.driver import Driver, Settings

    driver = Driver(
        driver_backend(),
        Settings(budget_s=budget_s, target_s=0.002, min_samples=3, cv_limit=1.0, max_attempts=1, probe_clock=False),
    )
    try:
        r = driver.run_case(case)
    except RooflabError as e:  # inputs refused before anything ran
        return {"variant": case.variant, "label": case.label, "status": "failed", "error": str(e)}
    finally:
        cp.get_default_memory_pool().free_all_blocks()
    rec = {"variant": r.variant, "label": r.label, "size": case.size, "meta": case.meta, "status": r.status}
    if r.status != "ok":
        rec["error"] = r.error
        return rec
    t = r.time_s["median"]
    rec.update(
        verification=r.verification,
        reps=r.reps,
        us_per_call=t / r.reps * 1e6,
        ns_per_launch=r.ns_per_launch["median"],
        gbps=r.gbps["median"] if r.gbps else None,
        gflops=r.gflops["median"] if r.gflops else None,
    )
    if "executed_flops" in case.meta:
        rec["executed_gflops"] = case.meta["executed_flops"] * r.reps / t / 1e9
    if r.family == "chase":
        rec["latency"] = r.meta.get("chase_latency")
    return rec


@pytest.mark.slow
@pytest.mark.parametrize("family", ["launch", "transfer", "chase", "elementwise", "conv"])
def test_quick_suite_runs(family):
    module = importlib.import_module(f"rooflab.families.{family}.cuda")
    records = [_measure(case) for case in module.cases(True, None)]
    FIGURES[family] = records
    path = os.environ.get("ROOFLAB_FAMILY_FIGURES")
    if path:
        from rooflab.cuda import loader

        FIGURES["cuda_builds"] = loader.builds()
        with open(path, "w") as f:
            json.dump(FIGURES, f, indent=1, default=str)
    failed = [(r["label"], r["error"]) for r in records if r["status"] != "ok"]
    assert not failed, failed
