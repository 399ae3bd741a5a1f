"""Agreement on constructed cases whose answer is known.

Krippendorff's published example gives the exact alphas; a "person" who copies the judge
agrees perfectly; one who grades at random agrees at chance (alpha near 0, its interval
around 0); the per-class flag fires for a class graded at random and not for one graded
like the judge.
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from tokenlens.compress.arms import CONTROL
from tokenlens.review import POOR_ALPHA, poor_agreement, review_figures
from tokenlens.review.agreement import (
    bootstrap_alpha,
    decision_agreement,
    krippendorff_alpha,
    loses,
)
from tokenlens.review.sample import ReviewCase, ReviewSample, case_id_for
from tokenlens.review.store import ReviewGrade
from tokenlens.review.summary import summary_lines

NAN = math.nan
#: Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability": 4 observers x 12 units.
KRIPPENDORFF_2011 = np.array(
    [
        [1, 2, 3, 3, 2, 1, 4, 1, 2, NAN, NAN, NAN],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, NAN, 3],
        [NAN, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, NAN],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, NAN],
    ]
)
JUDGE = "claude-judge"


def test_alpha_matches_krippendorffs_published_example() -> None:
    assert krippendorff_alpha(KRIPPENDORFF_2011, "interval") == pytest.approx(0.849, abs=5e-4)
    assert krippendorff_alpha(KRIPPENDORFF_2011, "ordinal") == pytest.approx(0.815, abs=5e-4)


def test_alpha_is_undefined_without_variation_or_pairs() -> None:
    assert math.isnan(krippendorff_alpha(np.array([[3.0, 3.0], [3.0, 3.0]])))
    assert math.isnan(krippendorff_alpha(np.array([[1.0, NAN], [NAN, 2.0]])))
    with pytest.raises(ValueError, match="raters x units"):
        krippendorff_alpha(np.array([1.0, 2.0]))


def test_copy_gives_one_and_random_gives_zero_with_intervals() -> None:
    rng = np.random.default_rng(7)
    judge = rng.integers(0, 101, 400).astype(float)
    cases = np.arange(400) // 2
    copy = bootstrap_alpha(np.vstack([judge, judge]), cases)
    assert (copy.value, copy.low, copy.high) == (1.0, 1.0, 1.0)
    noise = bootstrap_alpha(np.vstack([judge, rng.integers(0, 101, 400)]), cases)
    assert abs(noise.value) < 0.12
    assert noise.low < 0 < noise.high and noise.high - noise.low < 0.35
    # Agreement in between lands in between, with the truth inside its interval.
    near = judge + rng.normal(0, 15, 400)
    partial = bootstrap_alpha(np.vstack([judge, near]), cases)
    assert 0.6 < partial.value < 0.9 and partial.low < partial.value < partial.high


def test_decision_agreement_counts_and_interval() -> None:
    judge = [True, True, False, False, None, True]
    person = [True, False, False, True, True, None]
    found = decision_agreement(judge, person)
    assert (found.n, found.agree, found.only_first, found.only_second) == (4, 2, 1, 1)
    assert found.rate == 0.5 and found.low < 0.5 < found.high
    assert loses(80, 70, 0.95) is True and loses(80, 79, 0.95) is False
    assert loses(0, 50, 0.95) is None and loses(None, 50, 0.95) is None
    assert loses(60, 90, 0.95) is False  # capped at 1: better is not a loss


def constructed(n_per_class: int = 30, seed: int = 3) -> tuple[ReviewSample, list[dict]]:
    """Two classes of pairs with judge grades (and a metric judge) over known arms."""
    rng = random.Random(seed)
    cases: list[ReviewCase] = []
    rows: list[dict] = []
    for task_class in ("alpha-class", "beta-class"):
        for i in range(n_per_class):
            arm = CONTROL if i % 3 == 0 else "prune@0.6"
            task_id = f"{task_class}-{i}"
            key = f"{task_id}|{arm}|r0"
            cases.append(
                ReviewCase(
                    case_id=case_id_for("run", key),
                    position=len(cases) + 1,
                    task_id=task_id,
                    task_class=task_class,
                    arm=arm,
                    replicate=0,
                    clear_is_b=rng.random() < 0.5,
                )
            )
            clear = rng.randint(40, 100)
            comp = max(0, clear - rng.choice([0, 0, 5, 20, 40]))
            for judge, (c, s) in ((JUDGE, (clear, comp)), ("metric", (clear - 10, comp - 5))):
                rows.append(
                    {
                        "task_id": task_id,
                        "task_class": task_class,
                        "arm": arm,
                        "replicate": 0,
                        "judge": judge,
                        "grade_clear": float(c),
                        "grade_comp": float(s),
                        "error": None,
                        "judge_pass": 0,
                    }
                )
    return ReviewSample(run_id="run", judge=JUDGE, seed=0, cases=tuple(cases)), rows


def person(
    name: str, sample: ReviewSample, rows: list[dict], how: str, rng: random.Random
) -> list[ReviewGrade]:
    judge = {(r["task_id"], r["arm"]): r for r in rows if r["judge"] == JUDGE}
    grades = []
    for case in sample.cases:
        r = judge[(case.task_id, case.arm)]
        clear, comp = int(r["grade_clear"]), int(r["grade_comp"])
        if how == "random" or (how == "copy-alpha" and case.task_class != "alpha-class"):
            clear, comp = rng.randint(0, 100), rng.randint(0, 100)
        a, b = (comp, clear) if case.clear_is_b else (clear, comp)
        grades.append(
            ReviewGrade(reviewer=name, case_id=case.case_id, grade_a=a, grade_b=b, given_at="t")
        )
    return grades


def test_figures_for_a_copying_person_and_a_second_copier() -> None:
    sample, rows = constructed()
    rng = random.Random(1)
    people = person("ann", sample, rows, "copy", rng) + person("bo", sample, rows, "copy", rng)
    figures = review_figures(sample, people, rows, tolerance=0.95)
    assert figures.overall is not None
    assert figures.overall.alpha.value == pytest.approx(1.0)
    assert figures.overall.alpha.low == pytest.approx(1.0)
    assert figures.overall.decisions.rate == 1.0 and not figures.overall.disagreements
    assert [c.second for c in figures.by_reviewer] == ["ann", "bo"]
    assert figures.between_people is not None and figures.between_people.value == pytest.approx(1.0)
    # The metric as a third rater: close to the judge, not identical.
    (metric,) = figures.other_judges
    assert metric.first == "metric" and 0.5 < metric.alpha.value < 1.0
    # Control pairs: the people read the same noise floor as the judge.
    assert figures.control is not None and figures.control.n == 20
    assert figures.control.people_loss == pytest.approx(figures.control.judge_loss)
    assert poor_agreement(figures) == {}


def test_random_person_flags_only_the_class_they_did_not_follow() -> None:
    sample, rows = constructed()
    rng = random.Random(2)
    people = person("cy", sample, rows, "copy-alpha", rng)
    figures = review_figures(sample, people, rows, tolerance=0.95)
    assert figures.by_class["alpha-class"].alpha.value == pytest.approx(1.0)
    beta = figures.by_class["beta-class"].alpha
    assert beta.value < 0.3 and beta.high < POOR_ALPHA
    flags = poor_agreement(figures)
    assert list(flags) == ["beta-class"]
    assert "people disagree with the judge" in flags["beta-class"]
    assert f"< {POOR_ALPHA}" in flags["beta-class"]
    assert figures.between_people is None  # one reviewer: no inter-rater figure
    text = "\n".join(summary_lines(figures))
    assert "beta-class" in text and "POOR" in text
    assert figures.overall is not None and figures.overall.disagreements


def test_cant_tell_is_missing_not_zero() -> None:
    sample, rows = constructed(n_per_class=6)
    rng = random.Random(4)
    people = [
        g.model_copy(update={"grade_a": None}) if i % 2 else g
        for i, g in enumerate(person("di", sample, rows, "copy", rng))
    ]
    figures = review_figures(sample, people, rows, tolerance=0.95)
    assert figures.cant_tell == 6
    assert figures.overall is not None and figures.overall.alpha.value == pytest.approx(1.0)
    assert figures.overall.decisions.n == 6  # a pair with one can't tell cannot be decided


def test_bootstrap_replicates_equal_alpha_of_the_resampled_cases() -> None:
    """The vectorised replicates are exactly alpha recomputed on each resample of cases."""
    rng = np.random.default_rng(11)
    judge = rng.integers(0, 101, 40).astype(float)
    other = np.where(rng.random(40) < 0.2, NAN, judge + rng.normal(0, 20, 40))
    matrix, cases = np.vstack([judge, other]), np.arange(40) // 2
    found = bootstrap_alpha(matrix, cases, n_boot=300, seed=5)
    keep = ~np.isnan(other)
    kept, kept_cases = matrix[:, keep], cases[keep]
    ids = np.unique(kept_cases)
    picks = np.random.default_rng(5).integers(0, ids.size, (300, ids.size))
    draws = [
        krippendorff_alpha(
            kept[:, np.concatenate([np.flatnonzero(kept_cases == ids[i]) for i in row])]
        )
        for row in picks
    ]
    low, high = np.quantile(draws, [0.025, 0.975])
    assert (found.low, found.high) == pytest.approx((low, high), abs=1e-9)
