"""Command line: rooflab info | run | plot | place | export | llm | compare | report | fleet | publish,
assembled from rooflab/commands/ (one module per command: its parser and its main).

Every user mistake (unknown device, too many threads, a foreign or broken result file, a working set
larger than free memory) ends in one line on stderr naming the problem and the fix, exit status 2,
and nothing already written is lost.
"""

from __future__ import annotations

import argparse
import sys

from .errors import RooflabError, interrupted


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, no usage dump
        self.exit(2, f"rooflab: error: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    from .commands import COMMANDS

    p = _Parser(
        prog="rooflab",
        description="Measure the empirical roofline of this machine and place real model operations on it.",
    )
    p.add_argument("--version", action="version", version=f"rooflab {_version()}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for command in COMMANDS.values():
        command.add_parser(sub)
    return p


def _version() -> str:
    from . import __version__

    return __version__


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return 2
    try:
        from .commands import COMMANDS

        return COMMANDS[args.command].main(args)
    except RooflabError as e:
        print(f"rooflab: error: {e}", file=sys.stderr)
        return 2
    except (KeyboardInterrupt, SystemError) as e:  # Ctrl-C, also inside a compiled kernel (errors.interrupted)
        if not interrupted(e):
            raise
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
