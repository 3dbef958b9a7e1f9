from pathlib import Path

import pytest

from rooflab import machine


def _fake_sysfs(root: Path):
    for cpu in (0, 1):
        base = root / f"cpu{cpu}"
        (base / "topology").mkdir(parents=True)
        (base / "topology" / "core_id").write_text(f"{cpu}\n")
        (base / "topology" / "physical_package_id").write_text("0\n")
        for idx, (level, typ, size, shared) in enumerate(
            [
                (1, "Data", "32K", str(cpu)),
                (1, "Instruction", "32K", str(cpu)),
                (2, "Unified", "512K", str(cpu)),
                (3, "Unified", "32768K", "0-1"),
            ]
        ):
            d = base / "cache" / f"index{idx}"
            d.mkdir(parents=True)
            (d / "level").write_text(f"{level}\n")
            (d / "type").write_text(typ + "\n")
            (d / "size").write_text(size + "\n")
            (d / "shared_cpu_list").write_text(shared + "\n")


def test_caches_come_from_sysfs(tmp_path):
    _fake_sysfs(tmp_path)
    caches = machine.read_caches(tmp_path, cpus=[0, 1])
    assert [c["name"] for c in caches] == ["L1", "L2", "L3"]
    assert caches[0]["size_bytes"] == 32 << 10 and caches[0]["private"] and caches[0]["instances"] == 2
    assert caches[2]["size_bytes"] == 32 << 20 and not caches[2]["private"] and caches[2]["instances"] == 1
    assert machine.physical_cores(tmp_path, cpus=[0, 1]) == 2


def test_parsers():
    assert machine.parse_cpu_list("0-2,5,7-8") == [0, 1, 2, 5, 7, 8]
    assert machine.parse_size_kib("48K") == 48 << 10 and machine.parse_size_kib("480M") == 480 << 20
    with pytest.raises(ValueError):
        machine.parse_size_kib("lots")


def test_fma_units_and_theoretical_formula():
    zen3 = machine.fma_units("AuthenticAMD", 0x19, 1, {"avx2", "fma"})
    assert zen3["pipes"] == 2 and zen3["width_bits"] == 256
    p = machine.theoretical_peak(2, 2.9, zen3, 8)
    assert p["flop_per_cycle_per_core"] == 16 and p["gflops"] == pytest.approx(92.8)
    assert "2 cores x 2.900 GHz x 2 FMA pipes x 4 lanes x 2" in p["formula"]
    skx = machine.fma_units("GenuineIntel", 6, 85, {"avx2", "fma", "avx512f"})
    assert skx["width_bits"] == 512 and skx["assumed"]
    assert machine.theoretical_peak(1, 3.0, skx, 4)["gflops"] == pytest.approx(192.0)
    assert machine.theoretical_peak(1, 3.0, {"pipes": None, "width_bits": None}, 8) is None


def test_describe_has_what_a_result_needs():
    d = machine.describe(measured_ghz=3.0)
    cpu = d["cpu"]
    for key in ("model", "physical_cores", "simd", "caches", "nominal_ghz", "fma_units"):
        assert key in cpu
    assert d["memory_bytes"] and d["software"]["numpy"] and d["os"]
    assert cpu["theoretical"]["clock_source"] == "measured running clock"
    assert "git" in d and d["id"]
