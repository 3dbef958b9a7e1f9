"""What `rooflab run` (and `rooflab fleet run`) accept for --device and --suite: one leaf module, so
the fleet code can check its arguments before it starts a node without importing the commands."""

from __future__ import annotations

from .errors import RooflabError


def devices(text: str) -> list[str]:
    text = (text or "cpu").lower()
    if text == "all":  # the CPU first; a GPU that cannot run is one line and exit 2 after it
        return ["cpu", "cuda"]
    if text not in ("cpu", "cuda"):
        raise RooflabError(f"unknown device {text!r}", "use --device cpu, cuda or all")
    return [text]


def suites(text: str) -> list[str]:
    names = [s.strip() for s in (text or "ceilings").split(",") if s.strip()]
    from .registry import family_suites

    known = ("ceilings", "models", "probe", *family_suites())
    for s in names:
        if s not in known:
            raise RooflabError(f"unknown suite {s!r}", f"use one or more of: {', '.join(known)}")
    return names
