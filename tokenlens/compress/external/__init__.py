"""External compressors as arms: the plug-in seam (an entry point mapping a body to a body).

A compressor plugs in as an entry point in the group ``tokenlens.compressors`` whose
object is a callable taking a Messages API body (a dict) and returning the compressed
body (a new dict; the input must not be mutated)::

    # pyproject.toml of your package
    [project.entry-points."tokenlens.compressors"]
    mytrim = "mypackage.tokenlens_plugin:compress"

It is then the arm ``ext:mytrim`` everywhere an arm is named (``--arm``, ``--methods``,
the policy file), with the same ledger keys, fidelity check and decision rule as the
built-in rungs. Two adapters ship with TokenLens: ``ext:headroom`` (headroom-ai's Python
``compress``) and ``ext:llmtrim`` (llmtrim's in-process binding); neither package is a
dependency (see docs/external-compressors.md for what each needs offline). The tool-output
rungs ship as ``ext:tools-lossless`` and ``ext:tools-elide-0.9`` ... ``-0.3``.

A plugin that cannot run here raises `tokenlens.errors.ArmUnavailable` with the reason.
"""

from __future__ import annotations

import copy
import importlib
from collections.abc import Callable
from functools import cache
from importlib.metadata import entry_points
from typing import Any

from tokenlens.errors import ArmUnavailable, CompressionError

#: Entry point group that external compressors register under.
GROUP = "tokenlens.compressors"
#: The prefix of an external arm's method name (``ext:headroom``).
PREFIX = "ext:"
#: The adapters shipped with TokenLens (also registered as entry points by the package).
BUILTIN: dict[str, str] = {
    "headroom": "tokenlens.compress.external.adapters:headroom",
    "llmtrim": "tokenlens.compress.external.adapters:llmtrim",
    # The tool-output rungs (`tokenlens.compress.toolout.plugin.TOOL_PLUGINS`), measured on
    # the agent set's answers like any arm (`--methods ext:tools-elide-0.7`).
    "tools-lossless": "tokenlens.compress.toolout.plugin:tools_lossless",
    **{
        f"tools-elide-0.{n}": f"tokenlens.compress.toolout.plugin:tools_elide_0{n}"
        for n in (9, 7, 5, 3)
    },
}

Compressor = Callable[[dict[str, Any]], dict[str, Any]]


#: Compressors registered at run time (`register`), by name.
_REGISTERED: dict[str, Compressor] = {}


def register(name: str, compressor: Compressor) -> None:
    """Make `compressor` the arm ``ext:<name>`` in this process (no packaging needed)."""
    _REGISTERED[name] = compressor
    load.cache_clear()


def available() -> dict[str, str]:
    """Every external compressor name known here, with the object it points to."""
    found = dict(BUILTIN)
    for point in entry_points(group=GROUP):
        found[point.name] = point.value
    found.update({name: f"registered {fn!r}" for name, fn in _REGISTERED.items()})
    return found


def is_external(method: str) -> bool:
    return method.startswith(PREFIX) and len(method) > len(PREFIX)


@cache
def load(name: str) -> Compressor:
    """The compressor registered as `name` (raises ArmUnavailable if unknown or broken)."""
    if name in _REGISTERED:
        return _REGISTERED[name]
    target = available().get(name)
    if target is None:
        known = ", ".join(sorted(available()))
        raise ArmUnavailable(f"no external compressor {name!r} (known: {known})")
    module_name, _, attr = target.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split(".") if attr else []:
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise ArmUnavailable(f"external compressor {name!r} ({target}) cannot load: {exc}") from exc
    if not callable(obj):
        raise ArmUnavailable(f"external compressor {name!r} ({target}) is not callable")
    compressor: Compressor = obj
    return compressor


def run(name: str, body: dict[str, Any]) -> dict[str, Any]:
    """`body` through the external compressor `name`; the input is never mutated."""
    compressor = load(name)
    try:
        result = compressor(copy.deepcopy(body))
    except ArmUnavailable:
        raise
    except Exception as exc:  # a plugin's own failure, whatever its type
        raise CompressionError(f"{PREFIX}{name} failed: {type(exc).__name__}: {exc}") from exc
    if not isinstance(result, dict) or not isinstance(result.get("messages"), list):
        raise CompressionError(f"{PREFIX}{name} returned no Messages body (a dict with messages)")
    return result
