"""How often the decision's own rule would hold an arm at a planned size: the tasks a
calibration measured, drawn again at that size and read by the same bound.

Why not a normal-theory formula: the bound the decision reads (`tokenlens.stats`: a
skew-corrected t bound over per-task retentions capped at `TASK_RATIO_CAP`) is wider
than a t bound when those retentions lean left, and they do wherever a few answers
derail or a few tasks are hurt badly: a task with one derailed answer (1.5 % of answers
in the simulated worlds) reads far below the rest (sample skewness about -2.7 in
`tests/decision/test_plan_bound.py`'s world, 0 without the derails). A left-leaning
sample's mean and spread also move together: one low task lowers the mean and widens
the bound at once. There the formula planned 111 tasks that held in 71 % of simulated
runs against the 80 % stated. Drawing the planned number of tasks from the measured
ones and applying the decision's bound, the control's floor checks and the evidence
rule reads all of that off the data instead of modelling it; where the retentions are
near normal it agrees with the formula (`bench/bench_plan_power.py`).

What it assumes: the measured tasks stand for the class (a plan is only as good as the
run it reads); a design with other repeats than the run's keeps the shape of the
per-task spread and scales its width by sqrt(between^2 + within^2 / repeats) (the
split measured on the per-repeat ratios), and the control's per-task readings, drawn
with their tasks, by the same factor. Past `RESAMPLE_LIMIT` tasks the normal formula is used:
the skew correction has faded there (and nobody buys that many tasks by accident).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from tokenlens.compress.arms import CONTROL
from tokenlens.decision.curve import ALPHA, MAX_NOISE_FLOOR, TASK_RATIO_CAP, task_ratios
from tokenlens.decision.derails import set_aside
from tokenlens.decision.grades import ClassGrades, pick_judge, prepare
from tokenlens.stats import Spread, lower_bounds, spread, t_quantile, tasks_for_power

#: Simulated runs per size looked at (the share's standard error is ~1.3 points at 80 %).
DRAWS = 1000
#: Largest size read by resampling; past it, the normal formula.
RESAMPLE_LIMIT = 2000
#: Draws made at a time.
_BLOCK = 250
#: The search stops when the size is known to within this share (the drawn share's own
#: noise moves the crossing by about as much).
PRECISION = 0.03
_EPS = 1e-12


@dataclass(frozen=True)
class TaskSample:
    """One arm's per-task retentions as the decision's bound read them, with the
    control's per-task readings of the same tasks (for the floor's checks)."""

    ratios: np.ndarray
    #: Per task: the control's summed capped retentions and its pair counts (0: none).
    floor_num: np.ndarray
    floor_den: np.ndarray
    repeats: float  # the run's mean pairs per task
    split: Spread  # between / within spread of the per-repeat ratios

    @property
    def floor_mean(self) -> np.ndarray:
        """Per task: the control's mean capped retention (1.0 where it has no pair)."""
        den = np.where(self.floor_den > 0, self.floor_den, 1.0)
        return np.where(self.floor_den > 0, self.floor_num / den, 1.0)

    @property
    def sd(self) -> float:
        return float(np.std(self.ratios, ddof=1)) if self.ratios.size > 1 else 0.0

    def spread(self) -> Spread:
        """The per-task spread at the run's repeats, split between / within in the
        measured proportions (what the planner's other numbers read)."""
        within = self.split.within or 0.0
        raw = math.sqrt(self.split.between**2 + within**2 / max(self.repeats, 1.0))
        if raw <= 0:
            return Spread(self.sd, 0.0)
        scale = self.sd / raw
        return Spread(self.split.between * scale, within * scale)

    def width_at(self, repeats: int) -> float:
        """How much wider (> 1) or narrower the per-task spread is at `repeats`."""
        if self.split.within is None:  # one repeat measured: all of it counts as between
            return 1.0
        b2, w2 = self.split.between**2, self.split.within**2
        here = b2 + w2 / max(self.repeats, 1.0)
        return math.sqrt((b2 + w2 / max(repeats, 1)) / here) if here > 0 else 1.0


def task_samples(grades: pd.DataFrame, *, judge: str | None) -> dict[tuple[str, str], TaskSample]:
    """(class, arm) -> its `TaskSample`, read from a run's grades table with the judge
    that decided (`judge`: the curve's `judge` column)."""
    df, _ = pick_judge(prepare(grades), judge)
    out: dict[tuple[str, str], TaskSample] = {}
    for task_class, class_df in df.groupby("task_class", sort=True):
        grades_ = ClassGrades.of(class_df)
        n = len(grades_.tasks)
        ctrl = grades_.arms.get(CONTROL)
        num = ctrl.per_task(ctrl.capped, n) if ctrl is not None else np.zeros(n)
        den = ctrl.counts(n) if ctrl is not None else np.zeros(n)
        for arm, all_pairs in grades_.arms.items():
            if arm == CONTROL:
                continue
            pairs = set_aside(all_pairs)
            ratios, tasks = task_ratios(pairs, n)
            if ratios.size < 2:
                continue
            ok = pairs.reference > 0
            cell = np.minimum(pairs.comp[ok] / pairs.reference[ok], TASK_RATIO_CAP)
            split = spread(cell, np.ones(cell.size), pairs.task[ok], float(cell.mean()))
            out[str(task_class), arm] = TaskSample(
                ratios,
                num[tasks],
                den[tasks],
                repeats=max(pairs.n_pairs / ratios.size, 1.0),
                split=split or Spread(float(np.std(ratios, ddof=1)), None),
            )
    return out


def held_share(
    sample: TaskSample,
    tasks: int,
    repeats: int,
    *,
    tolerance: float,
    certain: bool = False,
    draws: int = DRAWS,
    seed: int = 0,
) -> float:
    """Share of `draws` calibrations of `tasks` tasks x `repeats` whose bound holds the
    arm (`certain`: and whose floor is narrow enough for a ✓)."""
    centre = float(sample.ratios.mean())
    width = sample.width_at(repeats)
    den_all = float(sample.floor_den.sum())
    kept_at = float(sample.floor_num.sum()) / den_all if den_all > 0 else 1.0
    q_floor = t_quantile(0.975, tasks - 1)
    held = 0
    for block, start in enumerate(range(0, draws, _BLOCK)):
        # drawn task by task, so a larger size's draws extend a smaller one's: the share
        # then grows smoothly with the size and the search finds one crossing
        rng = np.random.default_rng([seed, block])
        pick = rng.integers(0, sample.ratios.size, size=(tasks, min(_BLOCK, draws - start))).T
        ratios = np.minimum(centre + (sample.ratios[pick] - centre) * width, TASK_RATIO_CAP)
        ok = lower_bounds(ratios, 1 - ALPHA) >= tolerance - _EPS
        den = sample.floor_den[pick]
        num = den * (kept_at + (sample.floor_mean[pick] - kept_at) * width)
        total = den.sum(axis=1)
        # the control's floor, as `tokenlens.decision.curve` reads it; a draw of tasks
        # without a control pair is refused, as the decision refuses such a class
        measured = total > 0
        share = np.where(measured, total, 1.0)
        kept = num.sum(axis=1) / share  # capped control retention
        influence = (num - kept[:, None] * den) / share[:, None]
        se = np.sqrt(tasks / (tasks - 1) * np.sum(influence**2, axis=1))
        floor, floor_low = 1.0 - kept, np.maximum(1.0 - kept - q_floor * se, 0.0)
        ok &= measured & (tolerance - floor > _EPS) & (floor_low <= MAX_NOISE_FLOOR + _EPS)
        if certain:
            ok &= floor <= 1.0 - tolerance + _EPS
        held += int(ok.sum())
    return held / draws


def tasks_to_hold(
    sample: TaskSample,
    repeats: int,
    *,
    tolerance: float,
    power: float,
    minimum: int,
    certain: bool = False,
) -> int | None:
    """Fewest tasks (at least `minimum`, to within `PRECISION` of the size) whose
    calibration holds the arm in `power` of draws; None when the arm's measured
    retention is not above the tolerance, or no size up to the normal formula's limit
    gets there. The search starts at the normal formula's size, which the skewed
    spread usually makes too small."""
    if not sample.ratios.mean() > tolerance or not sample.floor_den.sum() > 0:
        return None  # nothing to certify, or no control: the decision refuses the class
    floor = 1.0 - float(sample.floor_num.sum() / sample.floor_den.sum())
    if certain and floor > 1.0 - tolerance + _EPS:
        return None  # a floor wider than the tolerance's loss never vouches for a ✓

    def enough(n: int) -> bool:
        return held_share(sample, n, repeats, tolerance=tolerance, certain=certain) >= power

    low = max(minimum, 2)
    if enough(low):
        return low
    guess = _formula(sample, repeats, tolerance=tolerance, power=power) or low
    high = min(max(guess, low + 1), RESAMPLE_LIMIT)
    while not enough(high):  # low fails; grow until a size holds
        low = high
        high = math.ceil(high * 1.3) + 1
        if high > RESAMPLE_LIMIT:
            formula = _formula(sample, repeats, tolerance=tolerance, power=power)
            return None if formula is None else max(formula, RESAMPLE_LIMIT)
    while high - low > max(1, PRECISION * high):
        mid = (low + high) // 2
        if enough(mid):
            high = mid
        else:
            low = mid
    return high


def _formula(sample: TaskSample, repeats: int, *, tolerance: float, power: float) -> int | None:
    margin = float(sample.ratios.mean()) - tolerance
    return tasks_for_power(margin, sample.spread(), repeats, alpha=ALPHA, power=power)
