"""What each CLI command does (argument parsing lives in cli.py)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from . import roofline
from .errors import RooflabError
from .memory import fmt_bytes, parse_size

AGREEMENT = 0.05  # two consecutive runs should agree within 5% on every ceiling's median


def _console():
    from rich.console import Console

    return Console()


def _devices(text: str) -> list[str]:
    text = (text or "cpu").lower()
    if text == "all":
        from .cuda import backend

        ok, why = backend.probe()
        if not ok:
            print(f"note: --device all runs the CPU only here: {why}", file=sys.stderr)
        return ["cpu"] + (["cuda"] if ok else [])
    if text not in ("cpu", "cuda"):
        raise RooflabError(f"unknown device {text!r}", "use --device cpu, cuda or all")
    return [text]


def _suites(text: str) -> list[str]:
    names = [s.strip() for s in (text or "ceilings").split(",") if s.strip()]
    from .registry import family_suites

    known = ("ceilings", "models", *family_suites())
    for s in names:
        if s not in known:
            raise RooflabError(f"unknown suite {s!r}", f"use one or more of: {', '.join(known)}")
    return names


# ---- info --------------------------------------------------------------------------------------


def cmd_info(args) -> int:
    from rich.table import Table

    from . import machine
    from .cpu.backend import probe_clock

    probe = probe_clock(1)
    m = machine.describe(measured_ghz=min(probe) if probe else None)
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
    c.print(
        f"  clock: nominal {cpu['nominal_ghz'] or 0:.3f} GHz ({cpu['nominal_ghz_source']}), "
        f"measured {cpu.get('measured_ghz') or float('nan'):.3f} GHz (dependent-add chain)"
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


# ---- run ---------------------------------------------------------------------------------------


def cmd_run(args) -> int:
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

            backend.require(args.gpu)  # one-line DeviceUnavailable when there is no GPU/cupy/such index
            import cupy

            cupy.cuda.Device(args.gpu).use()
        threads = check_threads(args.threads) if args.threads is not None else max_threads()
        max_ws = parse_size(args.max_working_set) if args.max_working_set else None
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
                print(f"rooflab: interrupted; kept what was measured in {writer.path}", file=sys.stderr)
                return 130
            except RooflabError:
                progress.close()
                writer.finish("failed")
                raise
            progress.close()
            writer.finish("complete" if not writer.data["errors"] else "complete-with-errors")
            files = []
            if not args.no_plot:
                from . import plots

                if suite in ("ceilings", "models"):
                    files = plots.all_plots(writer.data, writer.path.with_suffix(""), ops=writer.data.get("ops_placed"))
                else:
                    from . import family_report

                    files = family_report.chart(writer.data, writer.path.with_suffix(""), _newest_ceilings(out, writer))
            if suite not in ("ceilings", "models"):
                _family_summary(writer.data)
            if suite == "ceilings":
                _summary(writer.data)
                _agreement(writer, out)
            elif writer.data.get("ceilings"):  # a family suite that derives ceilings (latency, chase)
                _summary(writer.data)
            else:
                for e in writer.data.get("errors", []):
                    print(f"error: {e.get('label')}: {e['error']}")
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
        from .suite_ceilings import Plan, run

        plan = Plan(threads_all=threads, quick=args.quick, max_ws=max_ws, sweep_factor=4.0 if args.quick else 2**0.5)
        run(driver, writer, plan, progress)
    elif device == "cuda" and suite == "ceilings":
        from .cuda import suite as gpu_suite

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
    prefix = f"{data['device']}.{data['suite']}."  # said once in the title: a narrow terminal folds names
    t = Table(title=f"{data['suite']} ({data['machine']['id']}, {data['device']}): variants {prefix}*")
    for col in ("variant", "case", "figure", "% of library", "status"):
        right = col in ("figure", "% of library")
        t.add_column(col, justify="right" if right else "left", no_wrap=right, overflow="fold")
    for variant, label, value, unit, pct, status in family_report.table(data["records"]):
        t.add_row(
            variant.removeprefix(prefix),
            label,
            "-" if value is None else f"{value:.4g} {unit}",
            "-" if pct is None else f"{pct:.0f}%",
            status,
        )
    _console().print(t)


def _summary(data: dict) -> None:
    from rich.table import Table

    c = _console()
    if data.get("ceilings"):
        t = Table(title=f"Ceilings ({data['machine']['id']}, {data['device']})")
        for col in ("ceiling", "median", "p20-p80", "unit", "notes"):
            t.add_column(col, overflow="fold")
        from .roofline import ceiling_notes

        for ce in data["ceilings"]:
            s = ce["stats"]
            notes = [f"[red]{n}[/red]" if n in ("noisy", ">105% of theoretical") else n for n in ceiling_notes(ce)]
            t.add_row(ce["name"], f"{ce['value']:.4g}", f"{s['p20']:.4g}-{s['p80']:.4g}", ce["unit"], ", ".join(notes))
        c.print(t)
    from rich.markup import escape

    for e in data.get("errors", []):  # compiler logs and CUDA messages hold brackets: no markup
        c.print(f"[red]error[/red] {escape(str(e.get('label')))}: {escape(e['error'])}")
    for n in data.get("notes", []):
        c.print(f"[yellow]note[/yellow] {escape(n)}")


def _agreement(writer, out: Path) -> None:
    """Compare with the previous run of the same suite on this machine; say if it was noisy."""
    from .results import load, previous_results

    data = writer.data
    prev = previous_results(out, data["machine"]["id"], data["suite"], data["device"], writer.path)
    prev = [p for p in prev if p.stat().st_mtime < writer.path.stat().st_mtime]
    if not prev or not data.get("ceilings"):
        return
    try:
        old = load(prev[-1])
    except RooflabError:
        return
    if old.get("config", {}).get("quick") != data["config"].get("quick"):
        return
    rows = roofline.compare_ceilings([old, data])
    worst = [r for r in rows if r["ratios"][-1] is not None and abs(r["ratios"][-1] - 1) > AGREEMENT]
    data["agreement"] = {
        "previous": str(prev[-1]),
        "tolerance": AGREEMENT,
        "disagreeing": [{"name": r["name"], "ratio": r["ratios"][-1]} for r in worst],
        "compared": len(rows),
    }
    writer.save()
    if worst:
        names = ", ".join(f"{r['name']} ({r['ratios'][-1] - 1:+.0%})" for r in worst[:6])
        print(
            f"noisy: {len(worst)} of {len(rows)} ceilings differ by more than {AGREEMENT:.0%} from "
            f"{prev[-1].name}: {names}"
        )
    else:
        print(f"consistent: all {len(rows)} ceilings within {AGREEMENT:.0%} of {prev[-1].name}")


# ---- plot --------------------------------------------------------------------------------------


def cmd_plot(args) -> int:
    from . import plots
    from .results import load

    data = load(args.result)
    stem = Path(args.output) if args.output else Path(args.result).with_suffix("")
    if data.get("suite") not in ("ceilings", "models"):  # a kernel family's run: its own charts
        from . import family_report
        from .models.measure import find_ceilings

        try:  # the newest ceilings of that machine beside the result (results/<machine>/...)
            ceilings = find_ceilings(Path(args.result).resolve().parent.parent, data["machine"]["id"],
                                     data.get("device", "cpu"), None)[0]  # fmt: skip
        except (RooflabError, KeyError):
            ceilings = None
        files = family_report.chart(data, stem.with_suffix("") if stem.suffix in (".png", ".svg") else stem, ceilings)
    elif args.output and stem.suffix in (".png", ".svg"):
        files = plots.roofline(data, stem, ops=data.get("ops_placed"))
    elif data.get("suite") not in (None, "ceilings", "models"):  # a family's run: the chart `run` drew
        from . import family_report

        files = family_report.chart(data, stem)
    else:
        files = plots.all_plots(data, stem, ops=data.get("ops_placed"))
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
    kinds = {d.get("device") for d in data}
    if len(kinds) > 1:
        print(f"note: comparing different devices ({', '.join(sorted(kinds))})", file=sys.stderr)
    rows = roofline.compare_ceilings(data)
    thr = args.threshold / 100
    t = Table(title="Ceilings: " + " vs ".join(f"{d['machine']['id']} {d.get('started', '')[:16]}" for d in data))
    t.add_column("ceiling")
    t.add_column("unit")
    for i, _ in enumerate(data):
        t.add_column(chr(65 + i), justify="right")
        if i:
            t.add_column(f"{chr(65 + i)}/A", justify="right")
    regressions = []
    for r in rows:
        cells = [r["name"], r["unit"], f"{r['values'][0]:.4g}"]
        for v, ratio in zip(r["values"][1:], r["ratios"]):
            if v is None:
                cells += ["-", "-"]
                continue
            worse = (ratio > 1 + thr) if r["lower_is_better"] else (ratio < 1 - thr)
            if worse:
                regressions.append(r["name"])
            cells += [f"{v:.4g}", f"[red]{ratio:.3f}[/red]" if worse else f"{ratio:.3f}"]
        t.add_row(*cells)
    _console().print(t)
    if regressions:
        print(f"regressed beyond {args.threshold:g}%: {len(regressions)} ceiling(s): {', '.join(regressions[:8])}")
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
    from .models.export import export

    if export_llm.exportable(args.model):  # an LLM config (bundled name or config.json)
        export = export_llm.export
    out = export(args.model, args.output, batch=args.batch, seq=args.seq, cache=args.cache)
    print(f"{out} ({out.stat().st_size / 1e6:.1f} MB)")
    return 0


def cmd_llm(args) -> int:
    """rooflab llm CONFIG: an LLM's prefill and decode on the measured roofline (rooflab/models/llm_run.py)"""
    from .models.llm_run import cmd_llm

    return cmd_llm(args)


def cmd_report(args) -> int:
    from .report import build
    from .results import load

    results = [load(p) for p in args.results]
    out = Path(args.output or "results/report.html")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(build(results))
    print(out)
    return 0
