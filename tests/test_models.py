import json

import numpy as np
import pytest

from rooflab import RooflabError
from rooflab.models import measure, place
from rooflab.models.userops import parse_ops
from rooflab.workloads import catalog, ops


def test_resnet50_matches_published_totals():
    r = catalog.model_ops("resnet50", batch=1)
    assert sum(ops.macs(o) for o in r) / 1e9 == pytest.approx(4.089, abs=0.001)  # torchvision: 4.09 GMACs
    assert sum(ops.params(o) for o in r) == 25_557_032  # torchvision num_params
    kinds = [o["kind"] for o in r]
    assert (kinds.count("conv2d"), kinds.count("batchnorm"), kinds.count("relu"), kinds.count("add")) == (
        53,
        53,
        49,
        16,
    )
    r32 = catalog.model_ops("resnet50", batch=32)
    assert sum(ops.macs(o) for o in r32) == pytest.approx(32 * 4.0892e9, rel=1e-3)


def test_bert_and_gpt2_parameter_counts():
    b = catalog.model_ops("bert-base", seq=128)
    assert sum(ops.params(o) for o in b) + b[0]["shape"]["extra_params"] == 109_482_240
    g = catalog.model_ops("gpt2-decode")
    assert sum(ops.params(o) for o in g) + g[0]["shape"]["extra_params"] == 124_439_808
    # the decode step moves ~all weights once: intensity of its GEMVs ~ 2/itemsize (0.5 in fp32)
    gemv = [o for o in g if o["kind"] == "gemm" and o["shape"]["M"] == 1]
    assert all(0.45 < ops.intensity(o) < 0.51 for o in gemv)


def test_formulas_on_hand_examples():
    g = ops.normalize({"kind": "matmul", "shape": {"M": 2, "N": 3, "K": 4}, "dtype": "float32"})
    assert ops.flops(g) == 48 and ops.min_bytes(g) == 4 * (8 + 12 + 6)
    c = ops.normalize(
        {
            "kind": "conv2d",
            "shape": {"N": 1, "C": 3, "H": 224, "W": 224, "K": 64, "R": 7, "S": 7, "stride": 2, "pad": 3},
            "dtype": "fp16",
        }
    )
    assert c["shape"]["P"] == 112 and ops.flops(c) == 236_027_904 and ops.min_bytes(c) == 1_925_504  # research catalog
    assert ops.flops(ops.normalize({"kind": "layernorm", "shape": {"rows": 2, "cols": 10}})) == 100
    relu = ops.normalize({"kind": "relu", "shape": {"numel": 100}})
    assert ops.intensity(relu) == pytest.approx(1 / 8)


@pytest.mark.parametrize(
    "bad,needle",
    [
        ({"kind": "fft", "shape": {}}, "unknown kind"),
        ({"kind": "gemm", "shape": {"M": 1, "N": 2}}, "missing shape field(s) K"),
        ({"kind": "gemm", "shape": {"M": -1, "N": 2, "K": 2}}, "non-negative integer"),
        (
            {"kind": "conv2d", "shape": {"N": 1, "C": 3, "H": 8, "W": 8, "K": 4, "R": 3, "S": 3, "P": 99}},
            "inconsistent",
        ),
        ({"kind": "gemm", "shape": {"M": 1, "N": 2, "K": 2}, "dtype": "int4"}, "unknown dtype"),
    ],
)
def test_bad_ops_get_clear_messages(bad, needle):
    with pytest.raises(RooflabError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        ops.normalize(bad)


def test_user_ops_skip_bad_ones_and_keep_the_rest():
    good, bad = parse_ops(
        {
            "ops": [
                {"kind": "gemm", "shape": {"M": 4, "N": 4, "K": 4}},
                {"kind": "nope", "shape": {}},
                {"kind": "softmax", "shape": {"rows": 4}},
            ]
        }
    )
    assert [o["kind"] for o in good] == ["gemm"] and len(bad) == 2
    assert "unknown kind" in bad[0]["error"] and "cols" in bad[1]["error"]


# ---- classification: synthetic ceilings, every boundary ------------------------------------------

PEAK, BW, LAT = 100.0, 10.0, 1e-6  # GFLOP/s, GB/s, s -> ridge at 10 FLOP/B


def test_the_roof_with_the_largest_predicted_time_is_the_class():
    # 9.9 MFLOP at 100 GFLOP/s = 99 us; 1 MB at 10 GB/s = 100 us: memory explains the time
    c = place.classify(flops=9.9e6, nbytes=1e6, seconds=1e-4, peak_gflops=PEAK, bw_gbps=BW, latency_s=LAT)
    assert c["class"] == "memory-bound" and c["ridge"] == 10 and not c["below_roof"]
    c = place.classify(flops=10.1e6, nbytes=1e6, seconds=1.01e-4, peak_gflops=PEAK, bw_gbps=BW, latency_s=LAT)
    assert c["class"] == "compute-bound" and c["pct_of_roof"] == pytest.approx(100)
    assert c["attainable_gflops"] == pytest.approx(100) and c["pct_of_attainable"] == pytest.approx(100)


def test_latency_bound_when_dispatch_explains_the_time():
    # 1e4 FLOP / 100 GFLOP/s = 0.1 us and 100 B / 10 GB/s = 10 ns, but a dispatch costs 1 us
    c = place.classify(1e4, 1e2, 1.5e-6, PEAK, BW, LAT)
    assert c["class"] == "latency-bound" and c["pct_of_roof"] == pytest.approx(100 / 1.5)
    assert place.classify(1e6, 1e3, 2.1e-5, PEAK, BW, LAT)["class"] == "compute-bound"


def test_an_op_far_below_every_roof_says_so():
    # softmax-like: 1 MB should take 100 us at 10 GB/s; measured 2 ms -> 5 % of its memory roof
    c = place.classify(1e5, 1e6, 2e-3, PEAK, BW, LAT)
    assert c["class"] == "memory-bound" and c["below_roof"] and c["pct_of_roof"] == pytest.approx(5)


def test_cache_aware_roofs_and_stream_kernel_by_read_write_mix():
    assert place.stream_kernel_for(read=8e6, written=0) == "read"
    assert place.stream_kernel_for(read=4e6, written=4e6) == "copy"
    assert place.stream_kernel_for(read=8e6, written=4e6) == "triad"
    caches = [
        {"name": "L1", "size_bytes": 48 << 10, "private": True, "instances": 2},
        {"name": "L2", "size_bytes": 2 << 20, "private": True, "instances": 2},
        {"name": "L3", "size_bytes": 32 << 20, "private": False, "instances": 1, "shared_by_cpus": 2},
    ]
    from rooflab.cpu.caches import CacheMap

    cm = CacheMap(caches)  # OS sizes only: no ceilings run measured the plateaus
    assert cm.level_for(40 << 10, 1) == "L1"
    assert cm.level_for(12 << 20, 2) == "L3"  # the 12 MB GEMV of the issue lives in L3
    assert cm.level_for(64 << 20, 2) == "DRAM"


def test_model_summary_shares():
    placed = [
        {"class": "memory-bound", "total_time_s": 3.0, "flops": 1.0, "count": 1},
        {"class": "latency-bound", "total_time_s": 1.0, "flops": 1.0, "count": 1},
    ]
    s = place.summarize_model(placed)
    assert s["share_pct"] == {"latency-bound": 25.0, "memory-bound": 75.0}
    assert "75% memory-bound" in place.summary_line("m", "cpu", s)


# ---- execution: every op kind runs through its variants and matches its float64 reference --------

OP_CASES = [
    {"kind": "gemm", "shape": {"M": 33, "N": 17, "K": 65, "bias": True}},
    {"kind": "batched_gemm", "shape": {"batch": 3, "M": 5, "N": 7, "K": 9}},
    {"kind": "conv2d", "shape": {"N": 2, "C": 3, "H": 11, "W": 9, "K": 4, "R": 3, "S": 3, "stride": 2, "pad": 1}},
    {"kind": "conv2d", "shape": {"N": 1, "C": 8, "H": 5, "W": 5, "K": 6, "R": 1, "S": 1}},
    {"kind": "conv2d", "shape": {"N": 1, "C": 8, "H": 6, "W": 6, "K": 8, "R": 3, "S": 3, "pad": 1, "groups": 8}},
    {"kind": "conv2d", "shape": {"N": 1, "C": 8, "H": 6, "W": 6, "K": 4, "R": 3, "S": 3, "pad": 1, "groups": 2}},
    {"kind": "batchnorm", "shape": {"N": 2, "C": 3, "H": 4, "W": 5}},
    {"kind": "relu", "shape": {"numel": 1000}},
    {"kind": "gelu", "shape": {"numel": 1000}},
    {"kind": "add", "shape": {"numel": 1000}},
    {"kind": "softmax", "shape": {"rows": 6, "cols": 50}},
    {"kind": "layernorm", "shape": {"rows": 6, "cols": 50}},
    {"kind": "embedding", "shape": {"tokens": 10, "dim": 8, "vocab": 100, "tables": 3}},
    {"kind": "maxpool", "shape": {"N": 1, "C": 2, "H": 9, "W": 9, "kernel": 3, "stride": 2, "pad": 1}},
    {"kind": "avgpool", "shape": {"N": 2, "C": 3, "H": 4, "W": 4}},
]


# own variants whose first build costs ~30 s with a cold numba cache (as in tests/test_conv_cpu.py's
# SLOW_VARIANTS): checked on every op in the slow set
SLOW_OWN = ("cpu.conv.06-winograd-f4x4-3x3",)


def _run_op_through_variants(raw, keep):
    from rooflab.cpu.backend import cpu_backend
    from rooflab.driver import Driver, Settings

    op = ops.normalize(raw)
    library, mine = measure.variants_for(op, "cpu")
    assert len(library) == 1, f"no variant 0 executes {op['kind']}"
    driver = Driver(cpu_backend(probe=False), Settings(budget_s=0.0, min_samples=1, max_attempts=1))
    ran = []
    for v in [v for v in library + mine if keep(v)]:
        shape = dict(op["shape"])
        inputs = v.inputs(shape, np.dtype(measure.executed_dtype(op["dtype"], v.device, op["kind"])), seed=1)
        rec = driver.measure(v, inputs, params=measure.op_params(v, shape), reps=1)
        if v.library:
            assert rec.status == "ok", rec.error
        else:
            assert rec.status == "ok" or "verif" not in (rec.error or ""), rec.error
        ran.append(v.name)
    return ran


@pytest.mark.parametrize("raw", OP_CASES, ids=lambda r: r["kind"])
def test_every_op_kind_runs_through_its_variants(raw):
    """Variant 0 (the framework path) exists for every op kind and passes its check on the op's
    own shape; so does every own variant that accepts the shape (SLOW_OWN in the slow set)."""
    ran = _run_op_through_variants(raw, lambda v: v.name not in SLOW_OWN)
    assert ran and ran[0].split(".")[-1].startswith("00-")


@pytest.mark.slow
@pytest.mark.parametrize("raw", [r for r in OP_CASES if r["kind"] == "conv2d"], ids=lambda r: str(r["shape"]))
def test_every_conv_op_runs_through_the_slow_own_variants(raw):
    _run_op_through_variants(raw, lambda v: v.library or v.name in SLOW_OWN)


def test_fp16_ops_run_and_are_counted_in_the_dtype_executed():
    op = ops.normalize({"kind": "relu", "shape": {"numel": 4096}, "dtype": "float16", "name": "r"})
    (lib,), _ = measure.variants_for(op, "cpu")
    # one rule for every variant, numpy's variant 0 included: a CPU runs fp16 elementwise ops in fp32
    assert measure.executed_dtype(op["dtype"], lib.device, op["kind"]) == "float32"
    assert ops.min_bytes({**op, "dtype": "float32"}) == 2 * ops.min_bytes(op)


def test_too_large_op_is_refused_before_allocating():
    op = ops.normalize({"kind": "gemm", "shape": {"M": 10**6, "N": 10**6, "K": 10}, "name": "huge"})
    placed, errors = measure.measure_ops([op], None, device="cpu", threads=1, quick=True, machine=_machine())
    assert not placed and "of memory is free" in errors[0]["error"]


def _machine():
    from rooflab import machine

    return machine.describe()


def test_research_catalog_agrees_where_shapes_overlap():
    """Cross-check our formulas against the independently computed research catalog when present."""
    import pathlib

    p = pathlib.Path(__file__).parent / "data" / "research_model_ops.json"  # a copy of the research rows
    rows = json.loads(p.read_text())["ops"]
    checked = 0
    for row in rows:
        if row["op_kind"] in ("conv2d", "gemm", "layernorm", "softmax", "relu"):
            sh = dict(row["shape"])
            if row["op_kind"] == "gemm" and "M" not in sh:
                continue
            try:
                op = ops.normalize({"kind": row["op_kind"], "shape": sh, "dtype": "fp16"})
            except RooflabError:
                continue
            assert ops.flops(op) == row["flops"], row["layer"]
            checked += 1
    assert checked > 20


def test_zero_flop_ops_are_placed_and_tabulated():
    op = ops.normalize({"kind": "embedding", "shape": {"tokens": 8, "dim": 4, "vocab": 50}, "name": "emb"})

    class Roofs:
        device = "cpu"

        def peak(self, dtype):
            return {"value": PEAK, "name": "p"}

        def memory(self, read, written, cold=False):
            return {"value": BW, "name": "m", "level": "L1", "kernel": "copy"}

        def latency(self, path):
            return {"value": 300.0, "name": "dispatch: ufunc"}

    p = place.place_op(op, 1e-3, 1, Roofs(), "library-cpu")
    assert p["class"] == "latency-bound" and p["pct_of_attainable"] is None and p["below_roof"]  # 0.3 us > 32 ns
    row = dict(p, name="emb", kind="embedding", count=1, impl="numpy.take", total_time_s=1e-3)
    assert "| emb | embedding |" in place.to_markdown([row]) and "emb" in place.to_csv([row])
