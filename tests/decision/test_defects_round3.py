"""Defects of the instrument's third round, each pinned by a test that failed before the fix."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from tests.grade_tables import cell, frame, jittered, uniform
from tokenlens.compress.arms import CONTROL, Arm
from tokenlens.decision import EXIT_UNRESOLVED, aggregate, decide, exit_code
from tokenlens.decision.sequential import Cell, ClassPlan, SequentialSettings, run_sequential
from tokenlens.tables import GRADES

REDUCTIONS = {"prune@0.9": 0.1, "prune@0.8": 0.2, "prune@0.7": 0.3}


def _oracle(dead: str, log: list[Cell]):
    """Three lossless arms; every judge call of `dead` errors."""

    def oracle(cells: Sequence[Cell]) -> pd.DataFrame:
        log.extend(cells)
        rows = []
        for c in cells:
            t = int(c.task_id.split("-")[1])
            clear = 80 + (t % 5)
            wobble = (((t * 7 + c.replicate * 3 + len(c.arm)) % 5) - 2) * 0.5
            parsed = None if c.arm == CONTROL else Arm.parse(c.arm)
            failed = c.arm == dead
            rows.append(
                {
                    "task_id": c.task_id,
                    "task_class": c.task_class,
                    "arm": c.arm,
                    "method": CONTROL if parsed is None else parsed.method,
                    "rate": None if parsed is None else parsed.rate,
                    "replicate": c.replicate,
                    "judge": "metric",
                    "grade_clear": None if failed else float(clear),
                    "grade_comp": None if failed else float(clear + wobble),
                    "reduction": 0.0 if parsed is None else REDUCTIONS[c.arm],
                    "error": "judge failed" if failed else None,
                }
            )
        return pd.DataFrame(rows)

    return oracle


def test_the_sequential_loop_skips_a_dead_arm_as_the_fixed_design_does() -> None:
    plan = ClassPlan("x", tuple(f"x-{i:02d}" for i in range(20)), tuple(REDUCTIONS))
    for lookahead in (1, 2):
        log: list[Cell] = []
        settings = SequentialSettings(lookahead=lookahead)
        result = run_sequential([plan], _oracle("prune@0.9", log), settings)
        policy = decide(result.curve, calibration_id="round-three", model="m")
        entry = policy.classes["x"]
        assert entry.arm is not None and entry.arm.key == "prune@0.7", entry.reason
        assert exit_code(policy, ["x"]) == 0
        # The dead arm is read once, at its first look, not paid for at every look.
        dead_cells = sum(c.arm == "prune@0.9" for c in log)
        assert dead_cells <= 10, dead_cells


def test_a_sequential_bound_is_labelled_with_the_level_it_was_computed_at() -> None:
    grades = frame(
        cell("x", "control", uniform(90, 90, tasks=20)),
        cell("x", "prune@0.6", jittered(90, 1.0, tasks=20, spread=0.3), reduction=0.2),
    )
    curve = aggregate(grades, tolerance=0.95, alpha=0.0187)
    entry = decide(curve, calibration_id="round-three", model="m").classes["x"]
    assert entry.verdict == "provisional"
    assert "98.1%" in entry.reason and "95%" not in entry.reason.split("tolerance")[0]
    assert entry.retention_interval is not None
    assert entry.retention_interval.confidence == 0.9813
    default = aggregate(grades, tolerance=0.95)
    entry = decide(default, calibration_id="round-three", model="m").classes["x"]
    assert "one-sided 95% bound" in entry.reason
    assert entry.retention_interval is not None
    assert entry.retention_interval.confidence == 0.95


def test_a_class_with_no_arm_rows_is_unmeasurable_not_nothing_compressible() -> None:
    grades = frame(
        cell("x", "control", uniform(90, 90, tasks=20)),
        cell("y", "control", uniform(90, 90, tasks=20)),
        cell("y", "prune@0.6", jittered(90, 1.0, tasks=20, spread=0.3), reduction=0.2),
    )
    policy = decide(aggregate(grades, tolerance=0.95), calibration_id="round-three", model="m")
    assert policy.classes["x"].cause == "unmeasurable"
    assert "no arm" in policy.classes["x"].reason
    assert exit_code(policy, ["x", "y"]) == EXIT_UNRESOLVED


def test_a_class_of_only_second_pass_judgements_stays_in_the_policy() -> None:
    grades = frame(
        cell("x", "control", uniform(90, 90, tasks=20), judge_pass=1),
        cell("x", "prune@0.6", uniform(90, 90, tasks=20), judge_pass=1),
        cell("y", "control", uniform(90, 90, tasks=20)),
        cell("y", "prune@0.6", jittered(90, 1.0, tasks=20, spread=0.3), reduction=0.2),
    )
    policy = decide(aggregate(grades, tolerance=0.95), calibration_id="round-three", model="m")
    assert "x" in policy.classes
    assert policy.classes["x"].cause == "unmeasurable"
    assert exit_code(policy) == EXIT_UNRESOLVED


def test_an_empty_grades_table_publishes_an_unmeasurable_policy() -> None:
    empty = pd.DataFrame({name: [] for name in GRADES.names})
    curve = aggregate(empty, tolerance=0.95)
    policy = decide(curve, calibration_id="round-three", model="m", requested_classes=["x"])
    assert policy.default.cause == "unmeasurable"
    assert policy.classes["x"].cause == "unmeasurable"
    assert exit_code(policy, ["x"]) == EXIT_UNRESOLVED
