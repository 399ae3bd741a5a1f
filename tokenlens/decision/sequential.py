"""Sequential calibration: pay only until each decision is made.

A fixed design pays for every task x arm x repeat up front. This loop pays in rounds and
after each round asks the same `aggregate` the fixed design uses:

* an arm whose bound clears the tolerance (at that look's spent error, see
  `tokenlens.decision.spending`) is settled *held* and sampled no further;
* an arm whose upper bound is below the tolerance is settled *failed* (a futility stop:
  it can only make fewer arms hold, so it costs no error), and arms beyond it on the
  ladder are never sampled — the walk would ignore them anyway;
* undecided arms get more **tasks** first, then more repeats (tasks buy more per call);
* a class stops when it has no undecided arm, when its control shows it unmeasurable, or
  when its schedule (task pool, then `max_repeats`) runs out.

The loop is a pure function of an **oracle**: something that returns graded pairs (rows of
`tables.GRADES`) for the cells it is asked for. The flow's oracle samples and judges
through the call ledger (so a resumed run never pays twice); the simulation's oracle
draws from a synthetic world. The same code decides in both.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import pandas as pd

from tokenlens.compress.arms import CONTROL
from tokenlens.decision.curve import ALPHA, Curve, aggregate
from tokenlens.decision.evidence import tasks_for_provisional
from tokenlens.decision.grades import Mode
from tokenlens.decision.planner import ASSUMED_SPREAD
from tokenlens.decision.spending import nominal_alphas
from tokenlens.stats import Spread
from tokenlens.tables import CURVE

#: Fewest tasks before a futility stop may end an arm (a t bound on 2-3 tasks is wild).
MIN_TASKS_FOR_FUTILITY = 5


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
    max_rounds: int = 12
    judge: str | None = None
    spread: Spread = ASSUMED_SPREAD


@dataclass(frozen=True)
class RoundSummary:
    """What one round asked for and what it settled (for progress and artifacts)."""

    round: int
    cells: int
    designs: dict[str, tuple[int, int]]  # class -> (tasks, repeats) sampled so far
    statuses: dict[str, dict[str, str]]  # class -> arm -> held | failed | open | skipped


@dataclass
class SequentialResult:
    grades: pd.DataFrame
    curve: Curve
    rounds: list[RoundSummary] = field(default_factory=list)
    cells: int = 0
    #: Class -> the last look's nominal error (what the final curve was computed at).
    final_alpha: dict[str, float] = field(default_factory=dict)


def schedule(pool: int, need: int, first: int, max_repeats: int) -> list[tuple[int, int]]:
    """(tasks, repeats) of each look: tasks grow (to `need`, then doubling) to the pool,
    then repeats grow to `max_repeats`."""
    points: list[tuple[int, int]] = []
    n = max(1, min(first, pool))
    while True:
        points.append((n, 1))
        if n >= pool:
            break
        n = min(pool, need if n < need else 2 * n)
    points.extend((pool, r) for r in range(2, max_repeats + 1))
    return points


def _variance(n: int, r: int, spread: Spread) -> float:
    within = spread.within or 0.0
    return (spread.between**2 + within**2 / r) / n


def look_alphas(
    points: Sequence[tuple[int, int]], need: int, alpha: float, spread: Spread
) -> list[float]:
    """Each look's nominal one-sided error; looks with fewer tasks than `need` spend none."""
    holdable = [i for i, (n, _) in enumerate(points) if n >= need]
    out = [0.0] * len(points)
    if not holdable:
        return out
    final = _variance(*points[holdable[-1]], spread)
    fractions = [final / _variance(*points[i], spread) for i in holdable]
    for i, a in zip(holdable, nominal_alphas(fractions, alpha), strict=True):
        out[i] = a
    return out


@dataclass
class _ClassState:
    plan: ClassPlan
    points: list[tuple[int, int]]
    alphas: list[float]
    look: int = 0
    settled: dict[str, str] = field(default_factory=dict)
    done: bool = False

    def active_arms(self) -> list[str]:
        """Unsettled arms up to the first settled failure of the ladder."""
        out: list[str] = []
        for arm in self.plan.arms:
            status = self.settled.get(arm)
            if status == "failed":
                break
            if status is None:
                out.append(arm)
        return out

    def statuses(self) -> dict[str, str]:
        out: dict[str, str] = {}
        beyond = False
        for arm in self.plan.arms:
            status = self.settled.get(arm)
            out[arm] = "skipped" if beyond and status is None else status or "open"
            beyond = beyond or status == "failed"
        return out


def _requests(state: _ClassState, asked: set[Cell]) -> list[Cell]:
    n, r = state.points[state.look]
    name = state.plan.task_class
    cells = [
        Cell(name, arm, task, rep)
        for arm in (CONTROL, *state.active_arms())
        for task in state.plan.tasks[:n]
        for rep in range(r)
    ]
    return [c for c in cells if c not in asked]


def _settle(state: _ClassState, curve: Curve, settings: SequentialSettings) -> None:
    rows = curve.rows(state.plan.task_class).set_index("arm")
    last = state.look == len(state.points) - 1
    if (rows["status"] == "unmeasurable").any():
        floor_low = rows.at[CONTROL, "noise_floor_low"] if CONTROL in rows.index else math.nan
        if not pd.isna(floor_low) or last:
            state.done = True  # the control is shown too noisy: more rounds cannot fix it
            return
    for arm in state.active_arms():
        if arm not in rows.index:
            continue
        row = rows.loc[arm]
        high = row["retention_high"]
        if row["status"] in ("no_savings", "not_measured"):
            continue
        if bool(row["passes"]):
            state.settled[arm] = "held"
        elif (
            int(row["n_tasks"]) >= MIN_TASKS_FOR_FUTILITY
            and not pd.isna(high)
            and float(high) < settings.tolerance
        ):
            state.settled[arm] = "failed"
            break
    if last:
        for arm in state.active_arms():
            state.settled[arm] = "failed"
            break
    if last or not state.active_arms():
        state.done = True
    else:
        state.look += 1


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
    first = settings.first_tasks or max(5, math.ceil(need / 2))
    states: dict[str, _ClassState] = {}
    for plan in plans:
        points = schedule(len(plan.tasks), need, first, settings.max_repeats)
        alphas = look_alphas(points, need, settings.alpha, settings.spread)
        states[plan.task_class] = _ClassState(plan, points, alphas)
    frames: list[pd.DataFrame] = []
    asked: set[Cell] = set()
    rounds: list[RoundSummary] = []
    for number in range(1, settings.max_rounds + 1):
        open_states = [s for s in states.values() if not s.done]
        if not open_states:
            break
        cells = [c for s in open_states for c in _requests(s, asked)]
        if cells:
            frames.append(oracle(cells))
            asked.update(cells)
        grades = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
        for state in open_states:
            mine = grades[grades["task_class"] == state.plan.task_class] if len(grades) else grades
            if mine.empty:
                state.done = True
                continue
            _settle(state, _aggregate(mine, settings, state.alphas[state.look]), settings)
        summary = RoundSummary(
            number,
            len(cells),
            {s.plan.task_class: s.points[min(s.look, len(s.points) - 1)] for s in states.values()},
            {name: s.statuses() for name, s in states.items()},
        )
        rounds.append(summary)
        if on_round is not None:
            on_round(summary)
    grades = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    return _finish(grades, states, settings, rounds, len(asked))


def _finish(
    grades: pd.DataFrame,
    states: Mapping[str, _ClassState],
    settings: SequentialSettings,
    rounds: list[RoundSummary],
    cells: int,
) -> SequentialResult:
    """The final curve: each class at its last look's error, plus the pooled default."""
    tables: list[pd.DataFrame] = []
    final_alpha: dict[str, float] = {}
    judge = settings.judge or ""
    for name, state in states.items():
        mine = grades[grades["task_class"] == name] if len(grades) else grades
        if mine.empty:
            continue
        spent = [a for a in state.alphas[: state.look + 1] if a > 0]
        alpha = spent[-1] if spent else settings.alpha
        final_alpha[name] = alpha
        curve = _aggregate(mine, settings, alpha)
        judge = curve.judge
        tables.append(curve.table)
    if len(grades):
        pooled = aggregate(
            grades,
            tolerance=settings.tolerance,
            mode=settings.mode,
            judge=settings.judge,
            alpha=min(final_alpha.values(), default=settings.alpha),
        )
        judge = pooled.judge
        tables.append(pooled.table[pooled.table["task_class"] == "__all__"])
    table = pd.concat(tables, ignore_index=True) if tables else pd.DataFrame(columns=CURVE.names)
    curve = Curve(table, settings.tolerance, settings.mode, judge)
    return SequentialResult(grades, curve, rounds, cells, final_alpha)
