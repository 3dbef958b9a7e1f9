"""scripts/conv_compare.py and scripts/elementwise_report.py run through the one driver's
interleaved rounds (rooflab.driver.Driver.interleaved), at tiny sizes: every variant verified and
given one sample per round, the FMA peak / copy roof / clock probes in the same rounds, and a
wrong variant an error with no figure (exit 1), never a row of figures (issue 26)."""

import dataclasses
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

import rooflab
from rooflab import registry

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def load(name):
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def off_by_a_bit(v, **changes):
    """A twin of ``v`` whose result is 1 % too large (its kernel's ``supports`` kept)."""

    def kernel(*args, **kw):
        return np.asarray(v.kernel(*args, **kw)) * 1.01

    if hasattr(v.kernel, "supports"):
        kernel.supports = v.kernel.supports
    return dataclasses.replace(v, kernel=kernel, **changes)


@pytest.mark.slow  # numba compiles the depthwise rung and the ERT peak (~1 min on a busy 2-core VM)
def test_conv_compare_through_the_driver(tmp_path, capsys, monkeypatch):
    mod = load("conv_compare")
    F = mod.F
    monkeypatch.setattr(
        mod, "shapes_for", lambda which, batch: [F.shape(1, 8, 10, 10, 8, 3, pad=1, groups=8, name="dw")]
    )
    real = rooflab.list_variants

    def with_wrong(**kw):
        vs = real(**kw)
        dw = next(v for v in vs if v.number == 3)
        return vs + [off_by_a_bit(dw, name=dw.name.replace("03-", "98-wrong-"), number=98)]

    monkeypatch.setattr(mod.rooflab, "list_variants", with_wrong)
    out = tmp_path / "c.json"
    args = ["depthwise", "--runs", "3", "--variants", "3,98", "--target", "0.002", "--json", str(out)]
    assert mod.main(args) == 1  # the wrong rung failed
    (row,) = json.loads(out.read_text())["shapes"]
    by = {d["variant"]: d for d in row["variants"]}
    assert set(by) == {"00-im2col-blas", "03-direct-depthwise", "98-wrong-direct-depthwise"}
    assert "error" in by["98-wrong-direct-depthwise"] and "ms" not in by["98-wrong-direct-depthwise"]
    for name in ("00-im2col-blas", "03-direct-depthwise"):
        d = by[name]
        assert d["samples"] == 3 and d["ms"] > 0 and d["rel_err"] < 1e-5 and d["cpu_ms"] > 0
    assert by["00-im2col-blas"]["vs_im2col_blas"] == 1.0 and by["03-direct-depthwise"]["vs_im2col_blas"] > 0
    assert row["peak_gflops"] > 0 and row["copy_gbps"] > 0  # measured in the same rounds
    text = capsys.readouterr().out
    assert "FAILED" in text and "of copy" in text and "clock probes (before every round)" in text


def test_elementwise_report_through_the_driver(tmp_path, capsys, monkeypatch):
    mod = load("elementwise_report")
    chase_cases = mod.CH.cases
    monkeypatch.setattr(mod.CH, "cases", lambda quick: chase_cases(quick, llc=1 << 14))  # 8-64 KiB
    ufunc = rooflab.get_variant("cpu.latency.ufunc")
    monkeypatch.setitem(registry._REGISTRY, "cpu.latency.ufunc", off_by_a_bit(ufunc))
    args = ["--quick", "--threads", "1", "--rounds", "3", "--budget", "0.002", "--only", "tiny,chase"]
    assert mod.main([*args, "--out", str(tmp_path)]) == 1  # the wrong ufunc failed
    (path,) = tmp_path.glob("*/elementwise-report-*.json")
    recs = {r["label"] or r["variant"]: r for r in json.loads(path.read_text())["records"]}
    bad = recs.pop("cpu.latency.ufunc")
    assert bad["status"] == "failed" and bad["error"] and not bad.get("samples_s") and bad.get("gbps") is None
    assert recs and all(r["status"] == "ok" and r["verified"] for r in recs.values())
    for r in recs.values():
        assert len(r["samples_s"]) == 3 and len(r["cpu_samples_s"]) == 3
        assert r["time_s"]["median"] > 0 and (r.get("round_clock_ghz") is None or len(r["round_clock_ghz"]) == 3)
    text = capsys.readouterr().out
    assert "FAILED cpu.latency.ufunc" in text and "ceiling 02-random-cycle-hugepages L1" in text
    assert "thread CPU time" in text and "ns per chain" in text


def test_w4_gemv_levels_gives_ratios_to_the_read_roof_and_a_wrong_gemv_stops_it(capsys, monkeypatch):
    mod = load("w4_gemv_levels")
    argv = ["--K", "256", "--N", "64", "--threads", "1", "--rounds", "2", "--read-mb", "8"]
    assert mod.main(argv) == 0
    out = capsys.readouterr().out
    assert "read roof 1T" in out and ("dram 0." in out or "dram 1." in out)
    assert "l3 " in out and "median" in out
    bad = off_by_a_bit(rooflab.get_variant(mod.W4))
    monkeypatch.setitem(registry._REGISTRY, mod.W4, bad)
    with pytest.raises(SystemExit, match="w4_gemv_levels: .*cpu.qgemm.01-w4a8-dpbusd"):
        mod.main(argv)
