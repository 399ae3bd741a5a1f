"""The judge's noise as a design dimension: which lever buys the most power per dollar.

In a world with a noisy judge most of what keeps a good arm from clearing at 60 tasks is
the judge's own wobble, not the answers'. There are two ways to spend more calls on it:

* reduce the judge's noise per pair — judge each pair in both A/B orders and average
  (`judge_both_orders`; at temperature 0 a repeated call in the same order reads the same,
  so the second order is the only free second reading), a second judge model, or extra
  readings only for the pairs whose first two readings disagree;
* or spend the same calls on more repeats or more tasks, which also averages the answers'
  own noise;
* or re-answer where a task's repeats disagree (a derailed answer, a noisy reading): more
  answers for those cells only, every answer counted in the mean. That dilutes derails
  where they were seen, so it also dilutes compression's harm when the harm *is* extra
  derails: each lever is also read on an edge arm harmed only that way
  (`derail_edge`), and the derail guard reads an arm whose compressed answers derail
  more often than the cleartext ones on its planned repeats alone.

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
from typing import Any, Literal, cast

import numpy as np
import pandas as pd
from scipy.optimize import brentq

from tokenlens.decision import aggregate
from tokenlens.decision.planner import price_design
from tokenlens.decision.reanswer import DERAIL_GUARD, REANSWER_SPREAD, read_with_guard
from tokenlens.simulate import (
    POWER_MARGIN,
    PROBE_ARMS,
    TASK_LOSS,
    Scenario,
    SimArm,
    _hurt_probabilities,
    derail_retention,
    simulate_grades,
)
from tokenlens.stats import ratio_estimate

#: Prompt tokens the levers are priced at (a typical calibration task).
PRICED_PROMPT_TOKENS = 1000
#: Model the levers are priced on (answers and judge).
PRICED_MODEL = "claude-haiku-4-5"
#: Gap (points of comp - clear) between a pair's two readings that buys two more.
RECHECK_GAP = 10.0
# `REANSWER_SPREAD` (a cell's repeats' spread that buys `Lever.reanswer_count` more
# answers) and `DERAIL_GUARD` are the product's (`tokenlens.decision.reanswer`).


#: The true retentions the ceiling is read at: the edge arm, then the good arms.
TRUTHS = (0.94, 0.97, 0.99, 1.0)
#: The tolerance the ceiling's rules hold; an arm exactly at it is the hardest bad arm.
CEILING_TOLERANCE = 0.95


@dataclass(frozen=True)
class Ceiling:
    """Each true retention's share held when every task's true retention is read exactly
    (concentrated harm, no noise), by three rules:

    * `rule`: the decision's own skew-corrected bound;
    * `best`: the best threshold on the mean *that knows the world*, set to hold the 0.94
      arm in 5 %: no rule that reads the sample's tasks can beat it by much, but it holds
      an arm just under the tolerance (0.949) far more often than 5 %;
    * `at_tolerance`: the best threshold that holds an arm *at* the tolerance in 5 % — the
      most any rule can reach that keeps the tolerance's promise for every arm below it.
    """

    rule: dict[float, float]
    best: dict[float, float]
    at_tolerance: dict[float, float]

    def power(self, name: str) -> float:
        """Mean share held of the good arms (true retention above the 0.94 edge)."""
        held: dict[float, float] = getattr(self, name)
        return float(np.mean([held[t] for t in TRUTHS[1:]]))


def ceiling(n: int, runs: int, seed: int) -> Ceiling:
    """`runs` noiseless calibrations of `n` tasks per true retention (`Ceiling`)."""
    rng = np.random.default_rng(seed)
    held: dict[float, float] = {}
    means: dict[float, np.ndarray] = {}
    for truth in (*TRUTHS, CEILING_TOLERANCE):
        p_easy, p_hard = _hurt_probabilities(truth)
        count = 0
        means[truth] = np.empty(runs)
        for i in range(runs):
            hard = rng.random(n) < 0.4
            hurt = rng.random(n) < np.where(hard, p_hard, p_easy)
            x = np.where(hurt, 1.0 - rng.uniform(*TASK_LOSS, n), 1.0) + rng.normal(0, 1e-4, n)
            est = ratio_estimate(x, np.ones(n), confidence=0.9, method="skew_t")
            count += int(est.low is not None and est.low >= CEILING_TOLERANCE)
            means[truth][i] = x.mean()
        held[truth] = count / runs

    def best_at(edge: float) -> dict[float, float]:
        threshold = float(np.quantile(means[edge], 0.95))
        return {truth: float(np.mean(means[truth] > threshold)) for truth in means}

    return Ceiling(held, best_at(TRUTHS[0]), best_at(CEILING_TOLERANCE))


@dataclass(frozen=True)
class Lever:
    """One way to spend calls: judge readings per pair, models, repeats, tasks."""

    name: str
    judge_calls: int = 1
    judge_models: int = 1
    recheck: float = 0.0
    repeats: int = 3
    tasks: int = 60
    #: Re-answer where a task's repeats disagree by more than this many grade points
    #: (0: never), `reanswer_count` more answers, triggered on `reanswer_on` (`Scenario`).
    reanswer: float = 0.0
    reanswer_count: int = 3
    reanswer_on: Literal["pair", "clear"] = "pair"
    #: With re-answering: an arm whose compressed answers derailed significantly more
    #: often than the control's second cleartext answers in the planned repeats (one-sided
    #: binomial p below this) is read on the planned repeats alone (0: never).
    derail_guard: float = 0.0
    #: A bound, not a lever: the world changed (e.g. a judge without noise, answers that
    #: never derail) to show how much of the gap to the ceiling a lever could close.
    world: tuple[tuple[str, float], ...] = ()

    @property
    def bound(self) -> bool:
        return bool(self.world)

    def scenario(
        self, world: Scenario, stable_share: float, arms: tuple[SimArm, ...] = PROBE_ARMS
    ) -> Scenario:
        return replace(
            replace(world, **cast(dict[str, Any], dict(self.world))),
            arms=arms,
            n_tasks=self.tasks,
            replicates=self.repeats,
            judge_calls=self.judge_calls,
            judge_models=self.judge_models,
            judge_recheck=self.recheck,
            judge_stable_share=stable_share,
            reanswer_spread=self.reanswer,
            reanswer_count=self.reanswer_count,
            reanswer_on=self.reanswer_on,
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
    Lever("re-answer disagreeing repeats", reanswer=REANSWER_SPREAD),
    Lever("re-answer, derail guard", reanswer=REANSWER_SPREAD, derail_guard=DERAIL_GUARD),
    Lever("re-answer on cleartext spread", reanswer=REANSWER_SPREAD, reanswer_on="clear"),
    Lever(
        "both orders, re-answer, guard",
        judge_calls=2,
        reanswer=REANSWER_SPREAD,
        derail_guard=DERAIL_GUARD,
    ),
    Lever(
        "recheck, re-answer, guard",
        judge_calls=2,
        recheck=RECHECK_GAP,
        reanswer=REANSWER_SPREAD,
        derail_guard=DERAIL_GUARD,
    ),
    Lever(
        "re-answer 5 more, guard",
        reanswer=REANSWER_SPREAD,
        reanswer_count=5,
        derail_guard=DERAIL_GUARD,
    ),
    Lever(
        "re-answer, guard, 4 repeats",
        reanswer=REANSWER_SPREAD,
        derail_guard=DERAIL_GUARD,
        repeats=4,
    ),
    Lever("4 repeats", repeats=4),
    Lever("80 tasks", tasks=80),
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
    answers: int = 0
    #: Arms read on the planned repeats alone (the derail guard fired).
    guarded: int = 0
    #: The arms drawn (the probe arms, or the edge arm alone in the derail world).
    n_arms: int = len(PROBE_ARMS)
    world: str = "noisy"

    @property
    def power(self) -> float:
        return self.held / self.good if self.good else math.nan

    @property
    def false_rate(self) -> float:
        return self.false_held / self.bad if self.bad else math.nan

    @property
    def readings_per_pair(self) -> float:
        lever = self.lever
        pairs = self.runs * lever.tasks * lever.repeats * (1 + self.n_arms)
        return self.judge_calls / pairs if pairs else math.nan

    @property
    def answers_per_design(self) -> float:
        """Answers paid over the design's own (1.0 unless re-answering paid more)."""
        lever = self.lever
        planned = self.runs * lever.tasks * lever.repeats * (2 + self.n_arms)
        return self.answers / planned if planned else math.nan

    @property
    def cost_usd(self) -> float:
        """Dollars per calibration of one class: answers plus the judge readings paid."""
        lever = self.lever
        price = partial(
            price_design,
            lever.tasks,
            lever.repeats,
            self.n_arms,
            prompt_tokens=PRICED_PROMPT_TOKENS,
            model=PRICED_MODEL,
        )
        answers, one_reading = price(judge_model=None), price(judge_model=PRICED_MODEL)
        assert answers is not None and one_reading is not None  # a priced model
        return answers * self.answers_per_design + (one_reading - answers) * self.readings_per_pair


def derail_edge(
    world: Scenario, retention: float = PROBE_ARMS[0].true_retention, share: float = 1.0
) -> SimArm:
    """The edge arm harmed by extra derails, uniform over tasks, at the rate that takes
    `share` of its loss (all of it by default; hurt tasks the rest) and leaves it
    `retention`: a compressor that makes answers collapse more often, which a lever
    against derails must not forgive."""
    kept = 1.0 - share * (1.0 - retention)
    rate = brentq(lambda r: derail_retention(world, r) - kept, 1e-6, 0.9)
    return replace(PROBE_ARMS[0], true_retention=retention, derail=float(rate))


#: Worlds a lever is read in: the noisy world's probe arms, and the edge arm alone with
#: compression's harm as uniform extra derails (only its application is read there).
DERAIL_WORLD = "edge harmed by derails"


def run_lever(
    world: Scenario,
    lever: Lever,
    stable_share: float,
    *,
    runs: int,
    seed: int,
    arms: tuple[SimArm, ...] = PROBE_ARMS,
    world_name: str = "noisy",
) -> LeverResult:
    """`runs` calibrations of `arms` under one lever; each arm read alone."""
    scenario = lever.scenario(world, stable_share, arms)
    rng = np.random.default_rng([seed, lever.tasks, lever.repeats, int(100 * stable_share)])
    out = LeverResult(lever, stable_share, n_arms=len(arms), world=world_name)
    for _ in range(runs):
        grades = simulate_grades(scenario, rng)
        out.judge_calls += int(grades.attrs["judge_calls"])
        out.answers += int(grades.attrs["answers"])
        if lever.reanswer and lever.derail_guard:
            read, guarded = read_with_guard(grades, lever.repeats, guard=lever.derail_guard)
            passes = _passes(read, scenario.tolerance)
            out.guarded += sum(len(arms) for arms in guarded.values())
        else:
            passes = _passes(grades, scenario.tolerance)
        out.runs += 1
        for arm in scenario.arms:
            if arm.true_retention < scenario.tolerance - 1e-9:
                out.bad += 1
                out.false_held += int(passes.get(arm.key, False))
            elif arm.true_retention >= scenario.tolerance + POWER_MARGIN - 1e-9:
                out.good += 1
                out.held += int(passes.get(arm.key, False))
    return out


def _passes(grades: pd.DataFrame, tolerance: float) -> dict[str, bool]:
    rows = aggregate(grades, tolerance=tolerance, pooled=False).rows("sim")
    return dict(zip(rows["arm"], rows["passes"].astype(bool), strict=True))


def run_levers(
    world: Scenario,
    levers: Sequence[Lever] = LEVERS,
    stable_shares: Sequence[float] = (0.0, 0.5),
    *,
    runs: int,
    seed: int,
    processes: int = 1,
    derail_share: float | None = None,
) -> list[LeverResult]:
    """Every lever at every stable share (a bound at the first only); with `derail_share`
    also the edge arm alone, that share of its harm extra derails (`derail_edge`)."""
    jobs: list[tuple[Scenario, Lever, float, int, int, float | None]] = [
        (world, lever, share, runs, seed, None)
        for i, share in enumerate(stable_shares)
        for lever in levers
        if i == 0 or not lever.bound  # a bound is read once, at the first share
    ]
    if derail_share is not None:
        jobs += [
            (w, lever, share, runs, seed, derail_share)
            for w, lever, share, *_ in jobs
            if not lever.bound
        ]
    if processes > 1:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(processes) as pool:
            return list(pool.map(_job, jobs))
    return [_job(job) for job in jobs]


def _job(job: tuple[Scenario, Lever, float, int, int, float | None]) -> LeverResult:
    world, lever, share, runs, seed, derails = job
    if derails is not None:
        arms = (derail_edge(world, share=derails),)
        return run_lever(
            world, lever, share, runs=runs, seed=seed, arms=arms, world_name=DERAIL_WORLD
        )
    return run_lever(world, lever, share, runs=runs, seed=seed)
