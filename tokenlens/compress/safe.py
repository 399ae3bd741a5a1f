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

from tokenlens.compress.blocks import (
    BLANK,
    RULE_CHARS,
    Block,
    is_separator,
    newline_breaks_only,
    segment,
)

#: Kinds whose inner whitespace may carry meaning.
VERBATIM_KINDS = frozenset({"fence", "code", "diff", "table", "json", "trace", "log"})
_TRAILING = re.compile(r"[ \t]+(?=\r?\n|$)")
_INNER_RUN = re.compile(r"(?<=\S)[ \t]{2,}(?=\S)")
_NEWLINE_AFTER_BLANK_REVERSED = re.compile(r"\n[ \t]")
#: Every line `is_separator` accepts matches this, in a text prefixed with "\n" whose
#: lines break at "\n" only; a block without a match can be cleaned in one pass.
_SEPARATOR_LINE = re.compile(
    r"\n[^\S\n]*([" + re.escape("".join(sorted(RULE_CHARS))) + r"])(?: *\1){4,}[^\S\n]*(?=\n|\Z)"
)


def apply_safe(text: str, blocks: list[Block] | None = None) -> str:
    """Whitespace cleanup that keeps every meaningful character (see module docstring).

    `blocks` is `segment(text)` when the caller has it already (it is not computed twice).
    Facts about the whole text (no trailing blanks anywhere, no runs of blanks, no
    separator line) are checked once, so that the common, already clean block costs
    almost nothing.
    """
    if blocks is None:
        blocks = segment(text)
    trailing = _may_have_trailing(text)
    runs = "  " in text or "\t" in text
    plain = newline_breaks_only(text)
    separators = not plain or _SEPARATOR_LINE.search("\n" + text) is not None
    pieces: list[str] = []
    pending_blank = ""
    for kind, body, _ in blocks:
        if kind == BLANK:
            if pieces and not pending_blank:
                pending_blank = "\r\n" if "\r\n" in body else "\n"
            continue
        if kind == "rule":
            continue
        if kind in VERBATIM_KINDS:
            cleaned = _TRAILING.sub("", body) if trailing else body
        elif separators and (not plain or _SEPARATOR_LINE.search("\n" + body)):
            cleaned = _clean_lines(body)
        else:
            # Both substitutions are line-local: one pass over the block equals one per line.
            cleaned = _TRAILING.sub("", body) if trailing else body
            if runs and ("  " in cleaned or "\t" in cleaned):
                cleaned = _INNER_RUN.sub(" ", cleaned)
        if not cleaned:
            continue
        if pending_blank:
            if not pieces[-1].endswith("\n"):
                pieces[-1] += pending_blank
            pieces.append(pending_blank)
            pending_blank = ""
        pieces.append(cleaned)
    return "".join(pieces).rstrip("\r\n")


def _clean_lines(text: str) -> str:
    """A block that may hold separator lines, line by line."""
    kept: list[str] = []
    for line in text.splitlines(keepends=True):
        if is_separator(line) and not (kept and line.strip()[0] in "=-"):
            continue
        kept.append(_INNER_RUN.sub(" ", _TRAILING.sub("", line)))
    return "".join(kept)


def _may_have_trailing(text: str) -> bool:
    """False when no line of `text` ends in spaces or tabs (`_TRAILING` would do nothing).

    Searched in the reversed text, where the pattern starts with the rare "\n" instead of
    the frequent space: several times faster. With a "\r" anywhere it answers True.
    """
    if "\r" in text or text.endswith((" ", "\t")):
        return True
    return _NEWLINE_AFTER_BLANK_REVERSED.search(text[::-1]) is not None
