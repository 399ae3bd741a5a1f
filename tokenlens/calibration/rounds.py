"""The sequential design in the flow: the decision loop asks, the ledger answers.

`tokenlens.decision.sequential` decides which (class, arm, task, replicate) cells are still
worth paying for; this module is its oracle for a real run: it samples the answers of the
cells asked (the replicate's cleartext answer and the arm's second answer) and judges the
pairs, through the same stage functions and call ledger as the fixed design — so a resumed
or repeated run never pays twice, and a killed round resumes where the ledger stops.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pandas as pd

from tokenlens import tables
from tokenlens.calibration.cells import PairCell
from tokenlens.calibration.context import Calibration, judge_name_for
from tokenlens.calibration.stage_compress import measured_arms
from tokenlens.calibration.stage_pay import Paid, pay_stage
from tokenlens.calibration.stage_reanswer import read_reanswered, widened
from tokenlens.decision import Curve
from tokenlens.decision.planner import calls_for
from tokenlens.decision.sequential import (
    Cell,
    ClassPlan,
    RoundSummary,
    SequentialSettings,
    run_sequential,
)
from tokenlens.tables import AnswerRow, CompressionRow, GradeRow
from tokenlens.tasks import CalibrationTask


@dataclass
class RoundsResult:
    answers: list[AnswerRow]
    grades: list[GradeRow]
    curve: Curve
    rounds: list[RoundSummary]
    fixed_calls: int  # what the fixed design would have asked for the same arms
    asked_pairs: int
    #: Class -> why it cannot go for ✓ (its task pool is below a ✓'s size).
    stops_at_provisional: dict[str, str] = field(default_factory=dict)
    #: The grades the curve read (`--reanswer`: a guarded arm's re-answers left out; the
    #: grades table holds every row), and the report's lines on re-answering.
    read: list[GradeRow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def class_plans(
    cal: Calibration, tasks: Sequence[CalibrationTask], compressions: Sequence[CompressionRow]
) -> list[ClassPlan]:
    """Per class: its tasks in file order, its runnable arms gentlest first (by the
    reduction the compression stage measured on that class)."""
    arms = measured_arms(cal.config, list(compressions))
    plans: list[ClassPlan] = []
    for name in dict.fromkeys(t.task_class for t in tasks):
        ids = tuple(t.id for t in tasks if t.task_class == name)

        def reduction(arm: str, ids: tuple[str, ...] = ids) -> float:
            values = [
                float(r["reduction"])
                for r in compressions
                if r["arm"] == arm and r["task_id"] in ids and r["reduction"] is not None
            ]
            return statistics.fmean(values) if values else 0.0

        plans.append(ClassPlan(name, ids, tuple(sorted(arms, key=reduction))))
    return plans


def rounds_stage(
    cal: Calibration,
    tasks: list[CalibrationTask],
    compressions: list[CompressionRow],
    *,
    on_round: Callable[[RoundSummary], None] | None = None,
) -> RoundsResult:
    """Run the sequential design; write the answers, grades and curve tables at the end."""
    config = cal.config
    deciding = judge_name_for(config, cal.model)
    answers: dict[tuple[str, str, int, int], AnswerRow] = {}
    grades: list[GradeRow] = []
    wider = widened(cal)  # re-answers are replicates past the planned repeats

    def oracle(cells: Sequence[Cell]) -> pd.DataFrame:
        pairs = [PairCell(c.task_id, c.arm, c.replicate) for c in cells]
        past = any(c.replicate >= config.repeats for c in cells)
        paid = pay_stage(wider if past else cal, tasks, compressions, pairs=pairs, write=False)
        for row in paid.answers:
            answers[(row["task_id"], row["arm"], row["replicate"], row["sample"])] = row
        graded = paid.grades
        grades.extend(graded)
        frame = pd.DataFrame(graded, columns=tables.GRADES.names)
        return frame[frame["judge"] == deciding]

    settings = SequentialSettings(
        tolerance=config.tolerance,
        mode=config.mode,
        max_repeats=config.repeats,
        judge=deciding,
        reanswer=config.reanswer,
    )
    plans = class_plans(cal, tasks, compressions)
    result = run_sequential(plans, oracle, settings, on_round=on_round)
    cal.store.write("answers", list(answers.values()), tables.ANSWERS)
    cal.store.write("grades", grades, tables.GRADES)
    cal.store.write_table("curve", result.curve.to_arrow())
    llm = config.judge != "metric"
    fixed = sum(
        sum(calls_for(len(p.tasks), config.repeats, len(p.arms), llm_judge=llm)) for p in plans
    )
    read, notes = grades, []
    if config.reanswer:
        extra = [
            (r["task_class"], r["task_id"], r["arm"])
            for r in grades
            if r["replicate"] >= config.repeats
        ]
        paid = Paid(list(answers.values()), grades)
        reanswered = read_reanswered(paid, list(dict.fromkeys(extra)), config.repeats, deciding)
        read, notes = reanswered.read, reanswered.notes(config.repeats)
    return RoundsResult(
        list(answers.values()),
        grades,
        result.curve,
        result.rounds,
        fixed,
        result.cells,
        result.stops_at_provisional,
        read,
        notes,
    )


def rounds_markdown(
    summary: RoundSummary,
    asked: int,
    *,
    saved: float | None = None,
    stops: dict[str, str] | None = None,
) -> str:
    """A round's running verdicts for the Prefect UI (arm names in code spans: never links);
    `stops`: classes that stop at ? and why."""
    lines = [f"### Round {summary.round}: {summary.cells} new pairs, {asked} so far", ""]
    if saved is not None:
        lines += [f"Calls saved against the fixed design: **{saved:.0%}**", ""]
    lines += ["| class | tasks x repeats | arm | status |", "|---|---|---|---|"]
    for name, statuses in summary.statuses.items():
        n, r = summary.designs.get(name, (0, 0))
        for arm, status in statuses.items():
            lines.append(f"| `{name}` | {n} x {r} | `{arm}` | {status} |")
    if stops:
        lines += ["", "Classes that stop at ? (their task pool cannot reach a ✓):", ""]
        lines += [f"- `{name}`: {why}" for name, why in stops.items()]
    return "\n".join(lines)
