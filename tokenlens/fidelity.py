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
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tokenlens.compress.toolout.render import render_lines
from tokenlens.fidelity_json import check_array, check_json, decode_json, json_key, json_prefix
from tokenlens.fidelity_walk import MAX_PROBLEMS, Tally, check_lines

if TYPE_CHECKING:
    from tokenlens.facts import Fact


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


def compare(original: str, compressed: str, where: str = "") -> tuple[Tally, str]:
    """Check one output; returns the tally and the text of what it kept (for facts)."""
    tally = Tally()
    if original == compressed:
        return tally, original
    value, after = json_prefix(original) if original.lstrip()[:1] in ("{", "[") else (None, "")
    if isinstance(value, dict | list):
        decoded = decode_json(compressed)
        if decoded is not None:
            new, markers, dropped, rest = decoded
            if isinstance(value, list) and isinstance(new, list):
                check_array(value, new, markers, dropped, f"{where}$", tally)
            else:
                check_json(value, new, f"{where}$", tally)
            kept = check_lines(after, rest, tally, f"{where}after $: ")
            return tally, json.dumps(new, ensure_ascii=False) + "\n" + kept
    kept = check_lines(original, compressed, tally, where)
    return tally, kept


#: What states no number of the output's own: a numbered read's line number, a marker.
_NOT_STATED = re.compile(r"(?m)^[ \t]*\d+(?=[\t→]|$)|\[\.\.\. [^\]\n]* omitted[^\]\n]*\]")


def _stated(fact: Fact, text: str, strict: bool) -> bool:
    from tokenlens.facts import fact_present

    return fact_present(fact, _NOT_STATED.sub("", text) if strict else text)


def _facts_lost(facts: Sequence[Fact], original: str, compressed: Sequence[str]) -> int:
    """Facts the original states that none of `compressed` does. A number the original
    states in its text (not only as a line number) must be found in text too: a line
    number or a marker's range that happens to equal it does not keep it."""
    lost = 0
    for fact in facts:
        strict = fact.kind == "number" and _stated(fact, original, True)
        if _stated(fact, original, strict) and not any(
            _stated(fact, t, strict) for t in compressed
        ):
            lost += 1
    return lost


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
                        others.append(json_key(item))
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
        tally = Tally()
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
