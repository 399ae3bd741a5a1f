"""The planner: how many tasks and repeats a class needs to certify an arm, and the bill.

From a finished calibration it reads each arm's measured retention and the run's
per-task retentions (`tokenlens.decision.plan_power`: calibrations of each size
drawn from them and read by the decision's own rule), or, from a curve alone, the spread
its bound implies (`decision_spread`: the curve's interval, not the raw per-cell ratios
behind `sd_between` / `sd_within`, which one low cleartext grade blows up); with no
calibration it states its assumptions instead. For each design (repeats 1-3) it finds
the fewest tasks whose one-sided 95 % bound holds the arm with 80 % power, never fewer
than the minimum-evidence rule asks (`tokenlens.decision.evidence`), and prices the
calls. An arm the run already held is said to be so.

An arm measured at or below the tolerance cannot be planned for: no design certifies
what is not there, and the planner says so instead of printing a huge number.

With a paid judge it also weighs the next step for a class (`judge_options`,
`next_lever`): one more repeat, both A/B orders, or re-answering where repeats disagree
(`tokenlens.decision.plan_reanswer` measures and prices that step).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from tokenlens.decision.curve import ALPHA
from tokenlens.decision.evidence import tasks_for_measured, tasks_for_provisional
from tokenlens.decision.plan_power import TaskSample, tasks_to_hold
from tokenlens.pricing import cost_usd
from tokenlens.stats import Spread, t_quantile, tasks_for_power

POWER = 0.8
#: Stated assumptions when nothing was measured yet (fractions of the cleartext grade).
ASSUMED_SPREAD = Spread(between=0.05, within=0.06)
ASSUMED_MARGIN = 0.02  # plan for an arm that truly keeps tolerance + 2 points
ASSUMED_ANSWER_TOKENS = 300
ASSUMED_JUDGE_OUTPUT_TOKENS = 250
#: Largest spread of a per-task retention that is capped to [0, 1] (a coin between 0 and 1).
MAX_SPREAD = 0.5
JUDGE_PROMPT_OVERHEAD_TOKENS = 400


@dataclass(frozen=True)
class Design:
    """One way to certify one arm: tasks x repeats, what it costs, what it can claim."""

    repeats: int
    tasks: int | None  # None: no design certifies it
    tasks_measured: int | None  # tasks for a ✓ (at least the ✓ evidence rule)
    calls: int | None
    cost_usd: float | None
    cost_batch_usd: float | None


@dataclass(frozen=True)
class ArmPlan:
    task_class: str
    arm: str
    assumed_retention: float
    spread: Spread
    measured: bool  # numbers came from a calibration, not assumptions
    designs: tuple[Design, ...]
    note: str


def calls_for(
    tasks: int, repeats: int, n_arms: int, *, llm_judge: bool, judge_calls_per_pair: int = 1
) -> tuple[int, int]:
    """(answer calls, judge calls) of a fixed design over `n_arms` arms plus the control
    (`judge_calls_per_pair` 2: each pair judged in both A/B orders)."""
    answers = tasks * repeats * (2 + n_arms)
    judges = tasks * repeats * (1 + n_arms) * judge_calls_per_pair if llm_judge else 0
    return answers, judges


def price_design(
    tasks: int,
    repeats: int,
    n_arms: int,
    *,
    prompt_tokens: float,
    model: str,
    judge_model: str | None,
    batch: bool = False,
    judge_calls_per_pair: int = 1,
) -> float | None:
    """Dollars for a design; None when a model has no price (say so, never print $0)."""
    answers, judges = calls_for(
        tasks,
        repeats,
        n_arms,
        llm_judge=judge_model is not None,
        judge_calls_per_pair=judge_calls_per_pair,
    )
    return price_calls(
        answers,
        judges,
        prompt_tokens=prompt_tokens,
        model=model,
        judge_model=judge_model,
        batch=batch,
    )


def price_calls(
    answers: float,
    judges: float,
    *,
    prompt_tokens: float,
    model: str,
    judge_model: str | None,
    batch: bool = False,
) -> float | None:
    """Dollars for `answers` answer calls and `judges` judge calls (None: no price)."""
    answer_cost = cost_usd(
        model,
        input_tokens=int(prompt_tokens),
        output_tokens=ASSUMED_ANSWER_TOKENS,
        batch=batch,
    )
    if answer_cost is None:
        return None
    total = answers * answer_cost
    if judge_model is not None and judges:
        judge_in = int(prompt_tokens + 2 * ASSUMED_ANSWER_TOKENS + JUDGE_PROMPT_OVERHEAD_TOKENS)
        judge_cost = cost_usd(
            judge_model,
            input_tokens=judge_in,
            output_tokens=ASSUMED_JUDGE_OUTPUT_TOKENS,
            batch=batch,
        )
        if judge_cost is None:
            return None
        total += judges * judge_cost
    return total


@dataclass(frozen=True)
class Cleared:
    """Where the run the plan reads already stands on an arm its bound held."""

    tasks: int
    repeats: float
    low: float  # the bound that held
    certain: bool  # ✓ (else ?)
    ignored: bool = False  # the walk stopped at an earlier arm's failure


def plan_arm(
    task_class: str,
    arm: str,
    *,
    tolerance: float,
    retention: float | None,
    spread: Spread | None,
    n_arms: int,
    prompt_tokens: float,
    model: str,
    judge_model: str | None,
    repeats: Sequence[int] = (1, 2, 3),
    judge_calls_per_pair: int = 1,
    sample: TaskSample | None = None,
    cleared: Cleared | None = None,
) -> ArmPlan:
    """Designs that certify `arm` with 80 % power, from measurements or assumptions.

    With the run's per-task `sample`, the sizes are read by drawing calibrations of that
    size from it and applying the decision's own rule (`tokenlens.decision.plan_power`);
    otherwise from the normal formula on `spread`."""
    measured = retention is not None and (spread is not None or sample is not None)
    truth = min(retention, 1.0) if retention is not None else tolerance + ASSUMED_MARGIN
    sp = sample.spread() if sample is not None else spread or ASSUMED_SPREAD
    need_p, need_m = tasks_for_provisional(tolerance), tasks_for_measured(tolerance)
    designs: list[Design] = []
    for r in repeats:
        if sample is not None:
            n = tasks_to_hold(sample, r, tolerance=tolerance, power=POWER, minimum=need_p)
            n_m = tasks_to_hold(
                sample, r, tolerance=tolerance, power=POWER, minimum=need_m, certain=True
            )
        else:
            n = tasks_for_power(truth - tolerance, sp, r, alpha=ALPHA, power=POWER)
            n = None if n is None else max(n, need_p)
            n_m = None if n is None else max(n, need_m)
        if n is None:
            designs.append(Design(r, None, None, None, None, None))
            continue
        answers, judges = calls_for(
            n,
            r,
            n_arms,
            llm_judge=judge_model is not None,
            judge_calls_per_pair=judge_calls_per_pair,
        )
        kwargs = {
            "prompt_tokens": prompt_tokens,
            "model": model,
            "judge_model": judge_model,
            "judge_calls_per_pair": judge_calls_per_pair,
        }
        designs.append(
            Design(
                r,
                n,
                n_m,
                answers + judges,
                price_design(n, r, n_arms, **kwargs),  # type: ignore[arg-type]
                price_design(n, r, n_arms, batch=True, **kwargs),  # type: ignore[arg-type]
            )
        )
    if truth <= tolerance:
        note = (
            f"measured retention {100 * truth:.1f}% is not above the "
            f"{100 * tolerance:.1f}% tolerance: no design certifies it"
        )
    elif not measured:
        note = (
            f"assumed: true retention {100 * truth:.1f}%, spread between tasks "
            f"{100 * sp.between:.1f} points, within a task {100 * (sp.within or 0):.1f} points"
        )
    else:
        note = f"from the calibration: retention {100 * truth:.1f}%"
    if cleared is not None:
        note = f"{cleared_words(cleared, tolerance)}; {note}"
    if measured and any(d.tasks is not None and d.tasks_measured is None for d in designs):
        note += "; no size gives a ✓ with 80% power: the control's floor is too wide"
    return ArmPlan(task_class, arm, truth, sp, measured, tuple(designs), note)


def cleared_words(cleared: Cleared, tolerance: float) -> str:
    """What the run already shows for an arm its bound held: nothing more to buy for a
    ✓, or how many more tasks a ✓ needs."""
    held = (
        f"already holds {'✓' if cleared.certain else '?'} on {cleared.tasks} tasks x "
        f"{cleared.repeats:g} repeats (bound {100 * cleared.low:.1f}% >= "
        f"{100 * tolerance:.1f}%)"
    )
    if cleared.ignored:
        held += ", but the walk stopped at a gentler arm's failure before it"
    if cleared.certain:
        return f"{held}: no more tasks needed (the sizes are what a fresh calibration needs)"
    more = tasks_for_measured(tolerance) - cleared.tasks
    if more > 0:
        return f"{held}: a ✓ needs {more} more tasks ({tasks_for_measured(tolerance)} in all)"
    return f"{held}: a ✓ needs a control floor within {100 * (1 - tolerance):.1f}%"


def detectable_retention(
    tolerance: float, tasks: int, repeats: int, spread: Spread = ASSUMED_SPREAD
) -> float | None:
    """The lowest true retention a design holds with 80 % power; None below the evidence
    rule's minimum (nothing can be applied with so few tasks)."""
    if tasks < tasks_for_provisional(tolerance):
        return None
    within = spread.within or 0.0
    se = math.sqrt((spread.between**2 + within**2 / max(repeats, 1)) / tasks)
    need = t_quantile(1 - ALPHA, tasks - 1) + t_quantile(POWER, tasks - 1)
    return tolerance + need * se


#: The judge's share of the within-task noise assumed when no run measured it
#: (`--judge-twice` measures it: the control's pairs judged a second time).
ASSUMED_JUDGE_SHARE = 0.5


@dataclass(frozen=True)
class JudgeOption:
    """One way to spend calls on a class at a fixed task count: answer repeats, and judge
    readings per pair averaged (2: both A/B orders, `--judge-both-orders`)."""

    repeats: int
    readings: int
    tasks: int
    power: float
    cost_usd: float | None
    #: The cells whose repeats disagree re-answered (`--reanswer`,
    #: `tokenlens.decision.plan_reanswer.reanswer_option`).
    reanswer: bool = False

    @property
    def power_per_dollar(self) -> float:
        return self.power / self.cost_usd if self.cost_usd else math.nan


def read_spread(spread: Spread, judge_share: float, readings: int) -> Spread:
    """The spread when each pair is read `readings` times and averaged: the judge's share
    of the within-task variance shrinks by 1/readings; the answers' own share does not."""
    within = spread.within or 0.0
    share = min(max(judge_share, 0.0), 1.0)
    return Spread(spread.between, within * math.sqrt(1.0 - share + share / max(readings, 1)))


def power_at(effect: float, spread: Spread, tasks: int, repeats: int) -> float:
    """Power of the one-sided test at `ALPHA` for a true margin `effect` (normal approx.)."""
    if tasks < 2:
        return 0.0
    within = spread.within or 0.0
    se = math.sqrt((spread.between**2 + within**2 / max(repeats, 1)) / tasks)
    if se <= 0:
        return 1.0 if effect > 0 else 0.0
    from statistics import NormalDist

    return NormalDist().cdf(effect / se - t_quantile(1 - ALPHA, tasks - 1))


def judge_options(
    *,
    tolerance: float,
    retention: float | None,
    spread: Spread | None,
    judge_share: float | None,
    tasks: int,
    n_arms: int,
    prompt_tokens: float,
    model: str,
    judge_model: str,
    repeats: Sequence[int] = (1, 2, 3, 4, 5, 6),
    readings: Sequence[int] = (1, 2),
) -> list[JudgeOption]:
    """Power and price of each (repeats, readings) at `tasks` tasks: where more answers
    buy more than more judging, and the reverse."""
    truth = min(retention, 1.0) if retention is not None else tolerance + ASSUMED_MARGIN
    sp = spread if spread is not None else ASSUMED_SPREAD
    share = ASSUMED_JUDGE_SHARE if judge_share is None else judge_share
    out: list[JudgeOption] = []
    for r in repeats:
        for k in readings:
            cost = price_design(
                tasks,
                r,
                n_arms,
                prompt_tokens=prompt_tokens,
                model=model,
                judge_model=judge_model,
                judge_calls_per_pair=k,
            )
            power = power_at(truth - tolerance, read_spread(sp, share, k), tasks, r)
            out.append(JudgeOption(r, k, tasks, power, cost))
    return out


#: Power a step must buy to be named the next dollar while another step buys that much.
MIN_STEP_GAIN = 0.001
#: The next step's name when it re-answers the disagreeing cells.
REANSWER_STEP = "re-answer where repeats disagree (--reanswer)"


def best_option(options: Sequence[JudgeOption]) -> JudgeOption | None:
    """The cheapest option with the planner's power (None: no option reaches it)."""
    enough = [o for o in options if o.cost_usd is not None and o.power >= POWER]
    return min(enough, key=lambda o: (o.cost_usd or 0.0, -o.power), default=None)


def next_lever(
    options: Sequence[JudgeOption], repeats: int, readings: int
) -> tuple[str, float, float] | None:
    """From the current design, which step buys more power per extra dollar: one more
    repeat, a second judge reading per pair, or re-answering the cells whose repeats
    disagree (when `options` holds that option, `plan_reanswer.reanswer_option`).
    (name, power gained, dollars added)."""
    by = {(o.repeats, o.readings, o.reanswer): o for o in options}
    here = by.get((repeats, readings, False))
    if here is None or here.cost_usd is None:
        return None
    steps = {"one more repeat": by.get((repeats + 1, readings, False))}
    steps["both A/B orders"] = by.get((repeats, 2, False)) if readings == 1 else None
    steps[REANSWER_STEP] = by.get((repeats, readings, True))
    priced = [
        (name, step.power - here.power, step.cost_usd - here.cost_usd)
        for name, step in steps.items()
        if step is not None and step.cost_usd is not None and step.cost_usd > here.cost_usd
    ]
    # a step that buys (next to) nothing is no advice, however cheap: re-answering the one
    # cell a quiet class's repeats disagree on costs cents for a hundredth of a point
    worth = [s for s in priced if s[1] >= MIN_STEP_GAIN] or priced
    return max(worth, key=lambda s: s[1] / s[2], default=None)


def decision_spread(
    *,
    retention: float | None,
    low: float | None,
    n_tasks: int,
    n_pairs: int,
    level: float,
    between: float | None,
    within: float | None,
) -> Spread | None:
    """The spread behind the decision's bound, split between and within tasks.

    The bound's distance from the estimate, `t * s / sqrt(n)`, gives the per-task spread
    `s` the decision effectively saw at the run's repeats (`n_pairs / n_tasks`). The curve's
    own `sd_between` / `sd_within` (raw per-cell ratios, uncapped) only say how `s` splits
    between and within tasks, each capped at `MAX_SPREAD`; they are scaled so that
    together they give `s`. None when the row has no bound to read."""
    if retention is None or low is None or n_tasks < 2:
        return None
    t = t_quantile(level, n_tasks - 1)
    effective = min(max(retention - low, 0.0) * math.sqrt(n_tasks) / t, MAX_SPREAD)
    b = min(between if between is not None else ASSUMED_SPREAD.between, MAX_SPREAD)
    w = min(within if within is not None else 0.0, MAX_SPREAD)
    repeats = max(n_pairs / n_tasks, 1.0)
    raw = math.sqrt(b**2 + w**2 / repeats)
    if raw <= 0:
        return Spread(effective, 0.0)
    scale = effective / raw
    return Spread(b * scale, w * scale)
