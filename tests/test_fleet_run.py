"""`rooflab fleet run` without a cluster: node identity and SKU, what a node's run counts as, the
fleet directory, which nodes a run or a resume picks, and the one-line refusals. The real Ray
cluster is tests/test_fleet_ray.py."""

import builtins
import json
import sys

import pytest

from rooflab import cli
from rooflab.errors import RooflabError
from rooflab.fleet import identity, node, runner, store


def test_sku_key_and_node_id():
    s = identity.sku("AMD EPYC 9654 96-Core Processor", 96, 768 * 2**30 - 300 * 2**20, [])
    assert identity.sku_key(s) == "amd-epyc-9654-96-core-96c-768g"  # firmware's few MiB do not split a SKU
    g = identity.sku("Intel(R) Xeon(R) Platinum 8480+", 56, 2 * 2**40, [{"name": "NVIDIA H100 80GB HBM3"}] * 8)
    assert identity.sku_key(g) == "intel-xeon-platinum-8480-56c-2048g-8x-nvidia-h100-80gb-hbm3"
    assert identity.node_id("gpu-07.rack/2", "f00dcafe1234567890") == "gpu-07.rack-2-f00dcafe1234"
    here = identity.this_sku()
    assert here["physical_cores"] >= 1 and here["memory_gib"] >= 1


def test_sku_of_a_plain_result_comes_from_its_machine_block():
    doc = {"machine": {"cpu": {"model": "Intel Xeon", "physical_cores": 2}, "memory_bytes": 8 * 2**30}}
    assert identity.sku_of_result(doc)[0] == "intel-xeon-2c-8g"


def test_verdicts_of_a_node_run():
    good = {"status": "complete", "ceilings": [{"name": "x"}], "errors": []}
    assert node.verdict(0, good, False, 60, "") == ("ok", None)
    st, why = node.verdict(0, None, True, 60, "")
    assert st == "timeout" and "--timeout 60 s" in why
    st, why = node.verdict(2, None, False, 60, "rooflab: error: unknown suite 'x'\n")
    assert st == "failed" and "exited 2" in why and "unknown suite" in why
    bad = {"status": "complete-with-errors", "ceilings": [], "errors": [{"label": "triad", "error": "mismatch"}]}
    st, why = node.verdict(1, bad, False, 60, "")
    assert st == "failed" and "triad: mismatch" in why
    st, why = node.verdict(0, {"status": "complete", "ceilings": []}, False, 60, "")
    assert st == "failed" and "no ceilings" in why


def test_a_node_run_that_fails_or_hangs_is_reported_not_raised():
    ident = {"node_id": "h-1", "hostname": "h", "engine": "test", "engine_node_id": "1"}
    rep = node.characterize(["--suite", "nosuchsuite"], 120, ident)
    assert rep["status"] == "failed" and "unknown suite" in rep["reason"] and rep["result"] is None
    assert rep["node_id"] == "h-1" and rep["finished_unix"] >= rep["started_unix"]


def report(name, status="ok", host=None):
    doc = {"kind": "rooflab-result", "schema_version": 2, "status": "complete", "ceilings": [{"name": "c", "value": 1}]}
    return {
        "node_id": name,
        "hostname": host or name,
        "engine": "ray",
        "engine_node_id": name,
        "sku": {"cpu_model": "X"},
        "sku_key": "x-1c-1g",
        "status": status,
        "reason": None if status == "ok" else "boom",
        "result": doc,
        "log_tail": "",
    }


def test_fleet_directory_files_and_good_nodes(tmp_path):
    m = store.new_manifest("ray", {"suite": "probe"}, "head:6379")
    for r in (report("a"), report("b", "failed"), report("c", "died")):
        r_no_doc = dict(r, result=None) if r["status"] == "died" else r
        store.record(m, store.write_report(tmp_path, r_no_doc))
    store.save_manifest(tmp_path, m)
    assert set(store.good_nodes(tmp_path, store.load_manifest(tmp_path))) == {"a"}
    assert (tmp_path / "nodes" / "a.json").is_file() and (tmp_path / "failed" / "b.json").is_file()
    doc = json.loads((tmp_path / "nodes" / "a.json").read_text())
    assert doc["fleet"]["node_id"] == "a" and doc["fleet"]["sku_key"] == "x-1c-1g"
    assert m["nodes"]["c"]["reason"] == "boom" and m["nodes"]["c"]["file"] is None
    assert [n for n, _ in store.node_results(tmp_path)] == ["a"]
    (tmp_path / "nodes" / "a.json").unlink()  # a good result gone from disk is not good
    assert store.good_nodes(tmp_path, m) == {}


def nodes(*names, host=None):
    return [{"node_id": n, "hostname": host or n, "ray_id": n, "cpus": 1.0, "gpus": 0.0} for n in names]


def test_choose_all_n_and_resume():
    usable = nodes("a", "b", "c")
    assert [n["node_id"] for n in runner.choose(usable, None, {}, "x")[0]] == ["a", "b", "c"]
    assert [n["node_id"] for n in runner.choose(usable, 2, {}, "x")[0]] == ["a", "b"]
    todo, skipped = runner.choose(usable, None, {"b": {"hostname": "b"}}, "x")
    assert [n["node_id"] for n in todo] == ["a", "c"] and [n["node_id"] for n in skipped] == ["b"]
    # host b restarted under a new engine id: its host name still has a good result
    renamed = nodes("a", "b2", "c")
    renamed[1]["hostname"] = "b"
    assert [n["node_id"] for n in runner.choose(renamed, None, {"b": {"hostname": "b"}}, "x")[0]] == ["a", "c"]
    # several nodes on one host (one machine, many raylets): only the exact node id counts
    shared = nodes("h-1", "h-2", host="h")
    assert [n["node_id"] for n in runner.choose(shared, None, {"h-0": {"hostname": "h"}}, "x")[0]] == ["h-1", "h-2"]


def test_choose_refuses_more_nodes_than_alive_and_an_empty_cluster():
    with pytest.raises(RooflabError, match=r"--nodes 5 asked, the cluster at h:1 has 3 alive node"):
        runner.choose(nodes("a", "b", "c"), 5, {}, "at h:1")
    with pytest.raises(RooflabError, match="has no alive node with CPUs"):
        runner.choose([], None, {}, "at h:1")


def test_run_args_and_settings():
    s = {"suite": "probe", "device": "cpu", "quick": True, "threads": 1, "budget": 0.02}
    assert runner.run_args(s) == [
        "--suite",
        "probe",
        "--device",
        "cpu",
        "--quick",
        "--threads",
        "1",
        "--budget",
        "0.02",
    ]
    assert runner.parse_nodes("all") is None and runner.parse_nodes("3") == 3
    for bad in ("0", "-1", "x"):
        with pytest.raises(RooflabError, match="--nodes"):
            runner.parse_nodes(bad)


def one_line_exit_2(capsys, argv) -> str:
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def test_bad_input_before_any_cluster(tmp_path, capsys):
    out = str(tmp_path / "f")
    assert "unknown suite 'nosuch'" in one_line_exit_2(capsys, ["fleet", "run", "--suite", "nosuch", "-o", out])
    assert "--nodes 'x'" in one_line_exit_2(capsys, ["fleet", "run", "--nodes", "x", "-o", out])
    assert "needs -o DIR" in one_line_exit_2(capsys, ["fleet", "run"])
    assert "not a fleet directory" in one_line_exit_2(capsys, ["fleet", "run", "--resume", out])
    (tmp_path / "f").mkdir()
    store.save_manifest(tmp_path / "f", store.new_manifest("ray", {"suite": "probe", "nodes": "all"}))
    assert "already holds a fleet run" in one_line_exit_2(capsys, ["fleet", "run", "-o", out])
    assert "fleet needs an action" in one_line_exit_2(capsys, ["fleet"])
    assert not (tmp_path / "f" / "nodes").exists()


def test_without_ray_one_line_names_the_extra(tmp_path, capsys, monkeypatch):
    real_import = builtins.__import__

    def no_ray(name, *a, **k):
        if name == "ray" or name.startswith("ray."):
            raise ImportError("No module named 'ray'")
        return real_import(name, *a, **k)

    monkeypatch.delitem(sys.modules, "ray", raising=False)
    monkeypatch.setattr(builtins, "__import__", no_ray)
    err = one_line_exit_2(capsys, ["fleet", "run", "--engine", "ray", "-o", str(tmp_path / "f")])
    assert "needs Ray, which is not installed" in err and "rooflab[fleet]" in err


def test_no_cluster_at_the_address(tmp_path, capsys):
    pytest.importorskip("ray", reason="Ray not installed (pip install 'rooflab[fleet]')")
    err = one_line_exit_2(capsys, ["fleet", "run", "--address", "127.0.0.1:1", "-o", str(tmp_path / "f")])
    assert "no Ray cluster at 127.0.0.1:1" in err
    assert not (tmp_path / "f").exists()


def test_probe_suite_has_one_point_inside_every_level_window():
    """Each bandwidth point (its arrays rounded up to whole cache lines) lies inside the window of
    the level it is meant for, at each thread count; the chase has one size per level."""
    from rooflab.kernels.cpu import stream

    from rooflab import roofline, suite_probe

    caches = [
        {"level": 1, "name": "L1", "size_bytes": 32 << 10, "instances": 8, "shared_by_cpus": 1, "private": True},
        {"level": 2, "name": "L2", "size_bytes": 1 << 20, "instances": 8, "shared_by_cpus": 1, "private": True},
        {"level": 3, "name": "L3", "size_bytes": 32 << 20, "instances": 1, "shared_by_cpus": 8, "private": False},
    ]
    cases = suite_probe.cases(8, caches)
    for t in (1, 8):
        bw = [c for c in cases if c.sweep == "bandwidth" and c.threads == t]
        # 8 threads: L3's window [2 x 8 MiB of L2, 32 MiB / 4] is empty (no L3 ceiling, as in `ceilings`)
        windows = [w for w in roofline.level_windows(caches, t) if w["hi"] is None or w["lo"] <= w["hi"]]
        assert len(bw) == len(windows) == (4 if t == 1 else 3)
        for c, w in zip(bw, windows):
            ws = c.size * 8 * stream.ARRAYS["triad"]
            assert roofline._in_window(ws, w), (c.label, ws, w)
    chase = [c for c in cases if c.variant.startswith("cpu.chase.")]
    assert [roofline._in_window(c.size, w) for c, w in zip(chase, roofline.level_windows(caches, 1))] == [True] * 4
    peaks = [c for c in cases if c.variant == "cpu.ert.fma"]
    assert {(c.dtype, c.threads) for c in peaks} == {(d, t) for d in ("float64", "float32") for t in (1, 8)}
    assert {c.variant for c in cases if c.variant.startswith("cpu.latency.")} == {
        "cpu.latency.empty",
        "cpu.latency.ufunc",
        "cpu.latency.fork_join",
    }


def test_reports_written_after_the_last_manifest_save_still_count(tmp_path):
    """The caller rewrites the manifest at most once a second; a caller killed in between must not
    lose the nodes whose reports it already wrote (resume syncs them from reports/)."""
    m = store.new_manifest("ray", {"suite": "probe"})
    store.save_manifest(tmp_path, m)  # the last save, before any node finished
    store.write_report(tmp_path, report("a"))
    store.write_report(tmp_path, report("b", "failed"))
    again = store.load_manifest(tmp_path)
    assert set(store.good_nodes(tmp_path, again)) == {"a"}
    assert again["nodes"]["b"]["status"] == "failed"


def test_a_node_run_from_a_folder_that_holds_a_rooflab_clone_imports_the_installed_package(tmp_path, monkeypatch):
    """Issue 37: Ray started from the folder holding the clone (~/rooflab) made every node's
    `python -m rooflab run` import the clone's folders as the package ("cannot import name ... from
    'rooflab' (unknown location)"). The node's run starts in a folder of its own."""
    clone = tmp_path / "rooflab"
    for sub in ("results", "scripts", "tests", "kernels"):  # what a clone's root holds: no __init__.py
        (clone / sub).mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    ident = {"node_id": "h-1", "hostname": "h", "engine": "test", "engine_node_id": "1"}
    rep = node.characterize(["--suite", "nosuchsuite"], 120, ident)
    assert "ImportError" not in (rep["reason"] or "") + rep["log_tail"], rep["log_tail"][-500:]
    assert "unknown suite" in rep["reason"]  # the installed rooflab ran, and refused the suite


def test_a_fleet_resumed_after_a_node_died_counts_without_the_dead_node_id(tmp_path):
    """Issue 37: after a good --resume the site said "2 of 3 good": the dead node's id (a node comes
    back under a new Ray id) was counted. It is named as having left the cluster, not counted."""
    from rooflab import publish

    m = store.new_manifest("ray", {"suite": "probe", "device": "cpu", "quick": False})
    m["runs"] = [{"nodes": ["a", "b", "dead"]}, {"nodes": ["back"]}]
    for n, st in (("a", "ok"), ("b", "ok"), ("dead", "died"), ("back", "ok")):
        m["nodes"][n] = {"node_id": n, "status": st, "reason": None if st == "ok" else "NodeDiedError"}
    assert store.superseded(m) == ["dead"]
    d = tmp_path / "fleet"
    d.mkdir()
    store.save_manifest(d, m)
    publish.build_site(tmp_path, tmp_path / "site")
    index = (tmp_path / "site" / "index.html").read_text()
    assert "3 of 3" in index and "1 earlier failed node(s) left the cluster" in index


def test_a_long_reason_ends_at_a_whole_sentence_or_word():
    from rooflab.errors import first_line

    ray_like = Exception(
        "Task failed because the node it was running on is dead or unavailable. Node IP: 192.0.2.2, node ID: "
        + "ab" * 28
        + ". This can happen if the node was preempted, had a hardware failure, or its raylet crashed unexpectedly."
    )
    assert first_line(ray_like, 300).endswith("raylet crashed unexpectedly.")
    assert first_line(ray_like, 170).endswith("node ID: " + "ab" * 28 + ".")
    assert first_line(ray_like, 150).endswith("dead or unavailable.")
    assert first_line(Exception("word " * 100), 50).endswith("word ...")
    assert first_line(Exception("short"), 50) == "short" and first_line(Exception(""), 50) == "Exception"


def test_superseded_reads_only_a_run_that_names_its_nodes():
    """A Slurm manifest records how many nodes a run had (an int), not which: nothing is superseded,
    and the site and fleet page do not fail on it."""
    m = store.new_manifest("slurm", {"suite": "probe", "device": "cpu", "quick": False})
    m["runs"] = [{"nodes": 3}, {"nodes": 1}]
    m["nodes"]["a"] = {"node_id": "a", "status": "failed"}
    assert store.superseded(m) == []
