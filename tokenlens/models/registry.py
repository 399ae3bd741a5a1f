"""Choosing a backend by name, so a run records `backend + model + params`, never an object.

"auto" means Anthropic when `ANTHROPIC_API_KEY` is set, else the embedded local model
(announced once per process with `OFFLINE_BANNER` on stderr, because offline numbers
describe the instrument on a tiny model, not Claude). Backend modules are imported only
when chosen, so the proxy pays for neither `llama_cpp` nor anything it does not use.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any, Literal

from tokenlens.models.base import ModelClient

__all__ = ["BACKENDS", "make_client", "resolve_backend"]

BACKENDS = ("auto", "anthropic", "local")

_announced = False
_announce_lock = threading.Lock()


def resolve_backend(backend: str) -> Literal["anthropic", "local"]:
    """The concrete backend for a name ("auto" looks at `ANTHROPIC_API_KEY`)."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    if backend == "auto":
        return "anthropic" if os.environ.get("ANTHROPIC_API_KEY") else "local"
    return "anthropic" if backend == "anthropic" else "local"


def make_client(
    backend: str = "auto", model: str | None = None, *, announce: bool = True, **params: Any
) -> ModelClient:
    """Build the client for `backend` with `model` (None: the backend's default).

    Args:
        backend: "auto", "anthropic" or "local".
        model: a Claude model id, or for local a bundled model's name / a GGUF path.
        announce: print the offline banner (once per process) when the local model is used.
        **params: passed to the client (e.g. `timeout_s`, `retry`, `base_url`, `n_ctx`).
    """
    chosen = resolve_backend(backend)
    if chosen == "anthropic":
        from tokenlens.models.anthropic_backend import DEFAULT_MODEL, AnthropicClient

        return AnthropicClient(model or DEFAULT_MODEL, **params)
    from tokenlens.models.local import LocalClient

    client = LocalClient(model, **params)
    if announce:
        _announce(client.banner)
    return client


def _announce(banner: str) -> None:
    global _announced
    with _announce_lock:
        if _announced:
            return
        _announced = True
    print(f"\n*** {banner} ***\n", file=sys.stderr)
