"""A small run of the simulation study: the interval rule keeps its error rates."""

from __future__ import annotations

import numpy as np

from tokenlens.simulate import DEFAULT_SCENARIOS, run_study, simulate_grades
from tokenlens.tables import GRADES


def test_simulated_grades_have_the_grades_columns_and_integer_grades() -> None:
    df = simulate_grades(DEFAULT_SCENARIOS[1], np.random.default_rng(0))
    assert set(df.columns) <= set(GRADES.names)
    assert (df["grade_clear"] % 1 == 0).all() and df["grade_clear"].between(0, 100).all()
    assert len(df) == 5 * 3 * (1 + len(DEFAULT_SCENARIOS[1].arms))


def test_interval_rule_false_certify_and_coverage_on_a_small_study() -> None:
    # 50 runs x 5 scenarios: 250 arms with a true loss beyond tolerance, 500 intervals.
    # Goals are <= 5 % false certify and >= 93 % coverage; margins are ~3 binomial SDs.
    result = run_study(DEFAULT_SCENARIOS, runs=50, seed=2024, modes=("interval",))
    total = result.combined("interval")
    assert total.bad_arm_cases == 250 and total.intervals + total.no_interval == 500
    assert total.false_certify_rate <= 0.08
    assert total.false_held_rate <= 0.08
    assert total.coverage >= 0.90


def test_the_seed_mean_rule_holds_bad_arms_far_more_often() -> None:
    borderline = DEFAULT_SCENARIOS[0]  # one arm losing 7 % against a 5 % tolerance
    result = run_study([borderline], runs=60, seed=7, modes=("interval", "mean"))
    by_mode = {t.mode: t for t in result.tallies}
    assert by_mode["mean"].false_held_rate > by_mode["interval"].false_held_rate + 0.2
