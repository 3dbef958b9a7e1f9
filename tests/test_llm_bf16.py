"""bfloat16 model GEMMs on the CPU's BF16 unit (issue 39): `rooflab llm --dtype bfloat16` and a bf16
GEMM of OPS.json run on the bgemm family where the CPU has AMX or AVX-512 BF16, and in float32 where
it has neither, said in one line. The rule is held on both sides whatever this host has (the unit
is monkeypatched); the execution through the rungs runs where this host has the unit.
"""

from __future__ import annotations

import numpy as np
import pytest

from rooflab.families import bgemm
from rooflab.models import llm, measure
from rooflab.models.llm import predict
from rooflab.workloads import ops


@pytest.mark.parametrize("unit", [None, "bf16-avx512", "amx-bf16"])
def test_which_ops_run_in_bf16_follows_the_unit(unit, monkeypatch):
    monkeypatch.setattr(bgemm, "unit", lambda: unit)
    want = "bfloat16" if unit else "float32"
    assert measure.executed_dtype("bfloat16", "cpu", "gemm") == want
    for kind in ("add", "rmsnorm", "batched_gemm", "softmax", "embedding"):
        assert measure.executed_dtype("bfloat16", "cpu", kind) == "float32"  # rooflab's CPU kernels: fp32
    assert measure.executed_dtype("float16", "cpu", "gemm") == "float32"  # no fp16 GEMM rung
    assert measure.executed_dtype("float32", "cpu", "gemm") == "float32"
    assert measure.executed_dtype("bfloat16", "cuda", "add") == "bfloat16"
    note = predict.dtype_note("bfloat16", "cpu")
    assert note and (unit in note if unit else "executed as float32" in note)


@pytest.mark.parametrize("unit", [None, "bf16-avx512"])
def test_bytes_and_weights_of_a_bf16_phase_count_the_executed_dtypes(unit, monkeypatch):
    monkeypatch.setattr(bgemm, "unit", lambda: unit)
    arch = llm.load("smollm-135m")
    ph = llm.phase_ops(arch, "decode", 1, context=64, dtype="bfloat16")
    w = predict.stored_weight_bytes(ph, "cpu")
    counted = llm.totals(ph)["weight_elems"]
    assert w == pytest.approx(counted * (2 if unit else 4))  # every weight at 2 bytes on a BF16 unit


def test_an_fp32_gemm_never_runs_on_the_bf16_variants():
    op = ops.normalize({"kind": "gemm", "shape": {"M": 4, "N": 8, "K": 16}, "name": "g"})
    lib, own = measure.variants_for(op, "cpu")
    assert all(v.family == "gemm" for v in lib + own) and lib


def test_a_bf16_gemm_runs_where_the_unit_is():
    op = ops.normalize({"kind": "gemm", "shape": {"M": 4, "N": 8, "K": 16}, "dtype": "bfloat16", "name": "g"})
    lib, own = measure.variants_for(op, "cpu")
    if bgemm.unit():
        assert [v.family for v in lib] == ["bgemm"] and {v.family for v in own} == {"bgemm"}
        assert all(measure.executed_dtype(op["dtype"], v.device, op["kind"]) == "bfloat16" for v in lib + own)
    else:  # the current behaviour: the FP32 GEMMs, the op executed in float32
        assert lib and all(v.family == "gemm" for v in lib + own)
        assert measure.executed_dtype(op["dtype"], lib[0].device, op["kind"]) == "float32"


def test_a_bias_is_added_and_its_absence_would_be_seen():
    A, B, bias = bgemm.inputs({"M": 3, "N": 40, "K": 70, "bias": True}, seed=2)
    ref = bgemm.reference(A, B, bias)
    assert np.abs(ref - bgemm.reference(A, B)).max() > 0  # a dropped bias changes the result
    assert np.array_equal(bgemm._numpy_fp32(A, B, bias), ref.astype(np.float32))
    if not bgemm.BG.available():  # the AVX-512 BF16 rung, exact on these values
        assert np.array_equal(bgemm._avx512_bf16(A, B, bias, threads=1), ref.astype(np.float32))


@pytest.mark.skipif(not bgemm.unit(), reason="this CPU has no BF16 unit (AMX or AVX-512 BF16)")
def test_a_bf16_linear_layer_is_measured_on_the_bf16_rungs_and_placed_on_the_bf16_roof():
    from rooflab import machine
    from rooflab.models import place
    from tests.test_plots import synthetic

    doc = synthetic()
    fp32 = next(c for c in doc["ceilings"] if c["kind"] == "compute" and c["dtype"] == "float32" and c["threads"] == 1)
    doc["ceilings"].append(
        dict(fp32, name="BF16 peak (vdpbf16ps zmm), 1 thread", dtype="bfloat16", value=2 * fp32["value"])
    )
    roofs = place.Roofs(doc, 1)
    op = ops.normalize(
        {"kind": "gemm", "shape": {"M": 2, "N": 96, "K": 64, "bias": True}, "dtype": "bfloat16", "name": "q_proj"}
    )
    placed, errors = measure.measure_ops([op], roofs, device="cpu", threads=1, quick=True, machine=machine.describe())
    assert not errors
    assert {p["variant"].split(".")[1] for p in placed} == {"bgemm"}
    assert all(p["dtype"] == "bfloat16" and p["verification"] for p in placed)
    assert all(p["peak_used"].startswith("BF16 peak") for p in placed)  # the BF16 roof, not the FP32 one
