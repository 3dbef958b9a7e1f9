"""What a new user meets (issue 27), command by command, on the committed schema-1 results of
results/intel-xeon-2c (a ceilings run and a models run): compare names every regressed ceiling and
refuses a file without ceilings; the help texts and hints name only flags and models that exist;
bad ops are named."""

from __future__ import annotations

import json
from pathlib import Path

from rooflab import cli

RESULTS = Path(__file__).resolve().parent.parent / "results" / "intel-xeon-2c"
CEILINGS = RESULTS / "rooflab-ceilings-cpu-20261202T190544Z.json"
MODELS = RESULTS / "rooflab-models-cpu-20261202T191910Z.json"


def gemm_result(tmp_path: Path) -> Path:
    d = json.loads(CEILINGS.read_text())
    d.update(suite="gemm", ceilings=[], sweeps={}, records=[])
    p = tmp_path / "rooflab-gemm-cpu-20261202T200000Z.json"
    p.write_text(json.dumps(d))
    return p


def test_compare_names_every_regressed_ceiling(tmp_path, capsys):
    d = json.loads(CEILINGS.read_text())
    for c in d["ceilings"]:
        c["value"] = c["value"] * (2.0 if c["kind"] == "latency" else 0.5)
    worse = tmp_path / "worse.json"
    worse.write_text(json.dumps(d))
    assert cli.main(["compare", str(CEILINGS), str(worse)]) == 1
    out = capsys.readouterr().out
    assert len(d["ceilings"]) > 8
    assert f"{len(d['ceilings'])} ceiling(s)" in out
    tail = out.split("regressed beyond")[1]
    for c in d["ceilings"]:
        assert c["name"] in tail


def test_compare_refuses_a_file_without_ceilings(tmp_path, capsys):
    g = gemm_result(tmp_path)
    assert cli.main(["compare", str(CEILINGS), str(g)]) == 2
    cap = capsys.readouterr()
    assert "has no ceilings" in cap.err and "'gemm'" in cap.err
    assert "no ceiling regressed" not in cap.out
