"""Sequential calibration: pay only until each decision is made.

A fixed design pays for every task x arm x repeat up front. This loop pays in rounds and
after each round asks the same `aggregate` the fixed design uses:

* an arm whose bound clears the tolerance (at that look's spent error, see
  `tokenlens.decision.spending`) with the evidence a ✓ needs — its tasks, and a noise
  floor shown within the tolerance's loss (an upper bound before the last look; at the
  last, the floor's point, as the fixed design reads it) — is settled *held* and
  sampled no further. One that clears on fewer tasks than a ✓ needs is *provisional*:
  the walk goes on past it, and when every arm is settled the arm the walk would publish,
  if provisional, is sampled on (more tasks, then repeats, at its next looks) toward the
  ✓ evidence — when the class's task pool can reach it. Otherwise the class stops at ?
  and `SequentialResult.stops_at_provisional` says why. The final read of every arm is
  at its last look, so an arm that cleared early but fails on the fuller evidence is not
  applied: a bad arm is applied only if it crosses at a look the spending paid for;
* an arm whose upper bound is below the tolerance is settled *failed* (a futility stop:
  it can only make fewer arms hold, so it costs no error; its level is spent over the
  looks too, so a good arm is seldom ended on a wide early bound), and arms beyond it on
  the ladder are never sampled — the walk would ignore them anyway;
* undecided arms get more **tasks** first, then more repeats (tasks buy more per call);
* only the first `lookahead` open arms of the ladder are sampled at a time: a later arm
  can matter only if the ones before it hold, so it waits until they do. Each arm has
  its own looks (and spends its own error); the control follows the furthest arm;
* a class stops when it has no undecided arm, when its control shows it unmeasurable, or
  when its schedule (task pool, then `max_repeats`) runs out.

The loop is a pure function of an **oracle**: something that returns graded pairs (rows of
`tables.GRADES`) for the cells it is asked for. The flow's oracle samples and judges
through the call ledger (so a resumed run never pays twice); the simulation's oracle
draws from a synthetic world. The same code decides in both.

Near 500 lines on purpose: a class's state (`_ClassState`) and the rounds that read and
grow it are one loop, read top-down; what stands alone lives beside it (error spending in
`spending`, re-answering in `sequential_reanswer`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache

import pandas as pd

from tokenlens.compress.arms import CONTROL
from tokenlens.decision.curve import ALL_CLASSES, ALPHA, Curve, aggregate
from tokenlens.decision.evidence import tasks_for_measured, tasks_for_provisional
from tokenlens.decision.grades import Mode
from tokenlens.decision.ladder import Rung, walk_ladder
from tokenlens.decision.planner import ASSUMED_SPREAD
from tokenlens.decision.sequential_reanswer import Reanswers
from tokenlens.decision.spending import nominal_alphas
from tokenlens.stats import Spread, t_quantile
from tokenlens.tables import CURVE

#: Fewest tasks before a futility stop may end an arm (a t bound on 2-3 tasks is wild).
MIN_TASKS_FOR_FUTILITY = 5
#: One-sided error of the futility bound, spent over the looks like the 5 % (power family,
#: `tokenlens.decision.spending`): an arm exactly at the tolerance is stopped early at most
#: this often over all its looks, one that holds by a margin far less. Stopping a hopeless
#: arm never makes an arm hold, so it spends none of the 5 %; it only costs power, mostly
#: at the early looks where a 10-task bound is wide. Spent rather than 0.25 at every look,
#: which ended many good arms at 10 or 20 tasks (60 x 3, 400 paired runs: power through the
#: walk 42.1 -> 47.7 % noisy, 56.2 -> 58.2 % concentrated; ✓ in 86 -> 98 % and 95 -> 98 %
#: of the fixed design's ✓ runs, for 0.50 -> 0.64 and 0.55 -> 0.66 of its answers).
FUTILITY_ALPHA = 0.5
#: One-sided level at which a look before the last must show the noise floor within the
#: tolerance's loss to stop at ✓ (`_certain_now`): a floor exactly at the limit stops a
#: look at ✓ at most a fifth of the time. 0.8 rather than 0.975: the concentrated world's
#: control (derails, grades piled at 100) reads a wide 60 x 1 interval, and 0.975 paid
#: most such classes on to 60 x 3 (ten seeds, one lossless arm: calls 0.73 -> 0.83 of the
#: fixed design's; at 0.8 0.73, the same ✓ count).
FLOOR_SHOWN_LEVEL = 0.8
#: Walk statuses of an arm the ladder skips (it saved nothing, or no pair was graded).
DEAD = ("no_savings", "not_measured")


@dataclass(frozen=True, order=True)
class Cell:
    """One graded pair the loop asks for: a class's arm (or control) on a task, replicate."""

    task_class: str
    arm: str
    task_id: str
    replicate: int


#: Returns rows of `tables.GRADES` for the cells asked (error rows allowed, missing allowed).
Oracle = Callable[[Sequence[Cell]], pd.DataFrame]


@dataclass(frozen=True)
class ClassPlan:
    """A class's task pool (in the order tasks are added) and its arms, gentlest first."""

    task_class: str
    tasks: tuple[str, ...]
    arms: tuple[str, ...]


@dataclass(frozen=True)
class SequentialSettings:
    tolerance: float = 0.95
    mode: Mode = "interval"
    alpha: float = ALPHA
    max_repeats: int = 3
    #: Tasks in the first round; default half of what a ? needs (at least 5).
    first_tasks: int | None = None
    max_rounds: int = 40
    #: Open arms sampled at once, in ladder order. Later arms matter only if these hold
    #: (the walk stops at the first failure), so they wait: that is most of the saving.
    lookahead: int = 2
    judge: str | None = None
    spread: Spread = ASSUMED_SPREAD
    reanswer: bool = False  # re-answer cells whose full repeats disagree (sequential_reanswer)


@dataclass(frozen=True)
class RoundSummary:
    """What one round asked for and what it settled (for progress and artifacts)."""

    round: int
    cells: int
    designs: dict[str, tuple[int, int]]  # class -> (tasks, repeats) sampled so far
    #: class -> arm -> held | failed | open | skipped (beyond a failure) | no_savings |
    #: not_measured (skipped by the walk, as in the fixed design)
    statuses: dict[str, dict[str, str]]


@dataclass
class SequentialResult:
    grades: pd.DataFrame
    curve: Curve
    rounds: list[RoundSummary] = field(default_factory=list)
    cells: int = 0
    #: Class -> the last look's nominal error (what the final curve was computed at).
    final_alpha: dict[str, float] = field(default_factory=dict)
    #: Class -> why the design could not go for ✓ there (its pool is below a ✓'s size).
    stops_at_provisional: dict[str, str] = field(default_factory=dict)


def schedule(
    pool: int, need: int, first: int, max_repeats: int, need_measured: int | None = None
) -> list[tuple[int, int]]:
    """(tasks, repeats) of each look: tasks grow (to `need`, then doubling, with a look at
    `need_measured`, what a ✓ needs) to the pool, then repeats grow to `max_repeats`."""
    points: list[tuple[int, int]] = []
    n = max(1, min(first, pool))
    while True:
        points.append((n, 1))
        if n >= pool:
            break
        step = need if n < need else 2 * n
        if need_measured is not None and n < need_measured < step:
            step = need_measured
        n = min(pool, step)
    points.extend((pool, r) for r in range(2, max_repeats + 1))
    return points


def _variance(n: int, r: int, spread: Spread) -> float:
    within = spread.within or 0.0
    return (spread.between**2 + within**2 / r) / n


def look_alphas(
    points: Sequence[tuple[int, int]], need: int, alpha: float, spread: Spread
) -> list[float]:
    """Each look's nominal one-sided error; looks with fewer tasks than `need` spend none.

    Cached: the boundaries are a multivariate normal integral (~1 s), the same for every
    class of one pool size, and a simulation study asks for them thousands of times."""
    return list(_look_alphas(tuple(points), need, alpha, spread))


@lru_cache(maxsize=256)
def _look_alphas(
    points: tuple[tuple[int, int], ...], need: int, alpha: float, spread: Spread
) -> tuple[float, ...]:
    holdable = [i for i, (n, _) in enumerate(points) if n >= need]
    out = [0.0] * len(points)
    if not holdable:
        return tuple(out)
    final = _variance(*points[holdable[-1]], spread)
    fractions = [final / _variance(*points[i], spread) for i in holdable]
    for i, a in zip(holdable, nominal_alphas(fractions, alpha), strict=True):
        out[i] = a
    return tuple(out)


@dataclass
class _ClassState:
    plan: ClassPlan
    points: list[tuple[int, int]]
    alphas: list[float]
    lookahead: int
    need: int  # tasks a ? needs (the evidence rule)
    need_measured: int  # tasks a ✓ needs
    futility: list[float]  # each look's futility level (spent over the looks)
    looks: dict[str, int] = field(default_factory=dict)  # arm -> its next look (started arms)
    settled: dict[str, str] = field(default_factory=dict)
    #: Arms sampled on toward the ✓ evidence after clearing for ?.
    chasing: set[str] = field(default_factory=set)
    done: bool = False
    unmeasurable: bool = False

    @property
    def certifiable(self) -> bool:
        """Can the pool reach the evidence a ✓ needs?"""
        return len(self.plan.tasks) >= self.need_measured

    def frontier(self) -> list[str]:
        """Open arms to sample now: in ladder order, past held (or provisional) ones, up to
        the first failure, at most `lookahead` of them."""
        out: list[str] = []
        for arm in self.plan.arms:
            status = self.settled.get(arm)
            if status == "failed":
                break
            if status is None:
                out.append(arm)
                if len(out) == self.lookahead:
                    break
        return out

    def chase(self) -> bool:
        """With no open arm left: reopen the arm the walk would publish if it cleared only
        for ? (its next look adds evidence toward ✓). False when there is none."""
        candidate = None
        for arm in self.plan.arms:
            status = self.settled.get(arm)
            if status == "failed":
                break
            if status in ("held", "provisional"):
                candidate = arm
        if candidate is None or self.settled[candidate] != "provisional":
            return False
        del self.settled[candidate]
        self.chasing.add(candidate)
        self.looks[candidate] += 1
        return True

    def statuses(self) -> dict[str, str]:
        out: dict[str, str] = {}
        beyond = False
        for arm in self.plan.arms:
            status = self.settled.get(arm)
            out[arm] = "skipped" if beyond and status is None else status or "open"
            beyond = beyond or status == "failed"
        return out

    def point(self, arm: str) -> tuple[int, int]:
        return self.points[self.looks.get(arm, 0)]

    def last_look(self, arm: str) -> bool:
        return self.looks.get(arm, 0) == len(self.points) - 1

    def alpha(self, arm: str) -> float:
        return self.alphas[self.looks.get(arm, 0)]

    def futility_alpha(self, arm: str) -> float:
        """The level of this look's futility bound (0: no futility stop at this look)."""
        return self.futility[self.looks.get(arm, 0)]

    def final_alpha(self, arm: str, default: float) -> float:
        """The error of the last look this arm reached (what its final bound is read at)."""
        spent = [a for a in self.alphas[: self.looks.get(arm, 0) + 1] if a > 0]
        return spent[-1] if spent else default if arm not in self.looks else 0.0


def _requests(state: _ClassState, arms: Sequence[str], asked: set[Cell]) -> list[Cell]:
    name = state.plan.task_class
    points = [state.point(arm) for arm in arms]
    control = (max(p[0] for p in points), max(p[1] for p in points))
    cells: list[Cell] = []
    for arm, (n, r) in [(CONTROL, control), *zip(arms, points, strict=True)]:
        cells.extend(
            Cell(name, arm, task, rep) for task in state.plan.tasks[:n] for rep in range(r)
        )
    return [c for c in cells if c not in asked]


def _settle_arms(
    state: _ClassState, arms: Sequence[str], grades: pd.DataFrame, settings: SequentialSettings
) -> None:
    """Read each sampled arm at its own look; settle what is clear; move the rest on."""
    levels = {state.alpha(arm) for arm in arms} | {state.futility_alpha(arm) for arm in arms}
    curves = {a: _aggregate(grades, settings, a) for a in levels}
    any_curve = curves[state.alpha(arms[0])]
    status = any_curve.rows(state.plan.task_class).set_index("arm")["status"]
    if (status == "unmeasurable").any():
        # Refused only on the evidence a verdict needs (or at the end): a few early tasks
        # can make a quiet control look noisy by chance, and a class stopped here is lost.
        ctrl = any_curve.rows(state.plan.task_class).set_index("arm")
        n_ctrl = int(ctrl.at[CONTROL, "n_tasks"]) if CONTROL in ctrl.index else 0
        if n_ctrl >= state.need or all(state.last_look(a) for a in arms):
            state.done = state.unmeasurable = True  # more rounds cannot quiet the control
            return
    for arm in arms:
        rows = curves[state.alpha(arm)].rows(state.plan.task_class).set_index("arm")
        if arm not in rows.index:
            continue
        row = rows.loc[arm]
        level = state.futility_alpha(arm)
        futile = curves[level].rows(state.plan.task_class).set_index("arm")["retention_high"]
        high = futile.get(arm) if level > 0 else None
        if row["status"] in DEAD:
            # The fixed design's walk skips an arm that saved nothing or had no graded
            # pair; so does the loop, at its first look: more of it buys nothing, and a
            # "failed" here would stop the ladder where the fixed design goes on.
            state.settled[arm] = str(row["status"])
        elif bool(row["passes"]):
            if state.last_look(arm) or not state.certifiable or _certain_now(row, settings):
                state.settled[arm] = "held"
            elif arm in state.chasing:
                state.looks[arm] += 1  # cleared for ?, not yet with a ✓'s evidence
            else:
                state.settled[arm] = "provisional"
        elif (
            int(row["n_tasks"]) >= MIN_TASKS_FOR_FUTILITY
            and high is not None
            and not pd.isna(high)
            and float(high) < settings.tolerance
        ) or state.last_look(arm):
            state.settled[arm] = "failed"
        else:
            state.looks[arm] = state.looks.get(arm, 0) + 1
        if state.settled.get(arm) == "failed":
            break
    if not state.frontier() and not state.chase():
        state.done = True


def _certain_now(row: pd.Series, settings: SequentialSettings) -> bool:
    """May a look before the last stop at ✓? Only with the floor *shown* within the loss
    the tolerance allows (an upper bound, not its point): the ✓'s floor test is a point
    estimate, and read at every look on the control so far, a floor near the limit would
    pass at one of them more often than the fixed design's one read of the full control
    (noisy world, 60 x 3, 1,000 paired runs: 20 runs certified on a 60 x 1 or 60 x 2
    floor that the full control put over 5 %). An arm whose floor is not shown is sampled
    on; at its last look the floor is read as the fixed design reads it."""
    if not bool(row["certain"]):
        return False
    high = row["noise_floor_high"]
    if high is None or pd.isna(high) or int(row["n_tasks"]) < 2:
        return False
    # The curve holds the floor's two-sided 95 % interval (cluster t over tasks); its
    # one-sided FLOOR_SHOWN_LEVEL end follows from the same spread.
    df = int(row["n_tasks"]) - 1
    value = float(row["noise_floor"])
    widen = t_quantile(FLOOR_SHOWN_LEVEL, df) / t_quantile(0.975, df)
    upper = value + (float(high) - value) * widen
    return upper <= 1.0 - settings.tolerance + 1e-9


def _aggregate(grades: pd.DataFrame, settings: SequentialSettings, alpha: float) -> Curve:
    return aggregate(
        grades,
        tolerance=settings.tolerance,
        mode=settings.mode,
        judge=settings.judge,
        alpha=max(alpha, 1e-9),
        pooled=False,
    )


def run_sequential(
    plans: Sequence[ClassPlan],
    oracle: Oracle,
    settings: SequentialSettings = SequentialSettings(),
    *,
    on_round: Callable[[RoundSummary], None] | None = None,
) -> SequentialResult:
    """Ask the oracle for rounds of cells until every class is decided; return the curve."""
    need = tasks_for_provisional(settings.tolerance)
    need_measured = tasks_for_measured(settings.tolerance)
    first = settings.first_tasks or max(5, math.ceil(need / 2))
    states: dict[str, _ClassState] = {}
    redo = Reanswers(settings.max_repeats, settings.judge, on=settings.reanswer)
    for plan in plans:
        points = schedule(len(plan.tasks), need, first, settings.max_repeats, need_measured)
        alphas = look_alphas(points, need, settings.alpha, settings.spread)
        futility = look_alphas(points, MIN_TASKS_FOR_FUTILITY, FUTILITY_ALPHA, settings.spread)
        states[plan.task_class] = _ClassState(
            plan, points, alphas, settings.lookahead, need, need_measured, futility
        )
    frames: list[pd.DataFrame] = []
    asked: set[Cell] = set()
    rounds: list[RoundSummary] = []
    for number in range(1, settings.max_rounds + 1):
        work = {n: s.frontier() for n, s in states.items() if not s.done}
        work = {n: arms for n, arms in work.items() if arms}
        if not work:
            break
        for name, arms in work.items():
            for arm in arms:
                states[name].looks.setdefault(arm, 0)
        cells = [c for n, arms in work.items() for c in _requests(states[n], arms, asked)]
        cells += [Cell(*c) for c in redo.take()]
        if cells:
            frames.append(oracle(cells))
            asked.update(cells)
        grades = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
        for name, arms in work.items():
            mine = redo.read(grades[grades["task_class"] == name]) if len(grades) else grades
            if mine.empty:
                states[name].done = True
            # An arm waiting for its re-answers is read when they are in (one look, not two).
            elif arms := redo.hold_back(arms, mine, states[name].last_look):
                _settle_arms(states[name], arms, mine, settings)
        summary = RoundSummary(
            number,
            len(cells),
            {n: max((s.point(a) for a in s.looks), default=s.points[0]) for n, s in states.items()},
            {n: s.statuses() for n, s in states.items()},
        )
        rounds.append(summary)
        if on_round is not None:
            on_round(summary)
    if tail := [Cell(*c) for c in redo.take()]:  # queued as its class ended: read at the end
        frames.append(oracle(tail))
        asked.update(tail)
    grades = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    return replace(_finish(redo.read(grades), states, settings, rounds, len(asked)), grades=grades)


def _final_class_table(
    grades: pd.DataFrame, state: _ClassState, settings: SequentialSettings
) -> tuple[pd.DataFrame, float]:
    """Each arm read at its own last look's error, then walked again as one ladder."""
    arms = [a for a in state.plan.arms if a in set(grades["arm"])]
    alphas = {arm: state.final_alpha(arm, settings.alpha) for arm in arms}
    curves = {a: _aggregate(grades, settings, a).table for a in set(alphas.values()) | {0.0}}
    base = curves[0.0]
    rows = [base[base["arm"] == CONTROL]]
    for arm in arms:
        table = curves[alphas[arm]]
        rows.append(table[table["arm"] == arm])
    table = pd.concat(rows, ignore_index=True)
    keep = ("no_savings", "not_measured", "unmeasurable", "too_few_tasks", "control")
    # Walk in the plan's order (the loop's), not by the reduction measured on whichever
    # tasks each arm happened to be sampled on: the two can disagree on near-equal arms.
    order = {arm: i for i, arm in enumerate(state.plan.arms)}
    walk = walk_ladder(
        Rung(str(r.arm), 1.0 + order.get(str(r.arm), len(order)), bool(r.passes))
        for r in table.itertuples()
        if r.arm != CONTROL and r.status not in keep
    )
    statuses = [
        _final_status(state, str(a), s)
        if s in keep
        else s
        if s == "unfaithful" and walk.statuses.get(a) == "failed"
        else walk.statuses.get(a, s)
        for a, s in zip(table["arm"], table["status"], strict=True)
    ]
    table = table.assign(status=statuses, chosen=table["arm"] == walk.chosen)
    return table, max(alphas.values(), default=settings.alpha)


def _final_status(state: _ClassState, arm: str, status: str) -> str:
    """An arm the loop stopped on its futility bound failed, on however few tasks: its
    bound was below the tolerance, so "too few tasks" would misstate why it stopped."""
    if status == "too_few_tasks" and state.settled.get(arm) == "failed":
        return "failed"
    return status


def _finish(
    grades: pd.DataFrame,
    states: Mapping[str, _ClassState],
    settings: SequentialSettings,
    rounds: list[RoundSummary],
    cells: int,
) -> SequentialResult:
    """The final curve: each arm at its last look's error, plus the pooled default."""
    tables: list[pd.DataFrame] = []
    final_alpha: dict[str, float] = {}
    judge = settings.judge or ""
    for name, state in states.items():
        mine = grades[grades["task_class"] == name] if len(grades) else grades
        if mine.empty:
            continue
        table, final_alpha[name] = _final_class_table(mine, state, settings)
        judge = str(table["judge"].iloc[0])
        tables.append(table)
    if len(grades):
        pooled = aggregate(
            grades,
            tolerance=settings.tolerance,
            mode=settings.mode,
            judge=settings.judge,
            alpha=min(final_alpha.values(), default=settings.alpha) or settings.alpha,
        )
        tables.append(pooled.table[pooled.table["task_class"] == ALL_CLASSES])
    table = pd.concat(tables, ignore_index=True) if tables else pd.DataFrame(columns=CURVE.names)
    curve = Curve(table, settings.tolerance, settings.mode, judge)
    stops = {
        name: f"its pool has {len(s.plan.tasks)} tasks and a ✓ needs {s.need_measured}: "
        "an arm that clears is published as ? at most"
        for name, s in states.items()
        if not s.certifiable
    }
    return SequentialResult(grades, curve, rounds, cells, final_alpha, stops)
