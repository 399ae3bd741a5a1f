"""From judged pairs to a quality curve, and from the curve to a published policy.

The rules, in the order they apply to each task class:

1. The control arm (two independent cleartext answers) gives the class's noise floor,
   1 - capped mean control retention. A floor above 10 % means the instrument cannot
   tell: the class is refused (`none`, unmeasurable), whatever the arms read.
2. The bar is tolerance - floor: compression is charged only for loss beyond the noise.
3. Arms are walked from the gentlest (least measured reduction) upward; the walk stops at
   the first arm that fails. An arm that "passes" after a failure is a lucky draw: it is
   listed as ignored, never chosen. Arms that saved (almost) nothing are skipped: they
   neither count as a held arm with savings nor stop the walk.
4. `mean` mode is the seed's rule (capped mean >= bar). `interval` mode (default)
   also needs the lower end of the noise-adjusted interval to reach the tolerance
   (non-inferiority), so one lucky draw cannot certify an arm.
5. The chosen arm is ✓ measured when it also clears the unadjusted tolerance (it holds
   without borrowing from the noise floor; in interval mode the interval's low end too)
   and the floor is no wider than the loss the tolerance allows; else ? provisional:
   the harness could not detect harm because the loss sits inside the noise floor.

The statistics live in `tokenlens.stats`; this module only groups and applies rules.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

import numpy as np
import pandas as pd
import pyarrow as pa

from tokenlens.compress.arms import CONTROL, Arm
from tokenlens.errors import JudgeError, TokenLensError
from tokenlens.policy import Interval, NoneCause, Policy, PolicyEntry
from tokenlens.stats import (
    Estimate,
    IntervalMethod,
    ratio_difference,
    ratio_estimate,
    retention,
    spearman,
    split_noise_floor,
)
from tokenlens.tables import CURVE

Mode = Literal["interval", "mean"]

#: The curve's pooled pseudo-class (cannot clash: task classes are [a-z0-9-]).
ALL_CLASSES = "__all__"
#: A control that loses more than this is a coin, not an instrument.
MAX_NOISE_FLOOR = 0.10
#: An arm saving less than this fraction of tokens on a class compressed nothing there.
MIN_REDUCTION = 0.005
EXIT_OK = 0
#: `tokenlens calibrate` exit code when a requested class is unmeasurable or no arm held.
EXIT_UNRESOLVED = 4

_EPS = 1e-12
_REQUIRED = (
    "task_id",
    "task_class",
    "arm",
    "method",
    "rate",
    "replicate",
    "judge",
    "grade_clear",
    "grade_comp",
    "reduction",
)


@dataclass(frozen=True)
class Curve:
    """The per-class x arm quality curve (columns of `tokenlens.tables.CURVE`)."""

    table: pd.DataFrame
    tolerance: float
    mode: Mode
    judge: str
    interval_method: IntervalMethod = "cluster_t"

    def to_arrow(self) -> pa.Table:
        return pa.Table.from_pandas(self.table, schema=CURVE, preserve_index=False)

    def classes(self) -> list[str]:
        return [c for c in dict.fromkeys(self.table["task_class"]) if c != ALL_CLASSES]

    def rows(self, task_class: str) -> pd.DataFrame:
        return self.table[self.table["task_class"] == task_class]


# --------------------------------------------------------------------------- the walk


@dataclass(frozen=True)
class Rung:
    """What the walk needs to know about one arm on one class."""

    arm: str
    reduction: float
    passes: bool
    rank: tuple[int, float] = (0, 0.0)


@dataclass(frozen=True)
class Walk:
    chosen: str | None
    statuses: dict[str, str]
    ignored: tuple[str, ...]
    first_failure: str | None


def walk_ladder(rungs: Iterable[Rung], *, min_reduction: float = MIN_REDUCTION) -> Walk:
    """Gentlest first, stop at the first failure; what passes after it is ignored."""
    statuses: dict[str, str] = {}
    compressible: list[Rung] = []
    for rung in rungs:
        if not (rung.reduction >= min_reduction):  # NaN counts as nothing saved
            statuses[rung.arm] = "no_savings"
        else:
            compressible.append(rung)
    compressible.sort(key=lambda r: (r.reduction, r.rank))
    chosen: str | None = None
    first_failure: str | None = None
    ignored: list[str] = []
    for rung in compressible:
        if first_failure is None:
            if rung.passes:
                statuses[rung.arm] = "held"
                chosen = rung.arm
            else:
                statuses[rung.arm] = "failed"
                first_failure = rung.arm
        elif rung.passes:
            statuses[rung.arm] = "ignored"
            ignored.append(rung.arm)
        else:
            statuses[rung.arm] = "not_reached"
    return Walk(chosen, statuses, tuple(ignored), first_failure)


# --------------------------------------------------------------------------- aggregate


def _prepare(grades: pd.DataFrame) -> pd.DataFrame:
    missing = [c for c in _REQUIRED if c not in grades.columns]
    if missing:
        raise TokenLensError(f"grades table: missing column(s) {', '.join(missing)}")
    df = grades.copy()
    if "error" not in df.columns:
        df["error"] = None
    if "judge_pass" not in df.columns:
        df["judge_pass"] = 0
    df["judge_pass"] = df["judge_pass"].fillna(0).astype(int)
    for col in ("grade_clear", "grade_comp", "reduction", "rate"):
        df[col] = pd.to_numeric(df[col], errors="coerce").astype(float)
    has_grades = df["grade_clear"].notna() & df["grade_comp"].notna()
    df["valid"] = df["error"].isna() & has_grades
    out_of_range = df["valid"] & (
        ~df["grade_clear"].between(0, 100) | ~df["grade_comp"].between(0, 100)
    )
    if out_of_range.any():
        row = df[out_of_range].iloc[0]
        raise JudgeError(
            f"grades table: task {row['task_id']} arm {row['arm']} replicate "
            f"{row['replicate']} has grades {row['grade_clear']}/{row['grade_comp']} "
            "outside 0-100 (a bad grade must be an error row, not a number)"
        )
    df["broken"] = df["valid"] & (df["grade_clear"] == 0)
    df["usable"] = df["valid"] & (df["grade_clear"] > 0)
    df["ret_cap"] = retention(df["grade_comp"], df["grade_clear"])
    df["ret_raw"] = retention(df["grade_comp"], df["grade_clear"], cap=False)
    return df


@dataclass(frozen=True)
class _Cols:
    """One class's grades as numpy arrays (pandas indexing per arm costs ~100x more)."""

    task: np.ndarray
    arm: np.ndarray
    method: np.ndarray
    rate: np.ndarray
    first: np.ndarray
    valid: np.ndarray
    broken: np.ndarray
    usable: np.ndarray
    comp: np.ndarray
    clear: np.ndarray
    capped: np.ndarray
    reduction: np.ndarray
    code: np.ndarray  # index into `tasks`, -1 when the task has no usable pair
    tasks: list[str]

    @classmethod
    def of(cls, df: pd.DataFrame) -> _Cols:
        task = df["task_id"].astype(str).to_numpy()
        first = df["judge_pass"].to_numpy(int) == 0
        usable = df["usable"].to_numpy(bool)
        tasks = sorted(set(task[first & usable].tolist()))
        return cls(
            task=task,
            arm=df["arm"].astype(str).to_numpy(),
            method=df["method"].astype(str).to_numpy(),
            rate=df["rate"].to_numpy(float),
            first=first,
            valid=df["valid"].to_numpy(bool),
            broken=df["broken"].to_numpy(bool),
            usable=usable,
            comp=df["grade_comp"].to_numpy(float),
            clear=df["grade_clear"].to_numpy(float),
            capped=df["ret_cap"].to_numpy(float),
            reduction=df["reduction"].to_numpy(float),
            code=pd.Index(tasks).get_indexer(task) if tasks else np.full(len(task), -1),
            tasks=tasks,
        )


@dataclass(frozen=True)
class _TaskSums:
    """Per-task sums over usable first-judgement pairs of one arm, aligned to the tasks."""

    comp: np.ndarray
    clear: np.ndarray
    capped: np.ndarray
    count: np.ndarray
    reduction: float
    n_errors: int
    n_broken: int

    @classmethod
    def of(cls, cols: _Cols, rows: np.ndarray) -> _TaskSums:
        n = len(cols.tasks)
        use = rows & cols.usable
        codes = cols.code[use]

        def total(values: np.ndarray | None) -> np.ndarray:
            weights = None if values is None else values[use]
            return np.bincount(codes, weights=weights, minlength=n).astype(float)

        has_red = rows & ~np.isnan(cols.reduction) & (cols.code >= 0)
        red_sum = np.bincount(cols.code[has_red], cols.reduction[has_red], minlength=n)
        red_n = np.bincount(cols.code[has_red], minlength=n)
        seen = red_n > 0
        reduction = float(np.mean(red_sum[seen] / red_n[seen])) if seen.any() else math.nan
        return cls(
            comp=total(cols.comp),
            clear=total(cols.clear),
            capped=total(cols.capped),
            count=total(None),
            reduction=reduction,
            n_errors=int((rows & ~cols.valid).sum()),
            n_broken=int((rows & cols.broken).sum()),
        )

    def present(self) -> np.ndarray:
        return self.count > 0


def _lohi(est: Estimate | None) -> tuple[float | None, float | None]:
    return (None, None) if est is None else (est.low, est.high)


def _class_rows(
    df: pd.DataFrame,
    task_class: str,
    *,
    tolerance: float,
    mode: Mode,
    judge: str,
    method: IntervalMethod,
    seed: int,
) -> list[dict[str, Any]]:
    cols = _Cols.of(df)
    is_control = cols.arm == CONTROL
    ctrl = _TaskSums.of(cols, cols.first & is_control)
    have_control = bool(ctrl.count.sum() > 0)

    floor = floor_low = floor_high = bar = math.nan
    ctrl_raw: Estimate | None = None
    floor_judge = floor_sampling = None
    if have_control:
        keep = ctrl.present()
        capped = ratio_estimate(ctrl.capped[keep], ctrl.count[keep], method=method, seed=seed)
        floor_est = capped.shifted(1.0, negate=True)
        floor = floor_est.mean
        floor_low = math.nan if floor_est.low is None else max(floor_est.low, 0.0)
        floor_high = math.nan if floor_est.high is None else floor_est.high
        bar = tolerance - floor
        ctrl_raw = ratio_estimate(ctrl.comp[keep], ctrl.clear[keep], method=method, seed=seed)
        split = _floor_split(df, floor) if not cols.first.all() else None
        if split is not None:
            floor_judge, floor_sampling = split.judge, split.sampling
    measurable = have_control and floor <= MAX_NOISE_FLOOR + _EPS

    class_cols = {
        "task_class": task_class,
        "judge": judge,
        "noise_floor": floor,
        "noise_floor_low": floor_low,
        "noise_floor_high": floor_high,
        "floor_judge": floor_judge,
        "floor_sampling": floor_sampling,
        "bar": bar,
    }
    out: list[dict[str, Any]] = []
    if have_control:
        lo, hi = _lohi(ctrl_raw)
        out.append(
            {
                **class_cols,
                "arm": CONTROL,
                "method": CONTROL,
                "rate": None,
                "n_tasks": int(ctrl.present().sum()),
                "n_pairs": int(ctrl.count.sum()),
                "n_errors": ctrl.n_errors,
                "n_broken": ctrl.n_broken,
                "reduction": 0.0,
                "retention_mean": 1.0 - floor,
                "retention_uncapped": ctrl_raw.mean if ctrl_raw else math.nan,
                "retention_low": lo,
                "retention_high": hi,
                "adjusted_mean": None,
                "adjusted_low": None,
                "adjusted_high": None,
                "worst_case": _worst(ctrl),
                "passes": False,
                "certain": False,
                "status": "control",
            }
        )

    arm_rows: list[dict[str, Any]] = []
    rungs: list[Rung] = []
    for arm_key in sorted(set(cols.arm[cols.first & ~is_control].tolist())):
        mask = cols.first & (cols.arm == arm_key)
        sums = _TaskSums.of(cols, mask)
        keep = sums.present()
        n_pairs = int(sums.count.sum())
        raw: Estimate | None = None
        adjusted: Estimate | None = None
        cap_mean = math.nan
        if n_pairs:
            cap_mean = float(sums.capped.sum() / sums.count.sum())
            raw = ratio_estimate(sums.comp[keep], sums.clear[keep], method=method, seed=seed)
            if have_control:
                both = keep | ctrl.present()
                diff = ratio_difference(
                    sums.comp[both],
                    sums.clear[both],
                    ctrl.comp[both],
                    ctrl.clear[both],
                    method=method,
                    seed=seed,
                )
                adjusted = diff.shifted(1.0)
        passes, certain = _judge_arm(cap_mean, raw, adjusted, bar, tolerance, mode)
        passes = passes and measurable
        certain = certain and passes
        lo, hi = _lohi(raw)
        alo, ahi = _lohi(adjusted)
        index = int(np.flatnonzero(mask)[0])
        rate = cols.rate[index]
        arm_rows.append(
            {
                **class_cols,
                "arm": arm_key,
                "method": str(cols.method[index]),
                "rate": None if math.isnan(rate) else float(rate),
                "n_tasks": int(keep.sum()),
                "n_pairs": n_pairs,
                "n_errors": sums.n_errors,
                "n_broken": sums.n_broken,
                "reduction": sums.reduction,
                "retention_mean": cap_mean,
                "retention_uncapped": raw.mean if raw else math.nan,
                "retention_low": lo,
                "retention_high": hi,
                "adjusted_mean": adjusted.mean if adjusted else None,
                "adjusted_low": alo,
                "adjusted_high": ahi,
                "worst_case": _worst(sums),
                "passes": passes,
                "certain": certain,
                "status": "",
            }
        )
        rungs.append(Rung(arm_key, sums.reduction, passes, _rank(arm_key)))

    walk = walk_ladder(rungs)
    for row in arm_rows:
        row["status"] = walk.statuses[row["arm"]] if measurable else "unmeasurable"
    return out + arm_rows


def _rank(arm_key: str) -> tuple[int, float]:
    try:
        return Arm.parse(arm_key).ladder_rank
    except ValueError:
        return (99, 0.0)


def _worst(sums: _TaskSums) -> float:
    keep = sums.present()
    if not keep.any():
        return math.nan
    return float(np.min(sums.capped[keep] / sums.count[keep]))


def _judge_arm(
    cap_mean: float,
    raw: Estimate | None,
    adjusted: Estimate | None,
    bar: float,
    tolerance: float,
    mode: Mode,
) -> tuple[bool, bool]:
    """(passes the rule, clears the unadjusted tolerance too) for one arm on one class."""
    if math.isnan(cap_mean) or math.isnan(bar):
        return False, False
    passes = cap_mean >= bar - _EPS
    # ✓ needs the loss resolved beyond the noise: the arm holds without the floor's help,
    # and the floor itself is no wider than the loss the tolerance allows (a 5 % wobble
    # cannot vouch for a 1 % tolerance).
    floor = tolerance - bar
    certain = cap_mean >= tolerance - _EPS and floor <= (1.0 - tolerance) + _EPS
    if mode == "interval":
        adjusted_low = None if adjusted is None else adjusted.low
        raw_low = None if raw is None else raw.low
        passes = passes and adjusted_low is not None and adjusted_low >= tolerance - _EPS
        certain = certain and raw_low is not None and raw_low >= tolerance - _EPS
    return passes, passes and certain


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


def _pick_judge(df: pd.DataFrame, judge: str | None) -> tuple[pd.DataFrame, str]:
    judges = sorted(df["judge"].dropna().unique().tolist())
    if judge is None:
        if len(judges) != 1:
            raise JudgeError(
                f"grades table holds judges {judges}; say which one decides "
                "(aggregate(..., judge=...))"
            )
        judge = judges[0]
    elif judge not in judges:
        raise JudgeError(f"grades table has no rows from judge {judge!r} (has: {judges})")
    return df[df["judge"] == judge], judge


def aggregate(
    grades: pd.DataFrame,
    *,
    tolerance: float,
    mode: Mode = "interval",
    judge: str | None = None,
    seed: int = 0,
    interval_method: IntervalMethod = "cluster_t",
    pooled: bool = True,
) -> Curve:
    """Grades (columns of `tables.GRADES`) -> per-class x arm curve, walked and marked.

    Rows with an error or a missing grade are counted in `n_errors`, never scored;
    a cleartext grade of 0 is counted in `n_broken` and left out of retention.
    """
    if not 0.0 < tolerance <= 1.0:
        raise ValueError(f"tolerance must be in (0, 1], got {tolerance}")
    df, judge_name = _pick_judge(_prepare(grades), judge)
    kwargs: dict[str, Any] = {
        "tolerance": tolerance,
        "mode": mode,
        "judge": judge_name,
        "method": interval_method,
        "seed": seed,
    }
    rows: list[dict[str, Any]] = []
    for task_class, class_df in df.groupby("task_class", sort=True):
        rows.extend(_class_rows(class_df, str(task_class), **kwargs))
    if pooled:  # the `default` entry; the simulation study skips it to save time
        rows.extend(_class_rows(df, ALL_CLASSES, **kwargs))
    table = pd.DataFrame(rows, columns=CURVE.names)
    return Curve(table, tolerance, mode, judge_name, interval_method)


# --------------------------------------------------------------------------- decide


def _interval(low: Any, high: Any) -> Interval | None:
    if low is None or high is None or pd.isna(low) or pd.isna(high):
        return None
    return Interval(low=float(low), high=float(high))


def _num(value: Any) -> float | None:
    return None if value is None or pd.isna(value) else float(value)


def _pct(value: Any) -> str:
    return "n/a" if _num(value) is None else f"{100 * float(value):.1f}%"


def _label(arm_key: str) -> str:
    try:
        return Arm.parse(arm_key).label
    except ValueError:
        return arm_key


def _none(name: str, cause: NoneCause, reason: str, **numbers: Any) -> PolicyEntry:
    return PolicyEntry(task_class=name, verdict="none", reason=reason, cause=cause, **numbers)


def _entry(name: str, rows: pd.DataFrame, curve: Curve) -> PolicyEntry:
    control = rows[rows["arm"] == CONTROL]
    if control.empty:
        return _none(
            name,
            "unmeasurable",
            "unmeasurable — no control pair could be graded (its answers failed, e.g. were "
            "cut off at max_tokens, or the cleartext scored 0: see the grades table's error "
            "column), so the noise floor is unknown",
        )
    ctrl = control.iloc[0]
    floor = float(ctrl["noise_floor"])
    floor_numbers: dict[str, Any] = {
        "noise_floor": floor,
        "noise_floor_interval": _interval(ctrl["noise_floor_low"], ctrl["noise_floor_high"]),
        "floor_judge": _num(ctrl["floor_judge"]),
        "floor_sampling": _num(ctrl["floor_sampling"]),
        "bar": _num(ctrl["bar"]),
        "n_tasks": int(ctrl["n_tasks"]),
        "n_pairs": int(ctrl["n_pairs"]),
    }
    if floor > MAX_NOISE_FLOOR + _EPS:
        return _none(
            name,
            "unmeasurable",
            f"unmeasurable — control lost {_pct(floor)} "
            f"(more than the {MAX_NOISE_FLOOR:.0%} the instrument can tolerate)",
            **floor_numbers,
        )
    arms = rows[rows["arm"] != CONTROL]
    walked = arms[arms["status"] != "no_savings"].sort_values("reduction")
    ignored = tuple(arms.loc[arms["status"] == "ignored", "arm"])
    if walked.empty:
        return _none(
            name,
            "nothing_compressible",
            f"nothing was compressible — no arm saved {MIN_REDUCTION:.1%} of the tokens",
            **floor_numbers,
        )
    held = walked[walked["status"] == "held"]
    if held.empty:
        first = walked.iloc[0]
        detail = (
            f"gentlest arm {_label(first['arm'])} ({_pct(first['reduction'])} smaller) "
            f"kept {_pct(first['retention_mean'])} against a {_pct(first['bar'])} bar"
        )
        if curve.mode == "interval":
            detail += (
                f"; noise-adjusted interval low {_pct(first['adjusted_low'])} "
                f"vs {_pct(curve.tolerance)} tolerance"
            )
        return _none(
            name,
            "no_arm_held",
            f"no arm held quality — {detail}",
            ignored_arms=ignored,
            **floor_numbers,
        )
    chosen = held.iloc[-1]
    arm = Arm.parse(str(chosen["arm"]))
    verdict: Literal["measured", "provisional"] = (
        "measured" if bool(chosen["certain"]) else "provisional"
    )
    if verdict == "measured":
        reason = (
            f"measured — retention {_pct(chosen['retention_mean'])} "
            f"(95% interval {_pct(chosen['retention_low'])}–{_pct(chosen['retention_high'])}) "
            f"holds at the {_pct(curve.tolerance)} tolerance beyond a {_pct(floor)} noise floor"
        )
    else:
        reason = (
            "provisional — the harness could not detect harm because the loss sits inside "
            f"the {_pct(floor)} noise floor"
        )
    if ignored:
        reason += "; ignored after the first failure: " + ", ".join(map(_label, ignored))
    return PolicyEntry(
        task_class=name,
        verdict=verdict,
        method=arm.method,
        rate=arm.rate,
        reduction_pct=100 * float(chosen["reduction"]),
        retention_mean=float(chosen["retention_mean"]),
        retention_interval=_interval(chosen["retention_low"], chosen["retention_high"]),
        adjusted_interval=_interval(chosen["adjusted_low"], chosen["adjusted_high"]),
        worst_case=_num(chosen["worst_case"]),
        noise_floor=floor,
        noise_floor_interval=floor_numbers["noise_floor_interval"],
        floor_judge=floor_numbers["floor_judge"],
        floor_sampling=floor_numbers["floor_sampling"],
        bar=_num(chosen["bar"]),
        n_tasks=int(chosen["n_tasks"]),
        n_pairs=int(chosen["n_pairs"]),
        reason=reason,
        ignored_arms=ignored,
    )


def decide(
    curve: Curve,
    *,
    calibration_id: str,
    model: str,
    requested_classes: Sequence[str] | None = None,
    created: datetime | None = None,
) -> Policy:
    """One entry per class of the curve (and per requested class), plus `default`.

    `default` applies the same rules to every class pooled; a requested class with no
    graded pairs is unmeasurable.
    """
    names = list(dict.fromkeys([*curve.classes(), *(requested_classes or ())]))
    classes: dict[str, PolicyEntry] = {}
    for name in names:
        rows = curve.rows(name)
        classes[name] = (
            _entry(name, rows, curve)
            if not rows.empty
            else _none(name, "unmeasurable", "unmeasurable — no graded pairs for this class")
        )
    pooled = curve.rows(ALL_CLASSES)
    default = (
        _entry("default", pooled, curve)
        if not pooled.empty
        else _none("default", "unmeasurable", "unmeasurable — no graded pairs at all")
    )
    return Policy(
        created=created or datetime.now(UTC),
        calibration_id=calibration_id,
        model=model,
        judge=curve.judge,
        tolerance=curve.tolerance,
        mode=curve.mode,
        classes=classes,
        default=default,
    )


def unresolved_classes(policy: Policy, requested_classes: Iterable[str] | None = None) -> list[str]:
    """Requested classes that are unmeasurable or had no arm hold (or are missing)."""
    wanted = list(requested_classes) if requested_classes is not None else list(policy.classes)
    bad: list[str] = []
    for name in wanted:
        entry = policy.classes.get(name)
        if entry is None or entry.cause in ("unmeasurable", "no_arm_held"):
            bad.append(name)
    return bad


def exit_code(policy: Policy, requested_classes: Iterable[str] | None = None) -> int:
    """`EXIT_UNRESOLVED` when any requested class is unmeasurable or had no arm hold."""
    return EXIT_UNRESOLVED if unresolved_classes(policy, requested_classes) else EXIT_OK


# --------------------------------------------------------------------------- identity


def calibration_id(
    *,
    tasks: Iterable[Any],
    arms: Iterable[Arm | str],
    models: Mapping[str, str | None],
    settings: Mapping[str, Any],
) -> str:
    """A stable 16-hex id of what was calibrated: tasks + arms + models + settings.

    Tasks are hashed by content (pydantic models via `model_dump`), sorted by id, so the
    same set in another order gives the same id; any edit to a task changes it.
    """

    def task_dict(task: Any) -> dict[str, Any]:
        if hasattr(task, "model_dump"):
            return dict(task.model_dump(mode="json"))
        return dict(task)

    task_list = sorted((task_dict(t) for t in tasks), key=lambda t: str(t.get("id", "")))
    arm_keys = sorted(a.key if isinstance(a, Arm) else Arm.parse(a).key for a in arms)
    payload = {
        "tasks": task_list,
        "arms": arm_keys,
        "models": dict(sorted(models.items())),
        "settings": dict(sorted(settings.items())),
    }
    text = json.dumps(payload, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


# --------------------------------------------------------------------------- agreement


@dataclass(frozen=True)
class JudgeAgreement:
    """How far two judges agree on the same pairs and on the same decisions."""

    judges: tuple[str, str]
    n_pairs: int
    #: Spearman rank correlation of per-pair retention (capped) between the judges.
    spearman_retention: float
    #: Fraction of pairs where one judge has retention >= tolerance and the other not.
    pair_disagreement: float
    n_cells: int
    #: Fraction of class x arm cells where the rule passes under one judge only.
    cell_disagreement: float
    disagreements: tuple[tuple[str, str, bool, bool], ...]


def judge_agreement(
    grades: pd.DataFrame,
    *,
    judges: tuple[str, str],
    tolerance: float,
    mode: Mode = "interval",
) -> JudgeAgreement:
    """Compare two judges that graded the same pairs (e.g. the metric and an LLM)."""
    df = _prepare(grades)
    df = df[(df["judge_pass"] == 0) & df["usable"] & (df["arm"] != CONTROL)]
    keys = ["task_id", "arm", "replicate"]
    a = df[df["judge"] == judges[0]].set_index(keys)["ret_cap"].rename("a")
    b = df[df["judge"] == judges[1]].set_index(keys)["ret_cap"].rename("b")
    both = pd.concat([a, b], axis=1, join="inner")
    pass_a = both["a"] >= tolerance - _EPS
    pass_b = both["b"] >= tolerance - _EPS
    curve_a = aggregate(grades, tolerance=tolerance, mode=mode, judge=judges[0]).table
    curve_b = aggregate(grades, tolerance=tolerance, mode=mode, judge=judges[1]).table
    cells = curve_a[(curve_a["arm"] != CONTROL) & (curve_a["task_class"] != ALL_CLASSES)]
    merged = cells.merge(
        curve_b[["task_class", "arm", "passes"]], on=["task_class", "arm"], suffixes=("_a", "_b")
    )
    differ = merged[merged["passes_a"] != merged["passes_b"]]
    return JudgeAgreement(
        judges=judges,
        n_pairs=len(both),
        spearman_retention=spearman(both["a"], both["b"]),
        pair_disagreement=float((pass_a != pass_b).mean()) if len(both) else math.nan,
        n_cells=len(merged),
        cell_disagreement=float(len(differ) / len(merged)) if len(merged) else math.nan,
        disagreements=tuple(
            (str(r.task_class), str(r.arm), bool(r.passes_a), bool(r.passes_b))
            for r in differ.itertuples()
        ),
    )
