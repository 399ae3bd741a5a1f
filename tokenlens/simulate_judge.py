"""The judge's noise as a design dimension: which lever buys the most power per dollar.

In a world with a noisy judge most of what keeps a good arm from clearing at 60 tasks is
the judge's own wobble, not the answers'. There are two ways to spend more calls on it:

* reduce the judge's noise per pair — judge each pair in both A/B orders and average
  (`judge_both_orders`; at temperature 0 a repeated call in the same order reads the same,
  so the second order is the only free second reading), a second judge model, or extra
  readings only for the pairs whose first two readings disagree;
* or spend the same calls on more repeats or more tasks, which also averages the answers'
  own noise.

Each lever is a `Scenario` of `tokenlens.simulate` (its `judge_*` fields), drawn and read
by the real `aggregate` (fixed design, each arm alone, like the CEILING lines of
bench/bench_simulation.py), and priced by the planner's `price_design`. A stable share of
the judge's noise (its fixed opinion of an answer) is what a repeated reading by the
same model cannot remove: the study reads every lever at a stable share of 0 and of 1/2.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, cast

import numpy as np

from tokenlens.decision import aggregate
from tokenlens.decision.planner import price_design
from tokenlens.simulate import POWER_MARGIN, PROBE_ARMS, Scenario, simulate_grades

#: Prompt tokens the levers are priced at (a typical calibration task).
PRICED_PROMPT_TOKENS = 1000
#: Model the levers are priced on (answers and judge).
PRICED_MODEL = "claude-haiku-4-5"
#: Gap (points of comp - clear) between a pair's two readings that buys two more.
RECHECK_GAP = 10.0


@dataclass(frozen=True)
class Lever:
    """One way to spend calls: judge readings per pair, models, repeats, tasks."""

    name: str
    judge_calls: int = 1
    judge_models: int = 1
    recheck: float = 0.0
    repeats: int = 3
    tasks: int = 60
    #: A bound, not a lever: the world changed (e.g. a judge without noise, answers that
    #: never derail) to show how much of the gap to the ceiling a lever could close.
    world: tuple[tuple[str, float], ...] = ()

    @property
    def bound(self) -> bool:
        return bool(self.world)

    def scenario(self, world: Scenario, stable_share: float) -> Scenario:
        return replace(
            replace(world, **cast(dict[str, Any], dict(self.world))),
            arms=PROBE_ARMS,
            n_tasks=self.tasks,
            replicates=self.repeats,
            judge_calls=self.judge_calls,
            judge_models=self.judge_models,
            judge_recheck=self.recheck,
            judge_stable_share=stable_share,
        )


#: The levers at 60 tasks x 3, and the same money spent on repeats or tasks instead.
LEVERS: tuple[Lever, ...] = (
    Lever("one reading"),
    Lever("both orders", judge_calls=2),
    Lever("second judge model", judge_calls=2, judge_models=2),
    Lever("both orders, two models", judge_calls=4, judge_models=2),
    Lever("recheck disagreeing pairs", judge_calls=2, recheck=RECHECK_GAP),
    Lever("5 repeats", repeats=5),
    Lever("100 tasks", tasks=100),
    Lever("5 repeats, both orders", judge_calls=2, repeats=5),
    Lever("5 repeats, recheck", judge_calls=2, recheck=RECHECK_GAP, repeats=5),
    Lever("bound: judge without noise", world=(("judge_sd", 0.0),)),
    Lever("bound: no derailed answers", world=(("derail", 0.0),)),
)


@dataclass
class LeverResult:
    lever: Lever
    stable_share: float
    runs: int = 0
    bad: int = 0
    false_held: int = 0
    good: int = 0
    held: int = 0
    judge_calls: int = 0

    @property
    def power(self) -> float:
        return self.held / self.good if self.good else math.nan

    @property
    def false_rate(self) -> float:
        return self.false_held / self.bad if self.bad else math.nan

    @property
    def readings_per_pair(self) -> float:
        lever = self.lever
        pairs = self.runs * lever.tasks * lever.repeats * (1 + len(PROBE_ARMS))
        return self.judge_calls / pairs if pairs else math.nan

    @property
    def cost_usd(self) -> float:
        """Dollars per calibration of one class: answers plus the judge readings paid."""
        lever = self.lever
        price = partial(
            price_design,
            lever.tasks,
            lever.repeats,
            len(PROBE_ARMS),
            prompt_tokens=PRICED_PROMPT_TOKENS,
            model=PRICED_MODEL,
        )
        answers, one_reading = price(judge_model=None), price(judge_model=PRICED_MODEL)
        assert answers is not None and one_reading is not None  # a priced model
        return answers + (one_reading - answers) * self.readings_per_pair


def run_lever(
    world: Scenario, lever: Lever, stable_share: float, *, runs: int, seed: int
) -> LeverResult:
    """`runs` calibrations of the probe arms under one lever; each arm read alone."""
    scenario = lever.scenario(world, stable_share)
    rng = np.random.default_rng([seed, lever.tasks, lever.repeats, int(100 * stable_share)])
    out = LeverResult(lever, stable_share)
    for _ in range(runs):
        grades = simulate_grades(scenario, rng)
        out.judge_calls += int(grades.attrs["judge_calls"])
        rows = aggregate(grades, tolerance=scenario.tolerance, pooled=False).rows("sim")
        passes = dict(zip(rows["arm"], rows["passes"].astype(bool), strict=True))
        out.runs += 1
        for arm in scenario.arms:
            if arm.true_retention < scenario.tolerance - 1e-9:
                out.bad += 1
                out.false_held += int(passes.get(arm.key, False))
            elif arm.true_retention >= scenario.tolerance + POWER_MARGIN - 1e-9:
                out.good += 1
                out.held += int(passes.get(arm.key, False))
    return out


def run_levers(
    world: Scenario,
    levers: Sequence[Lever] = LEVERS,
    stable_shares: Sequence[float] = (0.0, 0.5),
    *,
    runs: int,
    seed: int,
    processes: int = 1,
) -> list[LeverResult]:
    jobs = [
        (world, lever, share, runs, seed)
        for i, share in enumerate(stable_shares)
        for lever in levers
        if i == 0 or not lever.bound  # a bound is read once, at the first share
    ]
    if processes > 1:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(processes) as pool:
            return list(pool.map(_job, jobs))
    return [_job(job) for job in jobs]


def _job(job: tuple[Scenario, Lever, float, int, int]) -> LeverResult:
    world, lever, share, runs, seed = job
    return run_lever(world, lever, share, runs=runs, seed=seed)
