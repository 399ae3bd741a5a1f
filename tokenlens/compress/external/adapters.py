"""The shipped adapters: ``ext:headroom`` (headroom-ai) and ``ext:llmtrim`` (llmtrim).

Each runs in this interpreter when its package is importable here, otherwise in the
interpreter named by ``TOKENLENS_<NAME>_PYTHON`` through `bridge.Bridge` (a throwaway
venv that holds the package). Options come from ``TOKENLENS_<NAME>_OPTIONS`` (JSON: the
keyword arguments of headroom's ``compress``; ``{"preset": ...}`` for llmtrim). Both are
offline by default: the worker's environment sets ``HF_HUB_OFFLINE=1`` and
``HEADROOM_OFFLINE=1``, so nothing is downloaded; a feature that needs a hub model then
fails or is skipped by the compressor itself, and says so.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any

from tokenlens.compress.external.bridge import Bridge
from tokenlens.errors import ArmUnavailable

#: Set in the worker's environment (and here, before an in-process import).
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "HEADROOM_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def _load_worker() -> Any:
    path = Path(__file__).with_name("_worker.py")
    spec = importlib.util.spec_from_file_location("tokenlens_external_worker", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Adapter:
    """A compressor adapter: `module` in-process if importable, else a bridged worker."""

    def __init__(
        self, kind: str, module: str, install: str, options: dict[str, Any] | None = None
    ) -> None:
        self.kind = kind
        self.module = module
        self.install = install
        self._options = options
        self._run: Any = None
        self.last_cpu_s: float | None = None  # set when the work ran in another process

    @property
    def options(self) -> dict[str, Any]:
        if self._options is not None:
            return self._options
        raw = os.environ.get(f"TOKENLENS_{self.kind.upper()}_OPTIONS", "")
        try:
            options = json.loads(raw) if raw.strip() else {}
        except ValueError as exc:
            raise ArmUnavailable(
                f"TOKENLENS_{self.kind.upper()}_OPTIONS is not JSON: {exc}"
            ) from exc
        if not isinstance(options, dict):
            raise ArmUnavailable(f"TOKENLENS_{self.kind.upper()}_OPTIONS must be a JSON object")
        return options

    @property
    def where(self) -> str:
        """The interpreter that runs it: this one, or the one the environment names."""
        return os.environ.get(f"TOKENLENS_{self.kind.upper()}_PYTHON") or sys.executable

    def _resolve(self) -> Any:
        python = os.environ.get(f"TOKENLENS_{self.kind.upper()}_PYTHON")
        if python:
            return Bridge(python, self.kind, self.options, OFFLINE_ENV)
        if importlib.util.find_spec(self.module) is None:
            raise ArmUnavailable(
                f"{self.kind}: {self.module} is not installed here; {self.install}, or set "
                f"TOKENLENS_{self.kind.upper()}_PYTHON to a Python that has it"
            )
        for key, value in OFFLINE_ENV.items():
            os.environ.setdefault(key, value)
        return getattr(_load_worker(), self.kind)(self.options)

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        if self._run is None:
            self._run = self._resolve()
        result: dict[str, Any] = self._run(body)
        if isinstance(self._run, Bridge):
            self.last_cpu_s = self._run.last_cpu_s
        return result


headroom = Adapter("headroom", "headroom", "pip install 'headroom-ai==0.42.0'")
llmtrim = Adapter("llmtrim", "llmtrim", "pip install 'llmtrim==0.13.7'")
