"""Re-answering where repeats disagree, and the derail guard (`tokenlens.decision.reanswer`)."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

from tokenlens import tables
from tokenlens.decision.reanswer import (
    REANSWER_COUNT,
    cells_to_reanswer,
    guarded_arms,
    read_with_guard,
)


def row(
    task: str, arm: str, rep: int, clear: float | None, comp: float | None, **extra: Any
) -> dict[str, Any]:
    values: dict[str, Any] = dict.fromkeys(tables.GRADES.names)
    values.update(
        task_id=task,
        task_class=extra.pop("task_class", "qa"),
        arm=arm,
        method="control" if arm == "control" else arm.split("@")[0],
        rate=None,
        replicate=rep,
        judge=extra.pop("judge", "j"),
        grade_clear=clear,
        grade_comp=comp,
        reduction=0.0,
        judge_pass=extra.pop("judge_pass", 0),
        **extra,
    )
    return values


def frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=tables.GRADES.names)


def steady(task: str, arm: str, reps: int = 3, start: int = 0) -> list[dict[str, Any]]:
    return [row(task, arm, r, 80.0, 78.0 + r) for r in range(start, start + reps)]


def test_only_cells_whose_repeats_disagree_on_either_side_are_reanswered() -> None:
    rows = [
        *steady("t1", "control"),
        *steady("t1", "safe"),
        # the compressed side spreads 30 points (one derailed answer)
        row("t2", "safe", 0, 80.0, 80.0),
        row("t2", "safe", 1, 80.0, 50.0),
        row("t2", "safe", 2, 80.0, 79.0),
        # the cleartext side spreads 25 points; the compressed answers agree
        row("t4", "safe", 0, 90.0, 80.0),
        row("t4", "safe", 1, 65.0, 80.0),
        row("t4", "safe", 2, 85.0, 80.0),
        # the control spreads as much, but is never re-answered: its floor reads the
        # planned repeats
        row("t2", "control", 0, 90.0, 80.0),
        row("t2", "control", 1, 65.0, 80.0),
        row("t2", "control", 2, 85.0, 50.0),
        # exactly 20 points is not "more than 20"
        row("t3", "safe", 0, 80.0, 60.0),
        row("t3", "safe", 1, 80.0, 80.0),
        row("t3", "safe", 2, 80.0, 70.0),
    ]
    assert cells_to_reanswer(frame(rows), 3) == [("qa", "t2", "safe"), ("qa", "t4", "safe")]


def test_reanswering_reads_the_deciding_judge_first_judgements_of_planned_repeats() -> None:
    rows = [
        *steady("t1", "safe"),
        # another judge, a second judgement, an error row and a re-answered replicate
        # disagree: none of them is read
        row("t1", "safe", 0, 80.0, 80.0, judge="metric"),
        row("t1", "safe", 1, 80.0, 10.0, judge="metric"),
        row("t1", "safe", 1, 80.0, 10.0, judge_pass=1),
        row("t1", "safe", 2, None, None, error="judge reply was not JSON"),
        row("t1", "safe", 3, 80.0, 5.0),
    ]
    assert cells_to_reanswer(frame(rows), 3, judge="j") == []
    with pytest.raises(ValueError, match="say which one decides"):
        cells_to_reanswer(frame(rows), 3)
    assert cells_to_reanswer(frame(rows), 3, judge="metric") == [("qa", "t1", "safe")]


def derailing(arm: str, lone_tasks: range, tasks: int = 20, start: int = 0) -> list[dict[str, Any]]:
    """An arm steady on every task but one lone derailed answer (graded 10) on each of
    `lone_tasks`, in its first replicate."""
    rows = []
    for t in range(tasks):
        for r in range(start, start + 3):
            derailed = t in lone_tasks and r == start
            rows.append(row(f"t{t}", arm, r, 80.0, 10.0 if derailed else 80.0))
    return rows


def test_the_guard_reads_an_arm_whose_compressed_answers_derail_more_than_the_control() -> None:
    planned = [
        *derailing("control", range(1)),
        *derailing("prune@0.6", range(8)),  # 8 lone derails against the control's 1
        *derailing("safe", range(1)),  # as many as the control: clean
    ]
    extra = [
        *derailing("control", range(0), start=3),
        *derailing("prune@0.6", range(0), start=3),
        *derailing("safe", range(0), start=3),
    ]
    grades = frame(planned + extra)
    assert guarded_arms(grades, 3) == {"qa": {"prune@0.6"}}
    read, guarded = read_with_guard(grades, 3)
    assert guarded == {"qa": {"prune@0.6"}}
    # only the guarded arm's re-answered replicates are left out
    dropped = grades.drop(read.index)
    assert set(dropped["arm"]) == {"prune@0.6"} and (dropped["replicate"] >= 3).all()
    assert len(dropped) == 20 * REANSWER_COUNT
    kept = read.groupby("arm")["replicate"].max().to_dict()
    assert kept == {"control": 5, "prune@0.6": 2, "safe": 5}


def test_the_guard_counts_per_class_and_ignores_a_task_hurt_in_every_repeat() -> None:
    # in class "b" the control derails as often as the arm: no guard there
    hurt = [row(f"h{t}", "prune@0.6", r, 80.0, 10.0) for t in range(8) for r in range(3)]
    other = [
        {**r, "task_class": "b"}
        for r in [*derailing("control", range(8)), *derailing("prune@0.6", range(8))]
    ]
    grades = frame([*derailing("control", range(1)), *hurt, *other])
    # a task hurt in every repeat is the prompt's harm, not a lone derail
    assert guarded_arms(grades, 3) == {}
    assert guarded_arms(frame([*derailing("control", range(1)), *other]), 3) == {}
