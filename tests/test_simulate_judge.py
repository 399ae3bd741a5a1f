"""Judge noise as a design dimension: the simulated levers and the planner's choice."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from tokenlens.commands.plan_view import PlanInputs, build_plans, lever_lines
from tokenlens.decision.planner import (
    JudgeOption,
    best_option,
    judge_options,
    next_lever,
    power_at,
    read_spread,
)
from tokenlens.decision.reanswer import DERAIL_GUARD, guarded_arms
from tokenlens.simulate import SimArm, derail_retention, simulate_grades
from tokenlens.simulate_judge import LEVERS, Lever, derail_edge, run_lever
from tokenlens.simulate_study import WORLDS
from tokenlens.stats import Spread

LOSSLESS = (SimArm("prune@0.6", 1.0, 0.3),)
QUIET = replace(WORLDS["noisy"], derail=0.0, error_rate=0.0, missing_rate=0.0, grade_step=1)


def _gap_sd(world, seed: int) -> tuple[float, int]:
    """Spread of comp - clear on a lossless arm, and the judge readings paid."""
    grades = simulate_grades(world, np.random.default_rng(seed))
    rows = grades[grades["arm"] != "control"]
    gap = (rows["grade_comp"] - rows["grade_clear"]).to_numpy(float)
    return float(np.std(gap)), int(grades.attrs["judge_calls"])


def test_more_readings_per_pair_cost_calls_and_quiet_only_the_judge() -> None:
    base = replace(QUIET, n_tasks=60, replicates=3, arms=LOSSLESS, sampling_sd=0.0)
    one_sd, one_calls = _gap_sd(base, 1)
    two_sd, two_calls = _gap_sd(replace(base, judge_calls=2), 1)
    assert two_calls == 2 * one_calls
    assert two_sd < 0.8 * one_sd  # ~1/sqrt(2) of a judge-only noise
    # A stable opinion of the answer is not removed by asking the same model again ...
    stable = replace(base, judge_stable_share=1.0)
    again, _ = _gap_sd(replace(stable, judge_calls=2), 1)
    other, _ = _gap_sd(replace(stable, judge_calls=2, judge_models=2), 1)
    assert again > 0.9 * one_sd
    # ... but a second model's opinion is independent of the first's.
    assert other < 0.8 * again


def test_rechecking_disagreeing_pairs_pays_extra_readings_only_where_they_disagree() -> None:
    base = replace(QUIET, n_tasks=30, replicates=1, arms=LOSSLESS)
    _, both = _gap_sd(replace(base, judge_calls=2), 2)
    _, recheck = _gap_sd(replace(base, judge_calls=2, judge_recheck=10.0), 2)
    _, never = _gap_sd(replace(base, judge_calls=2, judge_recheck=1000.0), 2)
    assert never == both < recheck < 2 * both


def test_a_lever_run_reads_every_arm_and_counts_its_readings() -> None:
    result = run_lever(WORLDS["noisy"], Lever("both orders", judge_calls=2), 0.0, runs=2, seed=3)
    assert result.runs == 2 and result.bad == 2 and result.good == 6
    assert result.readings_per_pair == pytest.approx(2.0, abs=0.05)  # a few judge errors
    one = run_lever(WORLDS["noisy"], LEVERS[0], 0.0, runs=2, seed=3)
    assert one.cost_usd < result.cost_usd


def _options(share: float, n_arms: int = 4) -> list[JudgeOption]:
    """Options at a ✓'s 60 tasks for a 0.97 arm, priced on Haiku (answers and judge)."""
    haiku = "claude-haiku-4-5"
    return judge_options(
        tolerance=0.95,
        retention=0.97,
        spread=Spread(0.05, 0.10),
        judge_share=share,
        tasks=60,
        n_arms=n_arms,
        prompt_tokens=1000,
        model=haiku,
        judge_model=haiku,
    )


def test_the_planner_judges_twice_only_where_the_judge_is_the_noise() -> None:
    spread = Spread(0.05, 0.10)
    quiet_judge = read_spread(spread, 0.0, 2)
    loud_judge = read_spread(spread, 0.9, 2)
    assert quiet_judge == spread and loud_judge.within is not None and loud_judge.within < 0.08
    assert power_at(0.02, spread, 60, 3) > power_at(0.02, spread, 20, 3)

    def step(share: float) -> str:
        found = next_lever(_options(share), 3, 1)
        assert found is not None
        return found[0]

    assert step(0.0) == "one more repeat"
    assert step(0.9) == "both A/B orders"


def test_plan_says_which_lever_buys_more_for_a_measured_class() -> None:
    curve = [
        {"task_class": "qa", "arm": "control", "floor_judge": 0.03, "floor_sampling": 0.003},
        {
            "task_class": "qa",
            "arm": "prune@0.6",
            "retention": 0.97,
            "sd_between": 0.05,
            "sd_within": 0.10,
        },
    ]
    inputs = PlanInputs("run-1", 0.95, "claude-haiku-4-5", curve)  # type: ignore[arg-type]
    plans = build_plans(inputs, model="claude-haiku-4-5", judge_model="claude-haiku-4-5")
    (line,) = lever_lines(inputs, plans, model="claude-haiku-4-5", judge_model="claude-haiku-4-5")
    assert "qa" in line and "91% of the noise floor (measured)" in line
    assert "next dollar: both A/B orders" in line
    best = best_option(_options(0.91, n_arms=1))
    assert best is not None and best.power >= 0.8
    assert pd.notna(best.cost_usd)


def _spread(values: pd.Series) -> float:
    return float(values.max() - values.min())


def test_reanswering_pays_more_answers_only_for_cells_whose_repeats_disagree() -> None:
    arms = (*LOSSLESS, SimArm("prune@0.4", 0.9, 0.5))
    base = replace(QUIET, n_tasks=40, replicates=3, arms=arms, derail=0.05)
    plain = simulate_grades(base, np.random.default_rng(4))
    grades = simulate_grades(replace(base, reanswer_spread=20.0), np.random.default_rng(4))
    planned = grades[grades["replicate"] < 3]
    extra = grades[grades["replicate"] >= 3]
    assert plain.attrs["answers"] == 40 * 3 * (2 + len(arms)) == len(planned) / 3 * 4
    assert set(extra["replicate"]) == {3, 4, 5}
    redone = set(zip(extra["task_id"], extra["arm"], strict=True))
    assert redone and len(redone) < 40 * (1 + len(arms)) / 2
    for (task, arm), cell in planned.groupby(["task_id", "arm"]):
        loud = max(_spread(cell["grade_clear"]), _spread(cell["grade_comp"])) > 20.0
        # never the control: its noise floor reads the planned repeats
        assert ((task, arm) in redone) == (loud and arm != "control"), (task, arm)
    # each re-answer round pays one cleartext answer and one answer per cell redone
    tasks_redone = {task for task, _ in redone}
    assert grades.attrs["answers"] == plain.attrs["answers"] + 3 * (len(tasks_redone) + len(redone))
    # reading only the cleartext answers re-answers every cell of the tasks it picks
    clear = simulate_grades(
        replace(base, reanswer_spread=20.0, reanswer_on="clear"), np.random.default_rng(4)
    )
    picked = clear[clear["replicate"] >= 3].groupby("task_id")["arm"].nunique()
    assert len(picked) and (picked == 1 + len(arms)).all()


def _per_task_retention(world, arm: SimArm) -> tuple[pd.Series, float]:
    """Over 400 tasks x 20: each task's mean compressed grade over its mean cleartext
    grade, and the share of the arm's answers that collapsed (graded 30 or less)."""
    grades = simulate_grades(
        replace(world, arms=(arm,), n_tasks=400, replicates=20), np.random.default_rng(5)
    )
    mine = grades[grades["arm"] == arm.key]
    pairs = mine.groupby("task_id")
    collapsed = float((mine["grade_comp"] <= 30).sum() / (400 * 20))
    return pairs["grade_comp"].mean() / pairs["grade_clear"].mean(), collapsed


def test_the_derail_edge_arm_loses_its_retention_to_derails_alone() -> None:
    world = replace(WORLDS["noisy"], error_rate=0.0, missing_rate=0.0)
    edge = derail_edge(world)
    assert 0.06 < edge.derail < 0.09 and edge.true_retention == 0.94
    assert derail_retention(world, edge.derail) == pytest.approx(0.94, abs=1e-6)
    per_task, collapsed = _per_task_retention(world, edge)
    assert per_task.mean() == pytest.approx(0.94, abs=0.01)
    # the harm is in single answers, not tasks: about one answer in eleven collapses
    assert 0.06 < collapsed < 0.12
    # half of it as derails: half the rate, and hurt tasks take the other half
    half = derail_edge(world, share=0.5)
    assert derail_retention(world, half.derail) == pytest.approx(0.97, abs=1e-6)
    per_task, fewer = _per_task_retention(world, half)
    assert per_task.mean() == pytest.approx(0.94, abs=0.01) and fewer < collapsed
    assert (per_task < 0.8).mean() > 0.05  # tasks hurt in every repeat


def test_the_derail_guard_reads_an_arm_that_derails_more_on_its_planned_repeats() -> None:
    world = replace(WORLDS["noisy"], n_tasks=60, replicates=3, reanswer_spread=20.0)
    lever = Lever("guarded", reanswer=20.0, derail_guard=DERAIL_GUARD)
    rng = np.random.default_rng(6)
    harmed = simulate_grades(replace(world, arms=(derail_edge(world),)), rng)
    lossless = simulate_grades(replace(world, arms=LOSSLESS), rng)
    assert guarded_arms(harmed, 3) == {"sim": {"llmlingua2@0.9"}}
    assert guarded_arms(lossless, 3) == {}
    # in a lever run the guard fires on the derail-harmed edge arm in most runs
    result = run_lever(
        WORLDS["noisy"], lever, 0.0, runs=6, seed=7, arms=(derail_edge(WORLDS["noisy"]),)
    )
    assert result.bad == 6 and result.guarded >= 4
    assert result.answers_per_design > 1.1  # re-answers were paid, and priced
    edge = (derail_edge(WORLDS["noisy"]),)
    plain = run_lever(WORLDS["noisy"], LEVERS[0], 0.0, runs=6, seed=7, arms=edge)
    assert plain.answers_per_design == 1.0 and plain.cost_usd < result.cost_usd
