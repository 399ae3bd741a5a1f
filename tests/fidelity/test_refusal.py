"""The decision refuses an arm whose compressed tool output broke fidelity, whatever its grades."""

from __future__ import annotations

from tests.grade_tables import cell, frame, uniform
from tokenlens.decision import aggregate, decide


def _grades(fabricated: int, unmarked: int):  # type: ignore[no-untyped-def]
    grades = frame(
        cell("agent-search", "control", uniform(80, 80, tasks=12, reps=2)),
        cell("agent-search", "safe", uniform(80, 80, tasks=12, reps=2), reduction=0.05),
        cell("agent-search", "ext:lossy", uniform(80, 80, tasks=12, reps=2), reduction=0.4),
    )
    grades["fabricated_lines"] = 0
    grades["unmarked_drops"] = 0
    grades["facts_lost"] = 0
    lossy = grades["arm"] == "ext:lossy"
    first_task = grades["task_id"] == grades.loc[lossy, "task_id"].iloc[0]
    grades.loc[lossy & first_task, "fabricated_lines"] = fabricated
    grades.loc[lossy & first_task, "unmarked_drops"] = unmarked
    return grades


def test_a_faithful_external_arm_can_be_chosen() -> None:
    curve = aggregate(_grades(0, 0), tolerance=0.95, mode="mean")
    policy = decide(curve, calibration_id="test-calibration", model="m")
    assert policy.classes["agent-search"].method == "ext:lossy"


def test_one_fabricated_line_refuses_an_arm_with_perfect_grades_and_says_why() -> None:
    curve = aggregate(_grades(1, 3), tolerance=0.95, mode="mean")
    table = curve.table
    lossy = table[(table["task_class"] == "agent-search") & (table["arm"] == "ext:lossy")].iloc[0]
    assert lossy["status"] == "unfaithful"
    # both replicates of the task carry the same compression: counted once
    assert (lossy["fabricated_lines"], lossy["unmarked_drops"]) == (1, 3)
    assert lossy["retention_mean"] == 1.0
    entry = decide(curve, calibration_id="test-calibration", model="m").classes["agent-search"]
    assert entry.method == "safe"
    assert "ext:lossy" in entry.reason and "1 fabricated lines" in entry.reason
    assert "3 lines dropped without a marker" in entry.reason


def test_an_unmarked_drop_alone_refuses() -> None:
    curve = aggregate(_grades(0, 1), tolerance=0.95, mode="mean")
    entry = decide(curve, calibration_id="test-calibration", model="m").classes["agent-search"]
    assert entry.method == "safe"
