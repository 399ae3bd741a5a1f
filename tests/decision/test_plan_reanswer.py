"""`tokenlens plan` weighs re-answering where repeats disagree against more repeats or judging.

Measured on a run's grades: the cells `cells_to_reanswer` picks (what the step costs) and
their share of an arm's within-task noise (what it buys); checked against the judge-lever
simulation, where re-answering buys the most power per dollar in the noisy world and
nothing in a quiet one (bench/bench_plan_power.py --reanswer prints the figures).
"""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from tokenlens.commands.plan_view import PlanInputs, build_plans, lever_lines
from tokenlens.decision import aggregate
from tokenlens.decision.plan_power import task_samples
from tokenlens.decision.plan_reanswer import measure_reanswer
from tokenlens.decision.planner import REANSWER_STEP, JudgeOption, next_lever
from tokenlens.decision.reanswer import REANSWER_COUNT, cells_to_reanswer
from tokenlens.simulate import PROBE_ARMS, simulate_grades
from tokenlens.simulate_study import WORLDS

HAIKU = "claude-haiku-4-5"
NOISY = replace(WORLDS["noisy"], n_tasks=60, replicates=3, arms=PROBE_ARMS)
#: The noisy judge without derailed answers: every disagreement is chance.
WOBBLE = replace(NOISY, derail=0.0)
#: A steady judge and no derailed answers: next to no cell's repeats disagree.
QUIET = replace(WORLDS["concentrated"], n_tasks=60, replicates=3, arms=PROBE_ARMS, derail=0.0)


def _inputs(grades: pd.DataFrame, *, reanswer: bool = True, drawn: bool = True) -> PlanInputs:
    """Plan inputs as `load_inputs` reads them from a run (`drawn` False: no per-task
    samples, the plan then reads the curve alone; faster, same lever lines' words)."""
    curve = aggregate(grades, tolerance=0.95, pooled=False).table.to_dict("records")
    return PlanInputs(
        "run-1",
        0.95,
        HAIKU,
        curve,
        samples=task_samples(grades, judge=None) if drawn else {},
        reanswer=measure_reanswer(grades, judge=None) if reanswer else None,
    )


def _line(inputs: PlanInputs) -> str:
    plans = build_plans(inputs, model=HAIKU, judge_model=HAIKU)
    (line,) = lever_lines(inputs, plans, model=HAIKU, judge_model=HAIKU)
    return line


def _next_step(grades: pd.DataFrame) -> tuple[str, str]:
    line = _line(_inputs(grades))
    found = re.search(r"next dollar: (.+?) \(\+", line)
    assert found is not None, line
    return found.group(1), line


def test_the_measure_picks_the_cells_the_calibration_would_and_prices_their_answers() -> None:
    # a run that re-answered: its extra replicates are exactly the cells picked on its
    # planned repeats, and the answers they cost are what the plan charges per task
    world = replace(NOISY, n_tasks=40, reanswer_spread=20.0)
    plain = simulate_grades(replace(world, reanswer_spread=0.0), np.random.default_rng(1))
    grades = simulate_grades(world, np.random.default_rng(1))
    measure = measure_reanswer(grades, judge=None)["sim"]
    assert measure.repeats == 3 and measure.already and measure.tasks == 40
    assert measure.cells == 40 * (1 + len(PROBE_ARMS))
    extra = grades[grades["replicate"] >= 3]
    redone = set(zip(extra["task_id"], extra["arm"], strict=True))
    assert measure.cells_redone == len(redone) == len(cells_to_reanswer(grades, 3)) > 0
    assert measure.tasks_redone == extra["task_id"].nunique()
    answers, pairs = measure.extra_per_task(len(PROBE_ARMS))
    paid = grades.attrs["answers"] - 40 * 3 * (2 + len(PROBE_ARMS))
    assert 40 * answers == pytest.approx(paid)
    assert 40 * pairs == pytest.approx(REANSWER_COUNT * len(redone))
    assert plain.attrs["answers"] == 40 * 3 * (2 + len(PROBE_ARMS))
    # noise sits in the loud cells: re-answering them removes a real share of it
    assert all(0.1 < measure.removed[a.key] < 1.0 for a in PROBE_ARMS)
    assert 0.5 < measure.within_scale(PROBE_ARMS[1].key) < 0.95


def test_the_plan_names_reanswering_where_derails_disagree_and_a_repeat_elsewhere() -> None:
    # the lever simulation (bench_plan_power.py --reanswer): in the noisy world
    # re-answering buys the most power a dollar (a 4th repeat a little less, both A/B
    # orders far less); without derails the disagreements are chance and re-answering
    # buys next to nothing, a 4th repeat more; in a quiet world no cell disagrees. One
    # run's ranking is itself noisy (11 of 12 seeds name re-answering in the noisy world,
    # 9 of 12 a repeat without derails), so two of three runs must name each.
    named: dict[str, list[str]] = {"noisy": [], "wobble": [], "quiet": []}
    for seed in range(3):
        for world, scenario in (("noisy", NOISY), ("wobble", WOBBLE), ("quiet", QUIET)):
            step, line = _next_step(simulate_grades(scenario, np.random.default_rng(seed)))
            named[world].append(step)
            assert "no re-answer step" not in line
            if world == "quiet":
                assert "redo 0% of cells" in line and step == "one more repeat", line
    assert named["noisy"].count(REANSWER_STEP) >= 2, named
    assert named["wobble"].count("one more repeat") >= 2, named


def test_no_reanswer_step_without_grades_a_second_repeat_or_after_one() -> None:
    def line(inputs: PlanInputs) -> str:
        found = _line(inputs)
        assert REANSWER_STEP not in found
        return found

    grades = simulate_grades(replace(NOISY, n_tasks=30), np.random.default_rng(2))
    assert REANSWER_STEP in _line(_inputs(grades, drawn=False))
    assert "no re-answer step: no grades table" in line(
        _inputs(grades, reanswer=False, drawn=False)
    )
    once = simulate_grades(replace(NOISY, n_tasks=30, replicates=1), np.random.default_rng(2))
    one = line(_inputs(once, drawn=False))
    assert "no re-answer step: 1 repeat, nothing to disagree" in one
    assert "1 repeats x 1 reading(s)" in one  # read at the run's repeats
    redone = simulate_grades(
        replace(NOISY, n_tasks=30, reanswer_spread=20.0), np.random.default_rng(2)
    )
    assert "no re-answer step: this run re-answered already" in line(_inputs(redone, drawn=False))


def test_a_step_that_buys_next_to_nothing_is_not_the_next_dollar_however_cheap() -> None:
    here = JudgeOption(3, 1, 60, 0.50, 5.0)
    repeat = JudgeOption(4, 1, 60, 0.53, 7.0)  # 1.5 points a dollar
    cheap = JudgeOption(3, 1, 60, 0.5001, 5.001, reanswer=True)  # 10 points a dollar
    assert next_lever([here, repeat, cheap], 3, 1) == ("one more repeat", pytest.approx(0.03), 2.0)
    # ... but a re-answer step that buys real power cheaper than a repeat is named
    useful = replace(cheap, power=0.52, cost_usd=6.0)
    step = next_lever([here, repeat, useful], 3, 1)
    assert step is not None and step[0] == REANSWER_STEP
    # with nothing worth buying, the cheapest gain per dollar still is the answer
    flat = replace(repeat, power=0.5002)
    step = next_lever([here, flat, cheap], 3, 1)
    assert step is not None and step[0] == REANSWER_STEP and step[2] == pytest.approx(0.001)
