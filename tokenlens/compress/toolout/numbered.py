"""Numbered file reads with an exact decode: most line numbers left out, the count kept.

``cat -n`` and an agent's read tool (``     1→text``) put a right-aligned number before
every line; on source code that prefix is over a quarter of the tokens. Where every line
of an output is numbered one more than the line before, the numbers are kept only where
a reader needs them to keep count: on the first line, on every tenth line, on a line
that starts a definition (``def``, ``class``, ...) and on the first line after a marker.
A header line says so::

    [line numbers shown on every 10th line and on definitions; each other line is ...]
         1\timport sys

         3\tclass Quitter(object):
         4\t    def __init__(self, name, eof):
            self.name = name

A numbered line keeps its original prefix byte for byte, which carries the width and
the separator; a line without a number is the line above plus one, in that same width and
separator. A line whose text would itself read as numbered keeps its number, so the
decode is never ambiguous. Markers (`tokenlens.compress.toolout.markers`) pass through;
the line after one is always numbered.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

HEADER = (
    "[line numbers shown on every 10th line and on definitions; "
    "each other line is the line above plus one]"
)
#: A numbered line: padding, the number, then a tab or an arrow and the text (a blank
#: line's rendering keeps only the padded number).
NUMBERED = re.compile(r"^(?P<pad> *)(?P<num>\d+)(?:(?P<sep>[\t→])(?P<text>.*))?$")
#: Every this many lines a number is kept.
EVERY = 10
DEFINITION = re.compile(
    r"^\s*(?:async\s+def|def|class|function|fn|func|impl|struct|interface|"
    r"export|public|private|module|package)\b"
)
#: A Markdown heading: a definition of a document's structure (not a number anchor: in
#: code it is a comment).
HEADING = re.compile(r"^#{1,6} ")


def _number_format(lines: Sequence[str], skip: Callable[[str], bool]) -> tuple[int, str] | None:
    """(width, separator) when every line is numbered in one format, consecutively
    between markers; else None."""
    width, sep, expected = None, None, None
    for line in lines:
        if skip(line):
            expected = None
            continue
        match = NUMBERED.match(line)
        if match is None:
            return None
        num = int(match["num"])
        if expected is not None and num != expected:
            return None
        size = len(match["pad"]) + len(match["num"])
        if match["pad"]:
            width = size if width is None else width
            if size != width:
                return None
        if match["sep"] is not None:
            sep = sep or match["sep"]
            if match["sep"] != sep:
                return None
        expected = num + 1
    if width is None or sep is None:
        return None
    return width, sep


def _prefix(num: int, width: int, sep: str | None) -> str:
    return f"{num:>{width}}" if sep is None else f"{num:>{width}}{sep}"


def drop_numbers(lines: Sequence[str], skip: Callable[[str], bool]) -> list[str] | None:
    """The numbered lines with most numbers left out (see the module docstring), or None
    when the lines are not all numbered consecutively in one format. `skip` marks the
    lines that pass through (markers)."""
    found = _number_format(lines, skip)
    if found is None:
        return None
    width = found[0]
    out = [HEADER]
    anchor_next = True
    seen_width = seen_sep = False  # what the decode has learnt from the numbers kept so far
    last = max(k for k, line in enumerate(lines) if not skip(line))
    for k, line in enumerate(lines):
        if skip(line):
            out.append(line)
            anchor_next = True
            continue
        match = NUMBERED.match(line)
        assert match is not None  # checked by _number_format
        num, text = int(match["num"]), match["text"] or ""
        plain = (
            not anchor_next
            and seen_width
            and (seen_sep or not text)
            and k != last  # a blank last line would read as layout
            and num % EVERY != 0
            and line == _prefix(num, width, match["sep"]) + text
            and (text or match["sep"] is None)  # a blank reads back as the bare number
            and not DEFINITION.match(text)
            and not NUMBERED.match(text)
            and not skip(text)
            and text != HEADER
        )
        out.append(text if plain else line)
        anchor_next = False
        if not plain:
            seen_width = seen_width or bool(match["pad"])
            seen_sep = seen_sep or match["sep"] is not None
    return out


def restore_numbers(lines: Sequence[str], skip: Callable[[str], bool]) -> list[str]:
    """Decode `drop_numbers`: every line under the header numbered again; other lines as
    they are. A line without a number before any numbered line is left as it is."""
    if not lines or lines[0] != HEADER:
        return list(lines)
    out: list[str] = []
    width: int | None = None
    sep: str | None = None
    num: int | None = None
    for line in lines[1:]:
        if skip(line):
            out.append(line)
            num = None
            continue
        match = NUMBERED.match(line)
        if match is not None:
            num = int(match["num"])
            width = len(match["pad"]) + len(match["num"]) if match["pad"] else width
            sep = match["sep"] or sep
            out.append(line)
            continue
        if num is None or width is None or (sep is None and line):
            out.append(line)  # nothing to number it from: read as it is (and checked)
            continue
        num += 1
        out.append(_prefix(num, width, sep if line else None) + line)
    return out
