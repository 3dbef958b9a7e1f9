"""The INT8 compute roof: u8 x s8 -> s32 dot peaks (kernels/cpu/int8.py, rooflab/families/int8.py),
verified exactly, gated on the CPU's units, judged against INT8_OPS_PER_CYCLE at the unit's clock."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from rooflab.kernels.cpu import int8 as K

import rooflab
from rooflab.cpu.backend import cpu_backend
from rooflab.cpu.machine import INT8_OPS_PER_CYCLE, int8_peak
from rooflab.driver import Driver, Settings
from rooflab.threads import max_threads

DRIVER = Driver(cpu_backend(), Settings(budget_s=0.0, min_samples=1, probe_clock=False, max_attempts=1))
PATHS = K.paths()
THREADS = sorted({1, max_threads()})


def _need(path):
    if PATHS[path]:
        pytest.skip(PATHS[path])


@pytest.mark.parametrize("path", ["avx2", "vnni"])
@pytest.mark.parametrize("threads", THREADS)
def test_every_accumulator_is_exact(path, threads):
    _need(path)
    v = rooflab.get_variant(f"cpu.int8.dot-{path}")
    rec = DRIVER.measure(v, v.inputs(threads, seed=3), threads=threads, params={}, verify_params={"reps": 5})
    assert rec.status == "ok" and rec.verified, rec.error
    a, b, out = v.inputs(threads, seed=4)
    got = v.kernel(a, b, out, reps=1 << 16, threads=threads)
    assert np.array_equal(got, K.reference(path, a, b, 1 << 16))  # int32 wrap-around included


def test_avx2_path_saturates_like_vpmaddubsw():
    _need("avx2")
    a = np.full(32, 255, np.uint8)
    b = np.full((1, K.STREAMS, 32), 127, np.int8)
    b[0, 1] = -128
    out = np.zeros((1, K.STREAMS, 8), np.int32)
    K.dot_avx2(a, b, out, 1, 1)
    # each pair is 2 x 255 x 127 = 64770, saturated to 32767; two pairs per int32 lane
    assert out[0, 0, 0] == 2 * 32767 and out[0, 1, 0] == 2 * -32768
    assert np.array_equal(out, K.reference("avx2", a, b, 1))


@pytest.mark.parametrize("path", ["avx2", "vnni"])
def test_a_kernel_that_skips_work_is_caught(path):
    _need(path)
    v = rooflab.get_variant(f"cpu.int8.dot-{path}")
    good = v.kernel

    def short(a, b, out, reps=1, threads=None):  # one step short
        return good(a, b, out, reps=max(int(reps) - 1, 0), threads=threads)

    def one_stream(a, b, out, reps=1, threads=None):  # every stream given stream 0's weights
        return good(a, np.repeat(b[:, :1], b.shape[1], axis=1), out, reps=reps, threads=threads)

    for wrong in (short, one_stream):
        bad = dataclasses.replace(v, kernel=wrong)
        rec = DRIVER.measure(bad, v.inputs(1, seed=5), threads=1, params={}, verify_params={"reps": 3})
        assert rec.status == "failed" and "outside" in rec.error


@pytest.mark.parametrize("path,instruction", [("avx2", "vpmaddubsw"), ("vnni", "vpdpbusd")])
def test_the_compiled_loop_runs_the_instruction(path, instruction):
    _need(path)
    from numba import njit

    cached = K.dot_avx2 if path == "avx2" else K.dot_vnni
    fn = njit(parallel=True)(cached.py_func)  # compiled fresh: code loaded from numba's cache keeps no assembly
    a, b, out = rooflab.get_variant(f"cpu.int8.dot-{path}").inputs(1)
    fn(a, b, out, 1, 1)
    asm = "\n".join(fn.inspect_asm().values())
    assert asm.count(instruction) >= K.STREAMS
    if path == "vnni":
        assert "zmm" in asm


def test_paths_say_why_a_unit_is_missing(monkeypatch):
    from rooflab.kernels.cpu import simd

    monkeypatch.setattr(simd, "_target_features", lambda: "+avx,+avx2,+fma,-avx512f,-avx512vnni")
    p = K.paths()
    assert p["avx2"] is None and "VNNI" in p["vnni"]
    monkeypatch.setattr(simd, "_target_features", lambda: "+sse2,+avx")
    assert "no AVX2" in K.paths()["avx2"]


def test_theoretical_int8_rates_follow_the_table():
    zen4 = {"uarch": "zen4", "assumed": False}
    spr = {"uarch": "goldencove-server", "assumed": False}
    p = int8_peak("vnni", 2, 3.5, zen4)
    assert p["gops"] == pytest.approx(2 * 3.5 * 128) and "128 int8 ops/cycle" in p["formula"]
    assert int8_peak("vnni", 1, 3.0, spr)["gops"] == pytest.approx(3.0 * 256)
    assert int8_peak("avx2", 1, 3.0, {"uarch": "zen", "assumed": False})["gops"] == pytest.approx(96)
    unknown = int8_peak("avx2", 1, 3.0, {"uarch": None, "assumed": True})
    assert unknown["gops"] == pytest.approx(192) and unknown["assumed_units"]
    assert int8_peak("avx2", 1, None, zen4) is None
    assert set(INT8_OPS_PER_CYCLE) == set(K.BYTES)


def test_int8_ceilings_use_the_unit_clock_and_name_the_instruction():
    from rooflab.suite_ceilings import int8_ceilings

    def rec(threads, gops, unit):
        return {
            "family": "int8", "path": "vnni", "instruction": "vpdpbusd zmm", "threads": threads,
            "gflops": {"median": gops}, "noisy": False, "clock_ghz": {"unit": unit},
        }  # fmt: skip

    cpu = {"physical_cores": 2, "fma_units": {"uarch": "zen4", "assumed": False}, "measured_ghz_all_threads": {}}
    cs = int8_ceilings([rec(1, 460.0, [3.6]), rec(1, 470.0, [3.7]), rec(2, 930.0, [3.7, 3.65])], cpu)
    one, two = cs
    assert one["name"] == "INT8 peak (vpdpbusd zmm), 1 thread" and one["unit"] == "GOPS" and one["dtype"] == "int8"
    assert one["value"] == 470.0 and one["theoretical"] == pytest.approx(3.7 * 128)
    assert two["theoretical"] == pytest.approx(2 * 3.65 * 128) and two["theoretical_clock_ghz"] == 3.65
    assert one["pass_spread"] == pytest.approx(1 - 460 / 470)


def test_the_asv_benchmark_measures_each_path_this_cpu_runs_and_skips_the_others(monkeypatch):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from benchmarks import _common, bench_compute_cpu

    monkeypatch.setattr(_common, "_PREPARED", {})
    b = bench_compute_cpu.Int8PeakCPU()
    for path, why in PATHS.items():
        if why:
            with pytest.raises(NotImplementedError):
                b.setup(path, 1)
            continue
        b.setup(path, 1)
        assert b.track_gops(path, 1) > 1.0  # GOPS of a verified kernel
