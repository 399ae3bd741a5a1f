"""`tokenlens plan` plans from the rule the decision applies: the planned size holds the
arm in about the stated share (80 %) of simulated runs, a spread measured on raw
per-cell ratios (which a low cleartext grade blows up) no longer asks for thousands of
tasks, and an arm the run already held is said to be so."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from tokenlens.commands.plan_view import PlanInputs, build_plans
from tokenlens.decision import aggregate
from tokenlens.decision.plan_power import task_samples
from tokenlens.decision.planner import POWER, ArmPlan, Design
from tokenlens.simulate import DEFAULT_SCENARIOS, SimArm, simulate_grades
from tokenlens.stats import ratio_estimate

TOLERANCE = 0.95
MODEL = "claude-haiku-4-5"
#: A friendly world: every task keeps ~97.5 % (a 2.5-point margin over the tolerance).
WORLD = replace(
    DEFAULT_SCENARIOS[0],
    name="plan",
    harm="spread",
    arms=(SimArm("prune@0.6", 0.975, 0.3),),
    replicates=2,
    tolerance=TOLERANCE,
)
#: A pilot this large leaves the plan little noise of its own: its retention's standard
#: error (0.06 points) moves the planned size by ~3 %, the power by ~1 point.
PILOT_TASKS = 20_000
RUNS = 400
#: The band around the stated power: a binomial 99 % margin at RUNS runs (5 points),
#: plus 2 points for the pilot's and the planner's own draws (1,000 per size).
BAND = 2.58 * math.sqrt(POWER * (1 - POWER) / RUNS) + 0.02


def _row(grades: pd.DataFrame) -> dict[str, Any]:
    curve = aggregate(grades, tolerance=TOLERANCE, pooled=False)
    records = curve.table.to_dict("records")
    [row] = [r for r in records if r["arm"] == "prune@0.6" and r["task_class"] == "sim"]
    return row


def _plan(row: dict[str, Any], grades: pd.DataFrame | None = None) -> ArmPlan:
    samples = {} if grades is None else task_samples(grades, judge=None)
    inputs = PlanInputs(run="pilot", tolerance=TOLERANCE, model=MODEL, curve=[row], samples=samples)  # type: ignore[list-item]
    [plan] = build_plans(inputs, model=MODEL, judge_model=None)
    return plan


def _design(plan: ArmPlan, repeats: int) -> Design:
    [design] = [d for d in plan.designs if d.repeats == repeats]
    return design


def _share(tasks: int, repeats: int, column: str, seed: int) -> float:
    rng = np.random.default_rng(seed)
    world = replace(WORLD, n_tasks=tasks, replicates=repeats)
    return sum(bool(_row(simulate_grades(world, rng))[column]) for _ in range(RUNS)) / RUNS


def test_the_planned_size_holds_the_arm_in_about_the_stated_share_of_simulated_runs() -> None:
    pilot = simulate_grades(replace(WORLD, n_tasks=PILOT_TASKS), np.random.default_rng(1))
    plan = _plan(_row(pilot), pilot)
    two = _design(plan, 2)  # the pilot's own repeats
    assert two.tasks is not None and two.tasks_measured is not None
    assert 20 <= two.tasks <= 400, two  # the raw spread asked for 600+
    # The size for a ? (the bound holds) ...
    held = _share(two.tasks, 2, "passes", seed=2)
    assert abs(held - POWER) <= BAND, (two.tasks, held)
    # ... and for a ✓ (the control's floor narrow enough too).
    certain = _share(two.tasks_measured, 2, "certain", seed=3)
    assert abs(certain - POWER) <= BAND, (two.tasks_measured, certain)


def test_a_blown_up_raw_spread_does_not_ask_for_thousands_of_tasks() -> None:
    """The curve's sd_between comes from raw per-cell ratios; one low cleartext grade
    makes it 2.8 (280 points) although the decision's bound, on capped ratios, is tight."""
    lossless = replace(WORLD, n_tasks=54, arms=(SimArm("prune@0.6", 1.0, 0.3),))
    grades = simulate_grades(lossless, np.random.default_rng(3))
    row = _row(grades)
    assert row["passes"], row  # it already cleared its bound on 54 tasks
    row = {**row, "sd_between": 2.84, "sd_within": 1.27}
    for plan in (_plan(row), _plan(row, grades)):
        assert _design(plan, 2).tasks is not None
        assert _design(plan, 2).tasks <= 54 * 2, plan  # type: ignore[operator]
        assert "already holds ? on 54 tasks" in plan.note, plan.note


def _issue_row(retention: float, low: float, high: float, *, sd: float) -> dict[str, Any]:
    """A curve row as the operator's run wrote it: 54 tasks x 3 repeats, raw spreads."""
    return {
        "task_class": "extraction",
        "arm": "select@0.4",
        "judge": "claude-haiku-4-5",
        "retention": retention,
        "retention_low": low,
        "retention_high": high,
        "n_tasks": 54,
        "n_pairs": 162,
        "sd_between": sd,
        "sd_within": 1.27,
        "bound_level": 0.95,
        "passes": True,
        "certain": False,
    }


def test_the_operators_example_gets_sane_answers() -> None:
    """select r=0.4 held at 96.1 % over 54 tasks, select r=0.8 at 100 % [100-100]: the
    plan said 19,968 and 20,557 tasks; it now says they already hold, what a ✓ needs,
    and sizes of the order the run already had."""
    cleared = _plan(_issue_row(0.985, 0.961, 1.0, sd=2.84))
    assert "already holds ? on 54 tasks x 3 repeats (bound 96.1% >= 95.0%)" in cleared.note
    assert "a ✓ needs 6 more tasks (60 in all)" in cleared.note
    sizes = [d.tasks for d in cleared.designs]
    assert all(n is not None and 20 <= n <= 120 for n in sizes), sizes
    perfect = _plan({**_issue_row(1.0, 1.0, 1.0, sd=2.88), "status": "ignored"})
    assert "already holds ?" in perfect.note and "the walk stopped" in perfect.note
    assert [(d.tasks, d.tasks_measured) for d in perfect.designs] == [(20, 60)] * 3


def test_the_resampled_bound_is_the_decisions_bound() -> None:
    from tokenlens.stats import lower_bounds

    rng = np.random.default_rng(4)
    rows = np.minimum(rng.normal(0.97, 0.08, size=(40, 30)) - rng.exponential(0.03, (40, 30)), 1.1)
    mine = lower_bounds(rows, 0.95)
    theirs = [ratio_estimate(r, np.ones_like(r), confidence=0.9, method="skew_t").low for r in rows]
    np.testing.assert_allclose(mine, np.array(theirs, dtype=float), rtol=0, atol=1e-12)


def test_a_floor_too_wide_for_a_check_mark_gets_no_check_mark_size() -> None:
    """A control that loses more than the tolerance allows never vouches for a ✓: the
    plan gives the ? sizes and says why there is no ✓ size, instead of a huge number."""
    noisy = replace(
        WORLD, n_tasks=300, control_retention=0.92, arms=(SimArm("prune@0.6", 1.0, 0.3),)
    )
    grades = simulate_grades(noisy, np.random.default_rng(5))
    row = _row(grades)
    assert row["noise_floor"] > 1 - TOLERANCE, row
    plan = _plan(row, grades)
    assert all(d.tasks is not None and d.tasks_measured is None for d in plan.designs), plan
    assert "the control's floor is too wide" in plan.note


def test_a_draw_of_tasks_without_a_control_pair_is_refused_not_an_error() -> None:
    """Two tasks, one whose control pairs all failed: a quarter of the draws of two tasks
    hold only that one; those are refused (as the decision refuses a class without a
    control), the rest read as usual, and nothing divides by zero."""
    from tokenlens.decision.plan_power import TaskSample, held_share
    from tokenlens.stats import Spread

    sample = TaskSample(
        ratios=np.array([1.0, 0.99]),
        floor_num=np.array([2.9, 0.0]),
        floor_den=np.array([3.0, 0.0]),
        repeats=3.0,
        split=Spread(0.01, None),
    )
    share = held_share(sample, 2, 3, tolerance=0.5, draws=1000)
    assert 0.6 <= share <= 0.9, share  # about 3 in 4 draws have a control pair
