"""The review's findings: judge vs people, judge vs judge, people vs people, per class.

Every figure is computed on the reviewed cases only, with the people's grades mapped
back from A/B to (cleartext, second answer) through the sample's record of the judge's
A/B order. Units of the grade-level alpha are answers; a case's two answers are
resampled together (see `tokenlens.review.agreement`).

`poor_agreement` is the hook for the policy: the classes where the judge cannot be
trusted, each with a sentence to append to that class's reason.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from tokenlens.calibration.cells import PairCell
from tokenlens.compress.arms import CONTROL
from tokenlens.decision.curve import TASK_RATIO_CAP
from tokenlens.decision.people import PeopleEstimate, pair_retention, people_corrected
from tokenlens.review.agreement import (
    DecisionAgreement,
    Estimate,
    bootstrap_alpha,
    decision_agreement,
    loses,
    retention,
)
from tokenlens.review.sample import ReviewCase, ReviewSample
from tokenlens.review.store import ReviewGrade
from tokenlens.tables import GradeRow

#: Krippendorff's own minimum: alpha >= 0.800 for conclusions, 0.667-0.800 "only for
#: tentative conclusions", below 0.667 the data should not be relied on (Krippendorff,
#: Content Analysis, 2004, p. 241). A class is flagged when even the top of alpha's 95 %
#: interval is below 0.667: the reviewed cases then show the judge is not adequate for
#: that class, not merely that too few cases were reviewed to tell (a wide interval
#: reaching above 0.667 is reported as such, not flagged).
POOR_ALPHA = 0.667

if TYPE_CHECKING:
    from tokenlens.policy import Policy

Pair = tuple[float | None, float | None]  # (grade of the cleartext answer, of the second)


@dataclass(frozen=True)
class Comparison:
    """Two raters (or a rater and a group) over the same cases."""

    first: str
    second: str
    alpha: Estimate  # interval level, on grades
    alpha_ordinal: Estimate
    decisions: DecisionAgreement
    disagreements: tuple[tuple[ReviewCase, float | None, float | None], ...] = ()


@dataclass(frozen=True)
class ControlFloor:
    """Mean capped loss on the reviewed control pairs: the noise floor, judge vs people."""

    n: int
    judge_loss: float
    people_loss: float


@dataclass
class ReviewFigures:
    run_id: str
    judge: str
    tolerance: float
    n_cases: int
    reviewers: dict[str, int]  # name -> cases graded
    cant_tell: int  # answers marked "can't tell"
    overall: Comparison | None = None  # deciding judge vs people (pooled)
    by_reviewer: list[Comparison] = field(default_factory=list)
    other_judges: list[Comparison] = field(default_factory=list)  # e.g. metric vs people
    judges: list[Comparison] = field(default_factory=list)  # judge vs judge on the sample
    between_people: Estimate | None = None
    by_class: dict[str, Comparison] = field(default_factory=dict)
    control: ControlFloor | None = None
    #: class -> arm -> retention as people would grade it (judge corrected by people)
    corrected: dict[str, dict[str, PeopleEstimate]] = field(default_factory=dict)


def _judge_pairs(grades: Iterable[GradeRow], judge: str) -> dict[str, Pair]:
    """case_key -> (clear, comp) of a judge's first judgement."""
    out: dict[str, Pair] = {}
    for r in grades:
        if r["judge"] == judge and (r.get("judge_pass") or 0) == 0 and not r["error"]:
            key = PairCell(r["task_id"], r["arm"], int(r["replicate"])).case_key
            out[key] = (r["grade_clear"], r["grade_comp"])
    return out


def _compare(
    first: str,
    second: str,
    cases: list[ReviewCase],
    a: dict[str, list[Pair]],
    b: dict[str, list[Pair]],
    tolerance: float,
    seed: int,
) -> Comparison:
    """`a` and `b` map case_id -> the rater's pairs (a group has several per case).

    Each pairing of one of a's readings with one of b's is a unit pair of rows, so a
    group of people is compared with the judge reading by reading.
    """
    rows_a: list[float] = []
    rows_b: list[float] = []
    unit_case: list[int] = []
    calls_a: list[bool | None] = []
    calls_b: list[bool | None] = []
    disagree: list[tuple[ReviewCase, float | None, float | None]] = []
    for index, case in enumerate(cases):
        for pa in a.get(case.case_id, []):
            for pb in b.get(case.case_id, []):
                for va, vb in zip(pa, pb, strict=True):
                    rows_a.append(math.nan if va is None else float(va))
                    rows_b.append(math.nan if vb is None else float(vb))
                    unit_case.append(index)
                la, lb = loses(*pa, tolerance), loses(*pb, tolerance)
                calls_a.append(la)
                calls_b.append(lb)
                if la is not None and lb is not None and la != lb:
                    disagree.append((case, retention(*pa), retention(*pb)))
    matrix = np.array([rows_a, rows_b], dtype=float).reshape(2, -1)
    cases_idx = np.array(unit_case, dtype=int)
    return Comparison(
        first=first,
        second=second,
        alpha=bootstrap_alpha(matrix, cases_idx, "interval", seed=seed),
        alpha_ordinal=bootstrap_alpha(matrix, cases_idx, "ordinal", seed=seed),
        decisions=decision_agreement(calls_a, calls_b),
        disagreements=tuple(disagree),
    )


def review_figures(
    sample: ReviewSample,
    people: list[ReviewGrade],
    run_grades: list[GradeRow],
    *,
    tolerance: float,
    seed: int = 0,
) -> ReviewFigures:
    """Every agreement figure of a review (see the module docstring)."""
    cases = list(sample.cases)
    by_id = {c.case_id: c for c in cases}
    person_pairs: dict[str, dict[str, list[Pair]]] = {}
    cant_tell = 0
    for g in people:
        case = by_id.get(g.case_id)
        if case is None:
            continue
        cant_tell += (g.grade_a is None) + (g.grade_b is None)
        clear, comp = g.for_case(case)
        person_pairs.setdefault(g.reviewer, {})[g.case_id] = [
            (None if clear is None else float(clear), None if comp is None else float(comp))
        ]
    pooled: dict[str, list[Pair]] = {}
    for pairs in person_pairs.values():
        for case_id, readings in pairs.items():
            pooled.setdefault(case_id, []).extend(readings)

    judge_names = sorted({str(r["judge"]) for r in run_grades})
    judge_readings: dict[str, dict[str, list[Pair]]] = {}
    for name in judge_names:
        by_key = _judge_pairs(run_grades, name)
        judge_readings[name] = {
            c.case_id: [by_key[c.case_key]] for c in cases if c.case_key in by_key
        }

    figures = ReviewFigures(
        run_id=sample.run_id,
        judge=sample.judge,
        tolerance=tolerance,
        n_cases=len(cases),
        reviewers={name: len(p) for name, p in sorted(person_pairs.items())},
        cant_tell=cant_tell,
    )
    main = judge_readings.get(sample.judge, {})
    if pooled:
        figures.overall = _compare(sample.judge, "people", cases, main, pooled, tolerance, seed)
        figures.by_reviewer = [
            _compare(sample.judge, name, cases, main, pairs, tolerance, seed)
            for name, pairs in sorted(person_pairs.items())
        ]
        figures.other_judges = [
            _compare(name, "people", cases, judge_readings[name], pooled, tolerance, seed)
            for name in judge_names
            if name != sample.judge
        ]
        for task_class in sorted({c.task_class for c in cases}):
            subset = [c for c in cases if c.task_class == task_class]
            figures.by_class[task_class] = _compare(
                sample.judge, "people", subset, main, pooled, tolerance, seed
            )
        figures.control = _control_floor(cases, main, pooled)
        figures.corrected = _corrected(cases, run_grades, sample.judge, main, pooled)
    figures.judges = [
        _compare(sample.judge, name, cases, main, judge_readings[name], tolerance, seed)
        for name in judge_names
        if name != sample.judge
    ]
    if len(person_pairs) >= 2:
        figures.between_people = _between(cases, person_pairs, seed)
    return figures


def _pair_kept(pair: Pair) -> float:
    """comp / clear of one reading, capped as the rule caps a task's ratio (NaN if none)."""
    clear, comp = pair
    if clear is None or comp is None:
        return math.nan
    return float(pair_retention([comp], [clear], TASK_RATIO_CAP)[0])


def _corrected(
    cases: list[ReviewCase],
    run_grades: list[GradeRow],
    judge: str,
    judge_pairs: dict[str, list[Pair]],
    people: dict[str, list[Pair]],
) -> dict[str, dict[str, PeopleEstimate]]:
    """Per class and arm: the judge's retention over every pair, corrected by people's."""
    every: dict[tuple[str, str], list[Pair]] = {}
    for r in run_grades:
        if r["judge"] == judge and (r.get("judge_pass") or 0) == 0 and not r["error"]:
            every.setdefault((r["task_class"], r["arm"]), []).append(
                (r["grade_clear"], r["grade_comp"])
            )
    reviewed: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for case in cases:
        if case.is_control or case.case_id not in judge_pairs or case.case_id not in people:
            continue
        judged = _pair_kept(judge_pairs[case.case_id][0])
        kept = [k for k in map(_pair_kept, people[case.case_id]) if np.isfinite(k)]
        if np.isfinite(judged) and kept:
            reviewed.setdefault((case.task_class, case.arm), []).append(
                (float(judged), float(np.mean(kept)))
            )
    out: dict[str, dict[str, PeopleEstimate]] = {}
    for (task_class, arm), pairs in sorted(reviewed.items()):
        if arm == CONTROL:
            continue
        judge_all = np.array([_pair_kept(p) for p in every.get((task_class, arm), [])])
        estimate = people_corrected(judge_all, [j for j, _ in pairs], [p for _, p in pairs])
        if estimate is not None:
            out.setdefault(task_class, {})[arm] = estimate
    return out


def _between(
    cases: list[ReviewCase], people: dict[str, dict[str, list[Pair]]], seed: int
) -> Estimate:
    """Alpha among the people: one row per reviewer, missing where one did not grade."""
    names = sorted(people)
    matrix = np.full((len(names), 2 * len(cases)), np.nan)
    for row, name in enumerate(names):
        for index, case in enumerate(cases):
            for clear, comp in people[name].get(case.case_id, []):
                if clear is not None:
                    matrix[row, 2 * index] = clear
                if comp is not None:
                    matrix[row, 2 * index + 1] = comp
    return bootstrap_alpha(matrix, np.repeat(np.arange(len(cases)), 2), "interval", seed=seed)


def _control_floor(
    cases: list[ReviewCase], judge: dict[str, list[Pair]], people: dict[str, list[Pair]]
) -> ControlFloor | None:
    judge_loss: list[float] = []
    people_loss: list[float] = []
    for case in cases:
        if not case.is_control or case.case_id not in judge or case.case_id not in people:
            continue
        kept_j = retention(*judge[case.case_id][0])
        kept_p = [k for k in (retention(*p) for p in people[case.case_id]) if k is not None]
        if kept_j is None or not kept_p:
            continue
        judge_loss.append(1 - kept_j)
        people_loss.append(1 - sum(kept_p) / len(kept_p))
    if not judge_loss:
        return None
    n = len(judge_loss)
    return ControlFloor(n, sum(judge_loss) / n, sum(people_loss) / n)


def poor_agreement(figures: ReviewFigures) -> dict[str, str]:
    """Classes where people and the judge disagree beyond chance: class -> reason sentence.

    Flagged when the top of the class's alpha interval (judge vs people, on grades) is
    below `POOR_ALPHA`; the sentence is meant to be appended to the policy's reason.
    """
    flags: dict[str, str] = {}
    for task_class, comparison in figures.by_class.items():
        alpha = comparison.alpha
        if alpha.defined and math.isfinite(alpha.high) and alpha.high < POOR_ALPHA:
            flags[task_class] = (
                f"people disagree with the judge on this class (Krippendorff's alpha "
                f"{alpha.value:.2f}, 95 % interval up to {alpha.high:.2f} < {POOR_ALPHA}, "
                f"{alpha.n_cases} reviewed cases): its grades are not a sound basis here"
            )
    return flags


def with_review_flags(policy: Policy, flags: dict[str, str]) -> Policy:
    """A copy of `policy` whose flagged classes say, in their reason, that people disagree.

    A ✓ needs an instrument people confirm, so a flagged class's ✓ becomes ? (its arm
    stays: poor agreement says the grades are unsound, not that the arm is harmful; a ?
    is the rule's word for "applied, not vouched for"). Its reason says so.
    """
    classes = {}
    for name, entry in policy.classes.items():
        if name not in flags:
            classes[name] = entry
            continue
        update: dict[str, object] = {"reason": f"{entry.reason} Review: {flags[name]}."}
        if entry.verdict == "measured":
            update["verdict"] = "provisional"
            update["reason"] = (
                f"{update['reason']} Poor agreement: held at ? until people and the judge agree."
            )
        classes[name] = entry.model_copy(update=update)
    return policy.model_copy(update={"classes": classes})


#: What an entry becomes when people's grades withdraw its arm (a measured failure).
WITHDRAWN: dict[str, object] = {
    "verdict": "none",
    "method": "none",
    "rate": None,
    "reduction_pct": None,
    "cause": "no_arm_held",
    "certified_at": None,
    "expires_at": None,
}


def with_people_corrections(policy: Policy, figures: ReviewFigures) -> Policy:
    """A copy of `policy` whose entries carry their arm's people-corrected retention.

    People can take an arm away, never grant one: when the corrected retention's upper
    bound is below the tolerance (people show, at 95 %, that the compressed answers lose
    more than the tolerance allows, whatever the judge read), the arm is withdrawn — a
    measured failure (`no_arm_held`), so it is not carried over either. Otherwise the
    judge's verdict stands (a handful of reviewed pairs gives a wide interval) and the
    figures go beside it. Re-running replaces the figures and never repeats the sentence.
    """
    from tokenlens.formatting import pct
    from tokenlens.policy import Interval

    classes = {}
    for name, entry in policy.classes.items():
        arm = entry.arm
        estimate = figures.corrected.get(name, {}).get(arm.key) if arm is not None else None
        if arm is None or estimate is None:
            classes[name] = entry
            continue
        withdraw = estimate.high < policy.tolerance
        reason = entry.reason
        if "People's grades" not in reason:
            reason += (
                f" People's grades put it at {pct(estimate.value)} (one-sided 95% bound "
                f"{pct(estimate.low)}, {estimate.n_reviewed} reviewed pairs; the judge alone "
                f"{pct(estimate.judge_value)} per pair)"
            )
            if withdraw:
                reason += (
                    f", wholly below the tolerance (upper bound {pct(estimate.high)}): "
                    f"{arm.key} is withdrawn, people read a loss the judge forgave"
                )
            elif estimate.low < policy.tolerance:
                reason += ", below the tolerance: the judge may be too lenient here"
            reason += "."
        elif withdraw and "is withdrawn" not in reason:
            reason += (  # an earlier review's sentence stands; say what the new one decided
                f" A later review put its upper bound at {pct(estimate.high)}, below the "
                f"tolerance: {arm.key} is withdrawn."
            )
        update: dict[str, object] = {
            "people_retention": min(estimate.value, 1.0),
            "people_interval": Interval(
                low=min(estimate.low, 1.0), high=min(estimate.high, 1.0), confidence=0.95
            ),
            "people_pairs": estimate.n_reviewed,
            "reason": reason,
        }
        if withdraw:
            update |= WITHDRAWN
        classes[name] = entry.model_copy(update=update)
    return policy.model_copy(update={"classes": classes})
