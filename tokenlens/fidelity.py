"""The fidelity check: does a compressed tool output still tell the truth? No model needed.

Every line of a compressed tool output must be one of:

* a line of the original, in the original's order;
* part of a documented lossless rewrite that decodes back to the original exactly
  (`tokenlens.compress.toolout`: rendering, folded repeats, grouped grep hits, minified
  JSON, a JSON array as a table; headroom-ai's ``[N]{schema}`` CSV is decoded too);
* an elision marker standing where the removed lines were, whose count (and range,
  when it gives one) is exactly what was removed there.

Anything else is a **fabricated line** (an invented, changed, fused or out-of-place
line, or a marker that claims what was not removed there); original lines missing
without a marker covering them are **unmarked drops**; and a task's facts that the
original shows but the compressed output no longer does are **facts lost**. An output
that is JSON is compared as JSON, in items and members instead of lines.

Matching is greedy in the original's order (earliest occurrence after the last matched
line, the expected position first), so a correct rewrite always passes: its kept lines
are a subsequence of the original and each gap is covered by its marker. Duplicated
lines make some errors ambiguous (which of two identical lines went); the counts are
then those of the earliest reading, never zero when something went unmarked.
"""

from __future__ import annotations

import json
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tokenlens.compress.toolout.jsoncodec import (
    CSV_HEAD,
    OPAQUE,
    from_csv_schema,
    from_table,
    sentinel_count,
)
from tokenlens.compress.toolout.lines import (
    GROUPED_HIT,
    backref,
    grouped_line,
    path_heading,
    repeated,
    unfold,
)
from tokenlens.compress.toolout.markers import Marker, parse_any, parse_partial
from tokenlens.compress.toolout.render import render_lines

if TYPE_CHECKING:
    from tokenlens.facts import Fact

#: Problems kept per report (the counts are always complete).
MAX_PROBLEMS = 20


@dataclass(frozen=True)
class FidelityReport:
    """What one check found. Counts are in the source's unit: lines, or JSON items/members."""

    fabricated_lines: int = 0
    unmarked_drops: int = 0
    facts_lost: int = 0
    marked_drops: int = 0
    outputs: int = 0
    problems: tuple[str, ...] = ()

    @property
    def faithful(self) -> bool:
        """No fabricated line and no unmarked drop (lost facts are graded, not refused)."""
        return self.fabricated_lines == 0 and self.unmarked_drops == 0

    def __add__(self, other: FidelityReport) -> FidelityReport:
        return FidelityReport(
            fabricated_lines=self.fabricated_lines + other.fabricated_lines,
            unmarked_drops=self.unmarked_drops + other.unmarked_drops,
            facts_lost=self.facts_lost + other.facts_lost,
            marked_drops=self.marked_drops + other.marked_drops,
            outputs=self.outputs + other.outputs,
            problems=(self.problems + other.problems)[:MAX_PROBLEMS],
        )


@dataclass
class _Tally:
    fabricated: int = 0
    unmarked: int = 0
    marked: int = 0
    problems: list[str] = field(default_factory=list)

    def problem(self, text: str) -> None:
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(text)


def _clip(text: str, width: int = 80) -> str:
    return repr(text if len(text) <= width else text[: width - 1] + "…")


class _Aligner:
    """Walks the original in order while the compressed units are read, one at a time."""

    def __init__(
        self, keys: Sequence[Hashable], tally: _Tally, unit: str, where: str, trailing: int = 0
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
                f"{self.where}marker {_clip(self.pending[0][0])} claims {claimed} {self.unit}, "
                f"but {gap} were removed there"
            )
        self.pending.clear()
        self.p = max(self.p, q)

    def marker(self, text: str, marker: Marker) -> None:
        if marker.summary:
            if marker.unit == self.unit and not self.n <= marker.count <= self.n + self.trailing:
                self.tally.fabricated += 1
                self.tally.problem(
                    f"{self.where}{_clip(text)} says the original had {marker.count} "
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
                f"{self.where}marker {_clip(text)} is not where those {self.unit} were "
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
            f"{hint}: {_clip(text)}"
        )

    def finish(self) -> None:
        self.settle(self.n)


def _check_lines(original: str, compressed: str, tally: _Tally, where: str) -> str:
    """The line walk; returns the text of the original lines the compressed output keeps."""
    lines = render_lines(original)
    trailing = original.count("\n") + 1 - len(lines)
    walk = _Aligner(lines, tally, "lines", where, trailing)
    original_lines, shown = lines, render_lines(compressed)
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


def _under(heading: str, line: str) -> str | None:
    """The original line `line` stands for under `heading` (grep file or directory)."""
    if heading.endswith("/"):
        return path_heading(heading, line)
    return grouped_line(heading, line)


def _foreign_run(walk: _Aligner, line: str) -> list[str] | None:
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


def _partial(walk: _Aligner, line: str) -> int | None:
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


def _key(value: Any) -> str:
    """A strict identity for a JSON value (``1``, ``1.0`` and ``true`` stay apart)."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _decode_json(text: str) -> tuple[Any, list[tuple[int, Marker]], int, str] | None:
    """A compressed JSON output: (value, marker rows of a table, rows said dropped, text
    after it), or None. Text after the document (a tool's notice lines) is kept apart."""
    table = from_table(text.strip())
    if table is not None:
        return table[0], table[1], 0, ""
    value, rest = _json_prefix(text)
    if value is None or CSV_HEAD.match(text.lstrip().partition("\n")[0]):
        value, rest = text.strip(), ""
    if isinstance(value, str):
        block, _, rest = value.partition("\n\n") if not rest else (value, "", rest)
        csv = from_csv_schema(block)
        if csv is None:
            return None
        return csv[0], [], csv[1], rest
    return value, [], 0, rest


def _json_prefix(text: str) -> tuple[Any, str]:
    """The JSON document a text starts with and the text after it, or (None, text).

    The document must end its line (``[1] Building`` is a log line, not JSON and text)."""
    stripped = text.lstrip()
    try:
        value, end = json.JSONDecoder().raw_decode(stripped)
    except ValueError:
        return None, text
    rest = stripped[end:]
    if rest.lstrip(" \t")[:1] not in ("", "\n", "\r"):
        return None, text
    return value, rest


def _check_json(v: Any, w: Any, path: str, tally: _Tally) -> None:
    """Compare JSON values: changed scalars and foreign members are fabricated."""
    if _key(v) == _key(w):
        return
    if isinstance(v, list) and isinstance(w, str):
        decoded = _decode_json(w)
        if decoded is not None and isinstance(decoded[0], list) and not decoded[3].strip():
            _check_array(v, decoded[0], decoded[1], decoded[2], path, tally)
            return
    if isinstance(v, list) and isinstance(w, list):
        _check_array(v, w, [], 0, path, tally)
    elif isinstance(v, dict) and isinstance(w, dict):
        for key in v:
            if key not in w:
                tally.unmarked += 1
                tally.problem(f"{path}.{key}: member removed with no marker")
            else:
                _check_json(v[key], w[key], f"{path}.{key}", tally)
        for key in w:
            if key not in v:
                tally.fabricated += 1
                tally.problem(f"{path}.{key}: member not in the original")
    elif isinstance(w, str) and OPAQUE.match(w):
        tally.marked += 1  # a value replaced in place by a handle that names its kind and size
    else:
        tally.fabricated += 1
        tally.problem(f"{path}: {_clip(_key(v), 40)} became {_clip(_key(w), 40)}")


def _check_array(
    v: list[Any],
    w: list[Any],
    table_markers: list[tuple[int, Marker]],
    dropped: int,
    path: str,
    tally: _Tally,
) -> None:
    walk = _Aligner([_key(item) for item in v], tally, "items", f"{path}: ")
    at = defaultdict(list)
    for row, marker in table_markers:
        at[row].append(marker)
    for i, item in enumerate(w):
        for marker in at.pop(i, []):
            walk.marker("table marker", marker)
        count = sentinel_count(item)
        if count is not None:
            walk.marker(_clip(str(item)), Marker("items", count, foreign=True))
            continue
        found = parse_any(item) if isinstance(item, str) else None
        if found is not None:
            walk.marker(item, found)
            continue
        q = walk.find(_key(item))
        if q is not None:
            walk.take(q)
        elif walk.expect < walk.n and isinstance(item, dict | list):
            q = walk.expect
            walk.take(q)
            _check_json(v[q], item, f"{path}[{q}]", tally)
        else:
            walk.fabricated(_key(item), i)
    for markers in at.values():
        for marker in markers:
            walk.marker("table marker", marker)
    if dropped:
        walk.marker(f"__dropped:{dropped}", Marker("items", dropped, foreign=True))
    walk.finish()


def compare(original: str, compressed: str, where: str = "") -> tuple[_Tally, str]:
    """Check one output; returns the tally and the text of what it kept (for facts)."""
    tally = _Tally()
    if original == compressed:
        return tally, original
    value, after = _json_prefix(original) if original.lstrip()[:1] in ("{", "[") else (None, "")
    if isinstance(value, dict | list):
        decoded = _decode_json(compressed)
        if decoded is not None:
            new, markers, dropped, rest = decoded
            if isinstance(value, list) and isinstance(new, list):
                _check_array(value, new, markers, dropped, f"{where}$", tally)
            else:
                _check_json(value, new, f"{where}$", tally)
            kept = _check_lines(after, rest, tally, f"{where}after $: ")
            return tally, json.dumps(new, ensure_ascii=False) + "\n" + kept
    kept = _check_lines(original, compressed, tally, where)
    return tally, kept


def _facts_lost(facts: Sequence[Fact], original: str, compressed: Sequence[str]) -> int:
    if not facts:
        return 0
    from tokenlens.facts import fact_present

    return sum(
        1
        for fact in facts
        if fact_present(fact, original) and not any(fact_present(fact, t) for t in compressed)
    )


def check_text(original: str, compressed: str, facts: Sequence[Fact] = ()) -> FidelityReport:
    """Check one compressed tool output against its original (see the module docstring)."""
    tally, kept = compare(original, compressed)
    return FidelityReport(
        fabricated_lines=tally.fabricated,
        unmarked_drops=tally.unmarked,
        facts_lost=_facts_lost(facts, original, (compressed, kept)),
        marked_drops=tally.marked,
        outputs=1,
        problems=tuple(tally.problems),
    )


@dataclass(frozen=True)
class ToolOutput:
    """One tool_result block: its text (string content, or text blocks joined by newlines),
    its other blocks (images, documents) as canonical JSON, and its error flag."""

    text: str
    others: tuple[str, ...]
    is_error: bool


def tool_outputs(body: dict[str, Any]) -> dict[str, ToolOutput]:
    """Every tool_result of a Messages body, by tool_use_id, in order."""
    found: dict[str, ToolOutput] = {}
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            continue
        for block in content:
            if not isinstance(block, dict) or block.get("type") != "tool_result":
                continue
            nested = block.get("content", "")
            texts: list[str] = []
            others: list[str] = []
            if isinstance(nested, str):
                texts.append(nested)
            elif isinstance(nested, list):
                for item in nested:
                    if isinstance(item, dict) and item.get("type") == "text":
                        texts.append(str(item.get("text", "")))
                    else:
                        others.append(_key(item))
            key = str(block.get("tool_use_id", f"#{len(found)}"))
            found[key] = ToolOutput("\n".join(texts), tuple(others), bool(block.get("is_error")))
    return found


def check_body(
    original: dict[str, Any], compressed: dict[str, Any], facts: Sequence[Fact] = ()
) -> FidelityReport:
    """Check every tool_result of `compressed` against `original`, paired by tool_use_id.

    A fact with a `source` is looked for in that tool output; one without, in all of them.
    """
    before = tool_outputs(original)
    after = tool_outputs(compressed)
    report = FidelityReport()
    kept_texts: dict[str, list[str]] = {}
    for key, old in before.items():
        new = after.get(key)
        where = f"tool_result {key}: "
        tally = _Tally()
        if new is None:
            tally.unmarked += len(render_lines(old.text)) + len(old.others)
            tally.problem(f"{where}removed from the request")
            kept_texts[key] = []
        else:
            tally, kept = compare(old.text, new.text, where)
            kept_texts[key] = [new.text, kept]
            gone = [o for o in old.others if o not in new.others]
            added = [o for o in new.others if o not in old.others]
            tally.unmarked += len(gone)
            tally.fabricated += len(added)
            if gone or added:
                tally.problem(f"{where}{len(gone)} non-text blocks removed, {len(added)} changed")
            if new.is_error != old.is_error:
                tally.fabricated += 1
                tally.problem(f"{where}is_error changed from {old.is_error} to {new.is_error}")
        report += FidelityReport(
            fabricated_lines=tally.fabricated,
            unmarked_drops=tally.unmarked,
            marked_drops=tally.marked,
            outputs=1,
            problems=tuple(tally.problems),
        )
    for key in after.keys() - before.keys():
        report += FidelityReport(
            fabricated_lines=max(1, len(render_lines(after[key].text))),
            outputs=1,
            problems=(f"tool_result {key}: not in the original request",),
        )
    lost = 0
    for fact in facts:
        keys = [fact.source] if fact.source in before else list(before)
        lost += _facts_lost(
            [fact],
            "\n".join(before[k].text for k in keys),
            [t for k in keys for t in kept_texts.get(k, [])],
        )
    return report + FidelityReport(facts_lost=lost)
