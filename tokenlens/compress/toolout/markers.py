"""The elision marker: one line standing where removed lines were, saying what went.

A compressed tool output that still *looks* complete is read as complete, so anything
removed leaves a marker **at the place it was removed from**, naming what it removed in
the source's own unit:

* lines of the output, numbered from 1: ``[... 12 lines omitted: 40-51 ...]`` and
  ``[... 1 line omitted: 7 ...]``;
* items of a JSON array (or rows of a table made from one), numbered from 1:
  ``[... 5 items omitted: 4-8 ...]``.

* one long string value of a JSON document, in characters:
  ``[... string of 2345 chars omitted ...]`` stands in the string's place.

A marker may be indented (it keeps the indentation of the lines it replaced). The count
must equal the range's length; `parse_marker` refuses anything else, so a marker that
parses is internally consistent and the fidelity check only has to verify its place.

Other compressors' markers are recognised too (`parse_foreign`), so their outputs are
checked rather than called fabricated: ``[333 lines omitted: ...]``, ``// [12 lines
omitted]`` (a count but no place), ``… 7 more items <<ccr:…>>`` and a closing summary
``[400 lines compressed to 67. Retrieve more: hash=…]`` (which places nothing; its
total is checked against the original).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Unit = Literal["lines", "items"]

_OURS = re.compile(
    r"^[ \t]*\[\.\.\. (?P<count>\d+) (?P<unit>lines?|items?) omitted: "
    r"(?P<start>\d+)(?:-(?P<end>\d+))? \.\.\.\]$"
)
_FOREIGN_COUNT = re.compile(
    r"^[ \t]*(?:\S{1,3}[ \t]+)?\[(?:…|\.\.\.)? ?(?P<count>\d[\d,]*) (?:comment/blank )?"
    r"(?P<unit>lines?|items?|rows?|entries|records?) "
    r"(?:omitted|elided|truncated|removed|hidden|skipped)\b[^\]]*\]$"
)
_FOREIGN_MORE = re.compile(
    r"^[ \t]*(?:\.\.\.|…) ?\(?(?P<count>\d[\d,]*) more (?P<unit>lines?|items?|rows?|entries)\b.*$"
)
_FOREIGN_SUMMARY = (
    re.compile(r"^\[(?P<total>\d[\d,]*) (?P<unit>lines?|items?|rows?) compressed to \d[^\]]*\]$"),
    re.compile(
        r"^\[[\w-]+: showing \d[\d,]* of (?P<total>\d[\d,]*) (?P<unit>lines?|items?)\b.*\]$"
    ),
    re.compile(r"^\[[\w-]+: (?P<total>\d[\d,]*) (?P<unit>lines?|items?)\b[^\]]*\]$"),
)


@dataclass(frozen=True)
class Marker:
    """A parsed marker. `start`/`end` are 1-based and inclusive; None when it names no place.

    `summary` markers (a total, no place) claim no lines: `count` is then the total they
    state about the original.
    """

    unit: Unit
    count: int
    start: int | None = None
    end: int | None = None
    foreign: bool = False
    summary: bool = False


def format_marker(start: int, end: int, unit: Unit = "lines", indent: str = "") -> str:
    """The marker for units `start`..`end` (1-based, inclusive) of the original."""
    if not 1 <= start <= end:
        raise ValueError(f"marker range must be 1 <= start <= end, got {start}-{end}")
    count = end - start + 1
    noun = unit if count > 1 else unit[:-1]
    where = f"{start}-{end}" if count > 1 else f"{start}"
    return f"{indent}[... {count} {noun} omitted: {where} ...]"


def _unit(word: str) -> Unit:
    return "items" if word.startswith(("item", "row", "entr", "record")) else "lines"


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def parse_marker(line: str) -> Marker | None:
    """Our own marker, or None. A count that disagrees with the range is not a marker."""
    if "omitted: " not in line:
        return None
    match = _OURS.match(line)
    if match is None:
        return None
    start = int(match["start"])
    end = int(match["end"]) if match["end"] else start
    count = int(match["count"])
    if start < 1 or end < start or count != end - start + 1:
        return None
    if (count == 1) != (not match["unit"].endswith("s")):
        return None
    return Marker(_unit(match["unit"]), count, start, end)


def parse_foreign(line: str) -> Marker | None:
    """Another compressor's marker (a count without a place, or a closing summary), or None."""
    if not line.endswith("]") and "more " not in line:
        return None
    for pattern in (_FOREIGN_COUNT, _FOREIGN_MORE):
        match = pattern.match(line)
        if match:
            return Marker(_unit(match["unit"]), _int(match["count"]), foreign=True)
    for pattern in _FOREIGN_SUMMARY:
        match = pattern.match(line)
        if match:
            return Marker(_unit(match["unit"]), _int(match["total"]), foreign=True, summary=True)
    return None


def parse_any(line: str) -> Marker | None:
    """Our marker first, then a foreign one."""
    return parse_marker(line) or parse_foreign(line)


_PARTIAL = re.compile(
    r"^(?P<head>.*) \.\.\.\[(?P<n>\d+) chars of dense machine-generated content elided\]\.\.\. "
    r"(?P<tail>.*)$"
)


def parse_partial(line: str) -> tuple[str, int, str] | None:
    """A line shortened in place (headroom-ai's dense-line elision): (head, chars gone, tail)."""
    if "chars of dense" not in line:
        return None
    match = _PARTIAL.match(line)
    return (match["head"], int(match["n"]), match["tail"]) if match else None


_VALUE = re.compile(r"^\[\.\.\. string of (?P<n>\d+) chars omitted \.\.\.\]$")


def format_value_marker(value: str) -> str:
    """The marker standing in place of one long JSON string value."""
    return f"[... string of {len(value)} chars omitted ...]"


def parse_value_marker(text: str) -> int | None:
    """The length a string-value marker says its string had, or None."""
    if not text.startswith("[... string of "):
        return None
    match = _VALUE.match(text)
    return int(match["n"]) if match else None
