"""Sequential vs fixed design on simulated worlds: the same decisions for fewer calls?

Each run draws one world at its largest design (the whole task pool x `max_repeats`
replicates, every arm); the fixed design reads all of it, the sequential loop
(`tokenlens.decision.sequential`) asks an oracle that serves cells from the same draw.
So both designs see identical data where they overlap: a paired comparison.

Calls are counted as a real run pays them: one cleartext answer per task and replicate
that was touched, and per graded cell one answer (compressed, or the control's second)
and one judge call.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from tokenlens.decision import Curve, aggregate, decide
from tokenlens.decision.sequential import (
    Cell,
    ClassPlan,
    Oracle,
    SequentialSettings,
    run_sequential,
)
from tokenlens.simulate import Scenario, simulate_grades


def table_oracle(table: pd.DataFrame) -> Oracle:
    """An oracle serving rows of a pre-drawn grades table (missing cells stay missing)."""
    keyed = table.set_index(["task_class", "arm", "task_id", "replicate"]).sort_index()

    def oracle(cells: Sequence[Cell]) -> pd.DataFrame:
        keys = [(c.task_class, c.arm, c.task_id, c.replicate) for c in cells]
        present = [k for k in keys if k in keyed.index]
        return keyed.loc[present].reset_index() if present else table.iloc[0:0]

    return oracle


def calls_for_cells(cells: pd.DataFrame) -> int:
    """Paid calls behind a set of graded cells: cleartext answers + answer and judge each."""
    return answers_for_cells(cells) + len(cells)


def answers_for_cells(cells: pd.DataFrame) -> int:
    """Answers paid behind a set of graded cells: cleartext answers + one per cell."""
    if cells.empty:
        return 0
    return int(len(cells[["task_id", "replicate"]].drop_duplicates()) + len(cells))


@dataclass
class DesignTally:
    world: str
    design: str
    runs: int = 0
    bad: int = 0
    false_applied: int = 0
    good: int = 0
    held: int = 0
    calls: int = 0

    @property
    def false_rate(self) -> float:
        return self.false_applied / self.bad if self.bad else math.nan

    @property
    def power(self) -> float:
        return self.held / self.good if self.good else math.nan

    @property
    def mean_calls(self) -> float:
        return self.calls / self.runs if self.runs else math.nan


def _chosen(curve_table: pd.DataFrame, tolerance: float, mode: str) -> str | None:
    curve = Curve(curve_table, tolerance, mode, "sim-judge")  # type: ignore[arg-type]
    entry = decide(curve, calibration_id="simulation", model="sim").classes.get("sim")
    return None if entry is None or entry.arm is None else entry.arm.key


def compare(
    scenario: Scenario, *, runs: int, seed: int = 0, margin: float = 0.02
) -> tuple[DesignTally, DesignTally]:
    """Fixed vs sequential on one world whose arms form the ladder (gentlest first)."""
    rng = np.random.default_rng(seed)
    fixed = DesignTally(scenario.name, "fixed")
    seq = DesignTally(scenario.name, "sequential")
    arms = tuple(a.key for a in sorted(scenario.arms, key=lambda a: a.reduction))
    truth = {a.key: a.true_retention for a in scenario.arms}
    settings = SequentialSettings(tolerance=scenario.tolerance, max_repeats=scenario.replicates)
    for _ in range(runs):
        table = simulate_grades(scenario, rng)
        tasks = tuple(sorted(set(table["task_id"])))
        plan = ClassPlan("sim", tasks, arms)
        fixed_curve = aggregate(table, tolerance=scenario.tolerance, pooled=False)
        result = run_sequential([plan], table_oracle(table), settings)
        for tally, chosen, cells in (
            (fixed, _chosen(fixed_curve.table, scenario.tolerance, "interval"), table),
            (seq, _chosen(result.curve.table, scenario.tolerance, "interval"), result.grades),
        ):
            tally.runs += 1
            tally.calls += calls_for_cells(cells)
            for key, value in truth.items():
                if value < scenario.tolerance - 1e-9:
                    tally.bad += 1
                    tally.false_applied += int(chosen == key)
                elif value >= scenario.tolerance + margin - 1e-9:
                    tally.good += 1
                    # held = the walk reached and chose it or a more aggressive arm
                    order = arms.index(key)
                    tally.held += int(chosen is not None and arms.index(chosen) >= order)
    return fixed, seq


def lone_arm_worlds(base: Scenario, truths: Sequence[float]) -> list[Scenario]:
    """One world per true retention with that arm alone on the ladder."""
    return [
        replace(
            base, name=f"{base.name} true={t:.2f}", arms=(replace(base.arms[0], true_retention=t),)
        )
        for t in truths
    ]
