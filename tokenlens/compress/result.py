"""What one arm did to one body (`CompressionResult`), and its offline token counts.

Counting is kept apart from compressing: `compress_request` counts nothing, and a count
is taken on first access, each distinct text once per process while it is kept
(`tokenlens.compress.counts`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import orjson

from tokenlens.compress.counts import TokenCounts, text_tokens
from tokenlens.compress.toolout.body import ToolRewrite
from tokenlens.tokens import TOKENIZER_NOTE


@dataclass(frozen=True)
class CompressionResult:
    """What one arm did to one body. `reduction` is measured, never the nominal rate.

    The token counts are computed on first access (and then kept). The original body's
    count is derived from the compressed one: the two differ only in the rewritten
    slots, whose texts before and after are kept in `rewritten`.
    """

    body: dict[str, Any]
    arm: str
    eligible_blocks: int
    total_blocks: int
    elapsed_ms: float
    question_found: bool = False
    tokenizer: str = TOKENIZER_NOTE
    rewritten: tuple[tuple[str, str], ...] = ()  # (before, after) of every changed slot
    #: The tool_results the tool arms changed (also in `rewritten`).
    tool_rewrites: tuple[ToolRewrite, ...] = ()

    @cached_property
    def compressed_tokens(self) -> int:
        return body_tokens(self.body)

    @cached_property
    def original_tokens(self) -> int:
        return self.compressed_tokens + self.tokens_saved

    @cached_property
    def tokens_saved(self) -> int:
        """Original minus compressed tokens, from the rewritten slots alone: the rest of
        the body is the same on both sides, so this needs no count of the whole body."""
        texts = self.rewritten[: len(self.rewritten) - len(self.tool_rewrites)]
        before, after = self.tool_tokens_saved
        return before - after + sum(text_tokens(old) - text_tokens(new) for old, new in texts)

    @cached_property
    def tool_tokens_saved(self) -> tuple[int, int]:
        """(original, compressed) estimated tokens of the tool outputs the tool arms changed
        (counted once per output, with the tool-output memo)."""
        before = sum(r.before_tokens for r in self.tool_rewrites)
        return before, sum(r.after_tokens for r in self.tool_rewrites)

    @property
    def reduction(self) -> float:
        if self.original_tokens <= 0:
            return 0.0
        return max(0.0, (self.original_tokens - self.compressed_tokens) / self.original_tokens)


_INPUTS = TokenCounts()


def _input_text(value: Any) -> str:
    """A tool_use input as `body_texts` counts it."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _input_tokens(value: Any) -> int:
    """`text_tokens(_input_text(value))`, keyed by orjson's canonical bytes (a tenth of
    the time of writing the counted text; `json` for an integer past 64 bits)."""
    try:
        key: str | bytes = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:
        key = _input_text(value)
    return _INPUTS.get(key, lambda: _input_text(value))


def body_tokens(body: dict[str, Any]) -> int:
    """Estimated tokens of all text a body carries (images and documents count 0 here)."""
    inputs: list[Any] = []
    texts = sum(map(text_tokens, body_texts(body, tool_inputs=inputs)))
    return texts + sum(map(_input_tokens, inputs))


def body_texts(body: dict[str, Any], *, tool_inputs: list[Any] | None = None) -> list[str]:
    """Every piece of text in a body, in order: tools, system, messages.

    With `tool_inputs`, each tool_use's input goes there as it is instead of as its text.
    """
    texts: list[str] = []
    for tool in body.get("tools") or []:
        texts.append(json.dumps(tool, ensure_ascii=False, sort_keys=True))
    system = body.get("system")
    if isinstance(system, str):
        texts.append(system)
    elif isinstance(system, list):
        texts.extend(_block_texts(system, tool_inputs))
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts.extend(_block_texts(content, tool_inputs))
    return texts


def _block_texts(blocks: list[Any], tool_inputs: list[Any] | None) -> list[str]:
    texts: list[str] = []
    for block in blocks:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif kind == "thinking" and isinstance(block.get("thinking"), str):
            texts.append(block["thinking"])
        elif kind == "tool_use":
            if tool_inputs is None:
                texts.append(_input_text(block.get("input", {})))
            else:
                tool_inputs.append(block.get("input", {}))
        elif kind == "tool_result":
            nested = block.get("content")
            if isinstance(nested, str):
                texts.append(nested)
            elif isinstance(nested, list):
                texts.extend(_block_texts(nested, tool_inputs))
    return texts
