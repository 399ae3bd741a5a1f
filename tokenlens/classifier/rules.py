"""Hand-written rules: the class a request's shape and wording suggest, or None.

They read only the shape of the request and the question's wording, on a bounded prefix
of the text, so they take microseconds and give the same answer for the same body. Alone
they are wrong too often to route on (the starter set: 9 of 35 wrong), so they serve as
evidence for the learned classifier (`tokenlens.classifier.features`) and as the fallback
for a policy that ships no classifier.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: How much context text the rules look at; bounds their cost on huge prompts.
SCAN_CHARS = 20_000
#: Context longer than this (characters) makes a question a long-document question.
LONG_DOC_CHARS = 7_000
#: The cue families below match *lowercased* text, with the word boundary factored out
#: in front: both make them ~3x faster than case-insensitive alternations (measured).
_SUMMARY = re.compile(
    r"\b(?:summari[sz]|tl;?dr\b|key (?:points|takeaways)\b|overview\b|recap\b"
    r"|main (?:points|ideas)\b|condense\b|in (?:one|two|three|\d+) sentences?\b)"
)
_NUMERIC = re.compile(
    r"\b(?:how (?:many|much|long|far|old)\b|total\b|calculate\b|compute\b|percent"
    r"|average\b|sum\b|difference\b|remain(?:s|ing)?\b|net\b|ratio\b|profit\b"
    r"|cost\b|budget\b|per (?:day|week|month|year|hour)\b)"
)
_EXTRACT = re.compile(
    r"\b(?:extract\b|list (?:all|every|each|the)\b|what (?:is|are|was|were) the\b"
    r"|which\b|who\b|when\b|where\b|find\b|identify\b|name the\b)"
)
_INSTRUCTION = re.compile(
    r"\b(?:exactly\b|must\b|do not\b|don't\b|never\b|only\b|format\b|bullet"
    r"|numbered\b|json\b|uppercase\b|lowercase\b|words?\b|sentences?\b"
    r"|start with\b|end with\b|include\b|without\b)"
)
_CODE = re.compile(
    r"\n\s*(?:def|class|import|from \S+ import|return|function|const|let|var|public|private"
    r"|#include|package|func|fn|SELECT|CREATE TABLE)\b",
)
#: Explicit output constraints: the request is mostly about following them.
_STRONG_INSTRUCTION = re.compile(
    r"\b(?:format:|constraints?:|reply only\b|respond only\b|exactly these\b"
    r"|under \d+ words\b|markdown table\b|json object\b|bullet points?\b"
    r"|draft the (?:reply|email|message)\b)"
)
_CODE_QUESTION = re.compile(
    r"\b(?:code\b|function\b|method\b|bug\b|stack ?trace\b|exception\b|compile"
    r"|returns?\b|variable\b|class\b|module\b|api\b|endpoint\b)"
)


def text_blocks(content: Any) -> list[str]:
    """The text of a content field: a string, or the text blocks of a block list."""
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
    blocks = [b for b in text_blocks(last.get("content")) if b.strip()]
    if len(blocks) >= 2:
        question, context = blocks[-1], "\n\n".join(blocks[:-1])
    elif blocks:
        head, _, tail = blocks[0].rstrip().rpartition("\n\n")
        question, context = (tail, head) if head else (blocks[0], "")
    else:
        question, context = "", ""
    return question[:SCAN_CHARS], context[:SCAN_CHARS], len(messages) - 1


#: Cue families counted in the question; the rules test them, the learned classifier
#: weighs them.
_CUES: dict[str, re.Pattern[str]] = {
    "summary": _SUMMARY,
    "numeric": _NUMERIC,
    "extract": _EXTRACT,
    "instruction": _INSTRUCTION,
    "strong-instruction": _STRONG_INSTRUCTION,
    "code-question": _CODE_QUESTION,
}


@dataclass(frozen=True)
class Evidence:
    """What the rules read from a body, computed once (the learned classifier reuses it)."""

    question: str
    context: str
    turns: int
    system: str
    #: Matches of each cue family (`_CUES`) in the question.
    cues: dict[str, int]
    system_instructions: int
    code_lines: int


def read_evidence(body: Mapping[str, Any]) -> Evidence:
    """The bounded evidence of one Messages API body."""
    question, context, turns = split_question(body)
    system = body.get("system")
    system_text = " ".join(text_blocks(system))[:SCAN_CHARS] if system else ""
    lowered = question.lower()
    return Evidence(
        question=question,
        context=context,
        turns=turns,
        system=system_text,
        cues={name: len(pattern.findall(lowered)) for name, pattern in _CUES.items()},
        system_instructions=len(_INSTRUCTION.findall(system_text.lower())),
        # the leading newline lets the engine jump from line start to line start
        code_lines=len(_CODE.findall("\n" + context)),
    )


def decide(found: Evidence) -> str | None:
    """The class the rules see in the evidence, or None when they are unsure."""
    cues = found.cues
    if found.turns >= 2:
        return "chat-history"
    if found.code_lines >= 8 or ("```" in found.context and cues["code-question"]):
        return "code-context"
    if cues["strong-instruction"]:
        return "instruction-following"
    if cues["summary"]:
        return "summarization"
    if cues["instruction"] + found.system_instructions >= 4:
        return "instruction-following"
    if len(found.context) >= LONG_DOC_CHARS:
        return "long-doc-qa"
    if cues["numeric"] and any(ch.isdigit() for ch in found.context):
        return "numeric-reasoning"
    question = found.question
    if found.context.strip() and (cues["extract"] or question.rstrip().endswith("?")):
        return "extraction"
    return None


def rule_class(body: Mapping[str, Any]) -> str | None:
    """The class the rules see in a request body, or None when they are unsure."""
    return decide(read_evidence(body))
