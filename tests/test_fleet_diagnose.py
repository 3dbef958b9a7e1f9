"""Fleet baseline and diagnosis on recorded result files: copies of a real `rooflab run` result
(results/intel-xeon-2c) whose ceilings are scaled, as a slow DIMM or a throttled core would."""

import copy
import json
from pathlib import Path

import pytest

from rooflab import cli
from rooflab.fleet import baseline, diagnose
from rooflab.fleet.store import node_results
from rooflab.results import atomic_write_json

REAL = (
    Path(__file__).resolve().parent.parent / "results" / "intel-xeon-2c" / "rooflab-ceilings-cpu-20261202T190544Z.json"
)
DRAM = "DRAM triad bandwidth, 2 threads"
FP64 = "FP64 FMA peak, 2 threads"
LAT = "dispatch: ufunc"


@pytest.fixture(scope="module")
def real():
    doc = json.loads(REAL.read_text())
    doc["records"], doc["sweeps"] = [], {"bandwidth": [], "intensity": []}  # ceilings are what is compared
    return doc


def node(real, folder: Path, name: str, scale=None, jitter: float = 0.0, sku=None) -> str:
    """A fleet node file: the real result, every ceiling x (1 + jitter), the named ones x scale."""
    doc = copy.deepcopy(real)
    for c in doc["ceilings"]:
        c["value"] *= (1 + jitter) * (scale or {}).get(c["name"], 1.0)
    key = sku or "intel-xeon-2c-8g"
    doc["fleet"] = {
        "node_id": name,
        "hostname": name,
        "sku_key": key,
        "sku": {"cpu_model": "Intel Xeon", "physical_cores": 2, "memory_gib": 8, "gpu_model": None, "gpu_count": 0},
    }
    atomic_write_json(folder / f"{name}.json", doc)
    return name


def make_baseline(real, tmp_path, n=3) -> Path:
    healthy = tmp_path / "healthy"
    for i in range(n):
        node(real, healthy, f"h{i}", jitter=(i - n // 2) * 0.002)
    out = tmp_path / "baseline.json"
    assert cli.main(["fleet", "baseline", str(healthy), "--group-by", "sku", "-o", str(out)]) == 0
    return out


def run_diagnose(tmp_path, folder, base, *extra):
    return cli.main(["fleet", "diagnose", str(folder), "--baseline", str(base), "--format", "json", *extra])


def flagged(capsys) -> tuple[set, list]:
    text = capsys.readouterr().out
    out = json.loads(text[text.index("{\n") :])  # after what `fleet baseline` printed
    return set(out["flagged"]), out["rows"]


def test_baseline_is_the_median_per_ceiling_with_count_and_spread(real, tmp_path):
    folder = tmp_path / "f"
    for i, j in enumerate([-0.02, 0.0, 0.01, 0.03, -0.5]):  # one node at half speed
        node(real, folder, f"n{i}", jitter=j)
    data = baseline.build(node_results(folder))
    g = data["skus"]["intel-xeon-2c-8g"]
    assert g["nodes"] == [f"n{i}" for i in range(5)] and g["suite"] == "ceilings"
    ref = next(c["value"] for c in real["ceilings"] if c["name"] == DRAM)
    c = g["ceilings"][DRAM]
    assert c["n"] == 5 and c["median"] == pytest.approx(ref)  # the slow node does not move the median
    assert c["min"] == pytest.approx(ref * 0.5) and c["max"] == pytest.approx(ref * 1.03)
    assert c["mad"] == pytest.approx(ref * 0.02)
    assert c["kind"] == "bandwidth" and c["unit"] == "GB/s"


def test_seven_percent_low_dram_and_flops_flagged_two_percent_not(real, tmp_path, capsys):
    base = make_baseline(real, tmp_path)
    fleet = tmp_path / "fleet"
    node(real, fleet, "ok")
    node(real, fleet, "slow7", scale={DRAM: 0.93, FP64: 0.93})
    node(real, fleet, "slow2", scale={DRAM: 0.98, FP64: 0.98})
    assert run_diagnose(tmp_path, fleet, base) == 1
    nodes, rows = flagged(capsys)
    assert nodes == {"slow7"}
    assert {r["ceiling"] for r in rows} == {DRAM, FP64}
    assert all("below baseline" in r["verdicts"][0] for r in rows)


def test_latency_seven_percent_high_flagged(real, tmp_path, capsys):
    base = make_baseline(real, tmp_path)
    fleet = tmp_path / "fleet"
    node(real, fleet, "ok")
    node(real, fleet, "laggy", scale={LAT: 1.07})
    node(real, fleet, "fast", scale={LAT: 0.90})  # faster dispatch is not a fault
    assert run_diagnose(tmp_path, fleet, base) == 1
    nodes, rows = flagged(capsys)
    assert nodes == {"laggy"} and [r["ceiling"] for r in rows] == [LAT]
    assert "above baseline" in rows[0]["verdicts"][0]


def test_healthy_fleet_passes(real, tmp_path, capsys):
    base = make_baseline(real, tmp_path)
    fleet = tmp_path / "fleet"
    for i in range(3):
        node(real, fleet, f"n{i}", jitter=0.01 * (i - 1))
    assert run_diagnose(tmp_path, fleet, base) == 0
    assert flagged(capsys)[0] == set()


def test_modified_z_score_catches_one_slow_node_of_eight(real, tmp_path, capsys):
    """4 % low: inside the 5 % rule, but far outside a fleet that agrees within 1 %."""
    base = make_baseline(real, tmp_path)
    fleet = tmp_path / "fleet"
    for i, j in enumerate([-0.005, -0.003, -0.001, 0.0, 0.001, 0.003, 0.005]):
        node(real, fleet, f"n{i}", jitter=j)
    node(real, fleet, "slow", scale={DRAM: 0.96})
    assert run_diagnose(tmp_path, fleet, base) == 1
    nodes, rows = flagged(capsys)
    assert nodes == {"slow"}
    assert [r["ceiling"] for r in rows] == [DRAM]
    assert rows[0]["z"] < -3.5 and "outlier" in rows[0]["verdicts"][0] and len(rows[0]["verdicts"]) == 1


def test_z_score_needs_five_nodes_and_reverses_for_latency(real, tmp_path, capsys):
    base = make_baseline(real, tmp_path)
    small = tmp_path / "small"
    for i, j in enumerate([-0.005, 0.0, 0.005]):
        node(real, small, f"n{i}", jitter=j)
    node(real, small, "slow", scale={DRAM: 0.96})
    assert run_diagnose(tmp_path, small, base) == 0  # 4 nodes: no outlier test, and 4 % is inside the rule
    capsys.readouterr()
    big = tmp_path / "big"
    for i, j in enumerate([-0.005, -0.003, -0.001, 0.0, 0.001, 0.003, 0.005]):
        node(real, big, f"n{i}", jitter=j)
    node(real, big, "laggy", scale={LAT: 1.04})
    assert run_diagnose(tmp_path, big, base) == 1
    nodes, rows = flagged(capsys)
    assert nodes == {"laggy"} and rows[0]["z"] > 3.5


def test_modified_z_formula():
    z = diagnose.modified_z([10.0, 10.0, 11.0, 9.0, 10.0, 4.0])
    # median 10, |dev| = 0 0 1 1 0 6 -> MAD 0.5
    assert z[-1] == pytest.approx(0.6745 * (4.0 - 10.0) / 0.5)
    assert diagnose.modified_z([5.0, 5.0, 5.0, 5.0, 1.0])[-1] < -3.5  # MAD 0: the mean deviation stands in
    assert diagnose.modified_z([5.0] * 5) == [0.0] * 5


def test_rules_file_overrides_the_defaults(real, tmp_path, capsys):
    base = make_baseline(real, tmp_path)
    fleet = tmp_path / "fleet"
    node(real, fleet, "ok")
    node(real, fleet, "slow2", scale={DRAM: 0.98, LAT: 1.5})
    rules = tmp_path / "rules.json"
    rules.write_text(
        json.dumps(
            {"rules": [{"ceiling": "DRAM * bandwidth, *", "op": "<", "pct": 1}, {"ceiling": LAT, "op": "ignore"}]}
        )
    )
    assert run_diagnose(tmp_path, fleet, base, "--rules", str(rules)) == 1
    nodes, rows = flagged(capsys)
    assert nodes == {"slow2"} and [r["ceiling"] for r in rows] == [DRAM]  # 2 % > 1 %; latency ignored


def test_markdown_and_table_output(real, tmp_path, capsys):
    base = make_baseline(real, tmp_path)
    fleet = tmp_path / "fleet"
    node(real, fleet, "ok")
    node(real, fleet, "slow7", scale={DRAM: 0.93})
    assert cli.main(["fleet", "diagnose", str(fleet), "--baseline", str(base), "--format", "markdown"]) == 1
    md = capsys.readouterr().out.split("\n", 2)[-1]  # after what `fleet baseline` printed
    assert md.startswith("| node | SKU | ceiling |") and f"| slow7 | intel-xeon-2c-8g | {DRAM} |" in md
    assert "1 of 2 node(s) flagged: slow7" in md
    assert cli.main(["fleet", "diagnose", str(fleet), "--baseline", str(base)]) == 1
    table = capsys.readouterr().out
    assert "slow7" in table and "7.0 % below baseline" in table


def bad(capsys, *argv) -> str:
    assert cli.main(list(argv)) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("rooflab: error:")
    return err


def test_bad_input_one_line_exit_2(real, tmp_path, capsys):
    base = make_baseline(real, tmp_path)
    fleet = tmp_path / "fleet"
    node(real, fleet, "other", sku="amd-epyc-9654-96c-768g")
    assert "is SKU amd-epyc-9654-96c-768g; the baseline has intel-xeon-2c-8g" in bad(
        capsys, "fleet", "diagnose", str(fleet), "--baseline", str(base)
    )
    ok = tmp_path / "ok"
    node(real, ok, "n0")
    foreign = json.loads(base.read_text())
    foreign["schema_version"] = 99
    (tmp_path / "b99.json").write_text(json.dumps(foreign))
    assert "schema_version 99" in bad(capsys, "fleet", "diagnose", str(ok), "--baseline", str(tmp_path / "b99.json"))
    assert "not a rooflab fleet baseline" in bad(capsys, "fleet", "diagnose", str(ok), "--baseline", str(REAL))
    for rule, msg in [
        ({"ceiling": "HBM bandwidth", "op": "below", "pct": 5}, "unknown ceiling 'HBM bandwidth'"),
        ({"ceiling": "kind:bandwidth", "op": "~", "pct": 5}, "unknown operator '~'"),
        ({"ceiling": "kind:bandwidth", "op": "below", "pct": "five"}, "'pct' must be a number"),
    ]:
        (tmp_path / "r.json").write_text(json.dumps({"rules": [rule]}))
        args = ["fleet", "diagnose", str(ok), "--baseline", str(base), "--rules", str(tmp_path / "r.json")]
        assert msg in bad(capsys, *args)
    assert "--group-by 'rack'" in bad(
        capsys, "fleet", "baseline", str(ok), "--group-by", "rack", "-o", str(tmp_path / "x")
    )
    assert not (tmp_path / "x").exists()


def test_baseline_refuses_mixed_suites(real, tmp_path, capsys):
    folder = tmp_path / "f"
    node(real, folder, "a")
    node(real, folder, "b")
    doc = json.loads((folder / "b.json").read_text())
    doc["suite"] = "probe"
    (folder / "b.json").write_text(json.dumps(doc))
    assert "mixes suites" in bad(capsys, "fleet", "baseline", str(folder), "-o", str(tmp_path / "b.json"))


def test_two_nodes_diagnosed_on_their_own_median_say_that_they_cannot_tell_which_is_off(real, tmp_path, capsys):
    """Issue 37: `fleet diagnose` of 2 nodes flagged them silently: a node 8 % below the median of two
    is mirrored by the other 8 % above it. The verdicts stay (they differ); a line says which is off
    cannot be told, and how to find out."""
    fleet = tmp_path / "two"
    node(real, fleet, "a")
    node(real, fleet, "b", scale={DRAM: 0.84})
    out = tmp_path / "base2.json"
    assert cli.main(["fleet", "baseline", str(fleet), "--group-by", "sku", "-o", str(out)]) == 0
    assert run_diagnose(tmp_path, fleet, out) == 1
    text = capsys.readouterr().out
    doc = json.loads(text[text.index("{\n") :])
    assert set(doc["flagged"]) == {"b"}  # the low one, by the rule; a is as far above the pair's median
    assert len(doc["notes"]) == 1 and "2 nodes cannot tell which one is off" in doc["notes"][0]
    base3 = make_baseline(real, tmp_path)  # from 3 healthy nodes: b alone, and no such note
    assert run_diagnose(tmp_path, fleet, base3) == 1
    nodes, _ = flagged(capsys)
    assert nodes == {"b"}
