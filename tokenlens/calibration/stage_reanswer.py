"""Stage 3b (opt-in, `--reanswer`): more answers where a task's repeats disagree.

After the planned answers are judged, every arm's cell (task x arm; never the control's,
whose noise floor reads the planned repeats) whose repeats disagree
(`tokenlens.decision.reanswer.cells_to_reanswer`) gets `REANSWER_COUNT` more replicates,
each with its own fresh cleartext answer, paid through the same ledger-backed `pay_stage`
as the planned ones: a new replicate is a new sample seed, so a new ledger key, and a
killed or repeated run finds every re-answer it paid in the ledger.
The answers and grades tables hold every row; the curve is read from
`read_with_guard`'s rows (an arm whose compressed answers derailed more often than the
control's is read on its planned repeats alone), and the report says which.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from tokenlens import tables
from tokenlens.calibration.cells import PairCell
from tokenlens.calibration.context import Calibration, judge_name_for
from tokenlens.calibration.stage_pay import Paid, pay_stage
from tokenlens.decision.reanswer import (
    REANSWER_COUNT,
    REANSWER_SPREAD,
    Cell,
    cells_to_reanswer,
    read_with_guard,
)
from tokenlens.tables import CompressionRow, GradeRow
from tokenlens.tasks import CalibrationTask


@dataclass(frozen=True)
class Reanswered:
    """Every answer and grade (planned, then re-answered), and what the curve reads."""

    paid: Paid
    #: The rows the curve is read from: a guarded arm's re-answers left out.
    read: list[GradeRow]
    cells: list[Cell] = field(default_factory=list)
    #: Answers the re-answered replicates needed (each replicate's cleartext answer and
    #: the cells' second answers), whether paid now or found in the ledger.
    answers: int = 0
    #: Class -> arms read on their planned repeats (re-answered, then guarded).
    guarded: dict[str, list[str]] = field(default_factory=dict)

    def notes(self, repeats: int) -> list[str]:
        """The report's lines on what re-answering did."""
        lines = [
            f"Re-answered {len(self.cells)} cells ({self.answers} more answers) whose "
            f"repeats disagreed by more than {REANSWER_SPREAD:g} points; every answer counts "
            "in the mean."
        ]
        for task_class, arms in self.guarded.items():
            for arm in arms:
                lines.append(
                    f"{arm} in {task_class} is read on its {repeats} planned repeats: its "
                    "compressed answers derailed more often than the control's second "
                    "answers there, which more answers would have diluted."
                )
        return lines


def reanswer_stage(
    cal: Calibration,
    tasks: list[CalibrationTask],
    compressions: list[CompressionRow],
    paid: Paid,
    *,
    log: Callable[[str], None] | None = None,
) -> Reanswered:
    """Pay the re-answers of the cells whose planned repeats disagree; write the answers
    and grades tables with every row; return the rows the curve is read from."""
    import pandas as pd

    config = cal.config
    repeats = config.repeats
    deciding = judge_name_for(config, cal.model)
    planned = pd.DataFrame(paid.grades, columns=tables.GRADES.names)
    cells = cells_to_reanswer(planned, repeats, judge=deciding) if len(planned) else []
    pairs = _extra_pairs(cells, repeats)
    if log is not None:
        log(
            f"re-answering {len(cells)} cells ({_answers(pairs)} answers) whose repeats disagree "
            f"by > {REANSWER_SPREAD:g} points"
        )
    if pairs:
        extra = pay_stage(widened(cal), tasks, compressions, pairs=pairs, write=False)
        paid = Paid(paid.answers + extra.answers, paid.grades + extra.grades)
    cal.store.write("answers", paid.answers, tables.ANSWERS)
    cal.store.write("grades", paid.grades, tables.GRADES)
    return read_reanswered(paid, cells, repeats, deciding)


def widened(cal: Calibration) -> Calibration:
    """`cal` with room for the re-answered replicates (past the planned repeats), which
    `pay_stage` pays like planned ones (the sequential design's oracle uses it too)."""
    repeats = cal.config.repeats + REANSWER_COUNT
    return replace(cal, config=cal.config.model_copy(update={"repeats": repeats}))


def _answers(pairs: list[PairCell]) -> int:
    """Answers the pairs need: each replicate's cleartext answer and each second answer."""
    return len({p.baseline for p in pairs} | {p.second for p in pairs})


def _extra_pairs(cells: list[Cell], repeats: int) -> list[PairCell]:
    return [
        PairCell(task_id, arm, replicate)
        for _, task_id, arm in cells
        for replicate in range(repeats, repeats + REANSWER_COUNT)
    ]


def read_reanswered(paid: Paid, cells: list[Cell], repeats: int, deciding: str) -> Reanswered:
    """What the curve reads of every row paid (`read_with_guard`), and what the report
    says: the cells re-answered, the answers they needed, the guarded arms among them.
    The sequential design (`tokenlens.calibration.rounds`) reads its rows the same way."""
    import pandas as pd

    every = pd.DataFrame(paid.grades, columns=tables.GRADES.names)
    read, guarded = read_with_guard(every, repeats, judge=deciding) if len(every) else (every, {})
    reanswered = {(c, a) for c, _, a in cells}
    shown = {
        task_class: sorted(a for a in arms if (task_class, a) in reanswered)
        for task_class, arms in sorted(guarded.items())
    }
    return Reanswered(
        paid,
        [paid.grades[i] for i in read.index],
        cells,
        _answers(_extra_pairs(cells, repeats)),
        {task_class: arms for task_class, arms in shown.items() if arms},
    )
