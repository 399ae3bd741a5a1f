"""Rung 2, `dedup`: say it once. Repeated paragraphs go; runs of near-identical lines collapse.

- A paragraph (prose, list, quote, log, heading-free text) whose *normalised* form was seen
  earlier in the same text is removed. Normalising drops quote markers (``>``), case and
  whitespace, so a quoted email thread or a boilerplate footer repeated under every
  message is caught. Paragraphs under `MIN_PARAGRAPH_CHARS` are kept (short lines such as
  "Thanks," repeat legitimately).
- Inside a paragraph, a run of three or more lines that differ only in digits (log lines
  with timestamps, counters) keeps its first and last line and says how many were
  omitted; two exact duplicate lines in a row become one.

Code, tables, JSON, diffs and stack traces are never deduplicated: "the old code is X, the
new code is X" means something.
"""

from __future__ import annotations

import re

from tokenlens.compress.blocks import Block, segment

MIN_PARAGRAPH_CHARS = 40
DEDUP_KINDS = frozenset({"prose", "list", "quote", "log", "html", "tag"})
_LINE_KINDS = frozenset({"prose", "list", "quote", "log"})
_QUOTE_MARKERS = re.compile(r"^[ \t]*(?:>[ \t]?)+", re.MULTILINE)
_SPACE = re.compile(r"\s+")
_DIGITS = re.compile(r"\d+")


def normalise(text: str) -> str:
    """The form two paragraphs must share to count as repeats."""
    return _SPACE.sub(" ", _QUOTE_MARKERS.sub("", text)).strip().lower()


def apply_dedup(text: str, blocks: list[Block] | None = None) -> str:
    """Remove repeated paragraphs and collapse repeated lines (see module docstring).

    `blocks` is `segment(text)` when the caller has it already.
    """
    seen: set[str] = set()
    out: list[Block] = []
    for block in segment(text) if blocks is None else blocks:
        if block.kind == "quote":
            block = Block(block.kind, _dedup_quote(block.text, seen), block.lang)
            if not block.text:
                _drop_separator_before(out)
                continue
        if block.kind in DEDUP_KINDS:
            key = normalise(block.text)
            if len(key) >= MIN_PARAGRAPH_CHARS:
                if key in seen:
                    _drop_separator_before(out)
                    continue
                seen.add(key)
        if block.kind in _LINE_KINDS:
            block = Block(block.kind, collapse_lines(block.text), block.lang)
        if block.is_blank and out and out[-1].is_blank:
            continue
        out.append(block)
    return "".join(block.text for block in out)


def _dedup_quote(text: str, seen: set[str]) -> str:
    """Inside a quote, drop quoted paragraphs already seen (quoted replies repeat the thread)."""
    groups: list[list[str]] = [[]]
    for line in text.splitlines(keepends=True):
        if not _QUOTE_MARKERS.sub("", line).strip():
            groups.append([line])  # a quoted blank line opens the next group
        else:
            groups[-1].append(line)
    kept: list[str] = []
    for group in groups:
        body = [line for line in group if _QUOTE_MARKERS.sub("", line).strip()]
        key = normalise("".join(body))
        if len(key) >= MIN_PARAGRAPH_CHARS and key in seen:
            continue
        if len(key) >= MIN_PARAGRAPH_CHARS:
            seen.add(key)
        kept.extend(group)
    while kept and not _QUOTE_MARKERS.sub("", kept[0]).strip():
        kept.pop(0)
    if not any(_QUOTE_MARKERS.sub("", line).strip() for line in kept):
        return ""
    return "".join(kept)


def _drop_separator_before(out: list[Block]) -> None:
    """Removing a paragraph also removes the blank line that introduced it."""
    if len(out) > 1 and out[-1].is_blank:
        out.pop()


def collapse_lines(text: str) -> str:
    """Collapse runs of lines equal up to digits (>= 3) and exact duplicate pairs."""
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    i = 0
    while i < len(lines):
        key = _line_key(lines[i])
        j = i + 1
        while j < len(lines) and key and _line_key(lines[j]) == key:
            j += 1
        run = j - i
        if run >= 3:
            ending = "\r\n" if lines[i].endswith("\r\n") else "\n"
            indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
            out.append(lines[i])
            out.append(f"{indent}[... {run - 2} similar lines omitted ...]{ending}")
            out.append(lines[j - 1])
        elif run == 2 and lines[i].rstrip("\r\n") == lines[i + 1].rstrip("\r\n"):
            out.append(lines[i + 1] if i + 2 == len(lines) else lines[i])
        else:
            out.extend(lines[i:j])
        i = j
    return "".join(out)


def _line_key(line: str) -> str:
    return _DIGITS.sub("0", line.strip())
