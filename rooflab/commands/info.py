"""`rooflab info`: hardware, software and theoretical peaks at one clock: the newest run's here
(measured while its kernels ran), else probed now (~1 s); the low-precision units this CPU runs
(or why not); every usable GPU with its theoretical peaks."""

from __future__ import annotations

from pathlib import Path

from ..errors import RooflabError
from ..memory import fmt_bytes
from ..results import RUNS_DIR

HELP = (
    "hardware, software and theoretical peaks at one clock: the newest run's here (measured while its "
    "kernels ran), else probed now (~1 s)"
)


def add_parser(sub) -> None:
    sub.add_parser("info", help=HELP)


def _lowprec_rows(table, cpu: dict) -> None:
    """The low-precision units (INT8, BF16, FP16, AMX tiles): a theoretical row per unit this CPU runs
    (its own unit in the GFLOP/s column), a row saying why for each unit it cannot run or whose rate
    is not known."""
    from ..cpu.machine import LOWPREC_DTYPE, LOWPREC_INSTRUCTION, lowprec_peak
    from ..families import lowprec

    ghz = cpu["theoretical"].get("clock_ghz")
    cores = cpu["physical_cores"]
    for unit, why in lowprec.available().items():
        dtype = LOWPREC_DTYPE[unit]
        if why:
            table.add_row(dtype, "-", "-", f"{LOWPREC_INSTRUCTION[unit]}: skipped ({why})")
            continue
        for threads in sorted({1, cores}):
            p = lowprec_peak(unit, threads, ghz, cpu["fma_units"])
            if p:
                table.add_row(dtype, str(threads), f"{p['value']:.1f} {p['unit']}", p["formula"])
            else:
                table.add_row(dtype, str(threads), "-", f"{LOWPREC_INSTRUCTION[unit]}: rate per cycle not known")


def main(args) -> int:
    from rich.console import Console

    from .. import machine
    from ..cpu.backend import probe_clock

    m = machine.describe()
    ghz, which = clock_shown(m["id"], Path(RUNS_DIR), probe_clock)
    if ghz:
        m = machine.describe(measured_ghz=ghz)
    c = Console()
    _print_cpu(c, m, which)
    _print_peaks(c, m["cpu"])
    sw = m["software"]
    blas = ", ".join(f"{b['internal_api']} {b['version']} ({b['architecture']})" for b in sw.get("blas", []))
    c.print(f"  Python {sw['python']}, numpy {sw['numpy']}, numba {sw.get('numba')}, BLAS {blas or 'none'}")
    c.print(f"  git commit: {m['git']['commit'] or m['git']['source']}")
    _print_gpus(c)
    return 0


def _print_cpu(c, m: dict, which: str) -> None:
    """The CPU: model, cores, memory, SIMD, caches, NUMA, what the description left out, clock, FMA units."""
    cpu = m["cpu"]
    c.print(f"[bold]{cpu['model']}[/bold]  (machine id [cyan]{m['id']}[/cyan], host {m['hostname']})")
    c.print(
        f"  {cpu['physical_cores']} usable physical cores ({cpu['logical_cpus']} logical), "
        f"{fmt_bytes(m['memory_bytes'] or 0)} memory, {m['os']}"
        + (", virtual machine" if cpu.get("hypervisor") else "")
    )
    c.print(f"  SIMD: {' '.join(s for s in cpu['simd'] if not s.startswith('avx512_'))}")
    c.print(f"  vector code: {m['software']['vector_policy']}")
    for cache in cpu["caches"]:
        sharing = "private" if cache["private"] else f"shared by {cache['shared_by_cpus']} CPUs"
        c.print(
            f"  {cache['name']} {cache['type'].lower()}: {fmt_bytes(cache['size_bytes'])} x {cache['instances']}"
            f" ({sharing}, {cache['source']})"
        )
    if len(cpu.get("numa_nodes") or {}) > 1:
        nodes = cpu["numa_nodes"]
        c.print(f"  NUMA: {len(nodes)} nodes ({', '.join(f'node {k}: {len(v)} CPUs' for k, v in nodes.items())})")
    for p in cpu.get("problems") or []:  # what the description left out, one line each
        c.print(f"  [yellow]machine description: {p}[/yellow]")
    c.print(
        f"  clock: nominal {cpu['nominal_ghz'] or 0:.3f} GHz ({cpu['nominal_ghz_source']}), "
        f"measured {cpu.get('measured_ghz') or float('nan'):.3f} GHz ({which})"
    )
    fu = cpu["fma_units"]
    c.print(
        f"  FMA units: {fu['pipes']} x {fu['width_bits']}-bit ({fu['source']}"
        f"{'; assumed' if fu.get('assumed') else ''})"
    )


def _print_peaks(c, cpu: dict) -> None:
    """Theoretical peaks at the clock shown, the low-precision units' included."""
    from rich.table import Table

    t = Table(title="Theoretical peaks at the " + cpu["theoretical"]["clock_source"])
    for col in ("dtype", "threads", "GFLOP/s", "formula"):
        t.add_column(col)
    for p in cpu["theoretical"]["peaks"]:
        t.add_row(p["dtype"], str(p["threads"]), f"{p['gflops']:.1f}", p["formula"])
    _lowprec_rows(t, cpu)
    c.print(t)


def _print_gpus(c) -> None:
    """Every usable GPU with its theoretical peaks, or why none is usable."""
    from ..cuda import backend

    gpus = backend.describe_all()
    if gpus.get("devices"):
        for g in gpus["devices"]:
            c.print(
                f"  GPU {g['index']}: {g['name']} (sm_{g['compute_capability']}, {g['sm_count']} SMs, "
                f"{fmt_bytes(g['memory_bytes'])}, L2 {fmt_bytes(g['l2_bytes'])}, max SM clock "
                f"{g['clock_ghz'] or 0:.3f} GHz, driver {g['driver_version']}, runtime {g['runtime_version']})",
                markup=False,
            )
            theo = g["theoretical"]
            for p in theo["peaks"]:
                c.print(f"    theoretical {p['dtype']}: {p['formula']}", markup=False)
            if theo.get("memory_formula"):
                c.print(f"    theoretical memory: {theo['memory_formula']}", markup=False)
    else:
        c.print(f"  GPU: none usable ({gpus.get('reason')})", markup=False)


def clock_shown(machine_id: str, out: Path, probe_clock) -> tuple[float | None, str]:
    """The one clock `info` shows, and which it is: the newest ceilings run's of this machine under
    ``out`` (the best running clock probed in that run, its FMA kernels included: the clock its
    theoretical peaks and plots use), else a dependent-add probe now (best of its samples; an idle
    core may not have reached the clock a run reaches under load)."""
    from ..ceilings_file import lacks
    from ..results import load, run_clock

    for path in sorted((out / machine_id).glob("rooflab-ceilings-cpu-*.json"), reverse=True):
        try:
            data = load(path)
        except RooflabError:
            continue
        ghz, _ = run_clock(data)
        if ghz and str(data.get("status", "")).startswith("complete") and not lacks(data, "cpu"):
            return ghz, f"the clock of run {path.name}, probed around its kernels, FMA included"
    probe = probe_clock(1)
    if not probe:
        return None, "no clock probe on this machine"
    return max(probe), "probed now, dependent-add chain; no run of this machine here yet"
