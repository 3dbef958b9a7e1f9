"""Progress display for long runs (rich): a bar on a terminal, a line per 10 % in logs."""

from __future__ import annotations

import sys
import time


class RichProgress:
    """One bar for the whole run; the description says what is being measured now. On a
    non-terminal (CI logs) it prints one line per 10% instead of redrawing."""

    def __init__(self, title: str):
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.console = Console(stderr=True)
        self.tty = self.console.is_terminal
        self.title = title
        self.total = 0
        self.count = 0
        self.t0 = time.monotonic()
        self._last_pct = -10
        self.progress = None
        if self.tty:
            self.progress = Progress(
                TextColumn("[bold]{task.fields[title]}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("{task.description}"),
                console=self.console,
            )
            self.progress.start()
        self.task = None

    def start(self, total: int):
        self.total = total
        if self.progress is not None:
            self.task = self.progress.add_task("", total=total, title=self.title)
        return self.task

    def extend(self, n: int) -> None:
        """``n`` more steps than announced (a re-measurement): the bar never passes 100 %."""
        self.total += n
        if self.progress is not None and self.task is not None:
            self.progress.update(self.task, total=self.total)

    def step(self, description: str) -> None:
        if self.progress is not None and self.task is not None:
            if self.count:
                self.progress.advance(self.task)
            self.progress.update(self.task, description=description)
        else:
            pct = 100 * self.count // max(self.total, 1)
            if pct >= self._last_pct + 10:
                self._last_pct = pct - pct % 10
                print(
                    f"[{time.monotonic() - self.t0:6.1f}s] {self.title}: {pct:3d}% {description}",
                    file=sys.stderr,
                    flush=True,
                )
        self.count += 1

    def done(self, task) -> None:
        if self.progress is not None and self.task is not None:
            self.progress.update(self.task, completed=self.total, description="done")

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()
