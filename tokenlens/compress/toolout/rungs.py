"""The rungs for tool output: lossless rewrites first, then whole-line elision with markers.

Every rung is a pure function of the output's text, the tool_use that produced it and
the arm, so the same block always compresses to the same bytes (the proxy relies on it
to compress behind a prompt-cache breakpoint). What each may do:

* ``lossless``: render what a terminal shows (ANSI codes, carriage-return overwrites and
  trailing blanks go), fold runs of three or more identical lines into ``[xN] line``,
  group consecutive grep hits of one file under a heading, minify JSON (a same-keyed
  array of objects becomes a table when that is shorter). Each decodes back exactly
  (`tokenlens.compress.toolout`).
* ``elide@R`` (keep about R of the lines): ``lossless``, after whole lines were removed
  where they were, each run of removed lines replaced in place by one marker naming the
  original line range and count (``[... 12 lines omitted: 40-51 ...]``). The lines kept
  are the first and last ones, lines that carry an error or a failure, lines that name
  what the tool_use asked for (its pattern, path or symbol) with two lines around them,
  a code file's definition lines, and the first and last of a run of near-identical
  lines (lines equal once their digits are masked). In a JSON output, arrays of eight or
  more items keep their first and last items and the ones naming what was asked; the
  removed items give way to one marker string per run, naming their indices. Kept lines
  and items are never altered, split or fused, so no number or path changes.

Outputs under `MIN_CHARS` are left alone: there is nothing worth a marker in them.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from tokenlens.compress.toolout.jsoncodec import to_table
from tokenlens.compress.toolout.kinds import command_of
from tokenlens.compress.toolout.lines import GREP_HIT, fold, group_hits, is_marker_or_fold
from tokenlens.compress.toolout.markers import format_marker, format_value_marker, parse_any
from tokenlens.compress.toolout.numbered import drop_numbers, restore_numbers
from tokenlens.compress.toolout.prefix import expand_prefixes, group_prefixes
from tokenlens.compress.toolout.render import render_lines
from tokenlens.compress.toolout.structure import skeleton

TOOL_METHODS: tuple[str, ...] = ("lossless", "elide")
#: Tool outputs shorter than this (characters) pass through unchanged.
MIN_CHARS = 400
#: Lines always kept at each end of a line-elided output.
EDGE_LINES = 3
#: Context lines kept on each side of a line that names what was asked.
AROUND = 2
#: Arrays shorter than this are never shortened.
MIN_ARRAY = 8
#: A JSON string longer than LONG_STRING / (1 - keep rate) characters is removed.
LONG_STRING = 100
_IMPORTANT = re.compile(
    r"(?i)(error|exception|traceback|fail(ed|ure)?\b|panic|fatal|warn(ing)?\b|critical|"
    r"denied|not found|no such|assert)"
)
_DIGITS = re.compile(r"\d+")
_TERM = re.compile(r"[A-Za-z_][\w.]{2,}")
_STOP_TEXT = """grep rg ag ack find sort head tail cat sed git log show ls la type name path
    not the and for with from into usr lib python3 python json format cwd command true false
    print null none self"""
_STOP = frozenset(_STOP_TEXT.split())
_FOLDERS = re.compile(r"[^\s'\"=]*/(?=[^/\s'\"]+)")


@dataclass(frozen=True)
class ToolArm:
    """A tool-output rung at one setting: ``lossless``, or ``elide`` with a keep rate."""

    method: str
    rate: float | None = None

    def __post_init__(self) -> None:
        if self.method not in TOOL_METHODS:
            raise ValueError(
                f"unknown tool-output method {self.method!r} (known: {', '.join(TOOL_METHODS)})"
            )
        if self.method == "elide":
            if self.rate is None or not 0.0 < self.rate < 1.0:
                raise ValueError(f"elide needs a keep rate in (0, 1), got {self.rate}")
        elif self.rate is not None:
            raise ValueError(f"{self.method} takes no rate, got {self.rate}")

    @property
    def key(self) -> str:
        return self.method if self.rate is None else f"{self.method}@{self.rate:g}"

    @property
    def lossy(self) -> bool:
        return self.method != "lossless"

    @classmethod
    def parse(cls, text: str) -> ToolArm:
        """``lossless``, ``elide@0.5`` (also ``elide:0.5``)."""
        raw = text.strip()
        for sep in ("@", ":"):
            if sep in raw:
                method, _, rate = raw.partition(sep)
                try:
                    return cls(method.strip(), float(rate))
                except ValueError as exc:
                    raise ValueError(f"cannot parse tool-output arm {text!r}: {exc}") from exc
        return cls(raw)


def asked_terms(tool_use: dict[str, Any] | None) -> tuple[str, ...]:
    """Words naming what a tool_use asked for: its pattern, path or symbol (no flags). Of a
    path only its last part counts: the folders above it say where, not what."""
    if not tool_use:
        return ()
    data = tool_use.get("input")
    values: list[str] = []
    if isinstance(data, dict):
        values = [v for v in data.values() if isinstance(v, str)]
    command = command_of(tool_use)
    text = _FOLDERS.sub("", command or " ".join(values))
    found = []
    for term in _TERM.findall(text):
        term = term.strip(".")
        if len(term) >= 3 and term.lower() not in _STOP and term not in found:
            found.append(term)
    return tuple(found[:12])


def compress_tool_text(text: str, arm: ToolArm, tool_use: dict[str, Any] | None = None) -> str:
    """One tool output through one tool arm (see the module docstring); pure."""
    if len(text) < MIN_CHARS:
        return text
    value = _json_value(text)
    out = _lines_out(text, arm, tool_use)
    if value is not None:
        if arm.lossy:
            rate = arm.rate or 1.0
            value = _shorten_json(value, rate, _telling(asked_terms(tool_use), value, rate))
        as_json = _json_text(value)
        # JSON of objects has no array to shorten: its lines may go instead, with markers
        out = as_json if not arm.lossy or len(as_json) <= len(out) else out
    return out if len(out) < len(text) else text


def _lines_out(text: str, arm: ToolArm, tool_use: dict[str, Any] | None) -> str:
    lines = render_lines(text)
    rate = arm.rate or 1.0
    pieces = _elide(lines, rate, asked_terms(tool_use)) if arm.lossy else [fold(lines)]
    out_lines: list[str] = []
    for piece in pieces:
        out_lines.extend(piece if isinstance(piece, list) else [piece])
    if any(map(GREP_HIT.match, lines)):  # grep output: hits under their file instead
        hits = group_hits(out_lines)
        if hits != out_lines:
            return "\n".join(hits)
    numbered = drop_numbers(out_lines, is_marker_or_fold)
    if numbered is not None and restore_numbers(numbered, is_marker_or_fold) == out_lines:
        return "\n".join(numbered)
    grouped = group_paths(out_lines, frozenset(lines))
    prefixed = group_prefixes(grouped, is_marker_or_fold)
    return "\n".join(prefixed if expand_prefixes(prefixed) == grouped else grouped)


_PATH = re.compile(r"^(?P<dir>[^\s:]*/)(?P<name>[^/]+)$")
#: Consecutive paths of one folder grouped under it from this many on.
MIN_GROUP = 3


def group_paths(lines: list[str], original: frozenset[str] = frozenset()) -> list[str]:
    """Consecutive paths in one folder under a heading line naming the folder.

    ``./cppgc/heap.h`` and ``./cppgc/macros.h`` become ``./cppgc/`` then ``heap.h`` and
    ``macros.h`` (the fidelity check reads a name under a heading ending in ``/`` as the
    heading plus the name: an exact decode). Never when the heading is itself a line of
    the original output (`original`), which would read as that line.
    """
    out: list[str] = []
    i = 0
    while i < len(lines):
        match = _PATH.match(lines[i])
        folder = match["dir"] if match else None
        j = i
        while folder is not None and j < len(lines):
            other = _PATH.match(lines[j])
            if other is None or other["dir"] != folder or other["name"].startswith((" ", "\t")):
                break
            j += 1
        if folder is None or j - i < MIN_GROUP or folder in original or folder == "/":
            out.append(lines[i])
            i += 1
            continue
        out.append(folder)
        out.extend(line[len(folder) :] for line in lines[i:j])
        i = j
    return out


def _json_value(text: str) -> Any:
    stripped = text.strip()
    if stripped[:1] not in "[{":
        return None
    try:
        value = json.loads(stripped)
    except ValueError:
        return None
    return value if isinstance(value, dict | list) else None


def _json_text(value: Any) -> str:
    minified = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    table = to_table(value) if isinstance(value, list) else None
    return table if table is not None and len(table) < len(minified) else minified


def _mentions(text: str, terms: tuple[str, ...]) -> bool:
    return any(term in text for term in terms)


def _strings(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return [value] if isinstance(value, str) else []


def _telling(terms: tuple[str, ...], value: Any, rate: float) -> tuple[str, ...]:
    """The asked terms that tell a JSON document's long strings apart: a word most of
    them carry (``data`` of a data folder's path) would keep them all."""
    long = [s for s in _strings(value) if len(s) > _long_string(rate)]
    return tuple(t for t in terms if sum(t in s for s in long) * 2 <= len(long))


def _long_string(rate: float) -> float:
    """Strings longer than this go at keep rate `rate` (2,000 characters at 0.9, 400 at 0.5)."""
    return LONG_STRING / (1.0 - rate) if rate < 1.0 else math.inf


def _shorten_json(value: Any, rate: float, terms: tuple[str, ...]) -> Any:
    """Arrays of `MIN_ARRAY`+ items keep ends and asked-for items; a marker per removed run.
    A string longer than `_long_string(rate)` that names nothing asked gives way to a
    marker naming its length."""
    if isinstance(value, dict):
        return {k: _shorten_json(v, rate, terms) for k, v in value.items()}
    if isinstance(value, str):
        if len(value) > _long_string(rate) and not _mentions(value, terms):
            return format_value_marker(value)
        return value
    if not isinstance(value, list):
        return value
    items = [_shorten_json(v, rate, terms) for v in value]
    n = len(items)
    if n < MIN_ARRAY or any(isinstance(v, str) and parse_any(v) for v in value):
        return items
    budget = max(2, math.ceil(rate * n))
    keep = set(range(budget // 2)) | set(range(n - (budget - budget // 2), n))
    if terms:
        keep |= {i for i, v in enumerate(value) if _mentions(json.dumps(v), terms)}
    out: list[Any] = []
    i = 0
    while i < n:
        if i in keep:
            out.append(items[i])
            i += 1
            continue
        j = i
        while j < n and j not in keep:
            j += 1
        if j - i == 1:
            out.append(items[i])
        else:
            out.append(format_marker(i + 1, j, "items"))
        i = j
    return out


def _near_key(line: str) -> str:
    return _DIGITS.sub("#", line)


def _elide(lines: list[str], rate: float, terms: tuple[str, ...]) -> list[list[str] | str]:
    """Kept runs of lines (folded) and markers, in the original's order."""
    n = len(lines)
    budget = max(2 * EDGE_LINES, math.ceil(rate * n))
    if n <= budget:
        return [fold(lines)]
    score = [0.0] * n
    # a term most lines carry (the pattern of a grep) tells no line apart
    terms = tuple(t for t in terms if sum(t in line for line in lines) * 2 <= n)
    for i in skeleton(lines):
        score[i] += 3
    for i, line in enumerate(lines):
        if _IMPORTANT.search(line):
            score[i] += 5
        if terms and _mentions(line, terms):
            for k in range(max(0, i - AROUND), min(n, i + AROUND + 1)):
                score[k] += 2 if k == i else 1
    i = 0
    while i < n:  # the middle of a run of near-identical lines goes first
        j = i + 1
        key = _near_key(lines[i])
        while j < n and _near_key(lines[j]) == key:
            j += 1
        if j - i >= 4:
            for k in range(i + 1, j - 1):
                score[k] -= 1
        i = j
    keep = set(range(EDGE_LINES)) | set(range(n - EDGE_LINES, n))
    # among lines of equal score, those in long runs of plain lines go first: a removed
    # run under three lines would be kept anyway (its marker would save nothing)
    plain_run = [0] * n
    i = 0
    while i < n:
        j = i
        while j < n and score[j] <= 0:
            j += 1
        for k in range(i, j):
            plain_run[k] = j - i
        i = max(j, i + 1)
    order = sorted(range(n), key=lambda k: (-score[k], plain_run[k], k))
    for k in order:
        if len(keep) >= budget:
            break
        keep.add(k)
    pieces: list[list[str] | str] = []
    i = 0
    while i < n:
        j = i
        if i in keep:
            while j < n and j in keep:
                j += 1
            pieces.append(fold(lines[i:j]))
        else:
            while j < n and j not in keep:
                j += 1
            if j - i < 3:  # a marker would cost what it saves: keep the lines
                pieces.append(lines[i:j])
            else:
                indent = lines[i][: len(lines[i]) - len(lines[i].lstrip(" \t"))]
                pieces.append(format_marker(i + 1, j, "lines", indent))
        i = j
    return pieces
