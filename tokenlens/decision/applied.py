"""Calibrate what the proxy will do: route certified arms by *predicted* class.

The calibration certifies arms per true class, but the proxy applies them per class its
classifier predicts. So after the walk this module (1) fits the classifier the policy
ships (or, when the calibration set is too small to fit one, takes the proxy's rules),
(2) reads where each true class's requests land — cross-validated, so it stands for
requests the classifier never saw — and (3) gives each predicted class the arm certified
for every true class routed there (`tokenlens.routing`: worst case, never weighted by
frequency), and `default` an arm certified for every class.

It also measures the **policy as applied**: per true class, the retention of the arm each
task would actually receive given its predicted class, read from pairs already paid for
(a task routed to no arm keeps 100 %), with a t bound over tasks.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from tokenlens.classifier.bundle import ClassifierBundle
from tokenlens.compress.arms import Arm
from tokenlens.decision.curve import ALL_CLASSES, ALPHA, TASK_RATIO_CAP, Curve
from tokenlens.decision.derails import set_aside
from tokenlens.decision.grades import ClassGrades, prepare
from tokenlens.formatting import arm_label
from tokenlens.policy import COULD_NOT_MEASURE, Interval, NoneCause, Policy, PolicyEntry
from tokenlens.routing import Confusion, arms_by_prediction, default_arm, routed_to, tally
from tokenlens.stats import ratio_estimate
from tokenlens.tasks import CalibrationTask

log = logging.getLogger(__name__)
DEFAULT = "default"


@dataclass(frozen=True)
class Routing:
    """Where each calibration task's request lands, and what the policy became."""

    policy: Policy
    matrix: Confusion
    labels: dict[str, str]  # task id -> predicted class, or "default" when unsure
    how: str  # "classifier (cross-validated)" or "rules"


@dataclass(frozen=True)
class AppliedRetention:
    """One true class under the policy as the proxy applies it."""

    task_class: str
    n_tasks: int
    routed_elsewhere: float  # share of its tasks served as another class or default
    retention: float | None
    low: float | None
    high: float | None
    note: str


def _certified(curve: Curve, name: str) -> tuple[list[Arm], Arm | None]:
    rows = curve.rows(name)
    held = rows[rows["status"] == "held"].sort_values("reduction", kind="stable")
    chosen = rows[rows["chosen"].astype(bool)]
    arm = Arm.parse(str(chosen.iloc[0]["arm"])) if len(chosen) else None
    return [Arm.parse(str(a)) for a in held["arm"]], arm


def _predict(
    tasks: Sequence[CalibrationTask], classes: Sequence[str]
) -> tuple[ClassifierBundle | None, Confusion, dict[str, str], str]:
    """Fit the shipped classifier and the confusion routing must be safe for."""
    from tokenlens.classifier.classify import classify

    bundle: ClassifierBundle | None = None
    matrix: Confusion
    try:
        if len(tasks) < 10 or min(pd.Series([t.task_class for t in tasks]).value_counts()) < 3:
            raise ValueError("too few tasks per class to fit and cross-validate a classifier")
        # Only now: scikit-learn costs ~1.4 s to import, for nothing on a small run.
        from tokenlens.classifier.fit import calibration_confusion, fit_bundle

        bundle = fit_bundle(tasks)
        matrix = calibration_confusion(tasks, bundle)
        how = "classifier (cross-validated)"
    except Exception as exc:  # the proxy then classifies by its rules: measure those
        log.info("no classifier shipped with the policy (%s); routing by the rules", exc)
        bundle = None
        how = "rules"
    labels: dict[str, str] = {}
    for task in tasks:
        found = classify(task.to_request(model="calibration"), None, classes, bundle)
        labels[task.id] = found.task_class
    if bundle is None:
        predicted = [None if labels[t.id] == DEFAULT else labels[t.id] for t in tasks]
        matrix = tally([t.task_class for t in tasks], predicted)
    return bundle, matrix, labels, how


def route_policy(policy: Policy, curve: Curve, tasks: Sequence[CalibrationTask]) -> Routing:
    """The policy with each predicted class's arm safe for every class routed to it."""
    classes = list(policy.classes)
    certified: dict[str, list[Arm]] = {}
    chosen: dict[str, Arm | None] = {}
    for name in classes:
        certified[name], chosen[name] = _certified(curve, name)
    bundle, matrix, labels, how = _predict(tasks, classes)
    routed = arms_by_prediction(matrix, certified, chosen)
    entries = {
        name: _reroute(policy.classes[name], routed.get(name), matrix, curve, name)
        for name in classes
    }
    for name, entry in entries.items():
        if entry.arm is None and entry.cause == "no_arm_held" and policy.classes[name].arm:
            routed_here = [name, *routed_to(matrix, name)]
            entries[name] = _unmeasured_cause(entry, policy, routed_here, chosen)
    default = _default_entry(policy.default, default_arm(certified, chosen), curve, classes)
    if default.arm is None:
        default = _unmeasured_cause(default, policy, classes, chosen)
    updated = policy.model_copy(
        update={"classes": entries, "default": default, "classifier": bundle}
    )
    return Routing(updated, matrix, labels, how)


def _unmeasured_cause(
    entry: PolicyEntry, policy: Policy, classes: Sequence[str], chosen: dict[str, Arm | None]
) -> PolicyEntry:
    """An entry left without an arm only because classes routed to it could not be measured
    this run (not because an arm lost) says so: `tokenlens.decision.carryover` then keeps
    the last certified entry rather than retracting it."""
    lacking = [c for c in dict.fromkeys(classes) if chosen.get(c) is None]
    causes = [policy.classes[c].cause if c in policy.classes else None for c in lacking]
    if not lacking or not all(cause in COULD_NOT_MEASURE for cause in causes):
        return entry
    cause: NoneCause = "unmeasurable"
    return entry.model_copy(
        update={
            "cause": cause,
            "reason": entry.reason + "; could not be measured this run: " + ", ".join(lacking),
        }
    )


def _reroute(
    entry: PolicyEntry, arm: Arm | None, matrix: Confusion, curve: Curve, name: str
) -> PolicyEntry:
    if entry.arm == arm:
        return entry
    others = sorted(c for c, row in matrix.items() if row.get(name, 0) and c != name)
    why = (
        f"requests of {', '.join(others)} are routed here by the classifier"
        if others
        else "routing"
    )
    if arm is None:
        return PolicyEntry(
            task_class=name,
            verdict="none",
            reason=f"no arm is certified for every class routed here ({why}); was: " + entry.reason,
            cause="no_arm_held",
            noise_floor=entry.noise_floor,
            n_tasks=entry.n_tasks,
        )
    row = curve.rows(name).set_index("arm").loc[arm.key]
    note = f"applied as {arm_label(arm.key)}, the gentler arm certified for all of them ({why})"
    return entry.model_copy(
        update={
            "method": arm.method,
            "rate": arm.rate,
            "verdict": "measured"
            if bool(row["certain"]) and entry.verdict == "measured"
            else "provisional",
            "reduction_pct": 100 * float(row["reduction"]),
            "retention_mean": _num(row["retention"]),
            "retention_interval": _interval(
                row["retention_low"], row["retention_high"], row.get("bound_level")
            ),
            "reason": f"{entry.reason}; {note}",
        }
    )


def _default_entry(
    entry: PolicyEntry, arm: Arm | None, curve: Curve, classes: Sequence[str]
) -> PolicyEntry:
    """`default` serves unsure and unknown requests: an arm held for every class or none."""
    if arm is None:
        return PolicyEntry(
            task_class=DEFAULT,
            verdict="none",
            reason="no arm held for every class: unsure and unknown requests pass through",
            cause="no_arm_held",
            n_tasks=entry.n_tasks,
        )
    if entry.arm == arm:
        return entry
    verdicts = [
        bool(curve.rows(c).set_index("arm").at[arm.key, "certain"])
        for c in classes
        if arm.key in set(curve.rows(c)["arm"])
    ]
    pooled = curve.rows(ALL_CLASSES).set_index("arm")
    row = pooled.loc[arm.key] if arm.key in pooled.index else None
    return entry.model_copy(
        update={
            "method": arm.method,
            "rate": arm.rate,
            "verdict": "measured" if verdicts and all(verdicts) else "provisional",
            "reduction_pct": None if row is None else 100 * float(row["reduction"]),
            "retention_mean": None if row is None else _num(row["retention"]),
            "retention_interval": None
            if row is None
            else _interval(row["retention_low"], row["retention_high"], row.get("bound_level")),
            "reason": f"{arm_label(arm.key)} held for every class (the gentlest of their "
            "choices): unsure and unknown requests may be of any class",
            "cause": None,
        }
    )


def _num(value: object) -> float | None:
    if value is None or pd.isna(value):
        return None
    return float(value)  # type: ignore[arg-type]


def _interval(low: object, high: object, level: object = None) -> Interval | None:
    lo, hi = _num(low), _num(high)
    if lo is None or hi is None:
        return None
    return Interval(low=lo, high=hi, confidence=_num(level))


def applied_retention(
    grades: pd.DataFrame,
    policy: Policy,
    labels: Mapping[str, str],
    *,
    judge: str | None = None,
) -> list[AppliedRetention]:
    """Per true class: retention of the arms the proxy would actually apply, with bounds.

    Each task contributes its own retention (compressed over uncompressed readings, read
    as the rule reads them: `tokenlens.decision.derails`) under the arm its predicted
    class's entry applies; a task served no arm keeps 100 %. Only pairs already paid for
    are read; a routed arm never sampled for that class makes the class "not measured"
    rather than a guess.
    """
    df = prepare(grades)
    df = df[(df["judge"] == judge) if judge else df["judge"].notna()]
    out: list[AppliedRetention] = []
    for name in policy.classes:
        mine = df[df["task_class"] == name]
        if mine.empty:
            continue
        cg = ClassGrades.of(mine)
        read = {key: set_aside(pairs) for key, pairs in cg.arms.items()}  # as the rule reads
        index = {t: i for i, t in enumerate(cg.tasks)}
        values: list[float] = []
        missing: set[str] = set()
        elsewhere = 0
        for task in cg.tasks:
            served = labels.get(task, name)
            elsewhere += served != name
            arm = policy.entry_for(None if served == DEFAULT else served).arm
            if arm is None:
                values.append(1.0)
                continue
            pairs = read.get(arm.key)
            if pairs is None:
                missing.add(arm.key)
                continue
            at = pairs.task == index[task]
            ref = float(pairs.reference[at].sum())
            if ref > 0:
                values.append(min(float(pairs.comp[at].sum()) / ref, TASK_RATIO_CAP))
        n = len(cg.tasks)
        if missing or not values:
            note = "not measured: routed to " + ", ".join(sorted(map(arm_label, missing)))
            out.append(AppliedRetention(name, n, elsewhere / n, None, None, None, note))
            continue
        est = ratio_estimate(
            np.array(values), np.ones(len(values)), confidence=1 - 2 * ALPHA, method="skew_t"
        )
        clip = lambda v: None if v is None or math.isnan(v) else min(max(v, 0.0), 1.0)  # noqa: E731
        out.append(
            AppliedRetention(
                name,
                n,
                elsewhere / n,
                clip(est.mean),
                clip(est.low),
                clip(est.high),
                f"{elsewhere} of {n} tasks served as another class or default",
            )
        )
    return out
