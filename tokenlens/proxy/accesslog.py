"""`--access-log [PATH|-]`: one JSON line per request, off by default.

Why the logging module's queue pair: the event loop only puts a small record on a queue
(`QueueHandler`) and a listener thread does the file write, so a slow disk never stalls a
relayed request. Each line is written with one `write` call to a file opened for append,
so several workers can share one file without interleaving lines. The line holds what
`Observation.log_line` gives: names, numbers, timings; never content, paths or keys.
"""

from __future__ import annotations

import json
import logging
import logging.handlers
import queue
import sys
from pathlib import Path

STDOUT = "-"


class AccessLog:
    """Writes JSON lines to `target` (a file path, or `-` for standard output)."""

    def __init__(self, target: str) -> None:
        self.target = target
        if target == STDOUT:
            sink: logging.Handler = logging.StreamHandler(sys.stdout)
        else:
            path = Path(target)
            if path.parent and not path.parent.is_dir():
                raise ValueError(f"--access-log: folder {path.parent} does not exist")
            sink = logging.FileHandler(path, mode="a", encoding="utf-8")
        sink.setFormatter(logging.Formatter("%(message)s"))
        self._queue: queue.SimpleQueue[logging.LogRecord] = queue.SimpleQueue()
        self._listener = logging.handlers.QueueListener(self._queue, sink)
        self._sink = sink
        # A private logger: nothing else writes to it and it never reaches the root handlers.
        self._logger = logging.Logger(f"tokenlens.access.{id(self)}", logging.INFO)
        self._logger.propagate = False
        self._logger.addHandler(logging.handlers.QueueHandler(self._queue))
        self._listener.start()

    def write(self, line: dict[str, object]) -> None:
        self._logger.info(json.dumps(line, separators=(",", ":")))

    def close(self) -> None:
        """Flush what is queued and release the file."""
        self._listener.stop()
        self._sink.close()
