"""What each CLI command does (argument parsing lives in cli.py)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from . import roofline
from .choices import devices as _devices
from .choices import suites as _suites
from .errors import RooflabError
from .memory import fmt_bytes, parse_size

AGREEMENT = 0.05  # two consecutive runs should agree within 5% on every ceiling's median


def _console():
    from rich.console import Console

    return Console()


# ---- info --------------------------------------------------------------------------------------


def _lowprec_rows(table, cpu: dict) -> None:
    """The low-precision units (INT8, BF16, FP16, AMX tiles): a theoretical row per unit this CPU runs
    (its own unit in the GFLOP/s column), a row saying why for each unit it cannot run or whose rate
    is not known."""
    from .cpu.machine import LOWPREC_DTYPE, LOWPREC_INSTRUCTION, lowprec_peak
    from .families import lowprec

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


def cmd_info(args) -> int:
    from rich.table import Table

    from . import machine
    from .cpu.backend import probe_clock

    m = machine.describe()
    from .results import RUNS_DIR

    ghz, which = _info_clock(m["id"], Path(RUNS_DIR), probe_clock)
    if ghz:
        m = machine.describe(measured_ghz=ghz)
    c = _console()
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
    t = Table(title="Theoretical peaks at the " + m["cpu"]["theoretical"]["clock_source"])
    for col in ("dtype", "threads", "GFLOP/s", "formula"):
        t.add_column(col)
    for p in cpu["theoretical"]["peaks"]:
        t.add_row(p["dtype"], str(p["threads"]), f"{p['gflops']:.1f}", p["formula"])
    _lowprec_rows(t, cpu)
    c.print(t)
    sw = m["software"]
    blas = ", ".join(f"{b['internal_api']} {b['version']} ({b['architecture']})" for b in sw.get("blas", []))
    c.print(f"  Python {sw['python']}, numpy {sw['numpy']}, numba {sw.get('numba')}, BLAS {blas or 'none'}")
    c.print(f"  git commit: {m['git']['commit'] or m['git']['source']}")
    from .cuda import backend

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
    return 0


def _info_clock(machine_id: str, out: Path, probe_clock) -> tuple[float | None, str]:
    """The one clock `info` shows, and which it is: the newest ceilings run's of this machine under
    ``out`` (the best running clock probed in that run, its FMA kernels included: the clock its
    theoretical peaks and plots use), else a dependent-add probe now (best of its samples; an idle
    core may not have reached the clock a run reaches under load)."""
    from .results import load, run_clock

    for path in sorted((out / machine_id).glob("rooflab-ceilings-cpu-*.json"), reverse=True):
        try:
            data = load(path)
        except RooflabError:
            continue
        ghz, _ = run_clock(data)
        from .models.measure import lacks

        if ghz and str(data.get("status", "")).startswith("complete") and not lacks(data, "cpu"):
            return ghz, f"the clock of run {path.name}, probed around its kernels, FMA included"
    probe = probe_clock(1)
    if not probe:
        return None, "no clock probe on this machine"
    return max(probe), "probed now, dependent-add chain; no run of this machine here yet"


# ---- run ---------------------------------------------------------------------------------------


def cmd_run(args) -> int:
    """`rooflab run`; the run's --max-working-set is in force for this run alone (a later run or
    suite in the same process, the tests' included, starts without it)."""
    from .memory import set_working_set_limit

    try:
        return _run(args)
    finally:
        set_working_set_limit(None)


def _run(args) -> int:
    from . import machine
    from .driver import Settings
    from .progress import RichProgress
    from .results import ResultWriter
    from .threads import check_threads, max_threads

    devices = _devices(args.device)
    status = 0
    for device in devices:
        suites = _suites(args.suite)
        if device == "cuda":
            from .cuda import backend
            from .errors import DeviceUnavailable

            try:  # one-line DeviceUnavailable: no cupy, no driver, an old driver, no such GPU index
                backend.require(args.gpu)
            except DeviceUnavailable as e:
                if len(devices) == 1:
                    raise
                print(f"rooflab: error: {e} (the CPU results above are kept)", file=sys.stderr)
                status = 2
                continue
            import cupy

            cupy.cuda.Device(args.gpu).use()
        threads = check_threads(args.threads) if args.threads is not None else max_threads()
        max_ws = parse_size(args.max_working_set) if args.max_working_set else None
        from .memory import set_working_set_limit

        set_working_set_limit(max_ws)  # every suite that sizes its own arrays honours it
        if max_ws and device == "cpu":  # refused before anything is written
            from .memory import require_fits

            require_fits(int(max_ws * 2.2), f"--max-working-set {args.max_working_set}")
        out = Path(args.out)
        from .results import require_writable

        require_writable(out)
        budget = args.budget if args.budget is not None else (0.08 if args.quick else 0.3)
        settings = Settings(
            budget_s=budget, target_s=0.004 if args.quick else 0.01, max_attempts=2 if args.quick else 3
        )
        for suite in suites:
            config = {
                "quick": args.quick,
                "threads": threads,
                "budget_s": budget,
                "max_working_set": max_ws,
                "suite": suite,
                "device": device,
            }
            desc = machine.describe()
            if device == "cuda":
                from .cuda import backend

                desc["gpu"] = backend.describe(args.gpu)
                if not os.environ.get("ROOFLAB_MACHINE"):  # GPU results are filed under the GPU's name
                    desc["id"] = f"{machine.slug(desc['gpu']['name'])}-gpu{args.gpu}"
            writer = ResultWriter(out, desc, suite, device, config)
            progress = RichProgress(f"{suite} on {device}")
            driver = _driver(device, settings)
            try:
                _run_suite(suite, device, driver, writer, args, threads, max_ws, progress)
            except KeyboardInterrupt:
                progress.close()
                writer.finish("interrupted")
                print(_interrupted_line(writer), file=sys.stderr)
                return 130
            except RooflabError:
                progress.close()
                writer.finish("failed")
                raise
            progress.close()
            writer.finish("complete" if not writer.data["errors"] else "complete-with-errors")
            files = []
            t_plots = time.perf_counter()
            if not args.no_plot:
                from .charts import all_plots

                if suite in ("ceilings", "models", "probe"):
                    files = all_plots(writer.data, writer.path.with_suffix(""), ops=writer.data.get("ops_placed"))
                else:
                    from .charts import family

                    files = family.chart(writer.data, writer.path.with_suffix(""), _newest_ceilings(out, writer))
            if files and writer.data.get("phases"):
                _add_phase(writer, "plots", time.perf_counter() - t_plots)
            if suite not in ("ceilings", "models", "probe"):
                _family_summary(writer.data)
            if suite == "ceilings":
                consistency = _agreement(writer, out)
                _summary(writer.data)
                print(consistency)
            elif writer.data.get("ceilings"):  # a family suite that derives ceilings (latency, chase)
                _summary(writer.data)
            else:
                for e in writer.data.get("errors", []):
                    print(f"error: {e.get('label')}: {e['error']}")
            from .phases import lines as phase_lines

            for line in phase_lines(writer.data):  # where the time went
                print(line)
            print(f"result: {writer.path}")
            for f in files:
                print(f"plot:   {f}")
            if writer.data["errors"]:
                status = 1
    return status


def _driver(device: str, settings):
    from .driver import Driver

    if device == "cuda":
        from .cuda.backend import driver_backend

        return Driver(driver_backend(), settings)
    from .cpu.backend import cpu_backend

    return Driver(cpu_backend(), settings)


def _run_suite(suite, device, driver, writer, args, threads, max_ws, progress):
    if device == "cpu" and suite == "ceilings":
        from .suite_ceilings import FULL_SWEEP_FACTOR, QUICK_SWEEP_FACTOR, Plan, run

        factor = QUICK_SWEEP_FACTOR if args.quick else FULL_SWEEP_FACTOR
        plan = Plan(threads_all=threads, quick=args.quick, max_ws=max_ws, sweep_factor=factor)
        run(driver, writer, plan, progress)
    elif device == "cpu" and suite == "probe":  # one point per level of each ceiling kind (fleets)
        from .suite_probe import run as run_probe

        run_probe(driver, writer, threads, progress)
    elif device == "cuda" and suite == "ceilings":
        from . import suite_cuda as gpu_suite

        gpu_suite.run(writer, quick=args.quick, progress=progress, budget_s=args.budget)
    elif suite == "models":
        from .models import measure

        measure.run_suite(
            writer,
            device=device,
            quick=args.quick,
            threads=threads,
            progress=progress,
            model=args.model,
            batch=args.batch,
            seq=args.seq,
            ceilings_path=args.ceilings,
            out_dir=Path(args.out),
        )
    else:  # a kernel family's own suite: its cases on this device
        from .registry import family_cases

        cases = family_cases(suite, device, quick=args.quick, threads=sorted({1, threads}))
        if not cases:
            raise RooflabError(f"suite {suite!r} has nothing to measure on {device}", "pick another --device")
        progress.start(len(cases))
        if device == "cpu":
            driver.probe_clock(1)  # the clock cycles per load are counted at (chase)
        driver.run(cases, writer, progress)
        progress.done(None)
        from . import family_report
        from .registry import family_ceilings

        family_report.add_pct_of_library(writer.data["records"])
        writer.data["ceilings"] = family_ceilings(suite, device, writer.data)
        writer.save()


def _newest_ceilings(out: Path, writer) -> dict | None:
    """This machine's newest ceilings result, drawn across a family's chart (None if there is none)."""
    from .models.measure import find_ceilings

    try:
        return find_ceilings(out, writer.data["machine"]["id"], writer.data["device"], None)[0]
    except RooflabError:
        return None


def _family_summary(data: dict) -> None:
    """Every rung of a family run with its figure and % of the library on the same case."""
    from rich.table import Table

    from . import family_report

    family_report.add_pct_of_library(data["records"])
    peaks = family_report.has_unit_peaks(data["records"])  # "% of unit peak": rungs beside their unit's peak
    prefix = f"{data['device']}.{data['suite']}."  # said once in the title: a narrow terminal folds names
    t = Table(title=f"{data['suite']} ({data['machine']['id']}, {data['device']}): variants {prefix}*, T = threads")
    if peaks:
        t.title += "; % of peak: of the rung's unit peak (lowprec.*) in this run"
    cols = ("variant", "case", "T", "figure", "% of library", *(("% of peak",) if peaks else ()), "status")
    for col in cols:  # T: threads
        right = col in ("T", "figure", "% of library", "% of peak")
        t.add_column(col, justify="right" if right else "left", no_wrap=right, overflow="fold")
    for variant, label, threads, value, unit, pct, pct_peak, status in family_report.table(data["records"]):
        cells = [
            variant.removeprefix(prefix).removeprefix(f"{data['device']}."),
            label,
            "-" if threads is None else str(threads),
            "-" if value is None else f"{value:.4g} {unit}",
            "-" if pct is None else f"{pct:.0f}%",
        ]
        cells += (["-" if pct_peak is None else f"{pct_peak:.0f}%"] if peaks else []) + [status]
        t.add_row(*cells)
    _console().print(t)


def _summary(data: dict) -> None:
    from rich.table import Table

    c = _console()
    if data.get("ceilings"):
        t = Table(title=f"Ceilings ({data['machine']['id']}, {data['device']})")
        # the interval a next run should fall into (rooflab/intervals.py: this run's spread, the
        # history of this machine's runs, a floor), not p20-p80 of what may be one sweep point
        ivs = [ce["interval"] for ce in data["ceilings"] if ce.get("interval")]
        for col in ("ceiling", "median", "interval" if ivs else "p20-p80", "unit", "notes"):
            t.add_column(col, overflow="fold")
        from .roofline import ceiling_notes

        for ce in data["ceilings"]:
            s, iv = ce["stats"], ce.get("interval")
            spread = f"{iv['lo']:.4g}-{iv['hi']:.4g}" if iv else f"{s['p20']:.4g}-{s['p80']:.4g}"
            notes = [f"[red]{n}[/red]" if n in ("noisy", ">105% of theoretical") else n for n in ceiling_notes(ce)]
            if ivs and not iv:  # a ceiling without an interval in a table of intervals
                notes.append("p20-p80, no interval")
            if ce.get("moved"):
                notes.append(f"[red]moved {ce['moved']['ratio'] - 1:+.0%} vs previous run[/red]")
            t.add_row(ce["name"], f"{ce['value']:.4g}", spread, ce["unit"], ", ".join(notes))
        c.print(t)
        if ivs:
            runs = max(iv.get("history_runs", 0) for iv in ivs)
            c.print(
                "interval: where the next quiet run should fall; "
                + (
                    f"from this run and up to {runs} earlier run(s) of this machine"
                    if runs
                    else "this run's spread only (no earlier runs here yet), at least 3 %"
                )
            )
    from rich.markup import escape

    for e in data.get("errors", []):  # compiler logs and CUDA messages hold brackets: no markup
        c.print(f"[red]error[/red] {escape(str(e.get('label')))}: {escape(e['error'])}")
    for n in data.get("notes", []):
        c.print(f"[yellow]note[/yellow] {escape(n)}")


def _interrupted_line(writer) -> str:
    ph = (writer.data.get("phases") or {}).get("items") or []
    done = [p["name"] for p in ph if not p.get("interrupted")]
    where = next((p["name"] for p in ph if p.get("interrupted")), None)
    return (
        "rooflab: interrupted"
        + (f" in phase {where!r}" if where else "")
        + f"; kept what was measured ({len(writer.data['records'])} records"
        + (f"; phases done: {', '.join(done)}" if done else "")
        + f") in {writer.path}"
    )


def _add_phase(writer, name: str, seconds: float) -> None:
    ph = writer.data["phases"]
    ph["items"].append({"name": name, "seconds": round(seconds, 3), "entered": 1})
    ph["total_s"] = round(ph["total_s"] + seconds, 3)
    writer.save()


def _earlier_same_kind(out: Path, data: dict, path: Path, n: int = 1) -> list[tuple[Path, dict]]:
    """The newest ``n`` earlier finished results of the same suite, device and --quick on this
    machine (the same id and the same CPU: machine.cpu_signature), oldest first."""
    from .machine import cpu_signature
    from .results import load, previous_results

    prev = previous_results(out, data["machine"]["id"], data["suite"], data["device"], path)
    found = []
    for p in reversed([p for p in prev if p.name < Path(path).name]):  # not a run started after this one
        try:
            old = load(p)
        except RooflabError:
            continue
        same_cpu = cpu_signature(old.get("machine")) == cpu_signature(data["machine"])
        if (
            same_cpu
            and old.get("status", "").startswith("complete")
            and old.get("config", {}).get("quick") == data["config"].get("quick")
        ):
            found.append((p, old))
            if len(found) >= n:
                break
    return found[::-1]


def _previous_same_kind(out: Path, data: dict, path: Path):
    """The newest earlier finished result of the same suite, device and --quick on this machine."""
    found = _earlier_same_kind(out, data, path)
    return found[-1] if found else (None, None)


def _agreement(writer, out: Path) -> str:
    """Compare with the previous finished run of the same suite on this machine (same --quick):
    each ceiling first gets its interval (rooflab/intervals.py: this run's spread and the earlier
    runs of this kind in the folder); every ceiling outside the previous run's interval (beyond
    AGREEMENT where that run has none) is flagged in the result (``moved``) and in the summary, and named in the line returned (always one line, also when there is nothing to
    compare with)."""
    from .intervals import HISTORY, inside, set_intervals

    data = writer.data
    earlier = _earlier_same_kind(out, data, writer.path, HISTORY)
    prev, old = earlier[-1] if earlier else (None, None)
    kind = "quick" if data["config"].get("quick") else "full"
    if not data.get("ceilings"):
        return "consistency: no ceilings in this run to compare"
    set_intervals(data["ceilings"], [d for _, d in earlier])
    writer.save()
    if prev is None:
        return f"consistency: no earlier finished {kind} run of this suite in {out} to compare with"
    rows = roofline.compare_ceilings([old, data])
    by_name = {c["name"]: c for c in data["ceilings"]}
    old_by_name = {c["name"]: c for c in old.get("ceilings", [])}

    def moved(r) -> bool:  # outside the previous run's interval; a run without intervals: beyond AGREEMENT
        ok = inside(old_by_name.get(r["name"], {}), r["values"][-1])
        return (abs(r["ratios"][-1] - 1) > AGREEMENT) if ok is None else not ok

    movers = [r for r in rows if r["ratios"][-1] is not None and moved(r)]
    for r in movers:
        c = by_name.get(r["name"])
        if c is not None:
            c["moved"] = {"ratio": r["ratios"][-1], "previous": str(prev)}
    compared = sum(r["ratios"][-1] is not None for r in rows)
    data["agreement"] = {
        "previous": str(prev),
        "tolerance": f"the previous run's interval of each ceiling (rooflab/intervals.py), else {AGREEMENT:.0%}",
        "disagreeing": [{"name": r["name"], "ratio": r["ratios"][-1]} for r in movers],
        "compared": compared,
        "agreeing_share": (compared - len(movers)) / compared if compared else None,
    }
    writer.save()
    if movers:
        names = ", ".join(f"{r['name']} ({r['ratios'][-1] - 1:+.0%})" for r in movers)
        return f"noisy: {len(movers)} of {compared} ceilings moved outside {prev.name}'s intervals: {names}"
    return f"consistent: all {compared} ceilings inside {prev.name}'s intervals"


# ---- plot --------------------------------------------------------------------------------------


def cmd_plot(args) -> int:
    from . import charts
    from .charts import family
    from .report import kind_of
    from .results import load

    data = load(args.result)
    stem = Path(args.output) if args.output else Path(args.result).with_suffix("")
    at = None  # -o X.png: the roofline at X.png (and .svg), the other charts beside it
    if stem.suffix in (".png", ".svg"):
        at, stem = stem, stem.with_suffix("")
    if kind_of(data) != "placement" and data.get("suite") not in (None, "ceilings"):  # a family's run: its charts
        from .models.measure import find_ceilings

        try:  # the newest ceilings of that machine beside the result (results/<machine>/...)
            ceilings = find_ceilings(Path(args.result).resolve().parent.parent, data["machine"]["id"],
                                     data.get("device", "cpu"), None)[0]  # fmt: skip
        except (RooflabError, KeyError):
            ceilings = None
        files = family.chart(data, stem, ceilings)
    else:  # ceilings, or ops placed on them: roofline, staircase (with sweeps), latency chart
        files = charts.all_plots(data, stem, ops=data.get("ops_placed"), roofline_at=at)
    for f in files:
        print(f)
    return 0


# ---- compare -----------------------------------------------------------------------------------


def cmd_compare(args) -> int:
    from rich.table import Table

    from .results import load

    if len(args.results) < 2:
        raise RooflabError("compare needs at least two result files", "rooflab compare A.json B.json")
    data = [load(p) for p in args.results]
    for path, d in zip(args.results, data):
        if not d.get("ceilings"):
            raise RooflabError(
                f"{path} has no ceilings (a {d.get('suite')!r} result): compare compares ceilings",
                "pass result files written by `rooflab run` (suite ceilings), or by `rooflab place`",
            )
    kinds = {d.get("device") for d in data}
    if len(kinds) > 1:
        print(f"note: comparing different devices ({', '.join(sorted(kinds))})", file=sys.stderr)
    from .intervals import inside
    from .machine import cpu_signature

    machines = {(d["machine"].get("cpu") or {}).get("model") or d["machine"]["id"] for d in data}
    if len(machines) > 1:
        print(f"note: these results come from different machines ({', '.join(sorted(machines))})", file=sys.stderr)
    elif len({cpu_signature(d["machine"]) for d in data}) > 1:  # one brand string, two CPUs (a VM's)
        cpu = [(d["machine"].get("cpu") or {}) for d in data]
        said = ", ".join(sorted({f"family {c.get('family')} model {c.get('model_number')}" for c in cpu}))
        print(f"note: these results come from different CPUs under one name ({said})", file=sys.stderr)
    rows = roofline.compare_ceilings(data)
    base = {c["name"]: c for c in data[0]["ceilings"]}
    thr = args.threshold / 100
    t = Table(title="Ceilings: " + " vs ".join(f"{d['machine']['id']} {d.get('started', '')[:16]}" for d in data))
    t.add_column("ceiling")
    t.add_column("unit")
    for i, _ in enumerate(data):
        t.add_column(chr(65 + i), justify="right")
        if i:
            t.add_column(f"{chr(65 + i)}/A", justify="right")
    regressions, missing, held, untrue = [], 0, [], []
    for r in rows:
        cells = [r["name"], r["unit"], f"{r['values'][0]:.4g}"]
        for v, ratio in zip(r["values"][1:], r["ratios"]):
            if v is None:
                cells += ["-", "-"]
                missing += 1
                continue
            worse = (ratio > 1 + thr) if r["lower_is_better"] else (ratio < 1 - thr)
            if worse and base[r["name"]].get("implausible"):  # A's figure cannot be true: no baseline
                worse = False
                untrue.append(r["name"])
            elif worse and inside(base[r["name"]], v):  # inside A's interval: the run-to-run spread
                worse = False
                held.append(r["name"])
            if worse:
                regressions.append(r["name"])
            cells += [f"{v:.4g}", f"[red]{ratio:.3f}[/red]" if worse else f"{ratio:.3f}"]
        t.add_row(*cells)
    _console().print(t)
    if missing:
        print(f"{missing} ceiling(s) of A have no counterpart in the other file(s) (shown as -): not compared")
    if held:
        print(
            f"{len(held)} move(s) beyond {args.threshold:g}% stay inside A's interval (its run-to-run spread): not regressions"
        )
    if untrue:
        print(
            f"{len(untrue)} ceiling(s) of A cannot be true (flagged in A): not compared: {', '.join(sorted(set(untrue)))}"
        )
    if regressions:
        print(f"regressed beyond {args.threshold:g}%: {len(regressions)} ceiling(s):")
        for name in regressions:  # every one, never a cut list
            print(f"  {name}")
        return 1
    print(f"no ceiling regressed beyond {args.threshold:g}%")
    return 0


# ---- place / report (model ops and HTML pages) -------------------------------------------------


def cmd_place(args) -> int:
    """rooflab place OPS.json|MODEL.onnx [--runtime onnxruntime]"""
    from .models import measure

    path = Path(args.ops)
    runtime = (getattr(args, "runtime", None) or "").lower() or None
    if runtime is None:
        given = [f for f, v in (("--batch", args.batch), ("--dim", args.dim), ("--runs", args.runs),
                                ("--no-own", args.no_own)) if v]  # fmt: skip
        if given:
            raise RooflabError(f"{', '.join(given)} apply to a runtime", "add --runtime onnxruntime")
    elif runtime in ("torch", "pytorch"):
        raise RooflabError(
            "--runtime torch places a PyTorch module, not a file", "call rooflab.place_torch(model, example_inputs)"
        )
    elif runtime not in ("onnxruntime", "ort"):
        raise RooflabError(f"unknown runtime {args.runtime!r}", "use --runtime onnxruntime")
    if not path.exists():
        raise RooflabError(f"no such file: {path}", "give an OPS.json or a MODEL.onnx")
    if runtime:
        return _place_runtime(path, args)
    if path.suffix.lower() == ".onnx":
        from .models.onnx_import import ops_from_onnx

        ops, unsupported = ops_from_onnx(path)
    else:
        from .models.userops import load_ops

        ops, unsupported = load_ops(path)
    return measure.place_command(ops, unsupported, args, source=str(path))


def _place_runtime(path: Path, args) -> int:
    from .models import runtime, runtime_ort

    if path.suffix.lower() != ".onnx":
        raise RooflabError(
            f"--runtime {args.runtime} runs an ONNX model, not {path.name}",
            "give a MODEL.onnx (`rooflab export MODEL -o MODEL.onnx` writes one)",
        )
    runtime_ort.import_ort()
    batch = runtime.check_batch(args.batch)
    model = runtime_ort.load_model(path)
    dims = {}
    for d in args.dim:
        name, _, size = d.partition("=")
        if not name or not size.isdigit() or int(size) < 1:
            raise RooflabError(f"--dim {d!r} is not NAME=SIZE", "e.g. --dim sequence=128")
        dims[name] = int(size)
    if args.runs is not None and args.runs < 1:
        raise RooflabError(f"--runs must be at least 1, got {args.runs}")
    runtime_ort.input_shapes(model, batch, dims)  # a fixed batch that disagrees, a dynamic dim not given
    ready = runtime.prepare(args, args.device)
    print(f"running {path.name} in onnxruntime ({ready['threads']} threads) ...", file=sys.stderr)
    profile = runtime_ort.profile_onnx(
        path,
        threads=ready["threads"],
        device=ready["device"],
        batch=batch,
        dims=dims,
        quick=args.quick,
        runs=args.runs,
        model=model,
    )
    runtime.place_profile(profile, args, str(path), ready)
    return 0


def cmd_export(args) -> int:
    """rooflab export MODEL -o MODEL.onnx"""
    from .models import export_llm
    from .models.export import ALIASES, EXPORTS, export

    catalog_name = ALIASES.get(str(args.model).lower(), str(args.model).lower())
    # an LLM config (bundled name or config.json); the catalog's networks first (gpt2 = gpt2-decode)
    is_llm = catalog_name not in EXPORTS and export_llm.exportable(args.model)
    if is_llm:
        export = export_llm.export
    if getattr(args, "quantize", None):
        from .models.export_quant import export_quantized

        out = export_quantized(
            export, args.model, args.output, args.quantize, is_llm, batch=args.batch, seq=args.seq, cache=args.cache
        )
    else:
        out = export(args.model, args.output, batch=args.batch, seq=args.seq, cache=args.cache)
    data = Path(str(out) + ".data")
    size = out.stat().st_size + (data.stat().st_size if data.exists() else 0)
    print(f"{out} ({size / 1e6:.1f} MB{', weights in ' + data.name if data.exists() else ''})")
    return 0


def cmd_llm(args) -> int:
    """rooflab llm CONFIG: an LLM's prefill and decode on the measured roofline (rooflab/models/llm_run.py)"""
    from .models.llm_run import cmd_llm

    return cmd_llm(args)


def cmd_report(args) -> int:
    if any(Path(p).is_dir() for p in args.results):  # a fleet directory: the fleet page
        from .fleet.page import report_command

        return report_command(args)
    from .report import build
    from .results import load

    results = [load(p) for p in args.results]
    out = Path(args.output or "results/report.html")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(build(results))
    print(out)
    return 0


# ---- fleet / publish (rooflab/fleet/, rooflab/publish.py) ---------------------------------------


def cmd_fleet(args) -> int:
    from .fleet.cli import fleet

    return fleet(args)


def cmd_publish(args) -> int:
    from .publish import publish_command

    return publish_command(args)
