"""Shared-prefix grouping with an exact decode: runs of lines that start alike, said once.

Logs stamp every line with the same date and second, ``ls -l`` repeats
``-rw-r--r-- 1 root root`` and pytest repeats the test file's name. A run of three or
more consecutive lines sharing a prefix long enough to be worth it becomes one heading
line naming the count and the prefix (as a JSON string, so spaces and quotes are exact)
and the lines with that prefix cut off::

    [next 3 lines start with "2026-12-05 03:53:39 "]
    status installed dbus:amd64 1.14.10-1~deb12u1
    trigproc fontconfig:amd64 2.14.1-4 <none>
    status half-configured fontconfig:amd64 2.14.1-4

The heading says how many lines it covers, so the decode needs no guessing: the next N
lines, each with the prefix put back. A prefix never starts with a blank (code
indentation stays as it is) and ends after a blank or a separator (``/``, ``:``, ``=``,
...), so no name is cut in two. Markers and folded lines are never grouped. An output that
already holds a line shaped like a heading is left ungrouped, so a heading always reads
as one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence

HEADING = re.compile(r'^\[next (?P<n>\d+) lines start with (?P<prefix>".*")\]$')
#: Lines a heading covers at least, and the shortest prefix said once.
MIN_RUN = 3
MIN_PREFIX = 8
#: Characters a heading costs beyond its prefix (what grouping must save first).
_OVERHEAD = 48
#: Shorter prefixes tried for one run's start (bounds the work on huge outputs).
_STEPS = 12


def heading_line(count: int, prefix: str) -> str:
    return f"[next {count} lines start with {json.dumps(prefix, ensure_ascii=False)}]"


def parse_heading(line: str) -> tuple[int, str] | None:
    """(count, prefix) of a heading line, or None."""
    if not line.startswith("[next "):
        return None
    match = HEADING.match(line)
    if match is None:
        return None
    try:
        prefix = json.loads(match["prefix"])
    except ValueError:
        return None
    count = int(match["n"])
    if not isinstance(prefix, str) or count < 1:
        return None
    return count, prefix


#: Where a shared prefix may end: after a blank or a separator, never inside a name
#: (``test_curve.py::`` is cut there, not in ``test_length``).
_BOUNDARY = frozenset(" \t/:=,;|([{")


def _cut(prefix: str) -> str:
    """`prefix` up to and including its last boundary character (`_BOUNDARY`)."""
    for k in range(len(prefix) - 1, -1, -1):
        if prefix[k] in _BOUNDARY:
            return prefix[: k + 1]
    return ""


def _lcp(a: str, b: str) -> int:
    """Characters `a` and `b` share at their start (a binary search over slices)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _plan(lines: Sequence[str], eligible: Callable[[str], bool]) -> list[tuple[int, str] | None]:
    """For each line, the run a heading starts there (end, prefix), or None: the split of
    the lines into runs that saves the most characters (a right-to-left dynamic program
    over the places where a run's shared prefix gets shorter)."""
    n = len(lines)
    ok = [eligible(line) for line in lines]
    # shared[k]: characters lines k and k+1 share, leaving each at least one of its own
    shared = [
        min(_lcp(lines[k], lines[k + 1]), len(lines[k]) - 1, len(lines[k + 1]) - 1)
        if ok[k] and ok[k + 1]
        else 0
        for k in range(n - 1)
    ]
    shorter = [n - 1] * max(n - 1, 0)  # next k' > k with shared[k'] < shared[k]
    stack: list[int] = []
    for k, value in enumerate(shared):
        while stack and shared[stack[-1]] > value:
            shorter[stack.pop()] = k
        stack.append(k)
    best = [0] * (n + 1)
    plan: list[tuple[int, str] | None] = [None] * n
    for i in range(n - 2, -1, -1):
        best[i] = best[i + 1]
        k, steps = i, 0
        while k < n - 1 and shared[k] >= MIN_PREFIX and steps < _STEPS:
            end = shorter[k] + 1 if shorter[k] < n - 1 else n
            prefix = _cut(lines[i][: shared[k]])
            if end - i >= MIN_RUN and len(prefix) >= MIN_PREFIX:
                gain = (end - i - 1) * len(prefix) - _OVERHEAD + best[end]
                if gain > best[i]:
                    best[i], plan[i] = gain, (end, prefix)
            if end >= n:
                break
            k, steps = end - 1, steps + 1
    return plan


def group_prefixes(lines: Sequence[str], skip: Callable[[str], bool]) -> list[str]:
    """Group runs of lines sharing a prefix (see the module docstring); `skip` marks lines
    that must stay as they are (markers, folded runs)."""
    if any(parse_heading(line) for line in lines):
        return list(lines)
    plan = _plan(lines, lambda line: bool(line) and not line[0].isspace() and not skip(line))
    out: list[str] = []
    i = 0
    while i < len(lines):
        run = plan[i]
        if run is None:
            out.append(lines[i])
            i += 1
            continue
        end, prefix = run
        out.append(heading_line(end - i, prefix))
        out.extend(line[len(prefix) :] for line in lines[i:end])
        i = end
    return out


def expand_prefixes(lines: Sequence[str]) -> list[str]:
    """Decode `group_prefixes`: each heading and the lines it covers back to full lines."""
    out: list[str] = []
    i = 0
    while i < len(lines):
        found = parse_heading(lines[i])
        if found is None:
            out.append(lines[i])
            i += 1
            continue
        count, prefix = found
        out.extend(prefix + line for line in lines[i + 1 : i + 1 + count])
        i += 1 + count
    return out
