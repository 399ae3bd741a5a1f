"""Derailed answers the rule sets aside, and the ones it must keep (tokenlens.decision.derails)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tokenlens.decision import aggregate, decide
from tokenlens.decision.derails import MAX_TASKS, set_aside
from tokenlens.decision.grades import ArmPairs

from ..grade_tables import cell, frame, jittered

TASKS, REPS = 20, 3


def _pairs(comp: np.ndarray, reference: np.ndarray | None = None) -> ArmPairs:
    """One arm's pairs, `comp[task, repeat]` over references of 80 unless given."""
    ref = np.full(comp.shape, 80.0) if reference is None else reference
    return ArmPairs(
        task=np.repeat(np.arange(comp.shape[0]), comp.shape[1]),
        comp=comp.ravel().astype(float),
        clear=ref.ravel().astype(float),
        reference=ref.ravel().astype(float),
        capped=np.minimum(comp / ref, 1.0).ravel(),
        n_errors=0,
        n_broken=0,
        reduction=0.3,
        method="prune",
        rate=0.7,
    )


def _lossless(tasks: int = TASKS, reps: int = REPS) -> np.ndarray:
    return (
        np.full((tasks, reps), 80.0) + np.tile([-1.0, 0.0, 1.0], (tasks, reps // 3 or 1))[:, :reps]
    )


def test_one_lone_compressed_derail_is_set_aside_and_nothing_else() -> None:
    comp = _lossless()
    comp[4, 1] = 10.0  # one answer collapsed; the task's other repeats keep everything
    kept = set_aside(_pairs(comp))
    assert kept.n_pairs == TASKS * REPS - 1
    assert 10.0 not in kept.comp


def test_two_compressed_derails_are_both_kept_they_may_be_the_harm() -> None:
    comp = _lossless()
    comp[4, 1] = comp[11, 0] = 10.0
    assert set_aside(_pairs(comp)).n_pairs == TASKS * REPS


@pytest.mark.parametrize("grade", [20.0, 35.0, 60.0])
def test_a_task_hurt_in_every_repeat_is_never_set_aside(grade: float) -> None:
    comp = _lossless()
    comp[7, :] = grade  # the prompt hurt this task: all its repeats are low
    assert set_aside(_pairs(comp)).n_pairs == TASKS * REPS


def test_a_low_reading_beside_a_hurt_repeat_is_kept() -> None:
    comp = _lossless()
    comp[7] = [10.0, 50.0, 80.0]  # the other repeats do not all keep >= 80 %
    assert set_aside(_pairs(comp)).n_pairs == TASKS * REPS


def test_an_uncompressed_derail_drops_its_pair_whatever_the_count() -> None:
    comp = _lossless()
    reference = np.full(comp.shape, 80.0)
    reference[2, 0] = reference[9, 2] = 45.0  # the cleartext answer derailed there
    kept = set_aside(_pairs(comp, reference))
    assert kept.n_pairs == TASKS * REPS - 2
    assert kept.reference.min() == 80.0


def test_from_max_tasks_on_every_answer_is_read() -> None:
    comp = _lossless(tasks=MAX_TASKS)
    comp[4, 1] = 10.0
    reference = np.full(comp.shape, 80.0)
    reference[2, 0] = 45.0
    assert set_aside(_pairs(comp, reference)).n_pairs == MAX_TASKS * REPS
    fewer = set_aside(_pairs(comp[1:], reference[1:]))
    assert fewer.n_pairs == (MAX_TASKS - 1) * REPS - 2


def test_a_single_repeat_has_nothing_to_compare_with() -> None:
    comp = _lossless(reps=1)
    comp[3, 0] = 5.0
    assert set_aside(_pairs(comp)).n_pairs == TASKS


def _table(derailed: list[tuple[int, int]]) -> list[dict[str, object]]:
    grades = [[(clear, comp) for clear, comp in reps] for reps in jittered(80, 1.0, tasks=TASKS)]
    for task, rep in derailed:
        grades[task][rep] = (grades[task][rep][0], 10.0)
    return cell("qa", "prune@0.7", grades)


def test_the_rule_holds_a_lossless_arm_despite_one_derailed_answer() -> None:
    control = cell("qa", "control", jittered(80, 1.0, tasks=TASKS))
    clean = aggregate(frame(control, _table([])), tolerance=0.95, judge="metric").rows("qa")
    one = aggregate(frame(control, _table([(5, 1)])), tolerance=0.95, judge="metric").rows("qa")
    two = aggregate(frame(control, _table([(5, 1), (12, 2)])), tolerance=0.95, judge="metric").rows(
        "qa"
    )
    arm = lambda rows: rows[rows["arm"] == "prune@0.7"].iloc[0]  # noqa: E731
    assert arm(clean)["passes"] and arm(one)["passes"]
    assert arm(one)["retention_low"] == pytest.approx(arm(clean)["retention_low"], abs=0.01)
    assert arm(one)["n_pairs"] == TASKS * REPS  # the table still counts every pair paid for
    assert not arm(two)["passes"]  # two derails are read as they are
    # the seed's mean rule reads every answer: the derail still costs it
    mean = aggregate(
        frame(control, _table([(5, 1)])), tolerance=0.95, judge="metric", mode="mean"
    ).rows("qa")
    assert arm(mean)["retention_mean"] < arm(clean)["retention_mean"]


def test_the_policy_says_what_was_set_aside() -> None:
    control = cell("qa", "control", jittered(80, 1.0, tasks=TASKS))
    curve = aggregate(frame(control, _table([(5, 1)])), tolerance=0.95, judge="metric")
    rows = curve.rows("qa").set_index("arm")
    assert rows.loc["prune@0.7", "n_set_aside"] == 1
    assert pd.isna(rows.loc["control", "n_set_aside"])  # not the control's to set aside
    entry = decide(curve, calibration_id="derails-test", model="m").classes["qa"]
    assert entry.verdict == "provisional"
    assert "over 20 tasks, 1 derailed answer set aside" in entry.reason
