"""Is the 4-bit GEMV short of the DRAM read roof because of memory or compute? The same GEMV read
from each level, against the read kernel, interleaved in one process.

    python scripts/w4_gemv_levels.py [--K 4096] [--N 11008] [--threads 1,2] [--rounds 5]

rooflab's w4a8 GEMV (``cpu.qgemm.01-w4a8-dpbusd``: 4-bit codes x int8 activations, MatMulNBits's
layout) at M = 1, its bytes (packed codes + fp32 scales) per second, timed in the one driver's
interleaved rounds (Driver.interleaved) beside ``cpu.stream.read`` on 140 MB, per thread count:
  dram  over distinct copies of the K x N weights (>= 4x the measured LLC together, as a decode
        step streams its layers), one call per copy;
  l3    on one K x N3 weight of about half the LLC, called again and again;
each as a ratio to the read roof in the same round: a neighbour that moves both cancels. Every
weight copy is verified (the variant's reference, rooflab's ``float32/quant`` tolerance) before
anything is timed. If l3 sits below the read roof too, the kernel is compute-bound there and no
prefetching will reach it. (An L2-sized weight is left out: a 0.3 MB call is mostly the call's own
activation quantization and parallel-region entry, not the GEMV.)

Measured (2-vCPU Zen 3, AVX2: no VNNI, 4096 x 11008, 5 rounds, two runs on a noisy host,
2026-12-07): per-round medians 1 thread dram 0.52 / 0.56, l3 0.59 / 0.60 of a 18.6 / 19.1 GB/s
roof; 2 threads dram 0.51 / 0.56, l3 0.59 / 0.60 of 35.1 / 26.7 GB/s. The L3-resident GEMV is
no faster than the streamed one: compute-bound on this core, below its read roof.
Napkin: the inner loop (AVX2) is ~36 instructions per 128 weights, i.e. per 64 B of codes and
16 B of scales (4 vpmaddubsw, 2 vpaddw, 2 vpmaddwd, 2 converts, 4 scale shuffles, 2 multiplies,
2 FMAs, the nibble masks and loads): at 4 a cycle and ~3 GHz that would be ~27 GB/s; one core
runs it at ~12-16 GB/s from its L2 (~2.3 a cycle; this VM has no PMU to say which port limits).
VNNI's vpdpbusd folds each vpmaddubsw + vpmaddwd pair into one instruction.
"""

from __future__ import annotations

import argparse

import rooflab
from rooflab.cpu.backend import cpu_backend
from rooflab.cpu.caches import host_measured
from rooflab.driver import Driver, Entry, Settings
from rooflab.errors import RooflabError
from rooflab.rotation import rotation_count

READ_BYTES = 140_000_000
W4 = "cpu.qgemm.01-w4a8-dpbusd"


def packed_bytes(inputs: tuple) -> int:
    return inputs[1].nbytes + inputs[2].nbytes


def checked(driver: Driver, v, size: dict, seed: int) -> tuple:
    """The variant's inputs at ``size``, verified as the driver verifies (a rotation's copies are
    all timed, so each is checked here; the driver checks each entry's first set again)."""
    inputs = v.inputs(size, seed=seed)
    driver.verify(v, inputs, v.params(), 1)
    return inputs


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--K", type=int, default=4096)
    ap.add_argument("--N", type=int, default=11008)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--read-mb", type=float, default=READ_BYTES / 1e6, help="the read roof's array (default 140)")
    a = ap.parse_args(argv)
    llc = int(host_measured().llc_effective())
    v = rooflab.get_variant(W4)
    read = rooflab.get_variant("cpu.stream.read")
    big = read.inputs(int(a.read_mb * 1e6) // 8)
    size = {"M": 1, "N": a.N, "K": a.K, "bits": 4}
    per_row = packed_bytes(v.inputs({**size, "N": 1}))
    n3 = max(8, llc // 2 // per_row)
    driver = Driver(cpu_backend(), Settings(probe_clock=False))
    try:
        l3 = checked(driver, v, {**size, "N": n3}, 0)
        first = checked(driver, v, size, 0)
        n = rotation_count(packed_bytes(first), llc, None)
        copies = [first] + [checked(driver, v, size, s) for s in range(1, n)]
    except RooflabError as e:
        raise SystemExit(f"w4_gemv_levels: {e}") from None
    print(f"{W4}, K = {a.K}: dram N = {a.N} x {len(copies)} copies "
          f"({len(copies) * packed_bytes(first) / 1e6:.0f} MB), l3 N = {n3} ({n3 * per_row / 1e6:.1f} MB; "
          f"LLC {llc / 2**20:.0f} MiB as this host's probe finds it)")  # fmt: skip
    entries = []
    for t in (int(x) for x in a.threads.split(",")):
        g = f"{t}T"
        entries += [
            Entry(read, big, label=f"read roof {g}", group=g, threads=t),
            Entry(v, first, label=f"dram {g}", group=g, threads=t, rotate=tuple(copies[1:]), reps=len(copies)),
            Entry(v, l3, label=f"l3 {g}", group=g, threads=t),
        ]
    records = driver.interleaved(entries, rounds=a.rounds)
    failed = [f"{r.label}: {r.error}" for r in records if r.status != "ok"]
    if failed:
        raise SystemExit("w4_gemv_levels: " + "; ".join(failed))
    nbytes = {"read": big[0].nbytes, "dram": packed_bytes(first), "l3": packed_bytes(l3)}

    def rates(r) -> list[float]:  # GB/s of each round's sample (packed weight bytes for the GEMVs)
        return [nbytes[r.label.split()[0]] * r.reps / s / 1e9 for s in r.samples_s]

    for roof, *gemv in (records[i : i + 3] for i in range(0, len(records), 3)):
        base = rates(roof)
        parts = []
        for r in gemv:
            ratio = sorted(x / b for x, b in zip(rates(r), base))
            parts.append(f"{r.label.split()[0]} {ratio[0]:.2f}-{ratio[-1]:.2f} (median {ratio[len(ratio) // 2]:.2f})")
        print(f"{roof.label} {sorted(base)[len(base) // 2]:.1f} GB/s; GEMV / roof, per round: " + ", ".join(parts))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
