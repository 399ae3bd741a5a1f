"""Re-answering in the sequential design: only cells whose full repeats disagree, once,
read at the arm's last look together with its planned repeats, behind the derail guard."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from tokenlens.compress.arms import CONTROL
from tokenlens.decision.reanswer import REANSWER_COUNT
from tokenlens.decision.sequential import Cell, ClassPlan, SequentialSettings, run_sequential

# 10 tasks: below the 20 a ? needs, so no look spends error and every arm is read at its
# last look (10 tasks x 3 repeats), the only look where its cells hold all repeats.
PLAN = ClassPlan("x", tuple(f"x-{i:02d}" for i in range(10)), ("prune@0.9",))
#: (arm, task, replicate) -> (grade_clear, grade_comp) where a planned repeat is off.
LOUD = {
    ("prune@0.9", "x-03", 2): (80.0, 40.0),  # the arm's answer derails once
    (CONTROL, "x-05", 1): (50.0, 80.0),  # the control's wobbles: never re-answered
}


def _oracle(rounds: list[list[Cell]], loud: dict[tuple[str, str, int], tuple[float, float]]):
    def oracle(cells: Sequence[Cell]) -> pd.DataFrame:
        rounds.append(list(cells))
        rows = []
        for c in cells:
            clear, comp = loud.get((c.arm, c.task_id, c.replicate), (80.0, 79.0))
            rows.append(
                {
                    "task_id": c.task_id,
                    "task_class": c.task_class,
                    "arm": c.arm,
                    "method": CONTROL if c.arm == CONTROL else "prune",
                    "rate": None if c.arm == CONTROL else 0.9,
                    "replicate": c.replicate,
                    "judge": "metric",
                    "grade_clear": clear,
                    "grade_comp": comp,
                    "reduction": 0.0 if c.arm == CONTROL else 0.1,
                    "error": None,
                }
            )
        return pd.DataFrame(rows)

    return oracle


def _extras(rounds: list[list[Cell]]) -> list[tuple[int, Cell]]:
    return [(i, c) for i, cells in enumerate(rounds) for c in cells if c.replicate >= 3]


def test_only_cells_whose_full_repeats_disagree_are_re_answered_and_only_once() -> None:
    rounds: list[list[Cell]] = []
    settings = SequentialSettings(max_repeats=3, reanswer=True)
    result = run_sequential([PLAN], _oracle(rounds, LOUD), settings)
    extras = _extras(rounds)
    asked = sorted((c.arm, c.task_id, c.replicate) for _, c in extras)
    assert asked == sorted(
        (arm, task, r)
        for arm, task, _ in LOUD
        if arm != CONTROL  # its noise floor reads the planned repeats
        for r in range(3, 3 + REANSWER_COUNT)
    )
    every = [c for cells in rounds for c in cells]
    assert len(every) == len(set(every))  # never asked twice
    # Asked in the round after the cells' last planned repeat, all in one round.
    last_planned = max(i for i, cells in enumerate(rounds) for c in cells if c.replicate == 2)
    assert {i for i, _ in extras} == {last_planned + 1}
    # The arm is read once its re-answers are in: the curve counts them.
    row = result.curve.rows("x").set_index("arm").loc["prune@0.9"]
    assert int(row["n_pairs"]) == 10 * 3 + REANSWER_COUNT
    assert len(result.grades) == len(every)


def test_without_reanswer_nothing_past_the_planned_repeats_is_asked() -> None:
    rounds: list[list[Cell]] = []
    run_sequential([PLAN], _oracle(rounds, LOUD), SequentialSettings(max_repeats=3))
    assert _extras(rounds) == []
    assert max(c.replicate for cells in rounds for c in cells) == 2


def test_an_arm_that_derails_more_than_the_control_is_read_on_its_planned_repeats() -> None:
    derails = {("prune@0.9", f"x-{t:02d}", 2): (80.0, 10.0) for t in range(4)}
    rounds: list[list[Cell]] = []
    settings = SequentialSettings(max_repeats=3, reanswer=True)
    result = run_sequential([PLAN], _oracle(rounds, derails), settings)
    assert len(_extras(rounds)) == 4 * REANSWER_COUNT  # paid and kept in the grades ...
    assert int((result.grades["replicate"] >= 3).sum()) == 4 * REANSWER_COUNT
    row = result.curve.rows("x").set_index("arm").loc["prune@0.9"]
    assert int(row["n_pairs"]) == 10 * 3  # ... but the guarded arm is read without them
