"""scripts/gemm_vs_blas.py runs through the one driver's interleaved rounds (rooflab.driver.Driver
.interleaved): every sample kept, % of variant 0 the median of per-round ratios, its CLI and JSON as
before (issue 26's item, with issue 25's interleaved mode)."""

import importlib.util
import json
from pathlib import Path

import pytest


@pytest.mark.slow  # numba compiles the GEMM rung
def test_gemm_vs_blas_interleaved(tmp_path, capsys):
    path = Path(__file__).resolve().parents[1] / "scripts" / "gemm_vs_blas.py"
    spec = importlib.util.spec_from_file_location("gemm_vs_blas", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = tmp_path / "g.json"
    args = ["--shapes", "64", "--dtypes", "float64", "--threads", "1", "--runs", "3", "--sample", "0.001"]
    assert mod.main([*args, "--variants", "04", "--roof", "--json", str(out)]) == 0
    rows = {r["variant"]: r for r in json.loads(out.read_text())["rows"]}
    assert set(rows) == {"cpu.gemm.00-numpy-blas", "cpu.gemm.04-packed-panels", "DRAM read roof (cpu.stream.read)"}
    assert all(len(r["samples_s"]) == 3 and r["verification"]["elements"] > 0 for r in rows.values())
    assert rows["cpu.gemm.00-numpy-blas"]["ratio"] == 1.0 and rows["cpu.gemm.04-packed-panels"]["ratio"] > 0
    assert "% of 00" in capsys.readouterr().out
