"""Errors a user can act on: each carries a one-line message and the fix."""

from __future__ import annotations


class RooflabError(Exception):
    """A problem with the user's input or machine. The CLI prints it as one line and exits 2."""

    def __init__(self, message: str, fix: str | None = None):
        super().__init__(message)
        self.message = message
        self.fix = fix

    def __str__(self) -> str:
        return f"{self.message} (fix: {self.fix})" if self.fix else self.message


class VerificationError(RooflabError):
    """A kernel produced a wrong result: it gets this error, never a figure."""


class DeviceUnavailable(RooflabError):
    """The requested device (GPU, cupy, nvcc) is not usable here."""


def first_line(e: BaseException, limit: int = 240) -> str:
    """The first line of an exception's message (CUDA and compiler errors run long), or its type; a
    line over ``limit`` ends at its last whole sentence within it (else its last whole word, then
    " ..."), never mid-word (Ray's node-death reasons are one 400-character line)."""
    text = str(e).strip()
    if not text:
        return type(e).__name__
    line = text.splitlines()[0]
    if len(line) <= limit:
        return line
    cut = line[:limit]
    end = cut.rfind(". ")
    if end >= limit // 3:
        return cut[: end + 1]
    return cut[: cut.rfind(" ")].rstrip(",;:") + " ..." if " " in cut else cut + " ..."


def interrupted(e: BaseException) -> bool:
    """Ctrl-C, also when it arrived inside a compiled function: numba's dispatcher then raises
    SystemError ("returned a result with an exception set") with the KeyboardInterrupt as its cause,
    and a run stopped by the user ended in a traceback and exit 1 instead of its interrupted path."""
    seen = 0
    while e is not None and seen < 8:
        if isinstance(e, KeyboardInterrupt):
            return True
        if not isinstance(e, SystemError):
            return False
        e, seen = e.__cause__ or e.__context__, seen + 1
    return False
