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
Token counts (`tokenlens.compress.result`) are offline estimates
(`tokenlens.tokens.TOKENIZER_NOTE`) over all text the body carries: system, every
message's text, tool inputs and results, tool definitions.
They are taken when first read, not by `compress_request`: on the proxy's request path
counting costs more than the cheaper rungs, and it only needs them for its statistics.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from tokenlens.compress import external
from tokenlens.compress.arms import CONTROL, Arm
from tokenlens.compress.blocks import segment
from tokenlens.compress.external import is_external
from tokenlens.compress.ladder import compress_text
from tokenlens.compress.result import CompressionResult, body_texts
from tokenlens.compress.settings import CompressSettings
from tokenlens.compress.slots import copy_body, find_targets
from tokenlens.compress.toolout.body import compress_tool_results
from tokenlens.compress.toolout.rungs import ToolArm
from tokenlens.errors import CompressionError


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
    targets, question = find_targets(new_body, settings)
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
