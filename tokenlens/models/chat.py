"""How a request reaches the local model: chat messages, the brief-answer instruction, and
the JSON-schema grammar bound.

Why a module of its own: these are plain functions of a request, used by the client
(`tokenlens.models.local`), the calibration (which adds the instruction to every answer
request, `tokenlens.calibration.answers`) and the benches, with no llama.cpp in sight.
"""

from __future__ import annotations

import json
from typing import Any

from tokenlens.models.base import CompletionRequest

__all__ = [
    "BRIEF_ANSWER_INSTRUCTION",
    "GRAMMAR_MAX_STRING",
    "brief_answer",
    "chat_messages",
    "grammar_schema",
    "prompt_key",
]

#: Appended to the last user message of every answer request of the local backend
#: (`brief_answer`), after compression, so every arm gets it alike: the tiny model's
#: answers are otherwise long, and a long answer is a cut-off one. It is part of the
#: request, hence of the ledger key and (through `calibration_key`) the calibration id.
BRIEF_ANSWER_INSTRUCTION = "Answer in at most three sentences."
#: Grammar bound on strings with no maxLength: a tiny model under a grammar otherwise
#: rambles inside a string until max_tokens and the object never closes.
GRAMMAR_MAX_STRING = 400


def brief_answer(body: dict[str, Any]) -> dict[str, Any]:
    """A Messages body with `BRIEF_ANSWER_INSTRUCTION` as a last text block of its last
    user message (a new body; the input is not changed)."""
    messages = [dict(m) for m in body["messages"]]
    last = messages[-1]
    if last.get("role") != "user":
        messages.append({"role": "user", "content": BRIEF_ANSWER_INSTRUCTION})
    else:
        content = last["content"]
        block = {"type": "text", "text": BRIEF_ANSWER_INSTRUCTION}
        last["content"] = (
            [{"type": "text", "text": content}, block]
            if isinstance(content, str)
            else [*content, block]
        )
    return {**body, "messages": messages}


def prompt_key(messages: list[dict[str, str]]) -> str:
    """The cache key of a chat: the loaded model's template makes the prompt from it alone."""
    return json.dumps(messages, ensure_ascii=False)


def grammar_schema(schema: Any) -> Any:
    """`schema` with every unbounded string given `maxLength=GRAMMAR_MAX_STRING`."""
    if isinstance(schema, list):
        return [grammar_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    bounded = {key: grammar_schema(value) for key, value in schema.items()}
    if bounded.get("type") == "string" and "maxLength" not in bounded and "enum" not in bounded:
        bounded["maxLength"] = GRAMMAR_MAX_STRING
    return bounded


def _content_text(content: str | list[dict[str, Any]]) -> str:
    """The text a chat template gets for a content: text blocks, and an agent's tool calls
    and tool results written out (a small model has no tool format of its own)."""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content:
        kind = block.get("type")
        if kind == "text":
            parts.append(str(block.get("text", "")))
        elif kind == "tool_use":
            call = json.dumps(block.get("input", {}), ensure_ascii=False, sort_keys=True)
            parts.append(f"[tool call {block.get('name', '')}: {call}]")
        elif kind == "tool_result":
            inner = block.get("content", "")
            parts.append("[tool result]\n" + _content_text(inner if inner else ""))
    return "\n\n".join(parts)


def chat_messages(request: CompletionRequest) -> list[dict[str, str]]:
    """The request as plain chat messages (text blocks joined by blank lines)."""
    messages: list[dict[str, str]] = []
    if request.system:
        messages.append({"role": "system", "content": _content_text(request.system)})
    messages += [{"role": m.role, "content": _content_text(m.content)} for m in request.messages]
    return messages
