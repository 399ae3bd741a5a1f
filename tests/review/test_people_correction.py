"""People's grades correct the judge: the PPI++ estimate, the review figures, the policy."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from tests.review.test_agreement import constructed
from tokenlens.decision.people import people_corrected
from tokenlens.policy import Interval, Policy, PolicyEntry
from tokenlens.review.figures import (
    review_figures,
    with_people_corrections,
    with_review_flags,
)
from tokenlens.review.sample import ReviewSample
from tokenlens.review.store import ReviewGrade
from tokenlens.review.summary import summary_lines, write_review_page


def test_a_lenient_judge_is_corrected_down_to_what_people_read() -> None:
    rng = np.random.default_rng(0)
    judge_all = np.clip(rng.normal(1.0, 0.05, 400), 0, 1.1)
    reviewed = judge_all[:40]
    people = reviewed - 0.1 + rng.normal(0, 0.02, 40)  # people see a 10-point loss
    est = people_corrected(judge_all, reviewed, people)
    assert est is not None
    assert est.judge_value == pytest.approx(judge_all.mean())
    assert est.value == pytest.approx(judge_all.mean() - 0.1, abs=0.01)
    assert est.low < est.value < est.high and est.n_reviewed == 40 and est.n_all == 400
    # The judge tracks people closely, so it carries most of the weight and the interval
    # is far narrower than the people's pairs alone would give.
    assert est.weight > 0.5
    people_only = 1.685 * people.std(ddof=1) / np.sqrt(40)
    assert est.value - est.low < 0.7 * people_only
    assert people_corrected(judge_all, reviewed[:2], people[:2]) is None  # too few


def test_the_corrected_bound_keeps_its_level() -> None:
    rng = np.random.default_rng(1)
    truth, below = 0.9, 0
    runs = 600
    for _ in range(runs):
        quality = np.clip(rng.normal(truth, 0.1, 300), 0, 1.1)
        judge = np.clip(quality + 0.08 + rng.normal(0, 0.05, 300), 0, 1.1)  # lenient, noisy
        people = quality[:25] + rng.normal(0, 0.03, 25)
        est = people_corrected(judge, judge[:25], people)
        assert est is not None
        below += est.low > truth
    assert below / runs < 0.07  # one-sided 95 %: ~5 % above the truth, within noise


def _policy(sample: ReviewSample) -> Policy:
    entry = PolicyEntry(
        task_class="alpha-class",
        verdict="provisional",
        method="prune",
        rate=0.6,
        retention_mean=0.99,
        retention_interval=Interval(low=0.96, high=1.0, confidence=0.95),
        reason="provisional — held",
    )
    none = PolicyEntry(task_class="default", verdict="none", reason="no", cause="no_arm_held")
    return Policy(
        created=datetime(2026, 12, 2, tzinfo=UTC),
        calibration_id=sample.run_id + "-calibration",
        model="m",
        judge="j",
        tolerance=0.95,
        mode="interval",
        classes={"alpha-class": entry},
        default=none,
    )


def test_review_figures_carry_corrections_into_the_policy_and_summary(tmp_path) -> None:
    sample, rows = constructed()
    judge = {(r["task_id"], r["arm"]): r for r in rows if r["judge"] == sample.judge}
    people: list[ReviewGrade] = []
    for case in sample.cases:  # a stricter person: every compressed answer 30 points lower
        r = judge[(case.task_id, case.arm)]
        clear = int(r["grade_clear"])
        comp = int(r["grade_comp"]) - (0 if case.is_control else 30)
        a, b = (max(comp, 0), clear) if case.clear_is_b else (clear, max(comp, 0))
        people.append(
            ReviewGrade(reviewer="di", case_id=case.case_id, grade_a=a, grade_b=b, given_at="t")
        )
    figures = review_figures(sample, people, rows, tolerance=0.95)
    est = figures.corrected["alpha-class"]["prune@0.6"]
    assert est.value < est.judge_value - 0.2
    assert "control" not in figures.corrected["alpha-class"]
    policy = _policy(sample)
    once = with_people_corrections(policy, figures)
    entry = once.classes["alpha-class"]
    assert entry.people_retention == pytest.approx(min(est.value, 1.0))
    assert entry.people_interval is not None and entry.people_pairs == est.n_reviewed
    # People show, at 95 %, a loss the judge forgave: the arm is taken away, as a measured
    # failure (so a later night that cannot measure does not carry it over either).
    assert est.high < policy.tolerance
    assert (entry.verdict, entry.arm, entry.cause) == ("none", None, "no_arm_held")
    assert entry.certified_at is None and entry.expires_at is None
    assert "People's grades put it at" in entry.reason and "is withdrawn" in entry.reason
    twice = with_people_corrections(once, figures)
    assert twice == once and twice.classes["alpha-class"].reason.count("People's grades") == 1
    text = "\n".join(summary_lines(figures))
    assert "Retention corrected by people's grades" in text and "alpha-class" in text
    page = write_review_page(tmp_path, figures).read_text(encoding="utf-8")
    assert "<h2>Retention corrected by people's grades</h2>" in page
    assert f"<td>{est.n_reviewed} / {est.n_all}</td>" in page


def _graded_by(sample: ReviewSample, rows: list[dict], comp_shift: int | None) -> list[ReviewGrade]:
    """People who grade every compressed answer `comp_shift` points off the judge's grade
    (None: as good as its cleartext answer)."""
    judge = {(r["task_id"], r["arm"]): r for r in rows if r["judge"] == sample.judge}
    people = []
    for case in sample.cases:
        r = judge[(case.task_id, case.arm)]
        clear = int(r["grade_clear"])
        comp = int(r["grade_comp"]) + (0 if case.is_control else (comp_shift or 0))
        comp = clear if comp_shift is None and not case.is_control else min(max(comp, 0), 100)
        a, b = (comp, clear) if case.clear_is_b else (clear, comp)
        people.append(
            ReviewGrade(reviewer="di", case_id=case.case_id, grade_a=a, grade_b=b, given_at="t")
        )
    return people


def test_people_who_do_not_show_a_loss_leave_the_judges_verdict_standing() -> None:
    sample, rows = constructed()
    figures = review_figures(sample, _graded_by(sample, rows, None), rows, tolerance=0.95)
    est = figures.corrected["alpha-class"]["prune@0.6"]
    assert est.high >= 0.95  # people see no loss: nothing is shown below the tolerance
    policy = _policy(sample)
    entry = with_people_corrections(policy, figures).classes["alpha-class"]
    assert (entry.verdict, entry.arm) == ("provisional", policy.classes["alpha-class"].arm)
    assert "withdrawn" not in entry.reason and entry.people_pairs == est.n_reviewed


def test_poor_agreement_withholds_a_tick_but_not_the_arm() -> None:
    sample, _ = constructed()
    policy = _policy(sample)
    ticked = policy.model_copy(
        update={
            "classes": {
                "alpha-class": policy.classes["alpha-class"].model_copy(
                    update={"verdict": "measured"}
                )
            }
        }
    )
    flagged = with_review_flags(ticked, {"alpha-class": "people disagree (alpha 0.1)"})
    entry = flagged.classes["alpha-class"]
    assert (entry.verdict, entry.arm) == ("provisional", ticked.classes["alpha-class"].arm)
    assert "Review: people disagree (alpha 0.1)." in entry.reason
    assert "held at ? until people and the judge agree" in entry.reason


def test_a_later_review_that_shows_a_loss_withdraws_and_says_so() -> None:
    sample, rows = constructed()
    agree = review_figures(sample, _graded_by(sample, rows, None), rows, tolerance=0.95)
    strict = review_figures(sample, _graded_by(sample, rows, -30), rows, tolerance=0.95)
    first = with_people_corrections(_policy(sample), agree)
    assert first.classes["alpha-class"].arm is not None
    later = with_people_corrections(first, strict).classes["alpha-class"]
    assert (later.verdict, later.arm, later.cause) == ("none", None, "no_arm_held")
    assert "A later review put its upper bound at" in later.reason
    assert later.reason.count("is withdrawn") == 1
