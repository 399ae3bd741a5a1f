"""Progress on the terminal (a rich bar per stage), as plain lines when nobody watches a
terminal (a pipe, CI, a worker log), and fan-out to several sinks."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import IO, Any

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

    def advance(self, stage: str, done: int, total: int, cached: int = 0) -> None:
        # The total can grow: the pay stage learns the arms' answers once compressed.
        self._bar.update(self._tasks[stage], completed=done, total=max(total, 1))

    def finish(self, stage: str) -> None:
        task = self._tasks.get(stage)
        if task is not None:
            total = self._bar.tasks[task].total or 1
            self._bar.update(task, completed=total)

    def close(self) -> None:
        if self._tasks:
            self._bar.stop()


class LineProgress:
    """A line per stage start and end, and one every `every_s` seconds in between:
    ``sample: 120/400 (30%), 48.0 per min, ETA 5m50s``, or after a resume
    ``sample: 320/400 (80%), 120.0 per min, ETA 40s (300 needed no new call)``: the rate
    and the ETA count only the calls paid now, since ledger hits finish at once.

    Lines go to `emit` (the flow passes its run logger's `info`, so they are in the run's
    log), else to `out` (stderr by default).

    A rich bar draws nothing under a pipe, so a long run would be silent for minutes. A
    line is due every `every_s` even when nothing finished meanwhile (one local answer
    can take longer than that on a busy machine): with `heartbeat`, a daemon thread
    prints the due line of every open stage.
    """

    def __init__(
        self,
        out: IO[str] | None = None,
        *,
        every_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        heartbeat: bool = True,
        emit: Callable[[str], None] | None = None,
    ) -> None:
        self._out = out
        self._emit = emit
        self._every = every_s
        self._clock = clock
        self._heartbeat = heartbeat
        self._started: dict[str, float] = {}
        self._last: dict[str, float] = {}
        self._done: dict[str, tuple[int, int, int]] = {}
        self._open: set[str] = set()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def _print(self, text: str) -> None:
        if self._emit is not None:
            self._emit(text)
        else:
            print(text, file=self._out or sys.stderr, flush=True)

    def start(self, stage: str, total: int) -> None:
        now = self._clock()
        with self._lock:
            self._started[stage] = self._last[stage] = now
            self._done[stage] = (0, total, 0)
            self._open.add(stage)
            if self._heartbeat and self._thread is None:
                self._wake.clear()
                self._thread = threading.Thread(target=self._beat, daemon=True)
                self._thread.start()
        self._print(f"{stage}: 0/{total} to do")

    def advance(self, stage: str, done: int, total: int, cached: int = 0) -> None:
        with self._lock:
            self._done[stage] = (done, total, cached)
        if done < total:
            self._due(stage)

    def _due(self, stage: str) -> None:
        """Print the stage's line if `every_s` passed since its last one."""
        now = self._clock()
        with self._lock:
            if stage not in self._open or now - self._last.get(stage, now) < self._every:
                return
            self._last[stage] = now
            done, total, cached = self._done[stage]
            text = self.line(stage, done, total, now - self._started[stage], cached)
        self._print(text)

    def _beat(self) -> None:
        while not self._wake.wait(min(1.0, self._every / 2)):
            with self._lock:
                stages = list(self._open)
            for stage in stages:
                self._due(stage)

    def finish(self, stage: str) -> None:
        with self._lock:
            done, total, cached = self._done.get(stage, (0, 0, 0))
            elapsed = self._clock() - self._started.get(stage, self._clock())
            self._open.discard(stage)
            thread = self._thread if not self._open else None
            if thread is not None:
                self._thread = None
                self._wake.set()
        free = f" ({cached} needed no new call)" if cached else ""
        self._print(f"{stage}: {done}/{total} done in {_duration(elapsed)}{free}")

    @staticmethod
    def line(stage: str, done: int, total: int, elapsed: float, cached: int = 0) -> str:
        share = f" ({100 * done / total:.0f}%)" if total else ""
        free = f" ({cached} needed no new call)" if cached else ""
        paid = done - cached
        if paid <= 0 or elapsed <= 0:
            return f"{stage}: {done}/{total}{share}, no rate yet{free}"
        per_minute = 60.0 * paid / elapsed
        eta = (total - done) * elapsed / paid
        return (
            f"{stage}: {done}/{total}{share}, {per_minute:.1f} per min, ETA {_duration(eta)}{free}"
        )


def _duration(seconds: float) -> str:
    whole = round(seconds)
    if whole < 60:
        return f"{whole}s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


class FanOut:
    """Send every progress event to several sinks."""

    def __init__(self, sinks: Sequence[Progress]):
        self.sinks = list(sinks)

    def start(self, stage: str, total: int) -> None:
        for sink in self.sinks:
            sink.start(stage, total)

    def advance(self, stage: str, done: int, total: int, cached: int = 0) -> None:
        for sink in self.sinks:
            sink.advance(stage, done, total, cached)

    def finish(self, stage: str) -> None:
        for sink in self.sinks:
            sink.finish(stage)
