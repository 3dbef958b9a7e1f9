"""Every planning rule against every machine in tests/machines, whichever CPU runs the tests.

A rule that holds on the host a developer happens to be on and breaks on another (a test that
asserted 4x the OS LLC passed on a 32 MiB-L3 EPYC and failed on a 480 MiB-L3 Xeon) fails here for
every developer: the machine description (sysfs tree, flags, cores, NUMA, memory) and the DRAM
probe's measurements come from the recorded or written machine, never from this host.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
from rooflab.kernels.cpu.simd import bits_for

from rooflab import memory
from rooflab.cpu import dram_probe
from rooflab.cpu.caches import CacheMap
from rooflab.cpu.machine import describe_cpu, has_fma, peaks_for
from rooflab.threads import threads_for
from tests import machines

NAMES = machines.names()
GPT2_LM_HEAD = 154.6e6  # bytes of GPT-2's LM head (50257 x 768 float32): DRAM on every machine here


def test_the_machines_the_issue_names_are_all_here():
    kinds = {n.split("-")[0] for n in NAMES}
    assert {"intel", "zen3", "zen4", "epyc7763", "neoverse", "xeon"} <= kinds
    for n in NAMES:
        assert machines.load(n)["how"]  # recorded where, or written from which public layout


@pytest.fixture(scope="session")
def described(tmp_path_factory):
    """Each machine's sysfs tree written and read once per test run (the 256-thread server's is
    ~4,600 files: written per test it cost ~2 s of setup each, and as long again to delete)."""
    done: dict = {}

    def describe(name: str) -> dict:
        if name not in done:
            done[name] = machines.describe(machines.load(name), tmp_path_factory.mktemp("machines"))
        return copy.deepcopy(done[name])  # a test may change its copy

    return describe


@pytest.fixture(params=NAMES)
def machine(request, described, monkeypatch):
    """(profile, its cpu description, its caches with the probe's DRAM start), with this host's
    memory readers answering for that machine."""
    m = machines.load(request.param)
    cpu = described(request.param)
    monkeypatch.setattr(memory, "available_bytes", lambda: m["meminfo"]["MemAvailable"])
    memory.set_working_set_limit(None)
    return m, cpu


def _dram(m, cpu, quick=True, max_ws=None):
    from rooflab.suite_ceilings import FULL_SWEEP_FACTOR, QUICK_SWEEP_FACTOR, Plan, dram_plan

    factor = QUICK_SWEEP_FACTOR if quick else FULL_SWEEP_FACTOR  # as `rooflab run` plans it
    plan = Plan(threads_all=cpu["physical_cores"], quick=quick, max_ws=max_ws, sweep_factor=factor)
    measure = machines.read_bandwidth(m)
    return plan, dram_plan(plan, cpu["caches"], probe=lambda caches, cap: dram_probe.plan_dram(caches, cap, 1, measure))


def test_description_reads_the_machine_not_the_host(machine):
    m, cpu = machine
    cpus = machines.cpus_of(m)
    assert cpu["logical_cpus"] == len(cpus)
    assert cpu["problems"] == ([] if has_fma(cpu) else ["this CPU has no FMA instructions: the FMA peaks are skipped"])
    cores = {(d["physical_package_id"], d["core_id"]) for d in cpus.values()}
    assert cpu["physical_cores"] == len(cores)
    sizes = [c["size_bytes"] for c in cpu["caches"]]
    assert [c["name"] for c in cpu["caches"]] == ["L1", "L2", "L3"] and sizes == sorted(sizes)
    assert cpu["arch"] == m["cpuinfo"]["arch_string_raw"]
    if "layout" in m and m["layout"].get("numa") == "socket":
        assert len(cpu["numa_nodes"]) == m["layout"]["sockets"]
        assert sum(len(v) for v in cpu["numa_nodes"].values()) == len(cpus)
    llc = cpu["caches"][-1]
    assert llc["instances"] * llc["shared_by_cpus"] >= len(cpus)  # every CPU is served by some slice


def test_fma_units_and_peaks_follow_the_flags(machine):
    m, cpu = machine
    units, flags = cpu["fma_units"], set(m["cpuinfo"]["flags"].split())
    peaks = peaks_for(cpu, 3.0)["peaks"]
    if cpu["arch"] == "aarch64":
        assert units["pipes"] is None and "Arm" in units["assumed_why"] and peaks == []
        assert has_fma(cpu)  # Arm's vector unit always fuses multiply-add
        return
    assert has_fma(cpu) == ("fma" in flags)
    if not has_fma(cpu):
        assert any("no FMA" in p for p in cpu["problems"])
        return
    isa = 512 if "avx512f" in flags else 256
    assert units["isa_bits"] == isa and units["width_bits"] <= isa and units["pipes"] in (1, 2)
    for p in peaks:  # the formula is printed with every theoretical figure
        assert "x" in p["formula"] and p["gflops"] > 0


def test_isa_build_follows_the_flags_and_256_can_be_forced(machine):
    m, _ = machine
    flags = m["cpuinfo"]["flags"].split()
    feats = ",".join(f"+{f}" for f in flags if f in ("avx", "avx2", "fma", "avx512f"))
    want = 512 if "avx512f" in flags else 256 if "avx" in flags else 128
    assert bits_for(feats) == want
    assert bits_for(feats, "256") == 256  # ROOFLAB_SIMD_BITS=256: the AVX2 build on an AVX-512 host
    assert bits_for(feats, prefer_256=True) == min(want, 256)


def test_thread_plan_is_one_thread_per_physical_core(machine):
    _, cpu = machine
    top = threads_for(cpu["logical_cpus"], cpu["physical_cores"], pool=cpu["logical_cpus"])
    assert top == cpu["physical_cores"]  # no SMT siblings (the 2-socket server: 128 of 256)
    from rooflab.suite_ceilings import Plan

    assert Plan(threads_all=top, quick=True).thread_counts() == sorted({1, top})


def test_dram_starts_where_the_probe_finds_it_not_at_4x_the_os_llc(machine):
    m, cpu = machine
    llc = cpu["caches"][-1]["size_bytes"]
    for quick in (True, False):
        plan, dram = _dram(m, cpu, quick)
        d = dram["dram_from_bytes"]
        assert d == min(m["behaviour"]["dram_from_bytes"], 4 * llc), dram
        assert dram["top_bytes"] <= (1 if quick else 2) * d
        assert len(dram["probe"]) <= 8  # the probe stops at the plateau: well under a second


def test_quick_run_sizes_and_so_its_time_stay_small_on_every_machine(machine):
    """The sizes set the time: a quick run's largest array is where DRAM starts (the 480 MiB-L3 VM
    swept 1.9 GiB before the probe), the chase ends there, and the sweep has a dozen points."""
    from rooflab.suite_ceilings import chase_cases, sizes_for

    m, cpu = machine
    plan, dram = _dram(m, cpu, quick=True)
    sizes = sizes_for(plan, dram)
    assert max(sizes) <= 256 << 20 and len(sizes) <= 12, sizes
    chases = chase_cases(plan, cpu["caches"], dram["top_bytes"], dram_from=dram["dram_from_bytes"])
    assert max(c.size for c in chases) <= 2 * dram["dram_from_bytes"]
    # the whole sweep, 2 passes x 4 kernels x 2 thread counts, at the LLC's bandwidth or better
    swept = 2 * 4 * 2 * sum(sizes) * 3  # 3 arrays at most per kernel (triad)
    assert swept / (m["behaviour"]["dram_gbps"] * 1e9) < 20  # seconds of pure data movement


def test_elementwise_dram_cases_reach_dram_within_memory(machine, monkeypatch):
    from rooflab.families import elementwise as F

    m, cpu = machine
    _, dram = _dram(m, cpu)
    llc = {**cpu["caches"][-1], "dram_from_bytes": dram["dram_from_bytes"]}
    cm = CacheMap([*cpu["caches"][:-1], llc])
    monkeypatch.setattr(F, "_caches", lambda: cm)
    for quick in (True, False):
        cases = F.cases(quick, [1, cpu["physical_cores"]])
        want = min(cm.dram_from(), memory.array_cap(F.LIVE_ARRAYS, quick))
        big = [c for c in cases if c.meta.get("role") == "op"]
        assert big
        for c in big:
            nbytes = math.prod(F.op_shape(c.meta["op"], c.size)) * np.dtype(c.dtype).itemsize
            assert nbytes >= want, c.label
        if quick:
            n = F.dram_numel("float32", cm.dram_from(), memory.array_cap(F.LIVE_ARRAYS, True))
            assert F.LIVE_ARRAYS * n * 4 <= 3.1 * (1 << 30)  # a quick run fits a 4 GB machine


def test_placement_uses_the_measured_plateaus(machine):
    m, cpu = machine
    _, dram = _dram(m, cpu)
    measured = CacheMap([*cpu["caches"][:-1], {**cpu["caches"][-1], "dram_from_bytes": dram["dram_from_bytes"]}])
    threads = cpu["physical_cores"]
    assert measured.level_for(GPT2_LM_HEAD, threads) == "DRAM"
    assert measured.level_for(8 << 10, 1) == "L1"
    os_only = CacheMap(cpu["caches"])  # what placement did before: the OS's 480 MiB held the LM head
    if cpu["caches"][-1]["size_bytes"] * cpu["caches"][-1]["instances"] > GPT2_LM_HEAD:
        assert os_only.level_for(GPT2_LM_HEAD, threads) == "L3"
    # a ceilings run's plateau ends decide the inner levels too
    ceil = [{"kind": "bandwidth", "level": "L2", "threads": 1, "kernel": "read", "plateau_end_bytes": 96 << 10}]
    assert CacheMap(cpu["caches"], ceil).level_for(200 << 10, 1, "read") == "L3"


def test_a_broken_description_says_what_it_left_out_and_keeps_the_rest(tmp_path):
    m = machines.load("zen3-vm-2c")
    m["layout"]["caches"][3][2] = "256K"  # an L3 smaller than the L2
    cpu = machines.describe(m, tmp_path)
    assert [c["name"] for c in cpu["caches"]] == ["L1", "L2"]
    assert len(cpu["problems"]) == 1 and "L3 (256 KiB) no larger than L2 (512 KiB)" in cpu["problems"][0]
    m["layout"]["caches"][3][2] = "0K"
    cpu = machines.describe(m, tmp_path / "zero")
    assert [c["name"] for c in cpu["caches"]] == ["L1", "L2"] and "size 0" in cpu["problems"][0]
    none = describe_cpu(machines.info(m), tmp_path / "empty", [])
    assert none["physical_cores"] == 1 and any("0 usable cores" in p for p in none["problems"])


def test_a_cpu_without_fma_skips_its_fma_phases_in_one_line(described):
    from rooflab.suite_ceilings import Plan, skip_what_cannot_run

    cpu = described("xeon-e5-2670-snb-16t")

    class W:
        data = {"notes": []}

    plan = skip_what_cannot_run(Plan(threads_all=8, quick=True), cpu, W)
    assert {"compute", "intensity"} <= plan.skip and W.data["skipped"] == ["FMA peaks", "intensity sweep"]
    assert sum("no FMA" in n for n in W.data["notes"]) == 2  # the description's line and the skip's


def test_info_shows_the_numa_nodes_and_what_the_description_left_out(tmp_path, described, monkeypatch, capsys):
    from rooflab import cli
    from rooflab import machine as rmachine

    cpu = described("epyc7763-2s-256t")
    cpu["problems"] = ["the OS reports L3 (16 KiB) no larger than L2 (512 KiB): L3 and the levels above it left out"]
    monkeypatch.setattr(rmachine, "describe_cpu", lambda: copy.deepcopy(cpu))
    monkeypatch.chdir(tmp_path)  # no results/ here: info probes the clock now
    assert cli.main(["info"]) == 0
    out = capsys.readouterr().out
    assert "NUMA: 2 nodes (node 0: 128 CPUs, node 1: 128 CPUs)" in out
    assert "machine description: the OS reports L3 (16 KiB)" in out


def test_the_chase_suite_ends_where_dram_starts(machine, monkeypatch):
    from rooflab.cpu import caches as caches_mod
    from rooflab.families import chase

    m, cpu = machine
    _, dram = _dram(m, cpu)
    cm = CacheMap([*cpu["caches"][:-1], {**cpu["caches"][-1], "dram_from_bytes": dram["dram_from_bytes"]}])
    monkeypatch.setattr(caches_mod, "host_measured", lambda: cm)
    for quick in (True, False):
        sizes = sorted({c.size for c in chase.cases(quick, [1])})
        assert cm.dram_from() <= sizes[-1] <= 2 * cm.dram_from(), sizes[-4:]


def test_the_low_precision_units_follow_the_flags(machine):
    from rooflab.families.lowprec import available

    m, cpu = machine
    flags = m["cpuinfo"]["flags"].split()
    llvm = [f.replace("_", "-") if f.startswith("amx") else f.replace("_", "") for f in flags]  # LLVM's names
    p = available(",".join(f"+{f}" for f in llvm), cpu["arch"])
    assert (p["int8-avx2"] is None) == ("avx2" in flags and cpu["arch"] == "x86_64")
    assert (p["int8-vnni"] is None) == ("avx512_vnni" in flags or "avx512vnni" in flags)
    assert (p["bf16-avx512"] is None) == ("avx512_bf16" in flags)
    assert (p["fp16-avx512"] is None) == ("avx512_fp16" in flags)
    for kind in ("bf16", "int8"):  # a described machine: its flags decide (this host's permission is not asked)
        assert (p[f"amx-{kind}"] is None) == ("amx_tile" in flags and f"amx_{kind}" in flags)
    assert all(why is None or why for why in p.values())  # a missing unit always says why


def test_a_cold_flush_and_a_streamed_rotation_size_from_the_measured_llc(machine, monkeypatch):
    """A cold sample's flush and a streamed GEMV's copies (llm, qgemm) exceed what the LLC holds as
    measured, not the OS size: on the 480 MiB-L3 VM the flush read 960 MiB and a rotation 1.9 GiB."""
    from rooflab import flush, rotation
    from rooflab.cpu import caches as caches_mod
    from rooflab.families import qgemm

    m, cpu = machine
    _, dram = _dram(m, cpu)
    d = dram["dram_from_bytes"]
    llc = {**cpu["caches"][-1], "dram_from_bytes": d}
    measured = {"cpu": {**cpu, "caches": [*cpu["caches"][:-1], llc]}}
    want = min(llc["size_bytes"], d // 2)
    assert flush.llc_bytes(measured, "cpu") == want <= d // 2
    assert flush.llc_bytes({"cpu": cpu}, "cpu") == llc["size_bytes"]  # nothing measured: the OS size
    cm = CacheMap(measured["cpu"]["caches"])
    monkeypatch.setattr(caches_mod, "host_measured", lambda: cm)
    seen = []
    monkeypatch.setattr(rotation, "rotation_count", lambda ws, llc_b, avail: seen.append(llc_b) or 2)
    monkeypatch.setattr(rotation, "rotation_inputs", lambda v, size, dt, t, inputs, n: [inputs] * (n - 1))
    case = next(c for c in qgemm.cases(True, [1]) if c.meta.get("streamed"))
    x = (np.zeros(4, np.float32), np.zeros(64, np.uint8))
    assert len(qgemm._stream_copies(case, x)) == 1 and seen == [want]
