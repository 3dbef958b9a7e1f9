import json

import numpy as np
import pytest

from rooflab import RooflabError
from rooflab.models import catalog, execute, ops, place
from rooflab.models.userops import parse_ops


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


def test_memory_vs_compute_at_the_ridge():
    # intensity just below the ridge, slow enough not to be latency-bound
    c = place.classify(flops=9.9e6, nbytes=1e6, seconds=1e-3, peak_gflops=PEAK, dram_gbps=BW, latency_s=LAT)
    assert c["class"] == "memory-bound" and c["ridge"] == 10
    c = place.classify(flops=10.1e6, nbytes=1e6, seconds=1e-3, peak_gflops=PEAK, dram_gbps=BW, latency_s=LAT)
    assert c["class"] == "compute-bound"
    assert c["attainable_gflops"] == pytest.approx(100) and c["pct_of_attainable"] == pytest.approx(10.1)


def test_latency_bound_by_measured_time_and_by_roofline_time():
    # measured within 2x of the dispatch latency
    assert place.classify(1e6, 1e3, 1.9e-6, PEAK, BW, LAT)["class"] == "latency-bound"
    assert place.classify(1e6, 1e3, 2.1e-5, PEAK, BW, LAT)["class"] == "compute-bound"
    # roofline time (1e4 FLOP / 100 GFLOP/s = 0.1 us) below the latency, even if measured slowly
    assert place.classify(1e4, 1e2, 5e-5, PEAK, BW, LAT)["class"] == "latency-bound"


def test_cache_resident_flag():
    c = place.classify(1e6, 1e6, 1e-5, PEAK, BW, LAT)  # 100 GB/s achieved > 10 GB/s DRAM
    assert c["cache_resident"] and c["class"] == "memory-bound"


def test_model_summary_shares():
    placed = [
        {"class": "memory-bound", "total_time_s": 3.0, "flops": 1.0, "count": 1},
        {"class": "latency-bound", "total_time_s": 1.0, "flops": 1.0, "count": 1},
    ]
    s = place.summarize_model(placed)
    assert s["share_pct"] == {"latency-bound": 25.0, "memory-bound": 75.0}
    assert "75% memory-bound" in place.summary_line("m", "cpu", s)


# ---- execution: every op kind runs and matches its float64 reference -----------------------------


@pytest.mark.parametrize(
    "raw",
    [
        {"kind": "gemm", "shape": {"M": 33, "N": 17, "K": 65, "bias": True}},
        {"kind": "batched_gemm", "shape": {"batch": 3, "M": 5, "N": 7, "K": 9}},
        {"kind": "conv2d", "shape": {"N": 2, "C": 3, "H": 11, "W": 9, "K": 4, "R": 3, "S": 3, "stride": 2, "pad": 1}},
        {"kind": "conv2d", "shape": {"N": 1, "C": 8, "H": 5, "W": 5, "K": 6, "R": 1, "S": 1}},
        {"kind": "batchnorm", "shape": {"N": 2, "C": 3, "H": 4, "W": 5}},
        {"kind": "relu", "shape": {"numel": 1000}},
        {"kind": "gelu", "shape": {"numel": 1000}},
        {"kind": "add", "shape": {"numel": 1000}},
        {"kind": "softmax", "shape": {"rows": 6, "cols": 50}},
        {"kind": "layernorm", "shape": {"rows": 6, "cols": 50}},
        {"kind": "embedding", "shape": {"tokens": 10, "dim": 8, "vocab": 100, "tables": 3}},
        {"kind": "maxpool", "shape": {"N": 1, "C": 2, "H": 9, "W": 9, "kernel": 3, "stride": 2, "pad": 1}},
        {"kind": "avgpool", "shape": {"N": 2, "C": 3, "H": 4, "W": 4}},
    ],
)
def test_every_op_kind_executes_correctly(raw):
    from rooflab.verify import check

    op = ops.normalize(raw)
    impl = execute.build(op)
    out = impl.run()
    assert out.size == ops.output_numel(op)
    check(out, impl.reference(), dtype=out.dtype, rtol=1e-4, atol=1e-5)
    own = execute.build(op, own=True)
    if own is not None:
        check(own.run(), own.reference(), dtype=np.float32)


def test_too_large_op_is_refused_before_allocating():
    op = ops.normalize({"kind": "gemm", "shape": {"M": 10**6, "N": 10**6, "K": 10}})
    with pytest.raises(RooflabError, match="of memory is free"):
        execute.build(op)


def test_research_catalog_agrees_where_shapes_overlap():
    """Cross-check our formulas against the independently computed research catalog when present."""
    import pathlib

    p = pathlib.Path(__file__).resolve().parents[2] / "shared" / "research" / "model_ops.json"
    if not p.exists():
        pytest.skip("shared/research/model_ops.json is not beside this checkout")
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
    roofs = {"peak": {"value": PEAK, "name": "p"}, "memory": {"value": BW, "name": "m"}, "latency": {"value": 300.0}}
    p = place.place_op(op, 1e-3, 1, roofs)
    assert p["class"] == "latency-bound" and p["pct_of_attainable"] is None  # roofline time of ns < 300 ns
    row = dict(p, name="emb", kind="embedding", count=1, impl="numpy.take", total_time_s=1e-3)
    assert "| emb | embedding |" in place.to_markdown([row]) and "emb" in place.to_csv([row])
