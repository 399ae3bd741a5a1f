"""The provider's prompt cache as a client sees it, for the loopback upstream.

Why: whether a proxy keeps the prompt cache warm is decided by one thing, that a
request's prefix up to a ``cache_control`` breakpoint is the same content as a prefix an
earlier request cached. This reproduces exactly that rule, so a test through the real
proxy fails when the proxy rewrites anything an earlier turn already sent.

The prefix is taken in the provider's order (tools, system, messages) one unit at a
time (a tool definition, a system block, a message's content block, each with its
message's role), canonical JSON with ``cache_control`` left out: moving a breakpoint to a
newer message does not change the content before it. A request writes an entry at each
of its breakpoints; it reads the longest earlier entry that its own prefix, up to its
last breakpoint, starts with. The provider's minimum cacheable length and time to live
are not modelled: a test wants every hit and miss to be the content's doing.
"""

from __future__ import annotations

import hashlib
import json
import threading
from typing import Any

from tokenlens.tokens import estimate_tokens


def without_breakpoints(value: Any) -> Any:
    """`value` without any ``cache_control`` key, at any depth."""
    if isinstance(value, dict):
        return {k: without_breakpoints(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [without_breakpoints(v) for v in value]
    return value


def _units(body: dict[str, Any]) -> list[tuple[str, bool]]:
    """(canonical text, carries a breakpoint) of each prefix unit, in the provider's order."""
    units: list[tuple[str, bool]] = []

    def add(tag: str, item: Any) -> None:
        marked = isinstance(item, dict) and bool(item.get("cache_control"))
        if isinstance(item, dict) and isinstance(item.get("content"), list):
            marked = marked or any(
                isinstance(part, dict) and part.get("cache_control") for part in item["content"]
            )
        text = json.dumps(without_breakpoints(item), sort_keys=True, ensure_ascii=False)
        units.append((f"{tag}:{text}", marked))

    for tool in body.get("tools") or []:
        add("tool", tool)
    system = body.get("system")
    if isinstance(system, str):
        add("system", system)
    elif isinstance(system, list):
        for block in system:
            add("system", block)
    for message in body.get("messages") or []:
        role = message.get("role", "?") if isinstance(message, dict) else "?"
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            for block in content:
                add(role, block)
        else:
            add(role, content)
    return units


class PromptCache:
    """Prefix entries written at breakpoints; `lookup` reads and writes like the provider."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: set[str] = set()

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def lookup(self, body: dict[str, Any]) -> tuple[int, int, int]:
        """(cache read, cache write, uncached input) estimated tokens for one request."""
        units = _units(body)
        total = 0
        running = hashlib.sha256()
        digests: list[str] = []
        sizes: list[int] = []
        last_mark = -1
        for n, (text, marked) in enumerate(units):
            running.update(text.encode("utf-8", "surrogatepass") + b"\x00")
            total += estimate_tokens(text)
            digests.append(running.hexdigest())
            sizes.append(total)
            if marked:
                last_mark = n
        if body.get("cache_control") and units:  # automatic caching: the whole body
            last_mark = len(units) - 1
        if last_mark < 0:
            return 0, 0, total
        with self._lock:
            hit = max((n for n in range(last_mark + 1) if digests[n] in self._entries), default=-1)
            marks = [n for n, (_, marked) in enumerate(units) if marked] or [last_mark]
            self._entries.update(digests[n] for n in marks if n <= last_mark)
            self._entries.add(digests[last_mark])
        read = sizes[hit] if hit >= 0 else 0
        write = sizes[last_mark] - read
        return read, write, total - read - write
