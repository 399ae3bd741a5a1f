"""`compress_request`: one Messages API body through one arm; the proxy and calibration share it.

If the proxy and the calibration compressed differently, the calibration would certify
something the proxy never sends; so there is exactly one function, and it is
deterministic (same body and arm, byte-identical output: prompt caching and the
calibration's content hashes depend on it). The input body is never mutated.

What may be touched:

* Text blocks (or string content) of **user** messages, and the **system** prompt (the
  system prompt only by the meaning-keeping rungs 0-2 unless
  `CompressSettings.compress_system`; it carries instructions).
* Earlier user turns are instructions too: in a user message before the last one, the
  lossy rungs (3-5) touch only document-like text (`is_document_like`: long and made of
  several blocks), and never that turn's own ask (found as the question is, below).
* An external arm (``ext:<name>``, `tokenlens.compress.external`) is the plug-in's own
  business: it gets a copy of the whole body and may change anything; the fidelity check
  and the grades say what that did. Everything below is about the built-in rungs.
* Never: the prefix up to and including the last ``cache_control`` breakpoint (in
  ``tools``, ``system`` or ``messages``; a top-level ``cache_control``, automatic caching,
  freezes the whole body), ``tools``, ``tool_use``, ``tool_result``, images, documents,
  thinking blocks, assistant turns, and the question.
* Except ``tool_result`` text, by the tool arms when given (``tool_arms``), before a
  breakpoint too: each block's rewrite is a pure function of the block, its tool_use and
  the arm its kind gets, so it is the same on every turn and the cached prefix holds.

Which text is the question (never compressed):

* The last user message has two or more text blocks (as `CalibrationTask.to_request`
  builds it: ``[context, question]``): its **last text block** is the question.
* Otherwise its text is one piece (live traffic). The question is the tail that starts at
  the **last prose paragraph** (prose, list or quote block in `blocks.segment` terms) and
  runs to the end, so "Fix this:" above a trailing code fence counts as the question.
  Everything before that tail is context. When that paragraph is the first one, the whole
  text is the question and nothing in it is compressed.

The question also steers the question-aware rungs (`prune`, `select`) everywhere else.
Token counts are offline estimates (`tokenlens.tokens.TOKENIZER_NOTE`) over all text the
body carries: system, every message's text, tool inputs and results, tool definitions.
They are taken when first read, not by `compress_request`: on the proxy's request path
counting costs more than the cheaper rungs, and it only needs them for its statistics.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from tokenlens.compress import external
from tokenlens.compress.arms import CONTROL, Arm
from tokenlens.compress.blocks import counted, segment
from tokenlens.compress.external import is_external
from tokenlens.compress.ladder import compress_text
from tokenlens.compress.settings import CompressSettings
from tokenlens.compress.toolout.body import ToolRewrite, compress_tool_results, tool_text_tokens
from tokenlens.compress.toolout.rungs import ToolArm
from tokenlens.errors import CompressionError
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
        texts = self.rewritten[: len(self.rewritten) - len(self.tool_rewrites)]
        delta = sum(estimate_tokens(old) - estimate_tokens(new) for old, new in texts)
        before, after = self.tool_tokens_saved
        return self.compressed_tokens + delta + before - after

    @cached_property
    def tool_tokens_saved(self) -> tuple[int, int]:
        """(original, compressed) estimated tokens of the tool outputs the tool arms changed."""
        before = sum(tool_text_tokens(r.before) for r in self.tool_rewrites)
        return before, sum(tool_text_tokens(r.after) for r in self.tool_rewrites)

    @property
    def reduction(self) -> float:
        if self.original_tokens <= 0:
            return 0.0
        return max(0.0, (self.original_tokens - self.compressed_tokens) / self.original_tokens)


@dataclass
class _Target:
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


def compress_request(
    body: dict[str, Any],
    arm: Arm,
    *,
    settings: CompressSettings | None = None,
    tool_arms: Mapping[str, ToolArm] | None = None,
) -> CompressionResult:
    """Compress a Messages API body with `arm` (see the module docstring for the rules).

    `tool_arms` (kind of tool output -> arm) compress each tool_result by its own kind,
    wherever it sits, breakpoints included (`tokenlens.compress.toolout.body`).

    Raises:
        ArmUnavailable: the arm cannot run here (LLMLingua-2 model not loadable); says why.
        CompressionError: the body is malformed or a rung failed.
    """
    started = time.perf_counter()
    _check_shape(body)
    if is_external(arm.method):
        return _external(body, arm, started)
    new_body = copy_body(body)
    settings = settings or CompressSettings()
    targets, question = _targets(new_body, settings)
    eligible = total = 0
    rewritten: list[tuple[str, str]] = []
    if arm.method != CONTROL:
        for target in targets:
            text = target.text
            if not text.strip():
                continue
            result = compress_text(
                text, arm, question=question, settings=settings, lossy=target.lossy
            )
            eligible += result.eligible_blocks
            total += result.total_blocks
            # an emptied slot would be an invalid block: keep it
            if result.text != text and result.text.strip():
                rewritten.append(target.replace(result.text))
    else:
        for target in targets:
            total += len([b for b in segment(target.text) if not b.is_blank])
    tool_rewrites = compress_tool_results(new_body, tool_arms or {})
    rewritten.extend((r.before, r.after) for r in tool_rewrites)
    return CompressionResult(
        body=new_body,
        arm=arm.key,
        eligible_blocks=eligible,
        total_blocks=total,
        elapsed_ms=(time.perf_counter() - started) * 1000.0,
        question_found=question is not None,
        rewritten=tuple(rewritten),
        tool_rewrites=tuple(tool_rewrites),
    )


def _external(body: dict[str, Any], arm: Arm, started: float) -> CompressionResult:
    """An external compressor's arm (`tokenlens.compress.external`): it may touch anything."""
    new_body = external.run(arm.method[len(external.PREFIX) :], body)
    _check_shape(new_body)
    before, after = body_texts(body), body_texts(new_body)
    if len(before) == len(after):
        pairs = tuple((old, new) for old, new in zip(before, after, strict=True) if old != new)
    else:
        pairs = (("\n".join(before), "\n".join(after)),)
    return CompressionResult(
        body=new_body,
        arm=arm.key,
        eligible_blocks=len(pairs),
        total_blocks=len(before),
        elapsed_ms=(time.perf_counter() - started) * 1000.0,
        rewritten=pairs,
    )


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


def _check_shape(body: Any) -> None:
    if not isinstance(body, dict):
        raise CompressionError(f"request body must be a JSON object, got {type(body).__name__}")
    messages = body.get("messages")
    if not isinstance(messages, list):
        raise CompressionError("request body: 'messages' must be a list")
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or "role" not in message:
            raise CompressionError(f"request body: messages[{i}] must be an object with a role")
        content = message.get("content")
        if not isinstance(content, str | list):
            raise CompressionError(f"request body: messages[{i}].content must be text or a list")
    system = body.get("system")
    if system is not None and not isinstance(system, str | list):
        raise CompressionError("request body: 'system' must be text or a list of blocks")


def _targets(body: dict[str, Any], settings: CompressSettings) -> tuple[list[_Target], str | None]:
    """The rewritable text slots, in body order, and the question text (if any)."""
    frozen_upto = _frozen_upto(body)
    position = len(body.get("tools") or [])
    targets: list[_Target] = []
    system = body.get("system")
    if isinstance(system, str):
        if position >= frozen_upto:
            targets.append(_Target(body, "system", lossy=settings.compress_system))
        position += 1
    elif isinstance(system, list):
        for block in system:
            if position >= frozen_upto and _is_text_block(block):
                targets.append(_Target(block, "text", lossy=settings.compress_system))
            position += 1
    messages: list[dict[str, Any]] = body["messages"]
    last_user = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=-1)
    question: str | None = None
    for i, message in enumerate(messages):
        content = message["content"]
        slots: list[_Target] = []
        if isinstance(content, str):
            if position >= frozen_upto and message["role"] == "user":
                slots.append(_Target(message, "content", lossy=True))
            position += 1
        else:
            for block in content:
                if position >= frozen_upto and message["role"] == "user" and _is_text_block(block):
                    slots.append(_Target(block, "text", lossy=True))
                position += 1
        if i == last_user:
            question = _question_of(message, slots)
        elif slots:
            _keep_instructions(message, slots)
        targets.extend(slots)
    return targets, question


def _question_of(message: dict[str, Any], slots: list[_Target]) -> str | None:
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


def _keep_instructions(message: dict[str, Any], slots: list[_Target]) -> None:
    """An earlier user turn: lossy rungs only on its document-like context, never its ask.

    Its ask is found as the last message's question is (`_question_of`) and kept
    verbatim; what is left is lossy only when `is_document_like`. The gentle rungs
    (rungs 0-2) still run on all of it: they keep meaning.
    """
    kept = list(slots)
    _question_of(message, slots)  # drops the ask's slot, or keeps its tail as a suffix
    for n, slot in enumerate(kept):
        if not any(other is slot for other in slots):  # the ask: gentle rungs only
            kept[n] = _Target(slot.holder, slot.key, lossy=False)
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


def body_tokens(body: dict[str, Any]) -> int:
    """Estimated tokens of all text a body carries (images and documents count 0 here)."""
    tools: list[str] = []
    plain = sum(estimate_tokens(text) for text in body_texts(body, tool_texts=tools))
    return plain + sum(map(tool_text_tokens, tools))


def body_texts(body: dict[str, Any], *, tool_texts: list[str] | None = None) -> list[str]:
    """Every piece of text in a body, in order: tools, system, messages.

    With `tool_texts`, the texts of tool_result blocks go there instead (their counts are
    kept between requests: `tool_text_tokens`).
    """
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
            texts.extend(_block_texts(content, tool_texts))
    return texts


def _block_texts(blocks: list[Any], tool_texts: list[str] | None = None) -> list[str]:
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
            into = texts if tool_texts is None else tool_texts
            if isinstance(nested, str):
                into.append(nested)
            elif isinstance(nested, list):
                into.extend(_block_texts(nested))
    return texts
