"""Progress on the terminal (a rich bar per stage) and fan-out to several sinks."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from tokenlens.calibration.runner import Progress


class RichProgress:
    """One rich progress bar per stage, on stderr (stdout stays for results)."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            TextColumn,
            TimeElapsedColumn,
        )
        from rich.progress import Progress as Bar

        self._bar = Bar(
            TextColumn("{task.description:<10}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=Console(file=sys.stderr),
            transient=False,
        )
        self._tasks: dict[str, Any] = {}

    def start(self, stage: str, total: int) -> None:
        if not self._tasks:
            self._bar.start()
        self._tasks[stage] = self._bar.add_task(stage, total=max(total, 1))

    def advance(self, stage: str, done: int, total: int) -> None:
        self._bar.update(self._tasks[stage], completed=done)

    def finish(self, stage: str) -> None:
        task = self._tasks.get(stage)
        if task is not None:
            total = self._bar.tasks[task].total or 1
            self._bar.update(task, completed=total)

    def close(self) -> None:
        if self._tasks:
            self._bar.stop()


class FanOut:
    """Send every progress event to several sinks."""

    def __init__(self, sinks: Sequence[Progress]):
        self.sinks = list(sinks)

    def start(self, stage: str, total: int) -> None:
        for sink in self.sinks:
            sink.start(stage, total)

    def advance(self, stage: str, done: int, total: int) -> None:
        for sink in self.sinks:
            sink.advance(stage, done, total)

    def finish(self, stage: str) -> None:
        for sink in self.sinks:
            sink.finish(stage)
