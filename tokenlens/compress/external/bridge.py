"""Run an adapter's compressor in another Python (a throwaway venv) over a pipe.

A compressor's dependencies may not fit this environment's pins (headroom-ai pulls in
litellm and openai), so an adapter can run it in another interpreter: one long-lived
worker process (`_worker.py`, standard library only) reads one JSON request per line on
stdin and answers one JSON line with the compressed body and the CPU seconds it spent,
so per-request CPU is the worker's own, not this process's.
"""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import threading
from pathlib import Path
from typing import Any

from tokenlens.errors import ArmUnavailable, CompressionError

WORKER = Path(__file__).with_name("_worker.py")


class Bridge:
    """One worker process in `python`, running `kind` (``headroom`` or ``llmtrim``)."""

    def __init__(self, python: str, kind: str, options: dict[str, Any], env: dict[str, str]):
        self.python = python
        self.kind = kind
        self.options = options
        self.env = env
        self.last_cpu_s = 0.0
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[str] | None = None

    def _start(self) -> subprocess.Popen[str]:
        if self._proc is None or self._proc.poll() is not None:
            if not Path(self.python).exists():
                raise ArmUnavailable(f"{self.kind}: interpreter {self.python} does not exist")
            self._proc = subprocess.Popen(
                [self.python, str(WORKER), self.kind, json.dumps(self.options)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                stderr=subprocess.DEVNULL,
                env={**os.environ, **self.env},
            )
            atexit.register(self.close)
        return self._proc

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            proc = self._start()
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(json.dumps(body) + "\n")
            proc.stdin.flush()
            line = proc.stdout.readline()
        if not line:
            raise ArmUnavailable(f"{self.kind}: the worker in {self.python} exited")
        answer = json.loads(line)
        if "unavailable" in answer:
            raise ArmUnavailable(f"{self.kind} ({self.python}): {answer['unavailable']}")
        if "error" in answer:
            raise CompressionError(f"{self.kind} ({self.python}): {answer['error']}")
        self.last_cpu_s = float(answer["cpu_s"])
        result: dict[str, Any] = answer["body"]
        return result

    def close(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            assert self._proc.stdin is not None
            self._proc.stdin.close()
            self._proc.wait(timeout=10)
