"""What the loopback Anthropic server "thinks": plain functions, testable without a server.

The fake model must behave like a model *for our purpose*: its answer depends on the prompt
it received, so a compression that deletes the facts a question needs measurably lowers the
grade, and two samples of the same prompt at temperature > 0 can differ (that is what the
control arm measures). It answers extractively: it takes the question (the last text block
of the last user message, or its last paragraph) and returns the context sentences that
share the most content words with it, with a seeded choice among near-ties.

The fake judge grades by agreement with the reference (`tokenlens.metric.score`) plus
seeded Gaussian noise, and replies with the judge object `{"reasoning", "grade_a",
"grade_b", "note"}`. Its input contract is the judge prompt's tagged sections:
`<request>`, `<reference>`, `<answer_a>`, `<answer_b>`.
"""

from __future__ import annotations

import json
import random
import re
from typing import Any

from tokenlens.metric import content_terms, score
from tokenlens.tokens import estimate_tokens

#: Tag names of the judge prompt (contract with tokenlens.judge).
JUDGE_TAGS = ("request", "reference", "answer_a", "answer_b")

NOT_FOUND_ANSWER = "The provided context does not contain the information needed."

_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+|\n+")
_PARAGRAPH_SPLIT = re.compile(r"\n\s*\n")


def block_text(content: Any) -> str:
    """The text of a message `content` (a string or a list of content blocks)."""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content or []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        elif block.get("type") == "tool_result":
            parts.append(block_text(block.get("content", "")))
    return "\n\n".join(parts)


def _text_blocks(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    return [
        str(b.get("text", ""))
        for b in content or []
        if isinstance(b, dict) and b.get("type") == "text"
    ]


def _tool_results(content: Any) -> list[str]:
    """The tool_result texts of a content (an agent's last message carries the newest)."""
    if isinstance(content, str):
        return []
    return [
        block_text(b.get("content", ""))
        for b in content or []
        if isinstance(b, dict) and b.get("type") == "tool_result"
    ]


def split_prompt(body: dict[str, Any]) -> tuple[str, list[str]]:
    """(question, context passages) of a Messages API body.

    The question is the last text block of the last user message (our tasks put context and
    question in two blocks), or the last paragraph when the message is one string. Context
    is everything else the model saw: the system prompt, earlier turns, other blocks.
    """
    messages = list(body.get("messages") or [])
    last_user = next(
        (i for i in range(len(messages) - 1, -1, -1) if messages[i].get("role") == "user"), None
    )
    context: list[str] = []
    system = body.get("system")
    if system:
        context.append(block_text(system))
    question = ""
    for i, message in enumerate(messages):
        if i != last_user:
            context.append(block_text(message.get("content", "")))
            continue
        blocks = [b for b in _text_blocks(message.get("content", "")) if b.strip()]
        if len(blocks) >= 2:
            question = blocks[-1]
            context.extend(blocks[:-1])
        elif blocks:
            paragraphs = [p for p in _PARAGRAPH_SPLIT.split(blocks[0]) if p.strip()]
            question = paragraphs[-1] if paragraphs else blocks[0]
            context.extend(paragraphs[:-1])
    return question.strip(), [c for c in context if c.strip()]


def sentences(passages: list[str]) -> list[str]:
    """Context passages cut into sentences (or lines), in document order."""
    return [s.strip() for p in passages for s in _SENTENCE_SPLIT.split(p) if s.strip()]


def fake_answer(body: dict[str, Any], rng: random.Random, forget_rate: float = 0.0) -> str:
    """The extractive answer: the context sentences most relevant to the question.

    At temperature 0 the two best sentences (ties broken by position). At temperature > 0
    the number of sentences (1-3) and the order among near-ties are drawn from `rng`, so a
    sampled answer may miss a second fact or carry an unrelated sentence. `forget_rate` is
    the share of answers that claim the context lacks the information: a model that got
    worse, for tests of drift (0 draws nothing, so answers stay as they were).

    An agent's turn (its last message carries tool results) is answered from that tool
    output alone, cut into lines like any passage: the answer quotes output lines as read,
    so a fact the compression dropped is missing from it. The task's facts are never read.
    """
    if forget_rate > 0 and rng.random() < forget_rate:
        return NOT_FOUND_ANSWER
    question, passages = split_prompt(body)
    messages = body.get("messages") or []
    tool_output = _tool_results(messages[-1].get("content", "")) if messages else []
    if tool_output:  # an agent's turn: answer from the newest tool output, line by line
        passages = tool_output
    q_terms = content_terms(question)
    candidates = sentences(passages)
    overlaps = [len(q_terms & content_terms(s)) for s in candidates]
    if not candidates or max(overlaps, default=0) == 0:
        return NOT_FOUND_ANSWER
    temperature = float(body.get("temperature", 1.0))
    keep = 2
    if temperature > 0:
        draw = rng.random()
        if draw < 0.3 * temperature:
            keep = 1
        elif draw > 1 - 0.3 * temperature:
            keep = 3
    # Greedy answers use only sentences that share words with the question; sampled ones
    # rank every sentence with noise, so a near-tie or an unrelated neighbour can slip in.
    pool = range(len(candidates)) if temperature > 0 else [i for i, o in enumerate(overlaps) if o]
    ranked = sorted(
        pool,
        key=lambda i: (
            -(overlaps[i] + (rng.uniform(0, 1.1 * temperature) if temperature else 0)),
            i,
        ),
    )
    chosen = sorted(ranked[:keep])
    return " ".join(candidates[i] for i in chosen)


def truncate_to_tokens(text: str, max_tokens: int) -> tuple[str, bool]:
    """Cut `text` to at most `max_tokens` estimated tokens; (text, was_cut)."""
    if estimate_tokens(text) <= max_tokens:
        return text, False
    words = text.split()
    while words and estimate_tokens(" ".join(words)) > max_tokens:
        words = words[: max(0, len(words) - max(1, len(words) // 10))]
    return " ".join(words), True


def input_tokens(body: dict[str, Any]) -> int:
    """Estimated input tokens of a request (usage and count_tokens agree by construction)."""
    parts = [block_text(body.get("system") or "")]
    parts += [block_text(m.get("content", "")) for m in body.get("messages") or []]
    schema = structured_schema(body)
    if schema is not None:
        parts.append(json.dumps(schema))
    return sum(estimate_tokens(p) for p in parts) + 4 * len(body.get("messages") or [])


# --- structured output / judge -------------------------------------------------------


def structured_schema(body: dict[str, Any]) -> dict[str, Any] | None:
    """The JSON schema a request asks its reply to follow, if any.

    Recognises the current API form `output_config.format = {type: json_schema, schema}`
    and the older forced-tool form (`tool_choice: {type: tool, name}` + that tool's
    `input_schema`).
    """
    fmt = (body.get("output_config") or {}).get("format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        schema = fmt.get("schema")
        return schema if isinstance(schema, dict) else {}
    tool = forced_tool(body)
    if tool is not None:
        schema = tool.get("input_schema")
        return schema if isinstance(schema, dict) else {}
    return None


def forced_tool(body: dict[str, Any]) -> dict[str, Any] | None:
    """The tool definition a request forces the model to call, if any."""
    choice = body.get("tool_choice")
    if not isinstance(choice, dict) or choice.get("type") != "tool":
        return None
    for tool in body.get("tools") or []:
        if isinstance(tool, dict) and tool.get("name") == choice.get("name"):
            return tool
    return None


def judge_sections(body: dict[str, Any]) -> dict[str, str] | None:
    """The tagged sections of a judge prompt, or None when the prompt is not one."""
    text = "\n".join(
        block_text(m.get("content", ""))
        for m in body.get("messages") or []
        if m.get("role") == "user"
    )
    found: dict[str, str] = {}
    for tag in JUDGE_TAGS:
        match = re.search(rf"<{tag}>(.*?)</{tag}>", text, flags=re.DOTALL)
        if match is None:
            return None
        found[tag] = match.group(1).strip()
    return found


def _default_for(schema: dict[str, Any]) -> Any:
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if schema.get("enum"):
        return schema["enum"][0]
    if kind == "object":
        return conform({}, schema)
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return schema.get("minimum", 0)
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    return ""


def conform(obj: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """Make `obj` follow `schema`'s properties: its key order, required keys, no extras."""
    props: dict[str, Any] = schema.get("properties") or {}
    if not props:
        return dict(obj)
    out: dict[str, Any] = {}
    for key, sub in props.items():
        if key in obj:
            out[key] = obj[key]
        elif key in (schema.get("required") or []):
            out[key] = _default_for(sub if isinstance(sub, dict) else {})
    if schema.get("additionalProperties", True) is not False:
        out.update({k: v for k, v in obj.items() if k not in out})
    return out


def fake_judge(sections: dict[str, str], rng: random.Random, noise: float) -> dict[str, Any]:
    """The judge object: each answer graded by agreement with the reference, plus noise."""

    def grade(answer: str) -> int:
        noisy = score(answer, sections["reference"]) + rng.gauss(0, noise)
        return round(min(100.0, max(0.0, noisy)))

    grade_a = grade(sections["answer_a"])
    grade_b = grade(sections["answer_b"])
    return {
        "reasoning": (
            "Compared each answer with the reference answer's key facts and numbers. "
            f"Answer A covers them to about {grade_a}%, answer B to about {grade_b}%."
        ),
        "grade_a": grade_a,
        "grade_b": grade_b,
        "note": "graded by the loopback fake judge (reference agreement plus seeded noise)",
    }


def structured_reply(body: dict[str, Any], rng: random.Random, noise: float) -> dict[str, Any]:
    """The object a structured-output request gets: the judge object, or schema defaults."""
    schema = structured_schema(body) or {}
    sections = judge_sections(body)
    obj = fake_judge(sections, rng, noise) if sections is not None else {}
    return conform(obj, schema)
