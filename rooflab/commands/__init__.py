"""The commands of `rooflab`, one module each: its parser (``add_parser(sub)``, with ``HELP``) and
its ``main(args) -> int``. COMMANDS is the table cli.py builds the command line from, in the order
`rooflab --help` lists them: a new command is one module here and one line in this table.
"""

from __future__ import annotations

from . import compare, export, fleet, info, llm, place, plot, publish, report, run

COMMANDS = {
    "info": info,
    "run": run,
    "plot": plot,
    "place": place,
    "export": export,
    "llm": llm,
    "compare": compare,
    "report": report,
    "fleet": fleet,
    "publish": publish,
}
