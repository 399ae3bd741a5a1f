"""Simulated calibrations with a known truth, to check the aggregator keeps its promises.

A rule that certifies arms is only as good as its error rates, and those cannot be read
off real data (nobody knows the true retention there). So we invent worlds where we do:
each task has a true cleartext quality, each arm a true retention, answers vary
(sampling noise, shared by every pair of a (task, replicate) as in the real flow, where
one cleartext answer is compared against each arm) and the judge adds its own noise to
every grade. The real `aggregate` + `decide` then run on the simulated grades table, and
we count:

* false certify: an arm whose true loss exceeds the tolerance comes back ✓ (goal <= 5 %);
  also reported: false held (✓ or ?, i.e. the arm would be applied);
* coverage: how often the 95 % interval of uncapped retention contains the true
  retention (goal >= 93 %).

Grades are rounded to integers and clipped to 0-100 like a judge's, so the truth is
approximate near the ceiling; qualities are drawn well below it to keep that rare.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from tokenlens.compress.arms import CONTROL, Arm
from tokenlens.decision import Mode, aggregate, decide
from tokenlens.stats import IntervalMethod


@dataclass(frozen=True)
class SimArm:
    """An arm with a known true retention and token reduction."""

    key: str
    true_retention: float
    reduction: float


@dataclass(frozen=True)
class Scenario:
    """One simulated world (one task class); noise is in grade points (0-100 scale)."""

    name: str
    arms: tuple[SimArm, ...]
    n_tasks: int = 5
    replicates: int = 3
    judge_sd: float = 3.0
    sampling_sd: float = 3.0
    #: Spread of the true retention across tasks (heterogeneity; clusters matter).
    task_sd: float = 0.02
    quality: tuple[float, float] = (50.0, 85.0)
    tolerance: float = 0.95
    #: Expected grade of the second cleartext answer relative to the first: below 1.0
    #: models an instrument that marks a clean answer down (e.g. open-ended classes).
    control_retention: float = 1.0


def simulate_grades(
    scenario: Scenario, rng: np.random.Generator, task_class: str = "sim"
) -> pd.DataFrame:
    """A grades table (columns of `tables.GRADES`) drawn from the scenario."""
    rows: list[dict[str, object]] = []

    def grade(value: float) -> float:
        noisy = value + rng.normal(0.0, scenario.judge_sd)
        return float(min(max(round(noisy), 0), 100))

    for t in range(scenario.n_tasks):
        task_id = f"{task_class}-{t:03d}"
        quality = rng.uniform(*scenario.quality)
        task_retention = {
            arm.key: arm.true_retention + rng.normal(0.0, scenario.task_sd) for arm in scenario.arms
        }
        for rep in range(scenario.replicates):
            clear = quality + rng.normal(0.0, scenario.sampling_sd)
            second = scenario.control_retention * quality + rng.normal(0.0, scenario.sampling_sd)
            base = {"task_id": task_id, "task_class": task_class, "replicate": rep}
            rows.append(
                {
                    **base,
                    "arm": CONTROL,
                    "method": CONTROL,
                    "rate": None,
                    "grade_clear": grade(clear),
                    "grade_comp": grade(second),
                    "reduction": 0.0,
                }
            )
            for arm in scenario.arms:
                parsed = Arm.parse(arm.key)
                comp = task_retention[arm.key] * quality + rng.normal(0.0, scenario.sampling_sd)
                rows.append(
                    {
                        **base,
                        "arm": arm.key,
                        "method": parsed.method,
                        "rate": parsed.rate,
                        "grade_clear": grade(clear),
                        "grade_comp": grade(comp),
                        "reduction": arm.reduction,
                    }
                )
    df = pd.DataFrame(rows)
    df["judge"] = "sim-judge"
    df["error"] = None
    return df


@dataclass
class Tally:
    """Counts for one scenario x mode; rates are derived."""

    scenario: str
    mode: Mode
    runs: int = 0
    bad_arm_cases: int = 0
    false_certified: int = 0
    false_held: int = 0
    good_arm_cases: int = 0
    good_held: int = 0
    intervals: int = 0
    covered: int = 0
    no_interval: int = 0

    @property
    def false_certify_rate(self) -> float:
        return self.false_certified / self.bad_arm_cases if self.bad_arm_cases else math.nan

    @property
    def false_held_rate(self) -> float:
        return self.false_held / self.bad_arm_cases if self.bad_arm_cases else math.nan

    @property
    def coverage(self) -> float:
        return self.covered / self.intervals if self.intervals else math.nan

    @property
    def power(self) -> float:
        """Share of good arms (true loss within tolerance) that were chosen and held."""
        return self.good_held / self.good_arm_cases if self.good_arm_cases else math.nan


@dataclass
class StudyResult:
    tallies: list[Tally] = field(default_factory=list)

    def combined(self, mode: Mode) -> Tally:
        total = Tally("all", mode)
        for t in self.tallies:
            if t.mode != mode:
                continue
            total.runs += t.runs
            total.bad_arm_cases += t.bad_arm_cases
            total.false_certified += t.false_certified
            total.false_held += t.false_held
            total.good_arm_cases += t.good_arm_cases
            total.good_held += t.good_held
            total.intervals += t.intervals
            total.covered += t.covered
            total.no_interval += t.no_interval
        return total


def _score_run(
    scenario: Scenario, grades: pd.DataFrame, tally: Tally, method: IntervalMethod
) -> None:
    curve = aggregate(
        grades,
        tolerance=scenario.tolerance,
        mode=tally.mode,
        interval_method=method,
        pooled=False,
    )
    policy = decide(curve, calibration_id="simulation", model="sim")
    entry = policy.classes["sim"]
    chosen = entry.arm.key if entry.arm is not None else None
    rows = curve.rows("sim").set_index("arm")
    tally.runs += 1
    for arm in scenario.arms:
        bad = (1.0 - arm.true_retention) > (1.0 - scenario.tolerance) + 1e-9
        picked = chosen == arm.key
        if bad:
            tally.bad_arm_cases += 1
            tally.false_held += int(picked)
            tally.false_certified += int(picked and entry.verdict == "measured")
        else:
            tally.good_arm_cases += 1
            tally.good_held += int(picked or _held(rows, arm.key))
        low, high = rows.at[arm.key, "retention_low"], rows.at[arm.key, "retention_high"]
        if pd.isna(low) or pd.isna(high):
            tally.no_interval += 1
        else:
            tally.intervals += 1
            tally.covered += int(low <= arm.true_retention <= high)


def _held(rows: pd.DataFrame, key: str) -> bool:
    return bool(rows.at[key, "status"] == "held")


def run_study(
    scenarios: Sequence[Scenario],
    *,
    runs: int,
    seed: int = 0,
    modes: Iterable[Mode] = ("interval", "mean"),
    interval_method: IntervalMethod = "cluster_t",
) -> StudyResult:
    """Simulate `runs` calibrations per scenario and score every mode on the same data."""
    result = StudyResult()
    mode_list = list(modes)
    for index, scenario in enumerate(scenarios):
        rng = np.random.default_rng([seed, index])
        tallies = [Tally(scenario.name, mode) for mode in mode_list]
        for _ in range(runs):
            grades = simulate_grades(scenario, rng)
            for tally in tallies:
                _score_run(scenario, grades, tally, interval_method)
        result.tallies.extend(tallies)
    return result


def _ladder(*pairs: tuple[float, float]) -> tuple[SimArm, ...]:
    """(true retention, reduction) pairs as llmlingua2 arms at descending keep rates."""
    rates = (0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2)
    return tuple(
        SimArm(f"llmlingua2@{rate:g}", retention, reduction)
        for rate, (retention, reduction) in zip(rates, pairs, strict=False)
    )


#: The study the bench runs: borderline losses, a realistic ladder, noisy and clean judges.
DEFAULT_SCENARIOS: tuple[Scenario, ...] = (
    Scenario("borderline-bad", _ladder((0.93, 0.2))),
    Scenario("ladder", _ladder((1.0, 0.15), (0.97, 0.25), (0.92, 0.35), (0.8, 0.5))),
    Scenario("noisy-judge", _ladder((0.93, 0.2)), judge_sd=7.0, sampling_sd=6.0),
    Scenario("clean-judge", _ladder((0.99, 0.15), (0.96, 0.3)), judge_sd=1.0, sampling_sd=1.0),
    Scenario("more-tasks", _ladder((0.99, 0.15), (0.93, 0.3)), n_tasks=20, judge_sd=4.0),
)


def small_scenarios() -> tuple[Scenario, ...]:
    """A cheaper cut of the default study for tests."""
    return tuple(replace(s, n_tasks=min(s.n_tasks, 8)) for s in DEFAULT_SCENARIOS)
