"""Simulated calibrations with a known truth, to check the decision rules keep their promises.

A rule that certifies arms is only as good as its error rates, and those cannot be read
off real data (nobody knows the true retention there). So we invent worlds where we do,
and run the real `aggregate` + `decide` on the simulated grades table.

Two kinds of world:

* `spread`: every task loses a little (true retention per task scattered around the
  arm's), normal sampling and judge noise. The friendly world.
* `concentrated`: the harsh one, closer to real compression. Most tasks are untouched;
  a few are hurt badly (each loses 15-55 % of its grade), hard tasks three times as often
  as easy ones; easy tasks sit near the ceiling so grades pile up at 100; the judge
  rounds to multiples of 5; 1.5 % of answers derail; ~1 % of judge calls error and ~1 %
  of rows go missing. The control then reads a ~3 % noise floor.

Scored per arm (each arm is judged as if it were alone on the ladder, from its own
`passes`/`certain`; the `ladder` scenario scores the walk instead):

* false application: an arm whose true retention is below the tolerance comes back ✓ or
  ? (it would be applied; goal <= 5 %); false ✓ alone too;
* power: arms whose true retention is >= tolerance + 2 points that hold;
* coverage: how often the arm's 90 % interval (two one-sided 95 % bounds) holds the truth.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np
import pandas as pd

from tokenlens.compress.arms import CONTROL, Arm
from tokenlens.decision import Mode, aggregate, decide
from tokenlens.decision.planner import calls_for
from tokenlens.stats import IntervalMethod

#: Good arms must beat the tolerance by this much to count towards power.
POWER_MARGIN = 0.02
#: Concentrated worlds: share of hard tasks, their quality range, easy tasks' range.
HARD_SHARE = 0.4
HARD_QUALITY = (40.0, 85.0)
EASY_QUALITY = (90.0, 104.0)  # above 100 saturates: grades pile up at the ceiling
HARD_HURT_RATIO = 3.0
TASK_LOSS = (0.15, 0.55)


@dataclass(frozen=True)
class SimArm:
    """An arm with a known true retention and token reduction."""

    key: str
    true_retention: float
    reduction: float
    #: Compression's harm as extra derails: this share of the arm's answers (on top of the
    #: world's) collapse. `true_retention` counts them; the tasks' own harm is what is
    #: left (`derail_retention`).
    derail: float = 0.0


@dataclass(frozen=True)
class Scenario:
    """One simulated world (one task class); noise is in grade points (0-100 scale)."""

    name: str
    arms: tuple[SimArm, ...]
    n_tasks: int = 5
    replicates: int = 3
    judge_sd: float = 3.0
    sampling_sd: float = 3.0
    #: Spread of the true retention across tasks (`spread` worlds).
    task_sd: float = 0.02
    quality: tuple[float, float] = (50.0, 85.0)
    tolerance: float = 0.95
    #: Expected grade of the second cleartext answer relative to the first: below 1.0
    #: models an instrument that marks a clean answer down (e.g. open-ended classes).
    control_retention: float = 1.0
    harm: Literal["spread", "concentrated"] = "spread"
    grade_step: int = 1
    derail: float = 0.0
    error_rate: float = 0.0
    missing_rate: float = 0.0
    #: Score the ladder walk (chosen arm) instead of each arm alone.
    walk: bool = False
    #: Concentrated worlds: share of hard tasks, how much likelier a hard task is hurt,
    #: and the share of its grade a hurt task loses (uniform in this range).
    hard_share: float = HARD_SHARE
    hurt_ratio: float = HARD_HURT_RATIO
    task_loss: tuple[float, float] = TASK_LOSS
    #: The judge as a design dimension (`tokenlens.simulate_judge`): readings per pair,
    #: averaged (`judge_sd` is one reading's noise); the independent judge models they
    #: are spread over; the share of a model's noise that is its stable opinion of an
    #: answer (no repeated call of that model removes it); and, when > 0, the gap between
    #: a pair's first two readings (points of comp - clear) that buys two more readings.
    judge_calls: int = 1
    judge_models: int = 1
    judge_stable_share: float = 0.0
    judge_recheck: float = 0.0
    #: Re-answer where a task's repeats disagree: after the repeats, an arm's cell (task x
    #: arm; never the control's) whose grades spread by more than this many points across
    #: its repeats gets `reanswer_count` more answers, each with a fresh cleartext answer,
    #: and every answer counts in the mean. `reanswer_on` "pair" reads both grades of
    #: the cell's pairs, "clear" only its cleartext answers (and the control's second
    #: answer), and then re-answers every cell of the task (a variant, control included).
    reanswer_spread: float = 0.0
    reanswer_count: int = 3
    reanswer_on: Literal["pair", "clear"] = "pair"


def _hurt_probabilities(
    true_retention: float,
    hard_share: float = HARD_SHARE,
    hurt_ratio: float = HARD_HURT_RATIO,
    task_loss: tuple[float, float] = TASK_LOSS,
) -> tuple[float, float]:
    """(easy, hard) chance that a task is hurt, so the mean over tasks of each task's
    retention is `true_retention` (a hurt task keeps 1 - mean(TASK_LOSS) on average).

    The truth is per task, every task counting once: the stricter reading when harm sits
    on hard, low-scoring tasks (a ratio of summed grades would weight easy tasks more)."""
    loss = 1.0 - true_retention
    if loss <= 0:
        return 0.0, 0.0
    mean_loss = sum(task_loss) / 2
    p_easy = loss / ((hard_share * hurt_ratio + (1 - hard_share)) * mean_loss)
    return p_easy, p_easy * hurt_ratio


def simulate_grades(
    scenario: Scenario, rng: np.random.Generator, task_class: str = "sim"
) -> pd.DataFrame:
    """A grades table (columns of `tables.GRADES`) drawn from the scenario."""
    s = scenario
    rows: list[dict[str, object]] = []
    reductions = {a.key: a.reduction for a in s.arms}
    calls = 0
    stable_sd = s.judge_sd * math.sqrt(s.judge_stable_share)
    call_sd = s.judge_sd * math.sqrt(1.0 - s.judge_stable_share)

    def grade(value: float, offset: float = 0.0) -> float:
        noisy = value + offset + rng.normal(0.0, call_sd)
        return float(min(max(s.grade_step * round(noisy / s.grade_step), 0), 100))

    def judge(clear: float, other: float) -> tuple[float, float]:
        """One pair's grades: the mean of its readings (one, unless the design asks more)."""
        nonlocal calls
        if s.judge_calls == 1 and not s.judge_recheck and not stable_sd:
            calls += 1
            return grade(clear), grade(other)
        models = max(1, s.judge_models)
        stable = rng.normal(0.0, stable_sd, (models, 2)) if stable_sd else np.zeros((models, 2))
        readings = [
            (grade(clear, stable[i % models, 0]), grade(other, stable[i % models, 1]))
            for i in range(s.judge_calls)
        ]
        if s.judge_recheck and len(readings) >= 2:
            gaps = [b - a for a, b in readings[:2]]
            if abs(gaps[0] - gaps[1]) > s.judge_recheck:
                readings += [
                    (grade(clear, stable[i % models, 0]), grade(other, stable[i % models, 1]))
                    for i in range(2)
                ]
        calls += len(readings)
        return (
            float(np.mean([a for a, _ in readings])),
            float(np.mean([b for _, b in readings])),
        )

    def answer(quality: float, extra_derail: float = 0.0) -> float:
        if s.derail and rng.random() < s.derail:
            return float(rng.uniform(0.0, 30.0))
        if extra_derail and rng.random() < extra_derail:
            return float(rng.uniform(0.0, 30.0))
        return quality + rng.normal(0.0, s.sampling_sd)

    hurt_p = {
        arm.key: _hurt_probabilities(
            arm.true_retention / derail_retention(s, arm.derail),
            s.hard_share,
            s.hurt_ratio,
            s.task_loss,
        )
        for arm in s.arms
    }
    parsed_arms = {a.key: Arm.parse(a.key) for a in s.arms}
    derails = {a.key: a.derail for a in s.arms}
    keys = [CONTROL, *parsed_arms]
    answers = 0

    def arm_answer(key: str, quality: float, effect: dict[str, float]) -> float:
        if key == CONTROL:
            return answer(s.control_retention * quality)
        return answer(effect[key] * quality, derails[key])

    def pair_row(
        task_id: str, rep: int, key: str, clear: float, other: float
    ) -> tuple[float, float] | None:
        """Judge one pair into a row; its grades, or None (missing row, judge error)."""
        if s.missing_rate and rng.random() < s.missing_rate:
            return None
        failed = bool(s.error_rate) and rng.random() < s.error_rate
        graded = None if failed else judge(clear, other)
        parsed = parsed_arms.get(key)
        rows.append(
            {
                "task_id": task_id,
                "task_class": task_class,
                "replicate": rep,
                "arm": key,
                "method": CONTROL if parsed is None else parsed.method,
                "rate": None if parsed is None else parsed.rate,
                "grade_clear": None if graded is None else graded[0],
                "grade_comp": None if graded is None else graded[1],
                "reduction": 0.0 if parsed is None else reductions[key],
                "error": "judge reply was not JSON" if failed else None,
            }
        )
        return graded

    for t in range(s.n_tasks):
        task_id = f"{task_class}-{t:03d}"
        if s.harm == "concentrated":
            hard = rng.random() < s.hard_share
            quality = rng.uniform(*(HARD_QUALITY if hard else EASY_QUALITY))
            effect = {}
            for arm in s.arms:
                p = hurt_p[arm.key][1 if hard else 0]
                hurt = rng.random() < p
                effect[arm.key] = 1.0 - rng.uniform(*s.task_loss) if hurt else 1.0
        else:
            quality = rng.uniform(*s.quality)
            effect = {arm.key: arm.true_retention + rng.normal(0.0, s.task_sd) for arm in s.arms}
        seen: dict[str, list[tuple[float, float]]] = {key: [] for key in keys}
        for rep in range(s.replicates):
            clear = answer(quality)
            others = [arm_answer(key, quality, effect) for key in keys]
            answers += 1 + len(keys)
            for key, other in zip(keys, others, strict=True):
                graded = pair_row(task_id, rep, key, clear, other)
                if graded is not None:
                    seen[key].append(graded)
        again = _disagreeing(s, seen) if s.reanswer_spread else []
        for rep in range(s.replicates, s.replicates + (s.reanswer_count if again else 0)):
            clear = answer(quality)
            answers += 1 + len(again)
            for key in again:
                pair_row(task_id, rep, key, clear, arm_answer(key, quality, effect))
    df = pd.DataFrame(rows)
    df["judge"] = "sim-judge"
    df.attrs["judge_calls"] = calls
    df.attrs["answers"] = answers
    return df


def _disagreeing(s: Scenario, seen: dict[str, list[tuple[float, float]]]) -> list[str]:
    """The cells of one task to re-answer: the arms' whose repeats' grades spread by more
    than `s.reanswer_spread` points (`reanswer_on` "pair"), or every cell when the
    task's cleartext answers do ("clear")."""

    def spread(values: list[float]) -> float:
        return max(values) - min(values) if len(values) >= 2 else 0.0

    limit = s.reanswer_spread
    if s.reanswer_on == "clear":
        loud = any(spread([c for c, _ in pairs]) > limit for pairs in seen.values())
        loud = loud or spread([o for _, o in seen[CONTROL]]) > limit
        return list(seen) if loud else []
    return [  # never the control's cells (`tokenlens.decision.reanswer.cells_to_reanswer`)
        key
        for key, pairs in seen.items()
        if key != CONTROL
        and (spread([c for c, _ in pairs]) > limit or spread([o for _, o in pairs]) > limit)
    ]


def derail_retention(s: Scenario, rate: float) -> float:
    """The true retention extra derails at `rate` leave an arm in world `s`: the mean over
    tasks of each task's expected compressed grade over its expected cleartext grade (a
    derail reads 15 on average; an answer's grade is its quality, capped at 100)."""
    if rate <= 0:
        return 1.0
    if s.harm == "concentrated":
        hard = np.linspace(*HARD_QUALITY, 201)
        easy = np.minimum(np.linspace(*EASY_QUALITY, 201), 100.0)
        weights = np.r_[np.full(201, s.hard_share), np.full(201, 1 - s.hard_share)]
        quality = np.r_[hard, easy]
    else:
        quality, weights = np.linspace(*s.quality, 201), np.ones(201)
    kept = 1 - s.derail
    clear = kept * quality + s.derail * 15.0
    comp = kept * (1 - rate) * quality + (1 - kept * (1 - rate)) * 15.0
    return float(np.average(comp / clear, weights=weights))


@dataclass
class Tally:
    """Counts for one scenario x design x mode; rates are derived."""

    scenario: str
    mode: Mode
    n_tasks: int = 0
    replicates: int = 0
    runs: int = 0
    bad_arm_cases: int = 0
    false_certified: int = 0
    false_held: int = 0
    good_arm_cases: int = 0
    good_held: int = 0
    intervals: int = 0
    covered: int = 0
    no_interval: int = 0
    calls: int = 0

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
        """Share of good arms (true retention >= tolerance + POWER_MARGIN) that held."""
        return self.good_held / self.good_arm_cases if self.good_arm_cases else math.nan

    @property
    def calls_per_run(self) -> float:
        return self.calls / self.runs if self.runs else math.nan


@dataclass
class StudyResult:
    tallies: list[Tally] = field(default_factory=list)

    def combined(self, mode: Mode, scenarios: Iterable[str] | None = None) -> Tally:
        wanted = None if scenarios is None else set(scenarios)
        total = Tally("all", mode)
        for t in self.tallies:
            if t.mode != mode or (wanted is not None and t.scenario not in wanted):
                continue
            for name in (
                "runs",
                "bad_arm_cases",
                "false_certified",
                "false_held",
                "good_arm_cases",
                "good_held",
                "intervals",
                "covered",
                "no_interval",
                "calls",
            ):
                setattr(total, name, getattr(total, name) + getattr(t, name))
        return total


def calls_per_design(n_tasks: int, replicates: int, n_arms: int, *, llm_judge: bool = True) -> int:
    """Paid calls of a fixed design (the planner's count, answers plus judge calls)."""
    return sum(calls_for(n_tasks, replicates, n_arms, llm_judge=llm_judge))


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
    rows = curve.rows("sim").set_index("arm")
    chosen = None
    verdict = None
    if scenario.walk:
        entry = decide(curve, calibration_id="simulation", model="sim").classes["sim"]
        chosen = entry.arm.key if entry.arm is not None else None
        verdict = entry.verdict
    tally.runs += 1
    tally.calls += calls_per_design(scenario.n_tasks, scenario.replicates, len(scenario.arms))
    for arm in scenario.arms:
        if arm.key not in rows.index:
            continue
        row = rows.loc[arm.key]
        if scenario.walk:
            held = chosen == arm.key or row["status"] == "held"
            certified = chosen == arm.key and verdict == "measured"
        else:
            held = bool(row["passes"])
            certified = bool(row["certain"])
        if arm.true_retention < scenario.tolerance - 1e-9:
            tally.bad_arm_cases += 1
            tally.false_held += int(held)
            tally.false_certified += int(certified)
        elif arm.true_retention >= scenario.tolerance + POWER_MARGIN - 1e-9:
            tally.good_arm_cases += 1
            tally.good_held += int(held)
        low, high = row["retention_low"], row["retention_high"]
        if pd.isna(low) or pd.isna(high):
            tally.no_interval += 1
        else:
            tally.intervals += 1
            tally.covered += int(low - 1e-9 <= min(arm.true_retention, 1.0) <= high + 1e-9)


def run_study(
    scenarios: Sequence[Scenario],
    *,
    runs: int,
    seed: int = 0,
    modes: Iterable[Mode] = ("interval", "mean"),
    interval_method: IntervalMethod = "skew_t",
) -> StudyResult:
    """Simulate `runs` calibrations per scenario and score every mode on the same data."""
    result = StudyResult()
    mode_list = list(modes)
    for index, scenario in enumerate(scenarios):
        rng = np.random.default_rng([seed, index])
        tallies = [
            Tally(scenario.name, mode, scenario.n_tasks, scenario.replicates) for mode in mode_list
        ]
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


#: One point below the 95 % tolerance (must not be applied), and good arms for power.
PROBE_ARMS = _ladder((0.94, 0.2), (0.97, 0.25), (0.99, 0.3), (1.0, 0.35))

#: The worlds of the study; `designs()` varies tasks and repeats over each.
DEFAULT_SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "concentrated",
        PROBE_ARMS,
        harm="concentrated",
        judge_sd=2.0,
        sampling_sd=2.5,
        grade_step=5,
        derail=0.015,
        error_rate=0.01,
        missing_rate=0.01,
    ),
    Scenario("spread", PROBE_ARMS),
    Scenario("noisy-judge", PROBE_ARMS, judge_sd=7.0, sampling_sd=6.0),
    Scenario("clean-judge", PROBE_ARMS, judge_sd=1.0, sampling_sd=1.0),
    Scenario(
        "ladder-walk", _ladder((1.0, 0.15), (0.97, 0.25), (0.92, 0.35), (0.8, 0.5)), walk=True
    ),
)

DESIGN_TASKS = (5, 10, 20, 40)
DESIGN_REPEATS = (1, 3)


def designs(
    scenarios: Sequence[Scenario],
    tasks: Sequence[int] = DESIGN_TASKS,
    repeats: Sequence[int] = DESIGN_REPEATS,
) -> list[Scenario]:
    """Every scenario at every design (tasks x repeats), named `world nxr`."""
    return [
        replace(s, name=f"{s.name} {n}x{r}", n_tasks=n, replicates=r)
        for s in scenarios
        for n in tasks
        for r in repeats
    ]


def small_scenarios() -> tuple[Scenario, ...]:
    """A cheaper cut of the default study for tests."""
    return tuple(replace(s, n_tasks=min(s.n_tasks, 8)) for s in DEFAULT_SCENARIOS)
