"""Tool-output rungs over a whole Messages body: each tool_result by its own kind's arm.

Why per block and not per request: a block compressed as a pure function of itself, the
tool_use that produced it and its arm reads the same on every later turn, so a provider's
prompt cache keeps hitting even when the block sits before a ``cache_control``
breakpoint. The arm comes from ``arms[kind]`` where the kind is `tool_output_kind` of the
same two inputs, never from the request's class (which may change from turn to turn).

Only a tool_result whose text is one piece (string content, or a single text block) is
rewritten: its markers number the lines of that one text. Images and other blocks, the
``is_error`` flag and the ids are never touched. Edits are made in place on `body`, which
the caller has already copied.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import orjson

from tokenlens.compress.counts import text_tokens
from tokenlens.compress.toolout.kinds import tool_output_kind
from tokenlens.compress.toolout.rungs import MIN_CHARS, ToolArm, compress_tool_text


@dataclass(frozen=True)
class ToolRewrite:
    """One tool_result the tool arms changed."""

    tool_use_id: str
    kind: str
    arm: str
    before: str
    after: str
    #: Tokens of `before` and `after` (`text_tokens`; kept in the memo: a resent output
    #: is not counted again).
    before_tokens: int = 0
    after_tokens: int = 0


def _slot(block: dict[str, Any]) -> tuple[dict[str, Any], str] | None:
    """Where a tool_result's single text lives (holder, key), or None."""
    content = block.get("content")
    if isinstance(content, str):
        return block, "content"
    if isinstance(content, list):
        texts = [item for item in content if isinstance(item, dict) and item.get("type") == "text"]
        if len(texts) == 1 and isinstance(texts[0].get("text"), str):
            return texts[0], "text"
    return None


#: Rewrites kept for reuse: a conversation resends every earlier tool output on each
#: turn, and a pure function need not run twice on the same input. Bounded in entries.
MEMO_ENTRIES = 1024


@dataclass(frozen=True)
class _Seen:
    """One tool output as compressed before: what went in (all of it: the memo answers
    only for the same text, call and arm), its kind, and the rewrite (None: unchanged)."""

    text: str
    call: bytes
    kind: str
    arm: ToolArm | None
    rewrite: ToolRewrite | None


class _Memo:
    """The last `MEMO_ENTRIES` tool outputs, least recently used out first, found by
    tool_use id and else by content.

    By id first: looking a text up by its hash reads all of it (~0.2 ms for the outputs of
    a 50k-token conversation), while an id is short and the entry's text is then compared
    whole (a byte compare, far cheaper), so a reused id with another output is a miss,
    never a wrong answer. By content (text and call) only when the id misses: a new
    output, or the same output under another id (a command run again).
    """

    def __init__(self, entries: int) -> None:
        self.entries = entries
        self._by_id: OrderedDict[str, _Seen] = OrderedDict()
        self._by_content: OrderedDict[tuple[str, bytes], _Seen] = OrderedDict()
        self._lock = threading.Lock()  # proxy workers compress in threads

    def get(self, use_id: str, text: str, call: bytes) -> _Seen | None:
        seen = self._by_id.get(use_id)
        if seen is not None and seen.call == call and seen.text == text:
            with self._lock:
                if use_id in self._by_id:
                    self._by_id.move_to_end(use_id)
            return seen
        seen = self._by_content.get((text, call))
        if seen is not None:  # filed under this id from now on, its rewrite naming it
            rewrite = seen.rewrite
            if rewrite is not None and rewrite.tool_use_id != use_id:
                seen = replace(seen, rewrite=replace(rewrite, tool_use_id=use_id))
            self.put(use_id, seen)
        return seen

    def put(self, use_id: str, seen: _Seen) -> None:
        content = (seen.text, seen.call)
        with self._lock:
            self._by_id[use_id] = seen
            self._by_id.move_to_end(use_id)
            self._by_content[content] = seen
            self._by_content.move_to_end(content)
            while len(self._by_id) > self.entries:
                self._by_id.popitem(last=False)
            while len(self._by_content) > self.entries:
                self._by_content.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._by_id.clear()
            self._by_content.clear()


_memo = _Memo(MEMO_ENTRIES)


def _call_key(tool_use: dict[str, Any] | None) -> bytes:
    """The parts of a tool_use the rungs read (name and input), as canonical JSON: orjson
    with sorted keys (a tenth of `json.dumps`'s time), `json` for an integer past 64 bits."""
    if not tool_use:
        return b""
    parts = [tool_use.get("name"), tool_use.get("input")]
    try:
        return orjson.dumps(parts, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:
        return json.dumps(parts, sort_keys=True, ensure_ascii=False).encode()


def _call_of(call: bytes) -> dict[str, Any] | None:
    """The tool_use as the rungs see it: rebuilt from its key, so nothing else can matter."""
    if not call:
        return None
    name, data = json.loads(call)
    return {"name": name, "input": data}


def _compress(
    use_id: str, text: str, call: bytes, arms: Mapping[str, ToolArm], seen: _Seen | None
) -> _Seen:
    """`text` through its kind's arm; `seen` (same text and call) gives the kind."""
    tool_use = _call_of(call)
    kind = seen.kind if seen is not None else tool_output_kind(text, tool_use)
    arm = arms.get(kind)
    out = text if arm is None else compress_tool_text(text, arm, tool_use)
    if arm is None or out == text:
        return _Seen(text, call, kind, arm, None)
    before = text_tokens(text)
    rewrite = ToolRewrite(use_id, kind, arm.key, text, out, before, text_tokens(out))
    return _Seen(text, call, kind, arm, rewrite)


def compress_tool_results(body: dict[str, Any], arms: Mapping[str, ToolArm]) -> list[ToolRewrite]:
    """Rewrite every tool_result of `body` (in place) with its kind's arm; say what changed."""
    if not arms:
        return []
    calls: dict[str, dict[str, Any]] = {}
    done: list[ToolRewrite] = []
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            continue
        for block in content:
            if not isinstance(block, dict):
                continue
            kind_of_block = block.get("type")
            if kind_of_block == "tool_use" and isinstance(block.get("id"), str):
                calls[block["id"]] = block
            elif kind_of_block == "tool_result":
                found = _slot(block)
                if found is None:
                    continue
                holder, key = found
                text = holder[key]
                if len(text) < MIN_CHARS:  # the rungs leave it as it is
                    continue
                use_id = str(block.get("tool_use_id", ""))
                call = _call_key(calls.get(use_id))
                seen = _memo.get(use_id, text, call)
                if seen is None or arms.get(seen.kind) != seen.arm:
                    seen = _compress(use_id, text, call, arms, seen)
                    _memo.put(use_id, seen)
                if seen.rewrite is not None:
                    holder[key] = seen.rewrite.after
                    done.append(seen.rewrite)
    return done
