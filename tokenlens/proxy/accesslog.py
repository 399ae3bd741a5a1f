"""`--access-log [PATH|-]`: one JSON line per request, off by default.

Why a plain `os.write` of each whole line on the event loop, not a logging handler or a
writer thread: a line is a few hundred bytes and one `write` to a file opened with
`O_APPEND` lands in the page cache in microseconds, and whole-line appends never interleave,
so several workers can share one file. `bench/bench_observe.py` measured logging's
`QueueHandler` with a listener thread at ~55 us per request at p50 (its thread competes with
the event loop for the GIL), this at ~37 us, metrics included (load 7 on 2 cores). With
`-` the lines go to standard output: a reader that stops reading a pipe stalls the proxy,
so prefer a file in production.
The line holds what `Observation.log_line` gives: names, numbers, timings; never content,
paths or keys. A write that fails (disk full, closed pipe) is counted and logged once, and
never fails the request.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path

log = logging.getLogger("tokenlens.proxy")

STDOUT = "-"


class AccessLog:
    """Appends JSON lines to `target` (a file path, or `-` for standard output)."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.failures = 0
        self._own = target != STDOUT
        if self._own:
            path = Path(target)
            if not path.parent.is_dir():
                raise ValueError(f"--access-log: folder {path.parent} does not exist")
            self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)
        else:
            sys.stdout.flush()
            self._fd = sys.stdout.fileno()

    def write(self, line: dict[str, object]) -> None:
        data = json.dumps(line, separators=(",", ":")).encode() + b"\n"
        try:
            os.write(self._fd, data)
        except OSError as exc:
            self.failures += 1
            if self.failures == 1:
                log.warning("access log write failed (%s); counting, not retrying", exc.strerror)

    def close(self) -> None:
        if self._own:
            os.close(self._fd)
            self._own = False
