"""Command line: rooflab info | run | plot | place | export | llm | compare | report | fleet | publish.

Every user mistake (unknown device, too many threads, a foreign or broken result file, a working set
larger than free memory) ends in one line on stderr naming the problem and the fix, exit status 2,
and nothing already written is lost.
"""

from __future__ import annotations

import argparse
import sys

from .errors import RooflabError
from .results import RUNS_DIR


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, no usage dump
        self.exit(2, f"rooflab: error: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="rooflab",
        description="Measure the empirical roofline of this machine and place real model operations on it.",
    )
    p.add_argument("--version", action="version", version=f"rooflab {_version()}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    sub.add_parser(
        "info",
        help="hardware, software and theoretical peaks at one clock: the newest run's here (measured while its "
        "kernels ran), else probed now (~1 s)",
    )

    r = sub.add_parser("run", help="measure ceilings (and model ops) and write a result file + plots")
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

    pl = sub.add_parser("plot", help="roofline, bandwidth staircase and latency chart (PNG + SVG) from a result file")
    pl.add_argument("result")
    pl.add_argument(
        "-o",
        "--output",
        default=None,
        help="output stem, or X.png/X.svg: the roofline there, the staircase at X.bandwidth.*, the latency chart at "
        "X.latency.* (default: next to the result)",
    )

    pc = sub.add_parser("place", help="time user-supplied ops (OPS.json or MODEL.onnx) and place them on a roofline")
    pc.add_argument("ops", help="OPS.json (see README) or MODEL.onnx")
    pc.add_argument(
        "--ceilings", default=None, metavar="RESULT.json", help="ceilings to place on (default: newest here)"
    )
    pc.add_argument("--device", default="cpu", help="cpu (default) or cuda: where the ops run and whose ceilings")
    pc.add_argument(
        "--threads", type=int, default=None, help="threads the ops run with and whose roofs they meet (default: all)"
    )
    pc.add_argument("--out", default=RUNS_DIR, help=f"results directory (default: {RUNS_DIR}/)")
    pc.add_argument("--quick", action="store_true", help="shorter timing per op (and per runtime profile)")
    pc.add_argument(
        "--runtime",
        default=None,
        metavar="NAME",
        help="run MODEL.onnx in this runtime (onnxruntime) and place its own per-node times",
    )
    pc.add_argument("--batch", type=int, default=None, help="--runtime: batch size of a model with a dynamic batch")
    pc.add_argument(
        "--dim", action="append", default=[], metavar="NAME=SIZE", help="--runtime: size of a named dynamic dimension"
    )
    pc.add_argument("--runs", type=int, default=None, help="--runtime: measured runs (default: ~2 s worth, at least 5)")
    pc.add_argument("--no-own", action="store_true", help="--runtime: skip rooflab's own re-execution of the ops")

    ex = sub.add_parser("export", help="write a catalog network as an ONNX graph with random weights")
    ex.add_argument("model", help="resnet50, mobilenetv2, bert-base or gpt2-decode")
    ex.add_argument("-o", "--output", required=True, metavar="MODEL.onnx")
    ex.add_argument("--batch", type=int, default=None, help="batch size (default 1)")
    ex.add_argument("--seq", type=int, default=None, help="bert-base: sequence length (default 128)")
    ex.add_argument("--cache", type=int, default=None, help="gpt2-decode: KV cache positions (default 1024)")
    ex.add_argument(
        "--quantize",
        default=None,
        metavar="SCHEME",
        help="quantize with onnxruntime's tools: static (QDQ, CNNs), static-qoperator, dynamic (INT8 MatMuls), "
        "int4 or int8w (MatMulNBits weight-only)",
    )

    from .models.llm_cli import add_parser as _llm_parser

    _llm_parser(sub)

    cp = sub.add_parser("compare", help="ceilings of two or more result files side by side; exit 1 on regression")
    cp.add_argument("results", nargs="+")
    cp.add_argument("--threshold", type=float, default=5.0, help="percent drop that counts as a regression (default 5)")

    rp = sub.add_parser("report", help="self-contained HTML characterization page from result files")
    rp.add_argument("results", nargs="+")
    rp.add_argument("-o", "--output", default=None, help="HTML file (default: results/report.html)")

    from .fleet.cli import add_parsers as fleet_parsers  # fleet run | baseline | diagnose, publish

    fleet_parsers(sub)
    return p


def _models() -> tuple[str, ...]:
    from .models.catalog import MODELS

    return MODELS


def _version() -> str:
    from . import __version__

    return __version__


def _positive_seconds(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not v > 0:
        raise argparse.ArgumentTypeError(f"{text} must be more than 0 seconds (e.g. --budget 0.05)")
    return v


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return 2
    try:
        from . import commands

        return getattr(commands, f"cmd_{args.command}")(args)
    except RooflabError as e:
        print(f"rooflab: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("rooflab: interrupted", file=sys.stderr)
        return 130
    except OSError as e:  # an output path that cannot be written (a folder that cannot be made, /proc, ...)
        if e.filename is None:
            raise
        print(
            f"rooflab: error: cannot write {e.filename}: {e.strerror} (fix: pass a path you can write to)",
            file=sys.stderr,
        )
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
