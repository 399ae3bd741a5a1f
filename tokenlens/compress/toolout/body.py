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
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from tokenlens.compress.toolout.kinds import tool_output_kind
from tokenlens.compress.toolout.rungs import ToolArm, compress_tool_text
from tokenlens.tokens import estimate_tokens


@dataclass(frozen=True)
class ToolRewrite:
    """One tool_result the tool arms changed."""

    tool_use_id: str
    kind: str
    arm: str
    before: str
    after: str


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


def _call_key(tool_use: dict[str, Any] | None) -> str:
    """The parts of a tool_use the rungs read (name and input), as canonical JSON."""
    if not tool_use:
        return ""
    return json.dumps(
        [tool_use.get("name"), tool_use.get("input")], sort_keys=True, ensure_ascii=False
    )


def _call_of(call: str) -> dict[str, Any] | None:
    if not call:
        return None
    name, data = json.loads(call)
    return {"name": name, "input": data}


@lru_cache(maxsize=MEMO_ENTRIES)
def _kind_once(text: str, call: str) -> str:
    return tool_output_kind(text, _call_of(call))


@lru_cache(maxsize=MEMO_ENTRIES)
def _compress_once(text: str, call: str, arm: ToolArm) -> str:
    return compress_tool_text(text, arm, _call_of(call))


@lru_cache(maxsize=2 * MEMO_ENTRIES)
def tool_text_tokens(text: str) -> int:
    """`estimate_tokens` of a tool output, kept: each turn resends every earlier one, and
    counting a long output costs more than compressing it from the memo."""
    return estimate_tokens(text)


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
                use_id = str(block.get("tool_use_id", ""))
                call = _call_key(calls.get(use_id))
                kind = _kind_once(text, call)
                arm = arms.get(kind)
                if arm is None:
                    continue
                new = _compress_once(text, call, arm)
                if new != text:
                    holder[key] = new
                    done.append(ToolRewrite(use_id, kind, arm.key, text, new))
    return done
