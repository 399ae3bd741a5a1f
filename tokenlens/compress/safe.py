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

from tokenlens.compress.blocks import RULE_CHARS, Block, is_separator, newline_breaks_only, segment

#: Kinds whose inner whitespace may carry meaning.
VERBATIM_KINDS = frozenset({"fence", "code", "diff", "table", "json", "trace", "log"})
_TRAILING = re.compile(r"[ \t]+(?=\r?\n|$)")
_INNER_RUN = re.compile(r"(?<=\S)[ \t]{2,}(?=\S)")
#: Every line `is_separator` accepts matches this, in a text prefixed with "\n" whose
#: lines break at "\n" only; a block without a match can be cleaned in one pass.
_SEPARATOR_LINE = re.compile(
    r"\n[^\S\n]*([" + re.escape("".join(sorted(RULE_CHARS))) + r"])(?: *\1){4,}[^\S\n]*(?=\n|\Z)"
)


def apply_safe(text: str, blocks: list[Block] | None = None) -> str:
    """Whitespace cleanup that keeps every meaningful character (see module docstring).

    `blocks` is `segment(text)` when the caller has it already (it is not computed twice).
    """
    plain = newline_breaks_only(text)
    pieces: list[str] = []
    pending_blank = ""
    for block in segment(text) if blocks is None else blocks:
        if block.is_blank:
            if pieces and not pending_blank:
                pending_blank = "\r\n" if "\r\n" in block.text else "\n"
            continue
        cleaned = _clean_block(block, plain)
        if not cleaned:
            continue
        if pending_blank:
            if not pieces[-1].endswith("\n"):
                pieces[-1] += pending_blank
            pieces.append(pending_blank)
            pending_blank = ""
        pieces.append(cleaned)
    return "".join(pieces).rstrip("\r\n")


def _clean_block(block: Block, plain: bool) -> str:
    if block.kind == "rule":
        return ""
    text = block.text
    if block.kind in VERBATIM_KINDS:
        return _drop_trailing(text)
    if plain and not _SEPARATOR_LINE.search("\n" + text):
        # Both substitutions are line-local, so one pass over the block equals one per line.
        text = _drop_trailing(text)
        return _INNER_RUN.sub(" ", text) if "  " in text or "\t" in text else text
    kept: list[str] = []
    for line in text.splitlines(keepends=True):
        if is_separator(line) and not (kept and line.strip()[0] in "=-"):
            continue
        kept.append(_INNER_RUN.sub(" ", _TRAILING.sub("", line)))
    return "".join(kept)


def _drop_trailing(text: str) -> str:
    """`_TRAILING.sub("", text)`, skipped when no line can have trailing blanks."""
    if " \n" in text or "\t\n" in text or " \r" in text or "\t\r" in text:
        return _TRAILING.sub("", text)
    return _TRAILING.sub("", text) if text.endswith((" ", "\t")) else text
