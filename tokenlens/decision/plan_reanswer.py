"""What re-answering where a task's repeats disagree (`--reanswer`) would buy a class.

The planner weighs three next steps for a class: one more repeat of every answer, each
pair judged in both A/B orders, and re-answering the cells whose repeats disagree
(`tokenlens.decision.reanswer`). The third is priced and powered from the run's own
grades, not assumed: which cells `cells_to_reanswer` would pick at the run's repeats
(how many more answers and judge readings that costs), and how much of the arm's
within-task noise sits in those cells (how much it can remove).

The power model (`ReanswerMeasure.within_scale`): a re-answered cell's mean is read over
R + K answers instead of R (R the run's repeats, K = `REANSWER_COUNT`), the K fresh
answers at the arm's typical spread (the mean s^2 over its cells: they derail at the
usual rate, no more). What its R planned readings are off by is the part that matters,
and a cell's own s^2 overstates it: a cell is picked *because* its readings spread, and
where that was the judge's chance wobble its mean is no further off than any cell's
(the noisy world without derails of bench/bench_plan_power.py: re-answering there buys
next to nothing in simulation, and a model on the cells' own s^2 ranked it above a 4th
repeat). So the planned mean is given the typical s^2 / R, plus, where one reading looks
derailed (a ratio below `DERAILED` of the cell's median, or above 1 / `REFERENCE_LOW` of
it), that reading's pull on the mean (mean - median): exact for one derail among three
agreeing readings, which fresh answers dilute. The cell-mean variance falls from v to
(R^2 v + K typical) / (R + K)^2; summed over the picked cells, as a share of the arm's
within-task term, it shrinks the plan's within spread. It errs low where a derail is
smaller than those thresholds (counted as chance) and with 2 repeats (no median apart
from the mean).
Figures against the simulation: bench/bench_plan_power.py --reanswer.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tokenlens.compress.arms import CONTROL
from tokenlens.decision.curve import TASK_RATIO_CAP
from tokenlens.decision.derails import DERAILED, REFERENCE_LOW
from tokenlens.decision.grades import ClassGrades, pick_judge, prepare
from tokenlens.decision.planner import (
    ASSUMED_JUDGE_SHARE,
    ASSUMED_MARGIN,
    ASSUMED_SPREAD,
    JudgeOption,
    calls_for,
    power_at,
    price_calls,
    read_spread,
)
from tokenlens.decision.reanswer import REANSWER_COUNT, cells_to_reanswer
from tokenlens.stats import Spread


@dataclass(frozen=True)
class ReanswerMeasure:
    """One class's re-answer step, as measured on a run's grades at its repeats."""

    repeats: int  # the run's planned repeats (the most common replicates per cell)
    tasks: int
    cells: int  # task x arm cells, control included (it is never re-answered)
    cells_redone: int  # cells `cells_to_reanswer` picks at `repeats`
    tasks_redone: int  # tasks with at least one such cell (each pays fresh cleartext)
    #: Per arm: the share of its within-task variance term re-answering removes.
    removed: dict[str, float]
    already: bool = False  # the run re-answered already (replicates past `repeats`)

    def extra_per_task(self, n_arms: int) -> tuple[float, float]:
        """(answers, pairs to judge) re-answering adds per task of a class of `n_arms`
        arms and the control, at the run's measured shares: each picked cell K more
        answers and pairs, each task with one K fresh cleartext answers."""
        if self.tasks == 0 or self.cells == 0:
            return 0.0, 0.0
        cells = self.cells_redone / self.cells * (1 + n_arms)
        answers = REANSWER_COUNT * (cells + self.tasks_redone / self.tasks)
        return answers, REANSWER_COUNT * cells

    def within_scale(self, arm: str) -> float:
        """Factor on the arm's within-task spread once its disagreeing cells are re-answered."""
        return float(np.sqrt(1.0 - min(max(self.removed.get(arm, 0.0), 0.0), 1.0)))


def planned_repeats(class_df: pd.DataFrame) -> int:
    """The run's planned repeats: the most common number of first-judgement replicates
    per cell (re-answered cells have more; they are a minority)."""
    counts = class_df.groupby(["task_id", "arm"])["replicate"].nunique()
    if counts.empty:
        return 0
    return int(counts.value_counts().idxmax())


def measure_reanswer(grades: pd.DataFrame, *, judge: str | None) -> dict[str, ReanswerMeasure]:
    """Per class, the re-answer step read off a run's grades with the deciding judge."""
    df, judge = pick_judge(prepare(grades), judge)
    df = df[df["judge_pass"] == 0]
    out: dict[str, ReanswerMeasure] = {}
    for task_class, class_df in df.groupby("task_class", sort=True):
        repeats = planned_repeats(class_df)
        planned = class_df[class_df["replicate"].astype(int) < repeats]
        picked = cells_to_reanswer(planned, repeats, judge=judge) if repeats >= 2 else []
        loud = {(task, arm) for _, task, arm in picked}
        out[str(task_class)] = ReanswerMeasure(
            repeats=repeats,
            tasks=int(planned["task_id"].nunique()),
            cells=len(planned.groupby(["task_id", "arm"])),
            cells_redone=len(loud),
            tasks_redone=len({task for task, _ in loud}),
            removed=_removed(planned, loud, repeats),
            already=bool((class_df["replicate"].astype(int) >= repeats).any()),
        )
    return out


def _removed(planned: pd.DataFrame, loud: set[tuple[str, str]], repeats: int) -> dict[str, float]:
    """Per arm: the share of the within-task term (the sum over its cells of s^2 / R)
    that re-answering its loud cells removes (the module's docstring says how)."""
    if repeats < 2 or not loud:
        return {}
    grades = ClassGrades.of(planned)
    r, k = float(repeats), float(REANSWER_COUNT)
    out: dict[str, float] = {}
    for arm, pairs in grades.arms.items():
        if arm == CONTROL:
            continue
        ok = pairs.reference > 0
        ratio = pd.Series(np.minimum(pairs.comp[ok] / pairs.reference[ok], TASK_RATIO_CAP))
        cells = ratio.groupby(pairs.task[ok]).agg(["mean", "median", "var", "min", "max", "count"])
        cells = cells[cells["count"] >= 2]
        term = float(cells["var"].sum() / r)
        if term <= 0:
            continue
        typical = float(cells["var"].mean())
        picked = cells[[(grades.tasks[t], arm) in loud for t in cells.index]]
        # a derailed compressed answer reads below DERAILED of the cell's median; a
        # derailed cleartext answer lowers the reference, lifting the ratio past
        # 1 / REFERENCE_LOW of it
        derailed = (picked["min"] < DERAILED * picked["median"]) | (
            picked["max"] * REFERENCE_LOW > picked["median"]
        )
        planned_var = typical / r + derailed * (picked["mean"] - picked["median"]) ** 2
        after = (r**2 * planned_var + k * typical) / (r + k) ** 2
        out[arm] = max(float((planned_var - after).sum()) / term, 0.0)
    return out


def reanswer_option(
    *,
    tolerance: float,
    retention: float | None,
    spread: Spread | None,
    judge_share: float | None,
    tasks: int,
    repeats: int,
    readings: int,
    within_scale: float,
    extra_per_task: tuple[float, float],
    n_arms: int,
    prompt_tokens: float,
    model: str,
    judge_model: str,
) -> JudgeOption:
    """The design (`repeats`, `readings`) with its disagreeing cells re-answered: the
    within-task spread scaled by `within_scale` and `extra_per_task` (answers, pairs to
    judge) more calls per task, both measured on the run's grades
    (`tokenlens.decision.plan_reanswer`)."""
    truth = min(retention, 1.0) if retention is not None else tolerance + ASSUMED_MARGIN
    sp = read_spread(
        spread if spread is not None else ASSUMED_SPREAD,
        ASSUMED_JUDGE_SHARE if judge_share is None else judge_share,
        readings,
    )
    sp = Spread(sp.between, (sp.within or 0.0) * within_scale)
    answers, judges = calls_for(
        tasks, repeats, n_arms, llm_judge=True, judge_calls_per_pair=readings
    )
    extra_answers, extra_pairs = extra_per_task
    cost = price_calls(
        answers + tasks * extra_answers,
        judges + tasks * extra_pairs * readings,
        prompt_tokens=prompt_tokens,
        model=model,
        judge_model=judge_model,
    )
    power = power_at(truth - tolerance, sp, tasks, repeats)
    return JudgeOption(repeats, readings, tasks, power, cost, reanswer=True)
