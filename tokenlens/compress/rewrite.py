"""Helpers the lossy rungs share to rewrite eligible blocks and put the text back together.

A lossy rung sees lines of prose as *prefix* (indentation, quote markers, list markers),
*content* and *ending*. It may only change content; the prefix and the line ending are
structure and stay. A block whose content is all gone is removed together with the blank
line that introduced it, so no hole is left behind.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from tokenlens.compress.blocks import BLANK, Block

_LINE_PREFIX = re.compile(r"^[ \t]*(?:>[ \t]?)*(?:(?:[-*+]|\d{1,3}[.)])[ \t]+)?")
#: The characters a non-empty `_LINE_PREFIX` match can start with, besides a digit.
_PREFIX_START = frozenset(" \t>-*+")


class Line(NamedTuple):
    """One line of an eligible block, split into structure and content.

    A named tuple rather than a frozen dataclass, like `Block`: as immutable, and several
    times cheaper to build (prune splits every line of every eligible block).
    """

    prefix: str
    content: str
    ending: str


def split_line(line: str) -> Line:
    body = line.rstrip("\r\n")
    ending = line[len(body) :]
    head = body[:1]
    if head and head not in _PREFIX_START and not head.isdecimal():  # ("\d" is isdecimal)
        return Line("", body, ending)  # most prose lines: `_LINE_PREFIX` matches ""
    match = _LINE_PREFIX.match(body)
    cut = match.end() if match else 0
    return Line(body[:cut], body[cut:], ending)


def split_lines(text: str) -> list[Line]:
    return [split_line(line) for line in text.splitlines(keepends=True)]


def rebuild(blocks: Sequence[Block], replaced: Mapping[int, str]) -> str:
    """The text with `replaced[i]` for block i; empty replacements remove the block cleanly."""
    pieces: list[str] = []
    last_blank_index: int | None = None
    for index, block in enumerate(blocks):
        text = replaced.get(index, block.text)
        if block.kind == BLANK:
            if last_blank_index is not None and last_blank_index == len(pieces) - 1:
                continue  # the paragraph between two blanks went away
            pieces.append(text)
            last_blank_index = len(pieces) - 1
            continue
        if not text or text.isspace():  # (`not text.strip()`, without a copy)
            continue
        pieces.append(text)
    while pieces and (not pieces[0] or pieces[0].isspace()):
        pieces.pop(0)
    result = "".join(pieces)
    # Does the original text (the blocks' texts joined) end with "\n"?
    last = next((block.text for block in reversed(blocks) if block.text), "")
    if not last.endswith("\n"):
        result = result.rstrip("\r\n")
    return result


def ending_of(text: str) -> str:
    """The line ending a block's text finishes with ('' for the last line of a text)."""
    return text[len(text.rstrip("\r\n")) :]
