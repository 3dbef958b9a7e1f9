"""`rooflab run`: measure the ceilings (or a kernel family, the models, the fleet probe) on each
device asked for and write one result file per suite, its plots and its summary.

Time: a quick ceilings run is 60-100 s on an idle 2-core VM (2 passes), a full one about 9 min.
The run's --max-working-set is in force for this run alone: a later run or suite in the same
process, the tests' included, starts without it.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from ..errors import RooflabError, interrupted
from ..results import RUNS_DIR

HELP = "measure ceilings (and model ops) and write a result file + plots"
PLOTTED = ("ceilings", "models", "probe")  # suites drawn as a roofline; a family's suite gets its own charts


def add_parser(sub) -> None:
    r = sub.add_parser("run", help=HELP)
    r.add_argument("--device", default="cpu", help="cpu (default), cuda, or all")
    r.add_argument(
        "--gpu", type=int, default=0, metavar="INDEX", help="CUDA device index for --device cuda (default 0)"
    )
    r.add_argument(
        "--suite",
        default="ceilings",
        help="comma-separated: ceilings (default), models, latency (every latency path), probe (one point per "
        "level of each ceiling: fleets), or a kernel family "
        "(gemm, conv, elementwise, chase, ...)",
    )
    r.add_argument(
        "--quick",
        action="store_true",
        help="2 passes, smaller sweeps: about 60-100 s on an idle 2-core VM (a full run: about 9 min)",
    )
    r.add_argument("--threads", type=int, default=None, help="threads for the all-core figures (default: all cores)")
    r.add_argument("--out", default=RUNS_DIR, help=f"results directory (default: {RUNS_DIR}/)")
    r.add_argument(
        "--max-working-set",
        default=None,
        metavar="SIZE",
        help="largest working set any suite allocates (bandwidth sweep, pointer chase, elementwise arrays), "
        "e.g. 512M or 2G (default: 4x the LLC, within free memory)",
    )
    r.add_argument(
        "--budget",
        type=_positive_seconds,
        default=None,
        metavar="SECONDS",
        help="time budget per measurement (default 0.3, --quick 0.08)",
    )
    r.add_argument("--model", default=None, help=f"models suite: {', '.join(_models())} (default: all)")
    r.add_argument(
        "--batch", type=int, default=None, help="models suite: batch size (default: ResNet-50 at 1 and 32, BERT at 1)"
    )
    r.add_argument("--seq", type=int, default=None, help="models suite: sequence length for BERT / GPT-2 prefill")
    r.add_argument(
        "--ceilings",
        default=None,
        metavar="RESULT.json",
        help="models suite: place ops on these ceilings (default: newest ceilings run here)",
    )
    r.add_argument("--no-plot", action="store_true", help="do not write plots")


def _models() -> tuple[str, ...]:
    from ..workloads.catalog import MODELS

    return MODELS


def _positive_seconds(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not v > 0:
        raise argparse.ArgumentTypeError(f"{text} must be more than 0 seconds (e.g. --budget 0.05)")
    return v


def main(args) -> int:
    from ..memory import set_working_set_limit

    try:
        return _run_devices(args)
    finally:
        set_working_set_limit(None)


def _run_devices(args) -> int:
    """Each device of --device in turn (all: the CPU first; a GPU that cannot run is one line and
    exit 2 after the CPU's results), each suite of --suite on it."""
    from .. import choices
    from ..command_setup import from_args
    from ..errors import DeviceUnavailable

    devices = choices.devices(args.device)
    if "models" in choices.suites(args.suite):  # a model that does not exist: refused before any file is made
        from ..workloads.catalog import suite_for

        suite_for(args.model, args.batch, args.seq)
    status = 0
    for device in devices:
        suites = choices.suites(args.suite)
        try:
            setup = from_args(args, device)
        except DeviceUnavailable as e:
            if len(devices) == 1:
                raise
            print(f"rooflab: error: {e} (the CPU results above are kept)", file=sys.stderr)
            status = 2
            continue
        if device == "cuda":
            import cupy

            cupy.cuda.Device(setup.gpu).use()
        max_ws = _working_set_limit(args.max_working_set, device)
        budget = args.budget if args.budget is not None else (0.08 if args.quick else 0.3)
        for suite in suites:
            rc = _run_suite_to_file(suite, setup, args, max_ws, budget)
            if rc == 130:
                return 130
            if rc:
                status = rc
    return status


def _working_set_limit(text: str | None, device: str) -> int | None:
    """--max-working-set in bytes, in force for every suite that sizes its own arrays; refused before
    anything is written when the CPU's memory cannot hold it."""
    from ..memory import parse_size, require_fits, set_working_set_limit

    max_ws = parse_size(text) if text else None
    set_working_set_limit(max_ws)
    if max_ws and device == "cpu":
        require_fits(int(max_ws * 2.2), f"--max-working-set {text}")
    return max_ws


def _run_suite_to_file(suite: str, setup, args, max_ws: int | None, budget: float) -> int:
    """One suite on one device: measured into its result file, plotted, summarized. 0, 1 (errors
    in the result) or 130 (interrupted: what was measured is kept)."""
    from ..driver import Settings
    from ..progress import RichProgress
    from ..results import ResultWriter

    config = {
        "quick": args.quick,
        "threads": setup.threads,
        "budget_s": budget,
        "max_working_set": max_ws,
        "suite": suite,
        "device": setup.device,
    }
    writer = ResultWriter(setup.out, setup.description(), suite, setup.device, config)
    progress = RichProgress(f"{suite} on {setup.device}")
    settings = Settings(budget_s=budget, target_s=0.004 if args.quick else 0.01, max_attempts=2 if args.quick else 3)
    try:
        _measure_suite(suite, setup, _driver(setup.device, settings), writer, progress, args, max_ws)
    except (KeyboardInterrupt, SystemError) as e:  # Ctrl-C, also inside a compiled kernel
        if not interrupted(e):
            raise
        progress.close()
        writer.finish("interrupted")
        print(_interrupted_line(writer), file=sys.stderr)
        return 130
    except RooflabError:
        progress.close()
        if writer.data["records"] or writer.data.get("ops_placed") or writer.data.get("errors"):
            writer.finish("failed")  # what was measured is kept, marked
        else:
            writer.path.unlink(missing_ok=True)  # nothing measured: no file that a listing would show
        raise
    progress.close()
    writer.finish("complete" if not writer.data["errors"] else "complete-with-errors")
    files = [] if args.no_plot else _plots(suite, writer, setup.out)
    _print_outcome(suite, writer, setup.out, files)
    return 1 if writer.data["errors"] else 0


def _driver(device: str, settings):
    from ..driver import Driver

    if device == "cuda":
        from ..cuda.backend import driver_backend

        return Driver(driver_backend(), settings)
    from ..cpu.backend import cpu_backend

    return Driver(cpu_backend(), settings)


def _measure_suite(suite, setup, driver, writer, progress, args, max_ws):
    device, quick = setup.device, setup.quick
    if device == "cpu" and suite == "ceilings":
        from ..suite_ceilings import FULL_SWEEP_FACTOR, QUICK_SWEEP_FACTOR, Plan, run

        factor = QUICK_SWEEP_FACTOR if quick else FULL_SWEEP_FACTOR
        run(driver, writer, Plan(threads_all=setup.threads, quick=quick, max_ws=max_ws, sweep_factor=factor), progress)
    elif device == "cpu" and suite == "probe":  # one point per level of each ceiling kind (fleets)
        from ..suite_probe import run as run_probe

        run_probe(driver, writer, setup.threads, progress)
    elif device == "cuda" and suite == "ceilings":
        from .. import suite_cuda

        suite_cuda.run(writer, quick=quick, progress=progress, budget_s=args.budget)
    elif suite == "models":
        from ..models import suite as models_suite

        models_suite.run_suite(writer, setup, progress, model=args.model, batch=args.batch, seq=args.seq)
    else:
        _measure_family(suite, setup, driver, writer, progress)


def _measure_family(suite, setup, driver, writer, progress) -> None:
    """A kernel family's own suite: its cases on this device, each rung beside the library."""
    from .. import family_report
    from ..registry import family_cases, family_ceilings

    cases = family_cases(suite, setup.device, quick=setup.quick, threads=sorted({1, setup.threads}))
    if not cases:
        raise RooflabError(f"suite {suite!r} has nothing to measure on {setup.device}", "pick another --device")
    progress.start(len(cases))
    if setup.device == "cpu":
        driver.probe_clock(1)  # the clock cycles per load are counted at (chase)
    driver.run(cases, writer, progress)
    progress.done(None)
    family_report.add_pct_of_library(writer.data["records"])
    writer.data["ceilings"] = family_ceilings(suite, setup.device, writer.data)
    writer.save()


def _plots(suite: str, writer, out: Path) -> list[Path]:
    """A roofline suite's plots (roofline, staircase, latency), or a family's charts beside this
    machine's newest ceilings; the time they took is a phase of the run."""
    from ..charts import all_plots, family

    t0 = time.perf_counter()
    stem = writer.path.with_suffix("")
    if suite in PLOTTED:
        files = all_plots(writer.data, stem, ops=writer.data.get("ops_placed"))
    else:
        files = family.chart(writer.data, stem, _newest_ceilings(out, writer))
    if files and writer.data.get("phases"):
        _add_phase(writer, "plots", time.perf_counter() - t0)
    return files


def _print_outcome(suite: str, writer, out: Path, files: list[Path]) -> None:
    """The tables, the consistency line (ceilings), where the time went, the files written."""
    from .. import agreement
    from ..phases import lines as phase_lines
    from .run_tables import ceilings_table, family_table

    if suite not in PLOTTED:
        family_table(writer.data)
    if suite == "ceilings":
        consistency = agreement.check(writer, out)
        ceilings_table(writer.data)
        print(consistency)
    elif writer.data.get("ceilings"):  # a family suite that derives ceilings (latency, chase)
        ceilings_table(writer.data)
    else:
        for e in writer.data.get("errors", []):
            print(f"error: {e.get('label')}: {e['error']}")
    for line in phase_lines(writer.data):  # where the time went
        print(line)
    print(f"result: {writer.path}")
    for f in files:
        print(f"plot:   {f}")


def _newest_ceilings(out: Path, writer) -> dict | None:
    """This machine's newest ceilings result, drawn across a family's chart (None if there is none)."""
    from ..ceilings_file import find_ceilings

    try:
        return find_ceilings(out, writer.data["machine"]["id"], writer.data["device"], None)[0]
    except RooflabError:
        return None


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
