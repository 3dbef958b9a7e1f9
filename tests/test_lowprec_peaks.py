"""The low-precision compute roofs: INT8 u8 x s8 -> s32 and BF16 dot peaks (kernels/cpu/int8.py,
bf16.py, rooflab/families/lowprec.py), verified exactly, gated on the CPU's units, judged against
LOWPREC_PER_CYCLE at the unit's clock."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from rooflab.kernels.cpu import bf16 as B
from rooflab.kernels.cpu import int8 as K

import rooflab
from rooflab.cpu.backend import cpu_backend
from rooflab.cpu.machine import LOWPREC_PER_CYCLE, lowprec_peak
from rooflab.driver import Driver, Settings
from rooflab.threads import max_threads

DRIVER = Driver(cpu_backend(), Settings(budget_s=0.0, min_samples=1, probe_clock=False, max_attempts=1))
from rooflab.families.lowprec import available  # noqa: E402

UNITS = available()
PATHS = {"avx2": UNITS["int8-avx2"], "vnni": UNITS["int8-vnni"]}
THREADS = sorted({1, max_threads()})


def _need(path):
    if PATHS[path]:
        pytest.skip(PATHS[path])


@pytest.mark.parametrize("path", ["avx2", "vnni"])
@pytest.mark.parametrize("threads", THREADS)
def test_every_accumulator_is_exact(path, threads):
    _need(path)
    v = rooflab.get_variant(f"cpu.lowprec.int8-{path}")
    rec = DRIVER.measure(v, v.inputs(threads, seed=3), threads=threads, params={}, verify_params={"reps": 5})
    assert rec.status == "ok" and rec.verified, rec.error
    a, b, out = v.inputs(threads, seed=4)
    got = v.kernel(a, b, out, reps=1 << 16, threads=threads)
    assert np.array_equal(got, K.reference(path, a, b, 1 << 16))  # int32 wrap-around included


def test_avx2_path_saturates_like_vpmaddubsw():
    _need("avx2")
    a = np.full(32, 255, np.uint8)
    b = np.full((1, K.STREAMS["avx2"], 32), 127, np.int8)
    b[0, 1] = -128
    out = np.zeros((1, K.STREAMS["avx2"], 8), np.int32)
    K.dot_avx2(a, b, out, 1, 1)
    # each pair is 2 x 255 x 127 = 64770, saturated to 32767; two pairs per int32 lane
    assert out[0, 0, 0] == 2 * 32767 and out[0, 1, 0] == 2 * -32768
    assert np.array_equal(out, K.reference("avx2", a, b, 1))


@pytest.mark.parametrize("path", ["avx2", "vnni"])
def test_a_kernel_that_skips_work_is_caught(path):
    _need(path)
    v = rooflab.get_variant(f"cpu.lowprec.int8-{path}")
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
    a, b, out = rooflab.get_variant(f"cpu.lowprec.int8-{path}").inputs(1)
    fn(a, b, out, 1, 1)
    asm = "\n".join(fn.inspect_asm().values())
    assert asm.count(instruction) >= K.STREAMS[path]
    if path == "vnni":
        assert "zmm" in asm


def test_paths_say_why_a_unit_is_missing(monkeypatch):
    from rooflab.kernels.cpu import simd

    monkeypatch.setattr(simd, "_target_features", lambda: "+avx,+avx2,+fma,-avx512f,-avx512vnni")
    p = K.paths()
    assert p["avx2"] is None and "VNNI" in p["vnni"]
    monkeypatch.setattr(simd, "_target_features", lambda: "+sse2,+avx")
    assert "no AVX2" in K.paths()["avx2"]
    assert "BF16" in available("+avx2,+avx512f,+avx512vnni")["bf16-avx512"]
    assert available("+avx2,+avx512f,+avx512bf16")["bf16-avx512"] is None
    arm = available("+neon", "aarch64")
    assert arm.pop("w4-dequant-fma") is None  # plain vector IR: every CPU has the dequantize-and-FMA roof
    assert all("x86-64" in why for why in arm.values())


def test_theoretical_rates_follow_the_table():
    zen4 = {"uarch": "zen4", "assumed": False}
    spr = {"uarch": "goldencove-server", "assumed": False}
    p = lowprec_peak("int8-vnni", 2, 3.5, zen4)
    assert p["value"] == pytest.approx(2 * 3.5 * 128) and "128 int8 ops/cycle" in p["formula"] and p["unit"] == "GOPS"
    assert lowprec_peak("int8-vnni", 1, 3.0, spr)["value"] == pytest.approx(3.0 * 256)
    assert lowprec_peak("int8-avx2", 1, 3.0, {"uarch": "zen", "assumed": False})["value"] == pytest.approx(96)
    unknown = lowprec_peak("int8-avx2", 1, 3.0, {"uarch": None, "assumed": True})
    assert unknown["value"] == pytest.approx(192) and unknown["assumed_units"]
    assert lowprec_peak("int8-avx2", 1, None, zen4) is None
    bf = lowprec_peak("bf16-avx512", 1, 3.0, zen4)
    assert bf["value"] == pytest.approx(3.0 * 64) and bf["unit"] == "GFLOP/s"  # 2x Zen 4's FP32 FMA rate
    assert lowprec_peak("bf16-avx512", 1, 3.0, spr)["value"] == pytest.approx(3.0 * 32)  # half SPR's FP32 rate
    assert lowprec_peak("bf16-avx512", 1, 3.0, {"uarch": "haswell"}) is None  # no such unit known: no figure
    assert set(LOWPREC_PER_CYCLE) == set(UNITS) - {"w4-dequant-fma"}  # a kernel's roof: no rate per cycle


def test_lowprec_ceilings_use_the_unit_clock_and_name_the_instruction():
    from rooflab.suite_ceilings import lowprec_ceilings

    def rec(threads, value, unit_clock, unit="int8-vnni", instruction="vpdpbusd zmm"):
        return {
            "family": "lowprec", "unit": unit, "instruction": instruction, "threads": threads,
            "gflops": {"median": value}, "noisy": False, "clock_ghz": {"unit": unit_clock},
        }  # fmt: skip

    cpu = {"physical_cores": 2, "fma_units": {"uarch": "zen4", "assumed": False}, "measured_ghz_all_threads": {}}
    recs = [rec(1, 460.0, [3.6]), rec(1, 470.0, [3.7]), rec(2, 930.0, [3.7, 3.65])]
    recs.append(rec(1, 230.0, [3.7], "bf16-avx512", "vdpbf16ps zmm"))
    bf, one, two = lowprec_ceilings(recs, cpu)
    assert one["name"] == "INT8 peak (vpdpbusd zmm), 1 thread" and one["unit"] == "GOPS" and one["dtype"] == "int8"
    assert one["value"] == 470.0 and one["theoretical"] == pytest.approx(3.7 * 128)
    assert two["theoretical"] == pytest.approx(2 * 3.65 * 128) and two["theoretical_clock_ghz"] == 3.65
    assert one["pass_spread"] == pytest.approx(1 - 460 / 470)
    assert bf["name"] == "BF16 peak (vdpbf16ps zmm), 1 thread" and bf["dtype"] == "bfloat16"
    assert bf["unit"] == "GFLOP/s" and bf["theoretical"] == pytest.approx(3.7 * 64)


@pytest.mark.parametrize("threads", THREADS)
def test_bf16_dot_is_exact_on_integers_and_catches_a_dropped_lane(threads):
    if UNITS["bf16-avx512"]:
        pytest.skip(UNITS["bf16-avx512"])
    v = rooflab.get_variant("cpu.lowprec.bf16-avx512")
    rec = DRIVER.measure(v, v.inputs(threads, seed=3), threads=threads, params={}, verify_params={"reps": 5})
    assert rec.status == "ok" and rec.verified, rec.error
    a, b, out = v.inputs(threads, seed=4)
    assert np.array_equal(v.kernel(a, b, out, reps=1 << 12, threads=threads), B.reference(a, b, 1 << 12))
    good = v.kernel

    def dropped(a, b, out, reps=1, threads=None):  # the last weight of every stream read as 0
        b = b.copy()
        b[..., -1] = 0
        return good(a, b, out, reps=reps, threads=threads)

    bad = dataclasses.replace(v, kernel=dropped)
    a, b, out = v.inputs(1, seed=6)
    a[-1], b[..., -1] = B.to_bf16(np.float32([2.0, 1.0]))  # the dropped weight meets a nonzero activation
    rec = DRIVER.measure(bad, (a, b, out), threads=1, params={}, verify_params={"reps": 3})
    assert rec.status == "failed"


def test_the_asv_benchmark_measures_each_path_this_cpu_runs_and_skips_the_others(monkeypatch):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from benchmarks import _common, bench_compute_cpu

    monkeypatch.setattr(_common, "_PREPARED", {})
    b = bench_compute_cpu.LowPrecPeakCPU()
    for unit, why in UNITS.items():
        if why:
            with pytest.raises(NotImplementedError):
                b.setup(unit, 1)
            continue
        b.setup(unit, 1)
        assert b.track_gops(unit, 1) > 1.0  # GOPS / GFLOP/s of a verified kernel
