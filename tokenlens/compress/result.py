"""What one arm did to one body (`CompressionResult`), and its offline token counts.

Counting is kept apart from compressing: `compress_request` counts nothing, and a count
is taken on first access. Each text's count is kept (`text_tokens`), because a
conversation resends every earlier text on each turn and tokenizing a long text costs
more than compressing it from the tool-output memo.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from tokenlens.compress.toolout.body import ToolRewrite
from tokenlens.tokens import TOKENIZER_NOTE, estimate_tokens


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


#: How many texts' counts `text_tokens` keeps (then it starts over): a 50k-token agent
#: conversation holds a few hundred texts.
COUNT_MEMO_ENTRIES = 8192
_counts: dict[int, int] = {}
_counts_lock = threading.Lock()


def text_tokens(text: str) -> int:
    """`estimate_tokens(text)`, kept by the text's hash (never the text itself, so the
    memo holds no prompt): a resent text is counted once per process.

    Two different texts with one 64-bit hash would share a count; that can only skew a
    statistic, never what is sent.
    """
    key = hash(text)
    count = _counts.get(key)
    if count is None:
        count = estimate_tokens(text)
        with _counts_lock:
            if len(_counts) >= COUNT_MEMO_ENTRIES:
                _counts.clear()
            _counts[key] = count
    return count


def body_tokens(body: dict[str, Any]) -> int:
    """Estimated tokens of all text a body carries (images and documents count 0 here)."""
    return sum(map(text_tokens, body_texts(body)))


def body_texts(body: dict[str, Any]) -> list[str]:
    """Every piece of text in a body, in order: tools, system, messages."""
    texts: list[str] = []
    for tool in body.get("tools") or []:
        texts.append(json.dumps(tool, ensure_ascii=False, sort_keys=True))
    system = body.get("system")
    if isinstance(system, str):
        texts.append(system)
    elif isinstance(system, list):
        texts.extend(_block_texts(system))
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts.extend(_block_texts(content))
    return texts


def _block_texts(blocks: list[Any]) -> list[str]:
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
            texts.append(json.dumps(block.get("input", {}), ensure_ascii=False, sort_keys=True))
        elif kind == "tool_result":
            nested = block.get("content")
            if isinstance(nested, str):
                texts.append(nested)
            elif isinstance(nested, list):
                texts.extend(_block_texts(nested))
    return texts
