"""The decision rule's instrument study: hard worlds x designs, fixed and sequential, paired.

Each calibration draws two classes from one world at its full design (tasks x repeats):

* a **borderline** class with one arm at true retention 0.94 against the 0.95 tolerance:
  the share of calibrations that apply it (✓ or ?) is the *false application* (goal
  <= 5 % at every design the minimum-evidence rule allows);
* a **ladder** class, gentlest first: arms at 1.00, 0.99 and 0.97 (they hold the tolerance)
  then 0.90. *Power* is the share of the good arms the published policy reaches (it
  applies that arm or a stronger one); the *savings share* is the token reduction the
  published arm achieves over what the oracle would take (the strongest arm whose true
  retention holds: the 0.97 rung). An arm applied wrongly saves nothing here.

The fixed design reads the whole draw; the sequential loop (`tokenlens.decision.sequential`)
asks an oracle serving the same draw, so both see identical data where they overlap.
Calls are counted as a run pays them (`simulate_sequential.calls_for_cells`).

With `reanswer`, the world also draws the re-answers of the cells whose repeats disagree
(`tokenlens.decision.reanswer`), both designs re-answer and read through the derail guard
(rows `fixed` and `sequential`), and the same draws without the re-answers are read as
before (rows `fixed-plain` and `sequential-plain`), so the two are paired; a third class
holds the edge arm harmed by extra derails (`simulate_judge.derail_edge`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace

import numpy as np
import pandas as pd

from tokenlens.decision import aggregate, decide
from tokenlens.decision.reanswer import REANSWER_COUNT, REANSWER_SPREAD, read_with_guard
from tokenlens.decision.sequential import ClassPlan, SequentialSettings, run_sequential
from tokenlens.simulate import DEFAULT_SCENARIOS, Scenario, SimArm, simulate_grades
from tokenlens.simulate_sequential import answers_for_cells, calls_for_cells, table_oracle
from tokenlens.simulate_why import explain

TOLERANCE = 0.95
#: The arm that must not be applied: one point below the tolerance.
BORDERLINE = (SimArm("prune@0.6", 0.94, 0.30),)
#: A ladder whose strongest holding rung (the oracle's choice) is the 0.97 arm.
LADDER = (
    SimArm("prune@0.9", 1.00, 0.10),
    SimArm("prune@0.8", 0.99, 0.20),
    SimArm("prune@0.7", 0.97, 0.30),
    SimArm("prune@0.5", 0.90, 0.45),
)

_CONCENTRATED = DEFAULT_SCENARIOS[0]
#: The hard worlds. `concentrated` is the issue's world; `noisy` the same with a judge
#: three times as noisy; `concentrated-b` moves every harm and noise parameter (fewer
#: hard tasks hurt five times as often, a coarser judge, more derails and missing rows)
#: so the rule is not tuned to one world; `spread-noisy` is the older noisy-judge world
#: (every task loses a little).
WORLDS: dict[str, Scenario] = {
    "concentrated": _CONCENTRATED,
    "noisy": replace(_CONCENTRATED, judge_sd=7.0, sampling_sd=6.0),
    "concentrated-b": replace(
        _CONCENTRATED,
        hard_share=0.25,
        hurt_ratio=5.0,
        task_loss=(0.2, 0.5),
        judge_sd=3.0,
        grade_step=10,
        derail=0.03,
        missing_rate=0.03,
    ),
    "spread-noisy": DEFAULT_SCENARIOS[2],
}
#: Designs the minimum-evidence rule allows a ? at (>= 20 tasks at a 95 % tolerance).
DESIGNS: tuple[tuple[int, int], ...] = ((20, 1), (20, 3), (40, 1), (40, 3))
DESIGN_NAMES = ("fixed", "sequential")
#: With re-answering: the same draws read without their re-answers (paired).
PLAIN = ("fixed-plain", "sequential-plain")


def wilson(successes: int, trials: int, z: float = 1.96) -> tuple[float, float]:
    """95 % Wilson score interval of a binomial share (nan, nan) with no trials."""
    if trials <= 0:
        return math.nan, math.nan
    p = successes / trials
    centre = (p + z * z / (2 * trials)) / (1 + z * z / trials)
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials))
    half /= 1 + z * z / trials
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass
class CellTally:
    """One world x design x (fixed | sequential)."""

    world: str
    tasks: int
    repeats: int
    design: str
    runs: int = 0
    false_applied: int = 0
    good: int = 0
    held: int = 0
    #: Good arms that clear the rule on their own (`passes`; fixed design only): the
    #: issue's per-arm power, blind to the walk.
    alone_held: int = 0
    savings: float = 0.0
    oracle_savings: float = 0.0
    calls: int = 0
    #: Answers paid (cleartext and arm/control answers; the rest of the calls are judges).
    answers: int = 0
    #: Runs whose ladder class was published ✓, and the savings of those entries alone
    #: (what a proxy without `--allow-provisional` applies).
    certified: int = 0
    certified_savings: float = 0.0
    #: Paired with the other design on the same draws: runs where only this design
    #: applied the borderline arm, and runs where both published the ladder ✓.
    edge_only: int = 0
    certified_both: int = 0
    #: Runs where only this design published the ladder ✓: why the other did not
    #: (`tokenlens.simulate_why.explain`, prefixed with the run's number).
    certified_only: list[str] = field(default_factory=list)
    #: Run numbers that applied the borderline arm, and (with re-answering) the edge arm
    #: harmed by extra derails: for paired comparisons across any two designs.
    edge_runs: list[int] = field(default_factory=list)
    derail_runs: list[int] = field(default_factory=list)

    @property
    def false_rate(self) -> float:
        return self.false_applied / self.runs if self.runs else math.nan

    @property
    def false_ci(self) -> tuple[float, float]:
        return wilson(self.false_applied, self.runs)

    @property
    def power(self) -> float:
        return self.held / self.good if self.good else math.nan

    @property
    def alone_power(self) -> float:
        return self.alone_held / self.good if self.good and self.design == "fixed" else math.nan

    @property
    def savings_share(self) -> float:
        return self.savings / self.oracle_savings if self.oracle_savings else math.nan

    @property
    def calls_per_run(self) -> float:
        return self.calls / self.runs if self.runs else math.nan

    @property
    def answers_per_run(self) -> float:
        return self.answers / self.runs if self.runs else math.nan

    @property
    def certified_rate(self) -> float:
        return self.certified / self.runs if self.runs else math.nan

    @property
    def certified_share(self) -> float:
        """Share of the oracle's savings that ✓ entries alone deliver."""
        return self.certified_savings / self.oracle_savings if self.oracle_savings else math.nan

    def add(self, other: CellTally) -> None:
        for f in fields(self):
            summed = ("int", "float", "list[str]", "list[int]")
            if f.type in summed and f.name not in ("tasks", "repeats"):
                setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


@dataclass(frozen=True)
class Outcome:
    """What one design published for one class on one draw, and what it paid."""

    chosen: str | None
    certified: bool
    calls: int
    answers: int


def _outcome(curve_table: pd.DataFrame, task_class: str, paid: pd.DataFrame) -> Outcome:
    from tokenlens.decision import Curve

    curve = Curve(curve_table, TOLERANCE, "interval", "sim-judge")
    entry = decide(curve, calibration_id="simulation", model="sim").classes.get(task_class)
    chosen = None if entry is None or entry.arm is None else entry.arm.key
    certified = entry is not None and entry.verdict == "measured"
    return Outcome(chosen, certified, calls_for_cells(paid), answers_for_cells(paid))


def _decisions(
    table: pd.DataFrame,
    arms: Sequence[SimArm],
    task_class: str,
    repeats: int,
    reanswer: bool = False,
) -> tuple[dict[str, Outcome], set[str], dict[str, tuple[pd.DataFrame, pd.DataFrame]]]:
    """Fixed and sequential: what each published and paid, on one draw; the arms that
    pass on their own in the fixed design; and each design's curve rows and paid grades.
    With `reanswer` both re-answer (the draw holds the re-answers) behind the guard."""
    read = read_with_guard(table, repeats)[0] if reanswer else table
    fixed = aggregate(read, tolerance=TOLERANCE, pooled=False)
    rows = fixed.rows(task_class)
    passing = set(rows.loc[rows["passes"].astype(bool), "arm"])
    ladder = tuple(a.key for a in sorted(arms, key=lambda a: a.reduction))
    plan = ClassPlan(task_class, tuple(sorted(set(table["task_id"]))), ladder)
    settings = SequentialSettings(tolerance=TOLERANCE, max_repeats=repeats, reanswer=reanswer)
    seq = run_sequential([plan], table_oracle(table), settings)
    rows_read = {
        "fixed": (fixed.rows(task_class), table),
        "sequential": (seq.curve.rows(task_class), seq.grades),
    }
    return (
        {
            "fixed": _outcome(fixed.table, task_class, table),
            "sequential": _outcome(seq.curve.table, task_class, seq.grades),
        },
        passing,
        rows_read,
    )


def _paired_decisions(
    table: pd.DataFrame, arms: Sequence[SimArm], task_class: str, repeats: int, reanswer: bool
) -> tuple[dict[str, Outcome], set[str], dict[str, tuple[pd.DataFrame, pd.DataFrame]]]:
    """`_decisions`, and with `reanswer` also the same draw without its re-answers."""
    out, passing, read = _decisions(table, arms, task_class, repeats, reanswer)
    if reanswer:
        planned = table[table["replicate"].astype(int) < repeats].reset_index(drop=True)
        plain, _, plain_read = _decisions(planned, arms, task_class, repeats)
        for design, name in zip(DESIGN_NAMES, PLAIN, strict=True):
            out[name], read[name] = plain[design], plain_read[design]
    return out, passing, read


def run_cell(
    world_name: str,
    world: Scenario,
    tasks: int,
    repeats: int,
    *,
    runs: int,
    seed: int,
    reanswer: bool = False,
) -> list[CellTally]:
    """`runs` paired calibrations of one world at one design (`reanswer`: module doc)."""
    rng = np.random.default_rng([seed, tasks, repeats, sum(map(ord, world_name))])
    names = DESIGN_NAMES + (PLAIN if reanswer else ())
    tallies = {d: CellTally(world_name, tasks, repeats, d) for d in names}
    base = replace(world, n_tasks=tasks, replicates=repeats, tolerance=TOLERANCE)
    if reanswer:
        from tokenlens.simulate_judge import derail_edge

        base = replace(base, reanswer_spread=REANSWER_SPREAD, reanswer_count=REANSWER_COUNT)
        derailing = (replace(derail_edge(base, BORDERLINE[0].true_retention), key="prune@0.6"),)
    truth = {a.key: a for a in LADDER}
    order = [a.key for a in sorted(LADDER, key=lambda a: a.reduction)]
    oracle = max(a.reduction for a in LADDER if a.true_retention >= TOLERANCE)
    for run in range(runs):
        border = simulate_grades(replace(base, arms=BORDERLINE), rng, task_class="border")
        ladder = simulate_grades(replace(base, arms=LADDER), rng, task_class="ladder")
        border_out, _, _ = _paired_decisions(border, BORDERLINE, "border", repeats, reanswer)
        ladder_out, passing, read = _paired_decisions(ladder, LADDER, "ladder", repeats, reanswer)
        derail_out: dict[str, Outcome] = {}
        if reanswer:
            drawn = simulate_grades(replace(base, arms=derailing), rng, task_class="derail")
            derail_out = _paired_decisions(drawn, derailing, "derail", repeats, reanswer)[0]
        for design, tally in tallies.items():
            pair = PLAIN if design in PLAIN else DESIGN_NAMES
            other = pair[1 - pair.index(design)]
            edge, out = border_out[design], ladder_out[design]
            chosen = out.chosen
            tally.runs += 1
            tally.calls += edge.calls + out.calls
            tally.answers += edge.answers + out.answers
            tally.false_applied += int(edge.chosen is not None)
            tally.edge_runs += [run] if edge.chosen is not None else []
            if design in derail_out and derail_out[design].chosen is not None:
                tally.derail_runs.append(run)
            tally.edge_only += int(edge.chosen is not None and border_out[other].chosen is None)
            tally.certified += int(out.certified)
            tally.certified_both += int(out.certified and ladder_out[other].certified)
            if out.certified and not ladder_out[other].certified:
                why = explain(
                    *read[other], order, chosen, tolerance=TOLERANCE, full=(tasks, repeats)
                )
                tally.certified_only.append(f"#{run} {why}")
            reached = order.index(chosen) if chosen is not None else -1
            for i, key in enumerate(order):
                if truth[key].true_retention >= TOLERANCE + 0.02 - 1e-9:
                    tally.good += 1
                    tally.held += int(reached >= i)
                    tally.alone_held += int(key in passing)
            tally.oracle_savings += oracle
            if chosen is not None and truth[chosen].true_retention >= TOLERANCE:
                tally.savings += truth[chosen].reduction
                tally.certified_savings += truth[chosen].reduction if out.certified else 0.0
    return list(tallies.values())


@dataclass
class Study:
    tallies: list[CellTally] = field(default_factory=list)

    def cell(self, world: str, tasks: int, repeats: int, design: str) -> CellTally:
        total = CellTally(world, tasks, repeats, design)
        for t in self.tallies:
            if (t.world, t.tasks, t.repeats, t.design) == (world, tasks, repeats, design):
                total.add(t)
        return total


def run_study(
    worlds: dict[str, Scenario],
    designs: Sequence[tuple[int, int]],
    runs_for: dict[tuple[int, int], int],
    *,
    seed: int,
    processes: int = 1,
    reanswer: bool = False,
) -> Study:
    """Every world x design; `runs_for[design]` calibrations each (in `processes`)."""
    jobs = [
        (name, world, n, r, runs_for[(n, r)], seed, reanswer)
        for name, world in worlds.items()
        for n, r in designs
    ]
    if processes > 1:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(processes) as pool:
            parts = list(pool.map(_job, jobs))
    else:
        parts = [_job(job) for job in jobs]
    return Study([t for part in parts for t in part])


def _job(job: tuple[str, Scenario, int, int, int, int, bool]) -> list[CellTally]:
    name, world, n, r, runs, seed, reanswer = job
    return run_cell(name, world, n, r, runs=runs, seed=seed, reanswer=reanswer)
