"""Line codecs with an exact decode: repeated lines folded with a count, grep hits grouped.

Both work on rendered lines (`tokenlens.compress.toolout.render`) and both decode back to
exactly the lines they encoded:

* **fold**: a run of ``n >= 3`` identical consecutive lines becomes one line
  ``[xN] <line>`` (``[x40] WARNING: retrying``). A line of the original that already
  starts with ``[x<digits>]`` is never folded, so the decode is unambiguous.
* **grep grouping**: consecutive hits of one file, ``path:12:text`` (and context lines
  ``path-13-text``), become a heading line ``path`` followed by ``12:text`` /
  ``13-text`` lines, the way ``rg --heading`` prints them. Only runs of two or more
  hits of a path that holds no ``:`` are grouped, and only where each hit line
  reads back to the same text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from tokenlens.compress.toolout.markers import parse_any

FOLD = re.compile(r"^\[x(?P<n>\d+)\](?: (?P<line>.*))?$")
#: Another compressor's fold (llmtrim): the count after the line, ``<line> [×N]``.
FOLD_AFTER = re.compile(r"^(?P<line>.*?) ?\[×(?P<n>\d+)\]$")
#: ``path:12:text`` (a hit) or ``path-12-text`` (a context line of grep -C).
GREP_HIT = re.compile(r"^(?P<path>[^:\s][^:]*?)(?P<sep>[:-])(?P<num>\d+)(?P=sep)(?P<text>.*)$")
#: A grouped hit under a heading: ``12:text`` or ``12-text``.
GROUPED_HIT = re.compile(r"^(?P<num>\d+)(?P<sep>[:-])(?P<text>.*)$")
MIN_FOLD = 3


def fold_line(line: str, count: int) -> str:
    """The folded form of `count` copies of `line`."""
    return f"[x{count}] {line}" if line else f"[x{count}]"


def unfold(line: str) -> list[str] | None:
    """The lines a folded line stands for, or None if it is not one."""
    match = FOLD.match(line) or FOLD_AFTER.match(line)
    if match is None or int(match["n"]) < 2:
        return None
    return [match["line"] or ""] * int(match["n"])


def fold(lines: Sequence[str], min_run: int = MIN_FOLD) -> list[str]:
    """Fold every run of `min_run` or more identical lines (see the module docstring)."""
    out: list[str] = []
    i = 0
    while i < len(lines):
        j = i
        while j < len(lines) and lines[j] == lines[i]:
            j += 1
        run = j - i
        if run >= min_run and not FOLD.match(lines[i]):
            out.append(fold_line(lines[i], run))
        else:
            out.extend(lines[i:j])
        i = j
    return out


def expand_fold(lines: Sequence[str]) -> list[str]:
    """Decode `fold`: every folded line back to its run."""
    out: list[str] = []
    for line in lines:
        out.extend(unfold(line) or [line])
    return out


def grouped_line(heading: str, hit: str) -> str | None:
    """The original line a grouped hit under `heading` stands for, or None."""
    match = GROUPED_HIT.match(hit)
    if match is None:
        return None
    sep = match["sep"]
    return f"{heading}{sep}{match['num']}{sep}{match['text']}"


def group_hits(lines: Sequence[str]) -> list[str]:
    """Group consecutive grep hits of one file under a heading line (exact decode)."""
    out: list[str] = []
    i = 0
    while i < len(lines):
        match = GREP_HIT.match(lines[i])
        path = match["path"] if match else None
        j = i
        while path is not None and j < len(lines):
            hit = GREP_HIT.match(lines[j])
            if hit is None or hit["path"] != path or (hit["sep"] == "-" and ":" in hit["text"]):
                break
            j += 1
        if path is None or j - i < 2 or GROUPED_HIT.match(path) or FOLD.match(path):
            out.append(lines[i])
            i += 1
            continue
        grouped = [lines[k][len(path) + 1 :] for k in range(i, j)]
        if any(grouped_line(path, hit) != lines[i + n] for n, hit in enumerate(grouped)):
            out.append(lines[i])
            i += 1
            continue
        out.append(path)
        out.extend(grouped)
        i = j
    return out


def ungroup_hits(lines: Sequence[str]) -> list[str]:
    """Decode `group_hits`: a heading followed by grouped hits back to full hit lines."""
    out: list[str] = []
    heading: str | None = None
    for n, line in enumerate(lines):
        full = grouped_line(heading, line) if heading is not None else None
        if full is not None:
            out.append(full)
            continue
        heading = None
        following = lines[n + 1] if n + 1 < len(lines) else ""
        if GROUPED_HIT.match(following) and not GROUPED_HIT.match(line):
            heading = line
            continue
        out.append(line)
    return out


# Other compressors' line rewrites that decode exactly (headroom-ai's lossless mode), read
# by the fidelity check so that they are checked rather than called fabricated.
_REPEATED = re.compile(r"^\.\.\. \(repeated (?P<n>\d+) times\)$")
_BACKREF = re.compile(r"^\.\.\. \(repeats (?P<k>\d+) lines from (?P<d>\d+) lines back\)$")


def repeated(line: str) -> int | None:
    """``... (repeated N times)`` after a line: N copies in all, so N - 1 more."""
    match = _REPEATED.match(line)
    return int(match["n"]) - 1 if match and int(match["n"]) >= 2 else None


def backref(line: str) -> tuple[int, int] | None:
    """``... (repeats K lines from D lines back)``: (K, D), in the original's lines."""
    match = _BACKREF.match(line)
    if match is None or not 0 < int(match["k"]) <= int(match["d"]):
        return None
    return int(match["k"]), int(match["d"])


def path_heading(heading: str, name: str) -> str | None:
    """A name listed under a directory heading (``./llvm/ADT/`` then ``APInt.h``)."""
    if not heading.endswith("/") or not name or name.startswith((" ", "\t")):
        return None
    return heading + name


def is_marker_or_fold(line: str) -> bool:
    """A line the rungs wrote (a marker or a folded run), not one of the original."""
    if "[" not in line and "more" not in line:  # every marker and fold holds one of these
        return False
    return parse_any(line) is not None or FOLD.match(line) is not None
