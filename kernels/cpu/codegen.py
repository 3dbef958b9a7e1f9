"""Checked-in generated kernels: a module (gemm_ukr.py, conv_direct.py) keeps its generator above a
marker line and the code it generates below it, so numba's cache sees ordinary source and a test
holds the two in sync. ``python -m rooflab.kernels.cpu.<module>`` rewrites the part below the marker."""

from __future__ import annotations

import pathlib


def rewrite_below_marker(module_file: str, marker: str, generated: str) -> None:
    """Replace everything from ``marker`` on in ``module_file`` with ``generated`` (which starts with
    the marker): the developer tool behind each generated module's ``__main__``."""
    path = pathlib.Path(module_file)
    head = path.read_text().split(marker)[0].rstrip("\n")
    path.write_text(head + "\n\n\n" + generated)
