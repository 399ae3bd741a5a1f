"""The walk of the fidelity check: the original in order, the compressed units one by one.

`Aligner` matches each compressed unit (a line, or a JSON item's identity) at the expected
position first, else at its earliest occurrence after the last match, and accounts for
every gap with the markers read since: a gap the markers cover exactly is marked, what
they do not cover is an unmarked drop, a marker that claims more than was removed where
it stands (or names a place it is not at) is fabricated. `check_lines` is the walk over
lines, with the decodable rewrites of `tokenlens.compress.toolout` (see
`tokenlens.fidelity` for the rules).
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

from tokenlens.compress.toolout.lines import (
    GROUPED_HIT,
    backref,
    grouped_line,
    is_marker_or_fold,
    path_heading,
    repeated,
    unfold,
)
from tokenlens.compress.toolout.markers import Marker, parse_any, parse_partial
from tokenlens.compress.toolout.numbered import HEADER, restore_numbers
from tokenlens.compress.toolout.prefix import expand_prefixes, parse_heading
from tokenlens.compress.toolout.render import render_lines

#: Problems kept per report (the counts are always complete).
MAX_PROBLEMS = 20


@dataclass
class Tally:
    fabricated: int = 0
    unmarked: int = 0
    marked: int = 0
    problems: list[str] = field(default_factory=list)

    def problem(self, text: str) -> None:
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(text)


def clip(text: str, width: int = 80) -> str:
    return repr(text if len(text) <= width else text[: width - 1] + "…")


class Aligner:
    """Walks the original in order while the compressed units are read, one at a time."""

    def __init__(
        self, keys: Sequence[Hashable], tally: Tally, unit: str, where: str, trailing: int = 0
    ) -> None:
        self.keys = keys
        self.trailing = (
            trailing  # blank lines rendering dropped at the end: a count may include them
        )
        self.n = len(keys)
        self.positions: dict[Hashable, list[int]] = defaultdict(list)
        for i, key in enumerate(keys):
            self.positions[key].append(i)
        self.tally = tally
        self.unit = unit
        self.where = where
        self.p = 0
        self.pending: list[tuple[str, Marker]] = []
        self.kept: list[int] = []
        self.blanks = [0]  # blank lines before each position: layout, never a drop
        for key in keys:
            self.blanks.append(self.blanks[-1] + (key == ""))

    @property
    def expect(self) -> int:
        """Where the next kept unit should be: after the last one and any pending counts."""
        return self.p + sum(marker.count for _, marker in self.pending)

    def find(self, key: Hashable) -> int | None:
        """The expected position if the unit is there, else its earliest one after `p`."""
        if self.expect < self.n and self.keys[self.expect] == key:
            return self.expect
        spots = self.positions.get(key)
        if not spots:
            return None
        k = bisect_left(spots, self.p)
        return spots[k] if k < len(spots) else None

    def find_run(self, run: Sequence[Hashable]) -> int | None:
        size = len(run)
        for q in self.positions.get(run[0], ()):
            if q >= self.p and list(self.keys[q : q + size]) == list(run):
                return q
        return None

    def take(self, q: int, size: int = 1) -> None:
        self.settle(q)
        self.kept.extend(range(q, q + size))
        self.p = q + size

    def settle(self, q: int) -> None:
        """Account for the gap before position `q` with the markers read since the last unit."""
        gap = q - self.p
        solid = gap - (self.blanks[q] - self.blanks[self.p])
        claimed = sum(marker.count for _, marker in self.pending)
        slack = self.trailing if q == self.n else 0
        if solid <= claimed <= gap + slack:
            self.tally.marked += claimed
        elif claimed < solid:
            gap = solid
            self.tally.unmarked += gap - claimed
            self.tally.marked += claimed
            self.tally.problem(
                f"{self.where}{self.unit} {self.p + 1}-{q} of the original: {gap - claimed} of "
                f"{gap} removed with no marker saying so"
            )
        else:
            self.tally.fabricated += len({text for text, _ in self.pending})
            self.tally.marked += gap
            self.tally.problem(
                f"{self.where}marker {clip(self.pending[0][0])} claims {claimed} {self.unit}, "
                f"but {gap} were removed there"
            )
        self.pending.clear()
        self.p = max(self.p, q)

    def marker(self, text: str, marker: Marker) -> None:
        if marker.summary:
            if marker.unit == self.unit and not self.n <= marker.count <= self.n + self.trailing:
                self.tally.fabricated += 1
                self.tally.problem(
                    f"{self.where}{clip(text)} says the original had {marker.count} "
                    f"{self.unit}; it had {self.n}"
                )
            return
        if marker.start is None or marker.end is None:
            self.pending.append((text, marker))
            return
        start, end = marker.start - 1, marker.end
        if start < self.p or end > self.n:
            self.tally.fabricated += 1
            self.tally.problem(
                f"{self.where}marker {clip(text)} is not where those {self.unit} were "
                f"(it follows {self.unit[:-1]} {self.p} of {self.n})"
            )
            return
        self.settle(start)
        self.tally.marked += end - start
        self.p = end

    def fabricated(self, text: str, index: int) -> None:
        self.tally.fabricated += 1
        elsewhere = self.positions.get(text)
        hint = f" (out of place: it is {self.unit[:-1]} {elsewhere[0] + 1})" if elsewhere else ""
        self.tally.problem(
            f"{self.where}compressed {self.unit[:-1]} {index + 1} is not in the original"
            f"{hint}: {clip(text)}"
        )

    def finish(self) -> None:
        self.settle(self.n)


def check_lines(original: str, compressed: str, tally: Tally, where: str) -> str:
    """The line walk; returns the text of the original lines the compressed output keeps."""
    lines = render_lines(original)
    trailing = original.count("\n") + 1 - len(lines)
    walk = Aligner(lines, tally, "lines", where, trailing)
    original_lines, shown = lines, decode_layout(render_lines(compressed), lines)
    heading: str | None = None
    i = 0
    while i < len(shown):
        line = shown[i]
        i += 1
        expect = walk.expect
        if expect < walk.n and original_lines[expect] == line:
            walk.take(expect)
            continue
        if heading is not None:
            full = _under(heading, line)
            q = walk.find(full) if full is not None else None
            if q is not None:
                walk.take(q)
                continue
            if full is None or heading.endswith("/"):
                heading = None
        run = _foreign_run(walk, line) or unfold(line)
        marker = parse_any(run[0] if run else line)
        if marker is not None:
            for _ in run or [line]:
                walk.marker(line, marker)
            continue
        q = walk.find_run(run) if run else None
        if run and q is not None:
            walk.take(q, len(run))
            continue
        if i < len(shown) and not GROUPED_HIT.match(line):
            full = _under(line, shown[i])
            if full is not None and walk.find(full) is not None:
                heading = line
                continue
        q = walk.find(line) if line else None
        if q is not None:
            walk.take(q)
            continue
        if not line:
            continue  # a blank line is layout: added or moved, it states nothing
        q = _partial(walk, line)
        if q is not None:
            walk.take(q)
            continue
        walk.fabricated(line, i - 1)
    walk.finish()
    return "\n".join(original_lines[k] for k in walk.kept)


def decode_layout(shown: list[str], original: Sequence[str]) -> list[str]:
    """Undo the rewrites that carry their own header (shared prefixes, left-out line
    numbers), in the reverse order of the rungs; never when the original itself holds a
    line shaped like that header (it then reads as that line)."""
    if not any(parse_heading(line) for line in original):
        shown = expand_prefixes(shown)
    if not original or original[0] != HEADER:
        shown = restore_numbers(shown, is_marker_or_fold)
    return shown


def _under(heading: str, line: str) -> str | None:
    """The original line `line` stands for under `heading` (grep file or directory)."""
    if heading.endswith("/"):
        return path_heading(heading, line)
    return grouped_line(heading, line)


def _foreign_run(walk: Aligner, line: str) -> list[str] | None:
    """The lines another compressor's back-reference or repeat count stands for."""
    more = repeated(line)
    if more is not None and walk.kept:
        previous = walk.keys[walk.kept[-1]]
        assert isinstance(previous, str)
        return [previous] * more
    ref = backref(line)
    if ref is not None and walk.expect - ref[1] >= 0:
        start = walk.expect - ref[1]
        return [str(key) for key in walk.keys[start : start + ref[0]]]
    return None


def _partial(walk: Aligner, line: str) -> int | None:
    """An original line shortened in place with a marker inside it, if `line` is one."""
    parts = parse_partial(line)
    if parts is None:
        return None
    head, gone, tail = parts
    for q in range(walk.p, walk.n):
        text = walk.keys[q]
        assert isinstance(text, str)
        size = len(head) + gone + len(tail)
        if len(text) == size and text.startswith(head) and text.endswith(tail):
            return q
    return None
