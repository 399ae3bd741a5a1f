"""The count of right cleartext answers an offline run prints: control rows graded by
facts only, each task once."""

from __future__ import annotations

from typing import Any

from tokenlens.competence import cleartext_lines, cleartext_right


def row(task: str, arm: str, clear: float, note: str = "facts 1/1 vs 1/1", **extra: Any) -> dict:
    return {"task_class": "lookup", "task_id": task, "arm": arm, "grade_clear": clear,
            "note": note, "error": None, **extra}  # fmt: skip


def test_counts_control_rows_graded_by_facts_once_per_task() -> None:
    rows = [
        row("a", "control", 100.0),
        row("a", "control", 0.0, replicate=1),  # a second replicate: the first counts
        row("a", "ext:tools-elide@0.7", 0.0),  # not the control arm
        row("b", "control", 50.0, note="facts 1/2 vs 1/2"),
        row("c", "control", 100.0),
        row("d", "control", 100.0, note="metric 100 vs 100"),  # not graded by facts
        row("e", "control", 100.0, error="cut off"),
    ]
    assert cleartext_right(rows) == {"lookup": (2, 3)}
    assert cleartext_lines(rows) == ["lookup: cleartext answers stating every fact: 2 of 3"]


def test_no_fact_graded_rows_no_line() -> None:
    assert cleartext_lines([row("a", "control", 80.0, note="metric 80 vs 80")]) == []
