"""From judged pairs to the per-class x arm quality curve, walked and marked.

The rules, in the order they apply to each task class:

1. The control arm (two independent cleartext answers) gives the noise floor,
   1 - capped mean control retention, with a task-clustered interval. A class is refused
   (unmeasurable) when the floor's interval lies wholly above 10 % — the instrument is a
   coin there — or when the floor reaches the tolerance itself (the bar
   `tolerance - floor` would be 0 or negative and any arm would "hold").
2. `interval` mode (default) holds an arm when the one-sided 95 % lower bound of its
   per-task retention (skew-corrected t, see `tokenlens.stats`) reaches the tolerance,
   read without the derailed answers that cannot be compression's harm
   (`tokenlens.decision.derails`),
   and the class has the tasks the minimum-evidence rule asks for
   (`tokenlens.decision.evidence`).
   `mean` mode is the seed's rule: capped mean >= tolerance - floor.
3. The walk (`tokenlens.decision.ladder`) goes from the gentlest arm and stops at the
   first failure; its choice is stored in the `chosen` column, so nothing downstream
   re-derives it.
4. A held arm is ✓-worthy (`certain`) when the class also has the tasks a ✓ needs and
   its floor is no wider than the loss the tolerance allows (a 5 % wobble cannot vouch
   for a 1 % tolerance); otherwise it is at most ? (provisional).

Every retention in the table is capped into 0-1: readable, and what decisions read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, TypedDict

import numpy as np
import pandas as pd
import pyarrow as pa

from tokenlens.compress.arms import CONTROL, Arm
from tokenlens.decision.derails import set_aside
from tokenlens.decision.evidence import tasks_for_measured, tasks_for_provisional
from tokenlens.decision.grades import (
    ArmPairs,
    ClassGrades,
    Mode,
    check_mode,
    pick_judge,
    prepare,
)
from tokenlens.decision.ladder import Rung, walk_ladder
from tokenlens.stats import Estimate, IntervalMethod, ratio_estimate, split_noise_floor, spread
from tokenlens.tables import CURVE, CurveRow

#: The curve's pooled pseudo-class (cannot clash: task classes are [a-z0-9-]).
ALL_CLASSES = "__all__"
#: A control that loses more than this is a coin, not an instrument.
MAX_NOISE_FLOOR = 0.10
#: The rule's one-sided error: the chance of holding an arm that sits at the tolerance.
ALPHA = 0.05
#: A task's retention counts at most this much. Compression earns no credit (the seed's
#: cap), but a task's ratio over ~3 replicates wobbles a few percent either way, so a cap
#: at 1.0 would bias every lossless arm down; 1.1 (about two such wobbles) trims only the
#: outliers a derailed *uncompressed* answer makes (90 over 30 reads as 300 %), which
#: otherwise lift the mean of a harmful arm. Chosen by simulation (bench_simulation.py).
TASK_RATIO_CAP = 1.1
_EPS = 1e-12


@dataclass(frozen=True)
class Curve:
    """The per-class x arm quality curve (columns of `tokenlens.tables.CURVE`)."""

    table: pd.DataFrame
    tolerance: float
    mode: Mode
    judge: str
    interval_method: IntervalMethod = "skew_t"
    #: Classes of the grades table that have no row here (e.g. only second-pass
    #: judgements): `decide` still lists them, unmeasurable, instead of dropping them.
    empty_classes: tuple[str, ...] = ()

    def to_arrow(self) -> pa.Table:
        return pa.Table.from_pandas(self.table, schema=CURVE, preserve_index=False)

    def classes(self) -> list[str]:
        seen = [*self.table["task_class"], *self.empty_classes]
        return [c for c in dict.fromkeys(seen) if c != ALL_CLASSES]

    def rows(self, task_class: str) -> pd.DataFrame:
        return self.table[self.table["task_class"] == task_class]


def _clip(value: float | None) -> float | None:
    if value is None or math.isnan(value):
        return None
    return min(max(value, 0.0), 1.0)


def _rank(arm_key: str) -> tuple[int, float]:
    return Arm.parse(arm_key).ladder_rank


@dataclass(frozen=True)
class _Floor:
    present: bool
    value: float = math.nan
    low: float = math.nan
    high: float = math.nan
    judge: float | None = None
    sampling: float | None = None
    n_tasks: int = 0
    n_pairs: int = 0

    def measurable(self, tolerance: float, mode: Mode) -> bool:
        if not self.present or tolerance - self.value <= _EPS:
            return False
        # interval mode refuses only when the floor is shown to exceed the limit; with one
        # task (no interval) the point estimate is all there is.
        reading = self.low if mode == "interval" and not math.isnan(self.low) else self.value
        return reading <= MAX_NOISE_FLOOR + _EPS


def _floor(grades: ClassGrades, df: pd.DataFrame, method: IntervalMethod, seed: int) -> _Floor:
    ctrl = grades.arms.get(CONTROL)
    if ctrl is None or ctrl.n_pairs == 0:
        return _Floor(False)
    n = len(grades.tasks)
    counts = ctrl.counts(n)
    keep = counts > 0
    # The floor's two-sided interval only decides measurability: the plain cluster t
    # (the skew correction is for the arms' one-sided bounds, where harm is skewed).
    floor_method: IntervalMethod = "cluster_t" if method == "skew_t" else method
    capped = ratio_estimate(
        ctrl.per_task(ctrl.capped, n)[keep], counts[keep], method=floor_method, seed=seed
    ).shifted(1.0, negate=True)
    split = _floor_split(df, capped.mean)
    return _Floor(
        True,
        value=capped.mean,
        low=math.nan if capped.low is None else max(capped.low, 0.0),
        # A floor is a share of quality lost: a t bound past 100 % says nothing more.
        high=math.nan if capped.high is None else min(capped.high, 1.0),
        judge=None if split is None else split.judge,
        sampling=None if split is None else split.sampling,
        n_tasks=int(keep.sum()),
        n_pairs=ctrl.n_pairs,
    )


def _floor_split(df: pd.DataFrame, floor: float) -> Any:
    control = df[(df["arm"] == CONTROL) & df["usable"]]
    if not (control["judge_pass"] > 0).any():
        return None
    keys = ["task_id", "replicate"]
    once = control[control["judge_pass"] == 0].set_index(keys)["ret_raw"]
    again = control[control["judge_pass"] == 1].set_index(keys)["ret_raw"]
    joined = pd.concat([once.rename("a"), again.rename("b")], axis=1, join="inner")
    return split_noise_floor(
        joined["a"].to_numpy(), joined["b"].to_numpy(), floor=floor, all_control=once.to_numpy()
    )


def _pooled(pairs: ArmPairs, n: int, method: IntervalMethod, seed: int, alpha: float) -> Estimate:
    """Mean over tasks of each task's own retention (its compressed grades over its
    uncompressed readings), with a t bound over tasks. Every task counts once, so harm
    concentrated on hard, low-scoring tasks is not diluted by easy ones."""
    ratios, _ = task_ratios(pairs, n)
    return ratio_estimate(
        ratios,
        np.ones_like(ratios),
        confidence=1 - 2 * alpha,  # both ends are one-sided (1 - alpha) bounds
        method=method,
        seed=seed,
    )


def task_ratios(pairs: ArmPairs, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Each task's retention as the bound reads it (capped at `TASK_RATIO_CAP`), and the
    indices of the tasks they belong to (the planner resamples them with the control's)."""
    reference = pairs.per_task(pairs.reference, n)
    keep = (pairs.counts(n) > 0) & (reference > 0)
    ratios = pairs.per_task(pairs.comp, n)[keep] / reference[keep]
    return np.asarray(np.minimum(ratios, TASK_RATIO_CAP), dtype=float), np.flatnonzero(keep)


def _worst(pairs: ArmPairs, n: int) -> float:
    counts = pairs.counts(n)
    keep = counts > 0
    if not keep.any():
        return math.nan
    return float(np.min(pairs.per_task(pairs.capped, n)[keep] / counts[keep]))


class _ClassColumns(TypedDict):
    """The columns of a `CurveRow` every arm of one class shares."""

    task_class: str
    judge: str
    noise_floor: float | None
    noise_floor_low: float | None
    noise_floor_high: float | None
    floor_judge: float | None
    floor_sampling: float | None
    bar: float | None
    tasks_needed: int | None
    tasks_needed_measured: int | None


def _class_rows(
    df: pd.DataFrame,
    task_class: str,
    *,
    tolerance: float,
    mode: Mode,
    judge: str,
    method: IntervalMethod,
    seed: int,
    alpha: float,
    refuse_lost_facts: bool = False,
) -> list[CurveRow]:
    grades = ClassGrades.of(df)
    n = len(grades.tasks)
    floor = _floor(grades, df, method, seed)
    measurable = floor.measurable(tolerance, mode)
    need_provisional = tasks_for_provisional(tolerance) if mode == "interval" else 2
    need_measured = tasks_for_measured(tolerance) if mode == "interval" else 1
    class_cols: _ClassColumns = {
        "task_class": task_class,
        "judge": judge,
        "noise_floor": floor.value,
        "noise_floor_low": floor.low,
        "noise_floor_high": floor.high,
        "floor_judge": floor.judge,
        "floor_sampling": floor.sampling,
        "bar": tolerance - floor.value,
        "tasks_needed": need_provisional,
        "tasks_needed_measured": need_measured,
    }
    out: list[CurveRow] = []
    if floor.present:
        ctrl = grades.arms[CONTROL]
        out.append(
            {
                **class_cols,
                "arm": CONTROL,
                "method": CONTROL,
                "rate": None,
                "n_tasks": floor.n_tasks,
                "n_pairs": floor.n_pairs,
                "n_errors": ctrl.n_errors,
                "n_broken": ctrl.n_broken,
                "reduction": 0.0,
                "retention_mean": 1.0 - floor.value,
                "retention": _clip(1.0 - floor.value),
                "retention_low": _clip(1.0 - floor.high),
                "retention_high": _clip(1.0 - floor.low),
                "sd_between": None,
                "sd_within": None,
                "worst_case": _worst(ctrl, n),
                "passes": False,
                "certain": False,
                "chosen": False,
                "status": "control",
                "bound_level": 0.975,  # each end of the floor's two-sided 95 % interval
                "n_set_aside": None,
                "fabricated_lines": None,
                "unmarked_drops": None,
                "facts_lost": None,
            }
        )

    arm_rows: list[CurveRow] = []
    rungs: list[Rung] = []
    for arm_key, all_pairs in grades.arms.items():
        if arm_key == CONTROL:
            continue
        # the bound reads the arm without readings that cannot be compression's harm
        pairs = set_aside(all_pairs) if mode == "interval" else all_pairs
        n_arm = int((pairs.counts(n) > 0).sum())
        cap_mean = float(all_pairs.capped.mean()) if all_pairs.n_pairs else math.nan
        est = _pooled(pairs, n, method, seed, alpha) if pairs.n_pairs else None
        low = None if est is None else est.low
        sp = None
        if est is not None and not math.isnan(est.mean):
            with np.errstate(divide="ignore", invalid="ignore"):
                cell = pairs.comp / pairs.reference
            ok = np.isfinite(cell)
            sp = spread(cell[ok], np.ones(int(ok.sum())), pairs.task[ok], est.mean)
        if mode == "interval":
            enough = n_arm >= need_provisional
            passes = measurable and enough and low is not None and low >= tolerance - _EPS
            certain = passes and n_arm >= need_measured
        else:
            passes = (
                measurable
                and not math.isnan(cap_mean)
                and cap_mean >= tolerance - floor.value - _EPS
            )
            certain = passes and cap_mean >= tolerance - _EPS
        certain = certain and floor.value <= (1.0 - tolerance) + _EPS
        # compression never invents: an arm with a fabricated line or an unmarked drop in a
        # compressed tool output is refused whatever its grades (see tokenlens.fidelity);
        # a tool-output rung also with a fact lost (`refuse_lost_facts`)
        faithful = all_pairs.faithful and not (refuse_lost_facts and all_pairs.fidelity[2])
        passes, certain = passes and faithful, certain and faithful
        arm_rows.append(
            {
                **class_cols,
                "arm": arm_key,
                "method": pairs.method,
                "rate": pairs.rate,
                "n_tasks": n_arm,
                "n_pairs": all_pairs.n_pairs,
                "n_errors": pairs.n_errors,
                "n_broken": pairs.n_broken,
                "reduction": pairs.reduction,
                "retention_mean": cap_mean,
                "retention": None if est is None else _clip(est.mean),
                "retention_low": None if est is None else _clip(est.low),
                "retention_high": None if est is None else _clip(est.high),
                "sd_between": None if sp is None else sp.between,
                "sd_within": None if sp is None else sp.within,
                "worst_case": _worst(all_pairs, n),
                "passes": bool(passes),
                "certain": bool(certain),
                "chosen": False,
                "status": "",
                "bound_level": round(1.0 - alpha, 4),
                "n_set_aside": all_pairs.n_pairs - pairs.n_pairs,
                "fabricated_lines": all_pairs.fidelity[0],
                "unmarked_drops": all_pairs.fidelity[1],
                "facts_lost": all_pairs.fidelity[2],
            }
        )
        rungs.append(
            Rung(arm_key, pairs.reduction, bool(passes), _rank(arm_key), all_pairs.n_pairs > 0)
        )

    walk = walk_ladder(rungs)
    too_few = mode == "interval" and n < need_provisional
    for row in arm_rows:
        status = walk.statuses[row["arm"]]
        if status not in ("no_savings", "not_measured"):
            if not measurable:
                status = "unmeasurable"
            elif too_few:
                status = "too_few_tasks"
            elif status == "failed" and (
                row["fabricated_lines"]
                or row["unmarked_drops"]
                or (refuse_lost_facts and row["facts_lost"])
            ):
                status = "unfaithful"
        row["status"] = status
        row["chosen"] = measurable and not too_few and row["arm"] == walk.chosen
    return out + arm_rows


def aggregate(
    grades: pd.DataFrame,
    *,
    tolerance: float,
    mode: Mode = "interval",
    judge: str | None = None,
    seed: int = 0,
    interval_method: IntervalMethod = "skew_t",
    pooled: bool = True,
    alpha: float = ALPHA,
    refuse_lost_facts: bool = False,
) -> Curve:
    """Grades (columns of `tables.GRADES`) -> per-class x arm curve, walked and marked.

    Rows with an error or a missing grade are counted in `n_errors`, never scored;
    a cleartext grade of 0 is counted in `n_broken` and left out of retention.
    `alpha` is the one-sided error of the bounds; the sequential design spends a share
    of the 5 % at each look (`tokenlens.decision.sequential`). `refuse_lost_facts` refuses
    an arm that lost any task's fact as it refuses an unfaithful one (the tool-output
    rungs' rule, `tokenlens.decision.tool_output`).
    """
    mode = check_mode(mode)
    if not 0.0 < alpha < 0.5:
        raise ValueError(f"alpha must be in (0, 0.5), got {alpha}")
    if not 0.0 < tolerance <= 1.0:
        raise ValueError(f"tolerance must be in (0, 1], got {tolerance}")
    if grades.empty:  # nothing was graded: every class (and the default) unmeasurable
        return Curve(pd.DataFrame(columns=CURVE.names), tolerance, mode, judge or "")
    df, judge_name = pick_judge(prepare(grades), judge)
    kwargs: dict[str, Any] = {
        "tolerance": tolerance,
        "mode": mode,
        "judge": judge_name,
        "method": interval_method,
        "seed": seed,
        "alpha": alpha,
        "refuse_lost_facts": refuse_lost_facts,
    }
    rows: list[CurveRow] = []
    for task_class, class_df in df.groupby("task_class", sort=True):
        rows.extend(_class_rows(class_df, str(task_class), **kwargs))
    if pooled:  # the `default` entry; the simulation study skips it to save time
        rows.extend(_class_rows(df, ALL_CLASSES, **kwargs))
    table = pd.DataFrame(rows, columns=CURVE.names)
    empty = tuple(sorted(set(df["task_class"].astype(str)) - set(table["task_class"])))
    return Curve(table, tolerance, mode, judge_name, interval_method, empty)
