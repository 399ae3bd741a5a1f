"""Rung 0, `safe`: whitespace and decorative junk only. Meaning is untouched and it is idempotent.

Outside code it collapses runs of spaces/tabs inside a line, drops trailing spaces, removes
decorative separator lines (``=====``, ``-----``, ``*****``, box-drawing rules) and
collapses runs of blank lines (two or more) to one; blank lines at the very start and
end of the text go. Inside fenced or indented code, JSON, diffs, tables and stack traces
only trailing spaces go: a run of spaces in a string literal is data, and so is a blank
line inside a fence. Leading indentation is always kept (nested lists depend on it).
A ``=====`` directly under a line of text is a setext heading underline and stays.
"""

from __future__ import annotations

import re

from tokenlens.compress.blocks import Block, is_separator, segment

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
