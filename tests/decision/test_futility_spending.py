"""The sequential futility stop spends its error over the looks: a good arm whose first
tasks happen to read low is not ended on a wide 10-task bound (a fixed 75 % bound at
every look stopped it there), while a clearly harmful arm still stops at its first look
(`test_futility_reason`)."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from tests.decision import test_sequential as seq
from tokenlens.decision.sequential import Cell, ClassPlan, Oracle, run_sequential

#: Tasks of a good arm that lose 20 %: four of its first ten, none after (it holds on 60).
HARMED = {2, 4, 6, 9}


def _oracle(log: list[Cell]) -> Oracle:
    scripted = seq.scripted_oracle({"safe": 1.0}, log)

    def oracle(cells: Sequence[Cell]) -> pd.DataFrame:
        frame = scripted(cells)
        task = frame["task_id"].str.split("-").str[1].astype(int)
        harmed = (frame["arm"] == "safe") & task.isin(HARMED)
        frame.loc[harmed, "grade_comp"] = 0.8 * frame.loc[harmed, "grade_clear"]
        return frame

    return oracle


def test_a_good_arm_with_a_bad_start_is_not_ended_on_its_first_bound() -> None:
    log: list[Cell] = []
    plan = ClassPlan("x", tuple(f"x-{i:02d}" for i in range(60)), ("safe",))
    result = run_sequential([plan], _oracle(log))
    assert len({c.task_id for c in log if c.arm == "safe"}) > 10  # past the first bound
    row = result.curve.rows("x").set_index("arm").loc["safe"]
    assert row["status"] == "held", row.to_dict()
