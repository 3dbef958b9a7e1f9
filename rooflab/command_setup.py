"""What every measuring command sets up before it measures, built once from its command line and
passed on as one object: the device (and GPU index), the threads, the machine's description and id,
the output folder and the ceilings the ops are placed on.

Every check that can fail on the user's input runs here, before anything is written: an unknown
device, no GPU (or no cupy) under --device cuda, too many threads, an output folder that cannot be
written. Results of a GPU are filed under the GPU's name (``nvidia-h200-gpu0``) unless
ROOFLAB_MACHINE names the machine, which then wins for every device.

Library code takes a ``Setup`` (or plain values), never the argparse namespace: `from_args` is the
one place that reads it.
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass
from pathlib import Path

from .errors import RooflabError
from .results import RUNS_DIR


@dataclass(frozen=True)
class Setup:
    device: str  # "cpu" or "cuda"
    gpu: int  # CUDA device index (device "cuda")
    threads: int  # the all-core figure's threads, checked against this machine
    machine: dict  # description as stored in result files (the GPU's under device "cuda")
    out: Path  # results folder, writable
    ceilings: str | None = None  # the ceilings result to place on (None: the newest that has every roof)
    quick: bool = False

    @property
    def machine_id(self) -> str:
        return self.machine["id"]

    def description(self) -> dict:
        """A fresh copy of the machine's description for one result file (a run writes into its own)."""
        return copy.deepcopy(self.machine)

    def find_ceilings(self) -> tuple[dict, str]:
        """The ceilings result to place on and where it came from (rooflab/ceilings_file.py)."""
        from .ceilings_file import find_ceilings

        return find_ceilings(self.out, self.machine_id, self.device, self.ceilings)


def check_device(device: str | None) -> str:
    device = (device or "cpu").lower()
    if device not in ("cpu", "cuda"):
        raise RooflabError(f"unknown device {device!r}", "use --device cpu or cuda")
    return device


def machine_on(device: str, gpu: int = 0) -> dict:
    """The machine's description; under "cuda" with the GPU's (it must be usable) and its id."""
    from . import machine

    desc = machine.describe()
    if device == "cuda":
        from .cuda import backend

        backend.require(gpu)  # one line: no cupy, no driver, an old driver, no such GPU index
        desc["gpu"] = backend.describe(gpu)
        if not os.environ.get("ROOFLAB_MACHINE"):  # GPU results are filed under the GPU's name
            desc["id"] = f"{machine.slug(desc['gpu']['name'])}-gpu{gpu}"
    return desc


def setup(
    device: str = "cpu",
    *,
    gpu: int = 0,
    threads: int | None = None,
    out: str | Path = RUNS_DIR,
    ceilings: str | None = None,
    quick: bool = False,
    check_out: bool = True,
) -> Setup:
    """Check the user's choices in the order a user reads them and build the setup (``check_out``
    False: the command checks its folder when it writes, as `llm` does: counts alone write nothing)."""
    from .results import require_writable
    from .threads import check_threads, max_threads

    device = check_device(device)
    desc = machine_on(device, gpu)
    n = check_threads(threads) if threads is not None else max_threads()
    out = Path(out)
    if check_out:
        require_writable(out)
    return Setup(device=device, gpu=gpu, threads=n, machine=desc, out=out, ceilings=ceilings, quick=quick)


def from_args(args, device: str | None = None, check_out: bool = True) -> Setup:
    """The setup of a command whose parser has --device, --gpu, --threads, --out, --ceilings and --quick
    (`run` passes each device of --device all in turn; its --ceilings serves the models suite)."""
    return setup(
        device if device is not None else args.device,
        gpu=args.gpu,
        threads=args.threads,
        out=args.out,
        ceilings=args.ceilings,
        quick=args.quick,
        check_out=check_out,
    )


def add_arguments(parser, *, what: str) -> None:
    """--device, --gpu, --threads, --out, --ceilings and --quick, worded for ``what`` the command measures."""
    parser.add_argument("--device", default="cpu", help=f"cpu (default) or cuda: where {what} run and whose ceilings")
    parser.add_argument(
        "--gpu", type=int, default=0, metavar="INDEX", help="CUDA device index for --device cuda (default 0)"
    )
    parser.add_argument(
        "--threads", type=int, default=None, help=f"threads {what} run with and whose roofs they meet (default: all)"
    )
    parser.add_argument("--out", default=RUNS_DIR, help=f"results directory (default: {RUNS_DIR}/)")
    parser.add_argument(
        "--ceilings", default=None, metavar="RESULT.json", help="ceilings to place on (default: newest here)"
    )
