"""The sequential design goes for ✓ where the task set can reach it.

Ten seeds of the concentrated world, one lossless arm, a 60-task pool at 3 repeats: the
fixed design certifies (✓) nearly every time; the sequential design must too, not stop
at ? once the arm has cleared at 20 tasks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import pandas as pd

from tokenlens.compress.arms import CONTROL
from tokenlens.decision import aggregate, decide
from tokenlens.decision.sequential import (
    Cell,
    ClassPlan,
    Oracle,
    SequentialSettings,
    run_sequential,
)
from tokenlens.simulate import SimArm, simulate_grades
from tokenlens.simulate_sequential import calls_for_cells, table_oracle
from tokenlens.simulate_study import WORLDS

LOSSLESS = (SimArm("prune@0.6", 1.0, 0.3),)


def _verdicts(seed: int) -> tuple[str, str, int, int]:
    world = replace(WORLDS["concentrated"], n_tasks=60, replicates=3, arms=LOSSLESS)
    table = simulate_grades(world, np.random.default_rng(seed))
    fixed = aggregate(table, tolerance=0.95, pooled=False)
    plan = ClassPlan("sim", tuple(sorted(set(table["task_id"]))), ("prune@0.6",))
    seq = run_sequential([plan], table_oracle(table), SequentialSettings(max_repeats=3))
    verdict = [
        decide(curve, calibration_id="simulation", model="sim").classes["sim"].verdict
        for curve in (fixed, seq.curve)
    ]
    return verdict[0], verdict[1], calls_for_cells(table), calls_for_cells(seq.grades)


def test_a_lossless_arm_on_a_60_task_pool_is_certified_as_often_as_the_fixed_design() -> None:
    runs = [_verdicts(seed) for seed in range(10)]
    fixed = sum(f == "measured" for f, _, _, _ in runs)
    seq = sum(s == "measured" for _, s, _, _ in runs)
    assert fixed >= 9
    assert seq >= fixed - 1, [s for _, s, _, _ in runs]
    # ... and still for fewer answers than the fixed design pays.
    assert sum(c for *_, c in runs) < 0.8 * sum(c for *_, c, _ in runs)


def test_only_the_arm_the_walk_would_publish_is_sampled_on_toward_the_check() -> None:
    from tests.decision.test_sequential import REDUCTIONS, scripted_oracle

    ratio = {"safe": 1.0, "prune@0.8": 1.0, "prune@0.6": 0.6}
    log: list[Cell] = []
    plan = ClassPlan("x", tuple(f"x-{i:02d}" for i in range(60)), tuple(REDUCTIONS)[:3])
    result = run_sequential([plan], scripted_oracle(ratio, log))

    def tasks_of(arm: str) -> int:
        return len({c.task_id for c in log if c.arm == arm})

    entry = decide(result.curve, calibration_id="seq-test", model="m").classes["x"]
    assert entry.arm is not None and entry.arm.key == "prune@0.8"
    assert entry.verdict == "measured"
    assert tasks_of("prune@0.8") == 60  # chased to a ✓'s evidence
    assert tasks_of("safe") == 20  # cleared for ?, then left: the walk goes past it
    assert tasks_of("prune@0.6") == 10  # failed at its first look
    assert result.stops_at_provisional == {}
    assert len(log) == len(set(log))


def test_a_pool_below_the_check_size_stops_at_provisional_and_says_why() -> None:
    from tests.decision.test_sequential import REDUCTIONS, scripted_oracle

    ratio = {"safe": 1.0, "prune@0.8": 1.0}
    plan = ClassPlan("x", tuple(f"x-{i:02d}" for i in range(40)), tuple(REDUCTIONS)[:2])
    result = run_sequential([plan], scripted_oracle(ratio, []))
    entry = decide(result.curve, calibration_id="seq-test", model="m").classes["x"]
    assert entry.verdict == "provisional"
    assert "40 tasks" in result.stops_at_provisional["x"]
    assert "60" in result.stops_at_provisional["x"]


def test_the_rounds_artifact_says_which_classes_stop_at_provisional() -> None:
    from tokenlens.calibration.rounds import rounds_markdown
    from tokenlens.decision.sequential import RoundSummary

    summary = RoundSummary(3, 12, {"qa": (40, 1)}, {"qa": {"prune@0.8": "held"}})
    why = "its pool has 40 tasks and a ✓ needs 60: an arm that clears is published as ? at most"
    text = rounds_markdown(summary, 90, stops={"qa": why})
    assert "stop at ?" in text and f"- `qa`: {why}" in text
    assert "stop at ?" not in rounds_markdown(summary, 90)


def _floor_oracle(control: dict[int, tuple[float, float]], log: list[Cell]) -> Oracle:
    """A lossless arm; the control's second answer keeps, per replicate, one of two shares
    of the first (even tasks, odd tasks): its noise floor is what those shares make it."""
    from tests.decision.test_sequential import REDUCTIONS, scripted_oracle

    arms = scripted_oracle({"prune@0.8": 1.0}, [], {"prune@0.8": 0.0})

    def oracle(cells: Sequence[Cell]) -> pd.DataFrame:
        log.extend(cells)
        rows = arms(cells)
        ctrl = rows["arm"] == CONTROL
        task = rows["task_id"].str.split("-").str[1].astype(int)
        keep = [control[r][t % 2] for r, t in zip(rows["replicate"], task, strict=True)]
        rows.loc[ctrl, "grade_comp"] = (rows["grade_clear"] * keep)[ctrl].round()
        assert set(REDUCTIONS) >= set(rows["arm"]) - {CONTROL}
        return rows

    return oracle


def _cells(plan: ClassPlan, repeats: int) -> list[Cell]:
    return [
        Cell(plan.task_class, arm, task, rep)
        for arm in (CONTROL, *plan.arms)
        for task in plan.tasks
        for rep in range(repeats)
    ]


def test_a_floor_read_on_fewer_repeats_does_not_certify_what_the_full_control_refuses() -> None:
    # The first repeat's control reads a 4.8 % floor (under the 5 % a ✓ allows), the
    # full control 6.9 %: the fixed design gives ? on these pairs; a ✓ read at the first
    # 60-task look would stand on a floor the rest of the control contradicts.
    plan = ClassPlan("x", tuple(f"x-{i:02d}" for i in range(60)), ("prune@0.8",))
    control = {0: (0.905, 1.0), 1: (0.92, 0.92), 2: (0.92, 0.92)}
    full = _floor_oracle(control, [])(_cells(plan, 3))
    fixed = decide(
        aggregate(full, tolerance=0.95, pooled=False), calibration_id="seq-test", model="m"
    )
    assert fixed.classes["x"].verdict == "provisional"
    log: list[Cell] = []
    seq = run_sequential([plan], _floor_oracle(control, log), SequentialSettings(max_repeats=3))
    entry = decide(seq.curve, calibration_id="seq-test", model="m").classes["x"]
    assert entry.arm is not None and entry.arm.key == "prune@0.8"
    assert entry.verdict == "provisional"
    assert {c.replicate for c in log if c.arm == CONTROL} == {0, 1, 2}


def test_a_floor_shown_within_the_tolerance_certifies_at_the_first_60_task_look() -> None:
    # A quiet control (a 1 % floor, its interval well under 5 %): ✓ at 60 x 1, no repeats.
    plan = ClassPlan("x", tuple(f"x-{i:02d}" for i in range(60)), ("prune@0.8",))
    control = dict.fromkeys(range(3), (0.98, 1.0))
    log: list[Cell] = []
    seq = run_sequential([plan], _floor_oracle(control, log), SequentialSettings(max_repeats=3))
    entry = decide(seq.curve, calibration_id="seq-test", model="m").classes["x"]
    assert entry.verdict == "measured"
    assert {c.replicate for c in log} == {0}
