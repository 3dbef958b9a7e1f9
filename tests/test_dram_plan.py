"""The run's DRAM sizing (rooflab/cpu/dram_probe.py, suite_ceilings.dram_plan): bounded on a VM
whose OS reports a 480 MiB L3, the OS rule kept as the cap, and said when DRAM is out of reach."""

from __future__ import annotations

import pytest

from rooflab import roofline, suite_ceilings
from rooflab.cpu import dram_probe
from rooflab.cpu import machine as cpu_machine
from rooflab.families import chase

MIB = 1 << 20


def _fake_sysfs(root, l3="491520K"):
    for cpu in (0, 1):
        for idx, (level, typ, size, shared) in enumerate(
            [(1, "Data", "32K", str(cpu)), (1, "Instruction", "32K", str(cpu)), (2, "Unified", "1024K", str(cpu)),
             (3, "Unified", l3, "0-1")]
        ):  # fmt: skip
            d = root / f"cpu{cpu}" / "cache" / f"index{idx}"
            d.mkdir(parents=True)
            (d / "level").write_text(f"{level}\n")
            (d / "type").write_text(typ + "\n")
            (d / "size").write_text(size + "\n")
            (d / "shared_cpu_list").write_text(shared + "\n")
    return cpu_machine.read_caches(root, cpus=[0, 1])


def _machine(real_llc, cache_gbps=60.0, dram_gbps=12.0, probed=None):
    """A read bandwidth curve: the cache up to real_llc, half-way at 2x, DRAM beyond."""

    def measure(nbytes, threads):
        if probed is not None:
            probed.append(nbytes)
        if nbytes <= real_llc:
            return cache_gbps
        return (cache_gbps + dram_gbps) / 2 if nbytes <= 2 * real_llc else dram_gbps

    return measure


def _plan(caches, quick, measure, max_ws=None):
    plan = suite_ceilings.Plan(threads_all=2, quick=quick, max_ws=max_ws)
    dram = suite_ceilings.dram_plan(plan, caches, probe=lambda c, cap: dram_probe.plan_dram(c, cap, measure=measure))
    return plan, dram


@pytest.mark.parametrize("quick", [True, False])
def test_a_480_mib_l3_vm_stays_bounded(tmp_path, quick):
    caches = _fake_sysfs(tmp_path)
    assert caches[-1]["size_bytes"] == 480 * MIB
    probed = []
    plan, dram = _plan(caches, quick, _machine(32 * MIB, probed=probed))
    # the probe stops once DRAM's plateau is seen, far below 4x the OS LLC (1.9 GiB)
    assert max(probed) <= 256 * MIB and dram["source"] == "measured"
    assert dram["plateau_from_bytes"] == 128 * MIB  # 64 MiB is half-way down the step
    assert dram["dram_from_bytes"] == 256 * MIB  # 2x the first size on DRAM's plateau
    sizes = suite_ceilings.sizes_for(plan, dram)
    assert max(sizes) <= (256 if quick else 512) * MIB
    chases = suite_ceilings.chase_cases(plan, caches, dram["top_bytes"], dram_from=dram["dram_from_bytes"])
    assert max(c.size for c in chases) == 256 * MIB  # the DRAM latency point is there (>= dram_from)
    # bytes the sweep and the chase allocate, against the old rule (4x / 8x the OS LLC)
    planned = sum(sizes) + sum(c.size for c in chases)
    old_top = (4 if quick else 8) * caches[-1]["size_bytes"]
    old = sum(suite_ceilings.sweep_sizes(plan.min_ws, old_top, 4.0 if quick else 2**0.5))
    old += sum(chase.sizes(caches[-1]["size_bytes"], quick))
    assert planned < old / 3
    # DRAM's window starts where the probe found it, and holds the largest points
    caches[-1]["dram_from_bytes"] = dram["dram_from_bytes"]
    dram_w = roofline.level_windows(caches, 1)[-1]
    assert dram_w["lo"] == 256 * MIB and max(sizes) >= dram_w["lo"]
    l3_w = roofline.level_windows(caches, 1)[-2]
    assert l3_w["hi"] <= dram_w["lo"] / 4


def test_no_plateau_below_the_cap_keeps_the_os_rule(tmp_path):
    caches = _fake_sysfs(tmp_path, l3="32768K")
    plan, dram = _plan(caches, True, _machine(1 << 40))  # cache speed everywhere: never leaves the cache
    assert dram["dram_from_bytes"] == 128 * MIB and dram["source"].startswith("4x the OS LLC")
    assert max(p["bytes"] for p in dram["probe"]) == 128 * MIB


def test_one_slow_point_in_the_cache_is_not_dram():
    pts = [(1 * MIB, 60.0), (2 * MIB, 20.0), (4 * MIB, 61.0), (8 * MIB, 59.0), (16 * MIB, 12.0), (32 * MIB, 12.5)]
    assert dram_probe.find_plateau(pts) == 16 * MIB
    assert dram_probe.find_plateau(pts[:4]) is None


def test_working_set_below_the_llc_has_no_dram(tmp_path):
    caches = _fake_sysfs(tmp_path, l3="32768K")
    probed = []
    plan, dram = _plan(caches, True, _machine(32 * MIB, probed=probed), max_ws=256 << 10)
    assert dram["dram_from_bytes"] is None and not probed
    assert max(suite_ceilings.sizes_for(plan, dram)) <= 256 << 10


def test_probe_checks_its_sum(monkeypatch):
    from rooflab.kernels.cpu import stream

    from rooflab.errors import VerificationError

    assert dram_probe.read_gbps(1 * MIB, 1) > 0
    monkeypatch.setattr(stream, "read_sum", lambda a, reps, n: 0.0)  # a kernel that read nothing
    with pytest.raises(VerificationError):
        dram_probe.read_gbps(1 * MIB, 1)
