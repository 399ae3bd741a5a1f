"""Which text of a Messages body an arm may rewrite, and which text is the question.

The rules are `tokenlens.compress.request`'s (its docstring says them); this module finds
the slots they allow, apart from running the rungs, so each reads on its own: what is
frozen behind a ``cache_control`` breakpoint, what is an earlier turn's instruction,
where a single-piece message's question starts. `copy_body` gives the rungs a body they
may write into without touching the caller's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tokenlens.compress.blocks import counted, segment
from tokenlens.compress.settings import CompressSettings


@dataclass
class Target:
    """A text slot of the body that the arm may rewrite."""

    holder: dict[str, Any]
    key: str
    lossy: bool
    suffix: str = ""  # the question tail of a single-piece last message (kept verbatim)

    @property
    def text(self) -> str:
        value = self.holder[self.key]
        assert isinstance(value, str)
        return value[: len(value) - len(self.suffix)]

    def replace(self, new: str) -> tuple[str, str]:
        """Write `new` (plus the kept suffix) into the slot; return (before, after)."""
        before = self.holder[self.key]
        after = new + self.suffix
        self.holder[self.key] = after
        return before, after


def copy_body(body: dict[str, Any]) -> dict[str, Any]:
    """A copy of `body` whose every container the rungs may write into is new: the body,
    its system blocks, its messages, their content lists and blocks, and a tool_result's
    nested blocks. Deeper values (a tool_use's input, an image's source) are shared: no
    rung touches them. `copy.deepcopy` of a long agent body cost the proxy ~1 ms a request.
    """
    new = dict(body)
    system = body.get("system")
    if isinstance(system, list):
        new["system"] = [dict(b) if isinstance(b, dict) else b for b in system]
    messages = body.get("messages")
    if isinstance(messages, list):
        new["messages"] = [_copy_message(m) for m in messages]
    return new


def _copy_message(message: Any) -> Any:
    if not isinstance(message, dict):
        return message
    new = dict(message)
    content = message.get("content")
    if isinstance(content, list):
        blocks = []
        for block in content:
            if isinstance(block, dict):
                block = dict(block)
                nested = block.get("content")
                if isinstance(nested, list):
                    block["content"] = [dict(b) if isinstance(b, dict) else b for b in nested]
            blocks.append(block)
        new["content"] = blocks
    return new


def find_targets(
    body: dict[str, Any], settings: CompressSettings
) -> tuple[list[Target], str | None]:
    """The rewritable text slots, in body order, and the question text (if any)."""
    frozen_upto = _frozen_upto(body)
    position = len(body.get("tools") or [])
    targets: list[Target] = []
    system = body.get("system")
    if isinstance(system, str):
        if position >= frozen_upto:
            targets.append(Target(body, "system", lossy=settings.compress_system))
        position += 1
    elif isinstance(system, list):
        for block in system:
            if position >= frozen_upto and _is_text_block(block):
                targets.append(Target(block, "text", lossy=settings.compress_system))
            position += 1
    messages: list[dict[str, Any]] = body["messages"]
    last_user = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=-1)
    question: str | None = None
    for i, message in enumerate(messages):
        content = message["content"]
        slots: list[Target] = []
        if isinstance(content, str):
            if position >= frozen_upto and message["role"] == "user":
                slots.append(Target(message, "content", lossy=True))
            position += 1
        else:
            for block in content:
                if position >= frozen_upto and message["role"] == "user" and _is_text_block(block):
                    slots.append(Target(block, "text", lossy=True))
                position += 1
        if i == last_user:
            question = _question_of(message, slots)
        elif slots:
            _keep_instructions(message, slots)
        targets.extend(slots)
    return targets, question


def _question_of(message: dict[str, Any], slots: list[Target]) -> str | None:
    """Find the last user message's question; drop it from `slots` (it is never compressed)."""
    content = message["content"]
    text_blocks = [b for b in content if _is_text_block(b)] if isinstance(content, list) else []
    if len(text_blocks) >= 2:
        last = text_blocks[-1]
        slots[:] = [slot for slot in slots if slot.holder is not last]
        return str(last["text"])
    whole = content if isinstance(content, str) else (text_blocks[0]["text"] if text_blocks else "")
    if not whole.strip():
        return None
    context, tail = split_question(whole)
    holder_slots = [slot for slot in slots if slot.text == whole]
    if holder_slots:
        slot = holder_slots[0]
        if not context.strip():
            slots.remove(slot)
        else:
            slot.suffix = tail
    return tail


#: An earlier user turn's text is document-like (open to lossy rungs) from this many
#: characters (~300 tokens) and `DOCUMENT_MIN_BLOCKS` non-blank blocks on.
DOCUMENT_MIN_CHARS = 1200
DOCUMENT_MIN_BLOCKS = 3


def is_document_like(text: str) -> bool:
    """Is `text` pasted material (a document, a file, a log) rather than an instruction?

    Instructions are short, or one paragraph however long; a document is long *and* made
    of several blocks (paragraphs, lists, code, tables). The threshold errs towards
    "instruction": wrongly keeping a document costs tokens, wrongly pruning an ask loses it.
    """
    if len(text) < DOCUMENT_MIN_CHARS:
        return False
    return len(counted(segment(text))) >= DOCUMENT_MIN_BLOCKS


def _keep_instructions(message: dict[str, Any], slots: list[Target]) -> None:
    """An earlier user turn: lossy rungs only on its document-like context, never its ask.

    Its ask is found as the last message's question is (`_question_of`) and kept
    verbatim; what is left is lossy only when `is_document_like`. The gentle rungs
    (rungs 0-2) still run on all of it: they keep meaning.
    """
    kept = list(slots)
    _question_of(message, slots)  # drops the ask's slot, or keeps its tail as a suffix
    for n, slot in enumerate(kept):
        if not any(other is slot for other in slots):  # the ask: gentle rungs only
            kept[n] = Target(slot.holder, slot.key, lossy=False)
        elif slot.lossy and not is_document_like(slot.text):
            slot.lossy = False
    slots[:] = kept


def split_question(text: str) -> tuple[str, str]:
    """Split a single-piece message into (context, question tail); see module docstring."""
    blocks = segment(text)
    prose = [i for i, block in enumerate(blocks) if block.eligible]
    start = prose[-1] if prose else 0
    context = "".join(block.text for block in blocks[:start])
    return context, text[len(context) :]


def _is_text_block(block: Any) -> bool:
    return (
        isinstance(block, dict)
        and block.get("type") == "text"
        and isinstance(block.get("text"), str)
    )


def _frozen_upto(body: dict[str, Any]) -> int:
    """Index (in tools, system, messages order) after the last cache breakpoint; 0 if none."""
    if body.get("cache_control"):
        return 1 << 62  # automatic caching: the whole body is the cached prefix
    position = 0
    frozen = 0
    for tool in body.get("tools") or []:
        position += 1
        if isinstance(tool, dict) and tool.get("cache_control"):
            frozen = position
    system = body.get("system")
    if isinstance(system, str):
        position += 1
    elif isinstance(system, list):
        for block in system:
            position += 1
            if isinstance(block, dict) and block.get("cache_control"):
                frozen = position
    for message in body["messages"]:
        content = message["content"]
        if isinstance(content, str):
            position += 1
            continue
        for block in content:
            position += 1
            if _has_breakpoint(block):
                frozen = position
    return frozen


def _has_breakpoint(block: Any) -> bool:
    if not isinstance(block, dict):
        return False
    if block.get("cache_control"):
        return True
    nested = block.get("content")
    return isinstance(nested, list) and any(
        isinstance(item, dict) and item.get("cache_control") for item in nested
    )
