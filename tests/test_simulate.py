"""A small run of the simulation study: the interval rule keeps its error rates."""

from __future__ import annotations

import numpy as np

from tokenlens.simulate import DEFAULT_SCENARIOS, designs, run_study, simulate_grades
from tokenlens.tables import GRADES


def test_simulated_grades_have_the_grades_columns_and_integer_grades() -> None:
    spread = DEFAULT_SCENARIOS[1]
    df = simulate_grades(spread, np.random.default_rng(0))
    assert set(df.columns) <= set(GRADES.names)
    assert (df["grade_clear"] % 1 == 0).all() and df["grade_clear"].between(0, 100).all()
    assert len(df) == 5 * 3 * (1 + len(spread.arms))


def test_the_concentrated_world_is_harsh_as_described() -> None:
    world = DEFAULT_SCENARIOS[0]
    df = simulate_grades(designs([world], (40,), (3,))[0], np.random.default_rng(1))
    graded = df.dropna(subset=["grade_clear"])
    assert (graded["grade_clear"] % 5 == 0).all()  # the judge rounds to multiples of 5
    assert (graded["grade_clear"] == 100).mean() > 0.2  # grades pile up at the ceiling
    assert df["error"].notna().any()  # some judge calls error
    assert len(df) < 40 * 3 * (1 + len(world.arms))  # and some rows go missing


def test_interval_rule_false_application_power_and_coverage_on_a_small_study() -> None:
    # 40 runs x 3 worlds at 20 tasks x 3 repeats: 120 arms one point below tolerance.
    worlds = designs(DEFAULT_SCENARIOS[1:4], (20,), (3,))
    result = run_study(worlds, runs=40, seed=2024, modes=("interval",))
    total = result.combined("interval")
    assert total.bad_arm_cases == 120
    assert total.false_held_rate <= 0.06  # goal 5 %; ~2 binomial SDs of room at 120 cases
    assert total.power >= 0.6
    assert total.coverage >= 0.85  # 90 % intervals


def test_the_seed_mean_rule_holds_bad_arms_far_more_often() -> None:
    worlds = designs(DEFAULT_SCENARIOS[1:2], (20,), (3,))
    result = run_study(worlds, runs=40, seed=7, modes=("interval", "mean"))
    by_mode = {t.mode: t for t in result.tallies}
    assert by_mode["mean"].false_held_rate > by_mode["interval"].false_held_rate + 0.2


def test_study_cells_count_false_application_power_and_savings() -> None:
    from tokenlens.simulate_study import WORLDS, run_cell, wilson

    fixed, seq = run_cell("spread-noisy", WORLDS["spread-noisy"], 20, 3, runs=2, seed=3)
    for tally in (fixed, seq):
        assert tally.runs == 2 and tally.good == 2 * 3  # three good rungs per ladder
        assert 0 <= tally.savings <= tally.oracle_savings
        assert tally.calls > 0
    assert seq.calls <= fixed.calls  # the loop never pays more than the whole draw
    low, high = wilson(5, 100)
    assert low < 0.05 < high and round(low, 3) == 0.022 and round(high, 3) == 0.112


def test_a_reanswer_study_reads_the_same_draws_with_and_without_the_re_answers() -> None:
    from tokenlens.simulate_study import WORLDS, run_cell

    tallies = run_cell("noisy", WORLDS["noisy"], 20, 3, runs=2, seed=3, reanswer=True)
    by = {t.design: t for t in tallies}
    assert list(by) == ["fixed", "sequential", "fixed-plain", "sequential-plain"]
    for design in ("fixed", "sequential"):
        # the same planned draws, and re-answers on top of them (the noisy world's
        # repeats disagree somewhere in every run)
        assert by[design].answers > by[f"{design}-plain"].answers
        assert by[design].runs == by[f"{design}-plain"].runs == 2
    # planned only: per run the edge class's 60 cleartext answers and 2 x 60 second ones,
    # the ladder's 60 and 5 x 60 (fewer where the world drops a row)
    assert 0.95 * 2 * (180 + 360) < by["fixed-plain"].answers <= 2 * (180 + 360)
