"""Which task class a live request belongs to: header, then rules, then `default`.

Why rules and not a model: classification sits on the hot path of every request, so it
must take microseconds, never fail, and give the same answer for the same request (a
flaky classifier would make the applied arm random). The rules read only the shape of
the request and the question's wording, on a bounded prefix of the text. When they are
unsure they say nothing and the policy's `default` entry applies; an application that
knows better sends `x-tokenlens-class`.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, Literal

CLASS_HEADER = "x-tokenlens-class"
DEFAULT_CLASS = "default"
#: How much context text the rules look at; bounds their cost on huge prompts.
SCAN_CHARS = 20_000
#: Context longer than this (characters) makes a question a long-document question.
LONG_DOC_CHARS = 7_000
_HEADER_VALUE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")

Source = Literal["header", "rules", "default"]

_SUMMARY = re.compile(
    r"\bsummari[sz]|\btl;?dr\b|\bkey (?:points|takeaways)\b|\boverview\b|\brecap\b"
    r"|\bmain (?:points|ideas)\b|\bcondense\b|\bin (?:one|two|three|\d+) sentences?\b",
    re.IGNORECASE,
)
_NUMERIC = re.compile(
    r"\bhow (?:many|much|long|far|old)\b|\btotal\b|\bcalculate\b|\bcompute\b|\bpercent"
    r"|\baverage\b|\bsum\b|\bdifference\b|\bremain(?:s|ing)?\b|\bnet\b|\bratio\b|\bprofit\b"
    r"|\bcost\b|\bbudget\b|\bper (?:day|week|month|year|hour)\b",
    re.IGNORECASE,
)
_EXTRACT = re.compile(
    r"\bextract\b|\blist (?:all|every|each|the)\b|\bwhat (?:is|are|was|were) the\b"
    r"|\bwhich\b|\bwho\b|\bwhen\b|\bwhere\b|\bfind\b|\bidentify\b|\bname the\b",
    re.IGNORECASE,
)
_INSTRUCTION = re.compile(
    r"\bexactly\b|\bmust\b|\bdo not\b|\bdon't\b|\bnever\b|\bonly\b|\bformat\b|\bbullet"
    r"|\bnumbered\b|\bjson\b|\buppercase\b|\blowercase\b|\bwords?\b|\bsentences?\b"
    r"|\bstart with\b|\bend with\b|\binclude\b|\bwithout\b",
    re.IGNORECASE,
)
_CODE = re.compile(
    r"^\s*(?:def|class|import|from \S+ import|return|function|const|let|var|public|private"
    r"|#include|package|func|fn|SELECT|CREATE TABLE)\b",
    re.MULTILINE,
)
#: Explicit output constraints: the request is mostly about following them.
_STRONG_INSTRUCTION = re.compile(
    r"\bformat:|\bconstraints?:|\breply only\b|\brespond only\b|\bexactly these\b"
    r"|\bunder \d+ words\b|\bmarkdown table\b|\bjson object\b|\bbullet points?\b"
    r"|\bdraft the (?:reply|email|message)\b",
    re.IGNORECASE,
)
_CODE_QUESTION = re.compile(
    r"\bcode\b|\bfunction\b|\bmethod\b|\bbug\b|\bstack ?trace\b|\bexception\b|\bcompile"
    r"|\breturns?\b|\bvariable\b|\bclass\b|\bmodule\b|\bapi\b|\bendpoint\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Classification:
    task_class: str
    source: Source


def _text(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        return []
    return [
        block["text"]
        for block in content
        if isinstance(block, Mapping) and isinstance(block.get("text"), str)
    ]


def split_question(body: Mapping[str, Any]) -> tuple[str, str, int]:
    """(question, context prefix, number of earlier turns) of a Messages API body.

    The question is the last text block of the last user message, or the last paragraph
    when that message is one string; the context is the rest of that message (bounded).
    """
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "", "", 0
    last = messages[-1] if isinstance(messages[-1], Mapping) else {}
    blocks = [b for b in _text(last.get("content")) if b.strip()]
    if len(blocks) >= 2:
        question, context = blocks[-1], "\n\n".join(blocks[:-1])
    elif blocks:
        head, _, tail = blocks[0].rstrip().rpartition("\n\n")
        question, context = (tail, head) if head else (blocks[0], "")
    else:
        question, context = "", ""
    return question[:SCAN_CHARS], context[:SCAN_CHARS], len(messages) - 1


def rule_class(body: Mapping[str, Any]) -> str | None:
    """The class the rules see in a request body, or None when they are unsure."""
    question, context, earlier_turns = split_question(body)
    if earlier_turns >= 2:
        return "chat-history"
    code_lines = len(_CODE.findall(context))
    if code_lines >= 8 or ("```" in context and _CODE_QUESTION.search(question)):
        return "code-context"
    if _STRONG_INSTRUCTION.search(question):
        return "instruction-following"
    if _SUMMARY.search(question):
        return "summarization"
    system = body.get("system")
    system_text = " ".join(_text(system))[:SCAN_CHARS] if system else ""
    if len(_INSTRUCTION.findall(question)) + len(_INSTRUCTION.findall(system_text)) >= 4:
        return "instruction-following"
    if len(context) >= LONG_DOC_CHARS:
        return "long-doc-qa"
    if _NUMERIC.search(question) and any(ch.isdigit() for ch in context):
        return "numeric-reasoning"
    if context.strip() and (_EXTRACT.search(question) or question.rstrip().endswith("?")):
        return "extraction"
    return None


def classify(
    body: Mapping[str, Any] | None,
    header: str | None,
    known: Collection[str],
) -> Classification:
    """Header wins; else the rules (when they name a class the policy knows); else default.

    `known` is the policy's class names. An unknown header value maps to `default` too, so
    a client cannot grow the proxy's per-class tables without bound.
    """
    if header is not None:
        value = header.strip().lower()
        if _HEADER_VALUE.match(value):
            return Classification(value if value in known else DEFAULT_CLASS, "header")
    if body is not None:
        guess = rule_class(body)
        if guess is not None and guess in known:
            return Classification(guess, "rules")
    return Classification(DEFAULT_CLASS, "default")
