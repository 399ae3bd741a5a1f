"""The ladder's segmentation and `safe` rung as they were before the hot-path work (main, c4c572b).

Kept verbatim as the reference the faster code must agree with, byte for byte, on any
text (see test_equivalence.py). Loaded by path: tests are not a package.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

#: Kinds that rungs 3-5 may rewrite. Everything else passes through byte-identical.
ELIGIBLE_KINDS: frozenset[str] = frozenset({"prose", "list", "quote"})
#: Kinds that carry no text worth compressing or counting as a block.
BLANK = "blank"

_FENCE_OPEN = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_HEADING = re.compile(r"^ {0,3}#{1,6}(\s|$)")
_TAG_LINE = re.compile(r"^\s*<(/?)([A-Za-z][\w.:-]*)(\s+[^<>]*)?/?>\s*$")
_TABLE_SEPARATOR = re.compile(r"^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)+\|?\s*$")
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d{1,3}[.)])\s+\S")
_QUOTE = re.compile(r"^\s*>")
_TRACE_LINE = re.compile(
    r"^(Traceback \(most recent call last\)|\s+File \".*\", line \d+|\s+at [\w$.<>/]+[(:]"
    r"|\s*Caused by: |\w+(\.\w+)*(Error|Exception): )"
)
_DIFF_LINE = re.compile(r"^(diff --git |@@ -\d|\+\+\+ |--- a/|index [0-9a-f]{6,}\.\.)")
_LOG_LINE = re.compile(
    r"^\s*\[?(\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}|\d{2}:\d{2}:\d{2}|"
    r"(TRACE|DEBUG|INFO|NOTICE|WARN|WARNING|ERROR|FATAL|CRITICAL)\b)"
)
_CODE_START = re.compile(
    r"^\s*(def |class |import |from \S+ import |return\b|if \(|for \(|while \(|function\b|"
    r"const |let |var |public |private |protected |static |#include|package |func |fn |"
    r"impl |struct |enum |SELECT |INSERT |UPDATE |DELETE |CREATE |\$ |>>> |@\w+)"
)
_CODE_END = re.compile(r"[;{}]\s*$|\)\s*:\s*$|=>\s*$")
_HTML_TAG_TEXT = """
    html head body div span p a script style meta link title table tr td th thead tbody ul
    ol li br hr img form input button nav footer header section article main h1 h2 h3 h4 h5
    h6 iframe noscript svg label select option textarea
"""
_HTML_TAGS = frozenset(_HTML_TAG_TEXT.split())
_RULE_CHARS = frozenset("-=*_~#+.·•─━═┄┈▬■□◆◇<>/\\|")
_HTML_TAG = re.compile(r"<(/?)([A-Za-z][\w-]*)[\s>/]")


@dataclass(frozen=True)
class Block:
    """A run of whole lines of one kind. `text` keeps its line endings verbatim."""

    kind: str
    text: str
    lang: str = ""  # a fence's info string (first word, lowercased)

    @property
    def eligible(self) -> bool:
        """May rungs 3-5 (prune, select, llmlingua2) rewrite this block?"""
        return self.kind in ELIGIBLE_KINDS

    @property
    def is_blank(self) -> bool:
        return self.kind == BLANK


def segment(text: str) -> list[Block]:
    """Cut `text` into typed blocks whose concatenation is `text`, byte for byte."""
    lines = text.splitlines(keepends=True)
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        fence = _FENCE_OPEN.match(line.rstrip("\r\n"))
        if fence and not (fence.group(1)[0] == "`" and "`" in fence.group(2)):
            end = _fence_end(lines, i, fence.group(1))
            info = fence.group(2).strip().split()
            blocks.append(Block("fence", "".join(lines[i:end]), info[0].lower() if info else ""))
            i = end
        elif not line.strip():
            end = i
            while end < len(lines) and not lines[end].strip():
                end += 1
            blocks.append(Block(BLANK, "".join(lines[i:end])))
            i = end
        elif _HEADING.match(line):
            blocks.append(Block("heading", line))
            i += 1
        elif (tag := _TAG_LINE.match(line)) is not None:
            kind = "html" if tag.group(2).lower() in _HTML_TAGS else "tag"
            blocks.append(Block(kind, line))
            i += 1
        else:
            end = i + 1
            while end < len(lines) and not _starts_new_block(lines[end]):
                end += 1
            blocks.extend(_split_paragraph(lines[i:end]))
            i = end
    return blocks


def _fence_end(lines: Sequence[str], start: int, opener: str) -> int:
    """Index after the closing fence (or the end of text for an unclosed fence)."""
    closer = re.compile(r"^ {0,3}" + re.escape(opener[0]) + "{" + str(len(opener)) + r",}\s*$")
    for j in range(start + 1, len(lines)):
        if closer.match(lines[j].rstrip("\r\n")):
            return j + 1
    return len(lines)


def _starts_new_block(line: str) -> bool:
    return (
        not line.strip()
        or bool(_FENCE_OPEN.match(line.rstrip("\r\n")))
        or bool(_HEADING.match(line))
        or bool(_TAG_LINE.match(line))
    )


def _split_paragraph(lines: Sequence[str]) -> list[Block]:
    """Classify one paragraph; a table inside it becomes its own block."""
    for k in range(1, len(lines)):
        if _TABLE_SEPARATOR.match(lines[k]) and "|" in lines[k - 1]:
            start = k - 1
            end = k + 1
            while end < len(lines) and "|" in lines[end]:
                end += 1
            out: list[Block] = []
            if start > 0:
                out.extend(_split_paragraph(lines[:start]))
            out.append(Block("table", "".join(lines[start:end])))
            if end < len(lines):
                out.extend(_split_paragraph(lines[end:]))
            return out
    text = "".join(lines)
    return [Block(classify_paragraph(lines), text)]


def is_separator(line: str) -> bool:
    """A decorative rule: five or more of one punctuation character (spaces allowed)."""
    bare = line.strip().replace(" ", "")
    return len(bare) >= 5 and len(set(bare)) == 1 and bare[0] in _RULE_CHARS


def classify_paragraph(lines: Sequence[str]) -> str:
    """The kind of a paragraph that holds no fence, heading, tag line or table."""
    stripped = "".join(lines).strip()
    n = len(lines)
    if all(is_separator(line) for line in lines):
        return "rule"
    if stripped[:1] in "{[":
        try:
            json.loads(stripped)
        except ValueError:
            return "code"
        return "json"
    if any(_DIFF_LINE.match(line) for line in lines):
        return "diff"
    if any(_TRACE_LINE.match(line) for line in lines):
        return "trace"
    if sum(bool(_LOG_LINE.match(line)) for line in lines) * 2 >= n + (n == 1):
        return "log"
    if len(_HTML_TAG.findall(stripped)) >= 2 and any(
        name.lower() in _HTML_TAGS for _, name in _HTML_TAG.findall(stripped)
    ):
        return "html"
    if all(line.startswith(("    ", "\t")) for line in lines):
        return "code"
    if all(_QUOTE.match(line) for line in lines):
        return "quote"
    if _LIST_ITEM.match(lines[0]):
        return "list"
    codey = sum(bool(_CODE_START.match(line) or _CODE_END.search(line)) for line in lines)
    if codey * 2 >= n + (n == 1) or _symbol_density(stripped) > 0.12:
        return "code"
    return "prose"


def _symbol_density(text: str) -> float:
    """Share of characters typical of code rather than prose."""
    if not text:
        return 0.0
    return sum(text.count(ch) for ch in "{}[]<>=;$\\|") / len(text)


#: Kinds whose inner whitespace may carry meaning.
VERBATIM_KINDS = frozenset({"fence", "code", "diff", "table", "json", "trace", "log"})
_TRAILING = re.compile(r"[ \t]+(?=\r?\n|$)")
_INNER_RUN = re.compile(r"(?<=\S)[ \t]{2,}(?=\S)")


def apply_safe(text: str) -> str:
    """Whitespace cleanup that keeps every meaningful character (see module docstring)."""
    pieces: list[str] = []
    pending_blank = ""
    for block in segment(text):
        if block.is_blank:
            if pieces and not pending_blank:
                pending_blank = "\r\n" if "\r\n" in block.text else "\n"
            continue
        cleaned = _clean_block(block)
        if not cleaned:
            continue
        if pending_blank:
            if not pieces[-1].endswith("\n"):
                pieces[-1] += pending_blank
            pieces.append(pending_blank)
            pending_blank = ""
        pieces.append(cleaned)
    return "".join(pieces).rstrip("\r\n")


def _clean_block(block: Block) -> str:
    if block.kind == "rule":
        return ""
    if block.kind in VERBATIM_KINDS:
        return _TRAILING.sub("", block.text)
    kept: list[str] = []
    for line in block.text.splitlines(keepends=True):
        if is_separator(line) and not (kept and line.strip()[0] in "=-"):
            continue
        kept.append(_INNER_RUN.sub(" ", _TRAILING.sub("", line)))
    return "".join(kept)
